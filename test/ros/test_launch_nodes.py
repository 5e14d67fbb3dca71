"""launch_testing (ROS 2 Jazzy): every node starts and publishes what it should, a skill goal
succeeds through skills/<tool>, a stale generation is refused with its reason, a cancel stops
a running skill within one control tick.  Run by ``colcon test`` (add_launch_test)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import unittest

import launch_testing
import launch_testing.actions
import launch_testing.asserts  # not imported by `import launch_testing`
import numpy as np
import pytest
from launch_ros.actions import Node

import launch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rostest_util import (  # noqa: E402
    LATCHED,
    RELIABLE,
    SENSOR,
    Probe,
    action_type,
    srv_type,
)

CONTROL_PERIOD_S = 0.02


def _video() -> str:
    import cv2

    path = os.path.join(tempfile.mkdtemp(prefix="solarian_cam_"), "cam.avi")
    w = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (160, 120))
    for i in range(200):
        f = np.full((120, 160, 3), i % 255, np.uint8)
        w.write(f)
    w.release()
    return path


@pytest.mark.launch_test
def generate_test_description():
    common = {"control_period_s": CONTROL_PERIOD_S}
    nodes = [
        Node(package="solarian_agent", executable="sim_node", name="sim_world",
             parameters=[common], output="screen"),
        Node(package="solarian_agent", executable="skills_node", name="skills",
             parameters=[{**common, "tool_set": "toy", "cameras": "overhead,wrist"}],
             output="screen"),
        Node(package="solarian_agent", executable="monitor_node", name="monitor",
             parameters=[common], output="screen"),
        Node(package="solarian_agent", executable="planner_node", name="planner",
             parameters=[{**common, "planner_provider": "rules"}], output="screen"),
        # the hardware drivers in their own namespace (their topics would collide with the sim)
        Node(package="solarian_agent", executable="camera_node", name="camera_cam",
             namespace="hw", parameters=[{"camera": "cam", "source": _video()}],
             output="screen"),
        Node(package="solarian_agent", executable="arm_node", name="arm", namespace="hw",
             parameters=[{"simulated_bus": True}], output="screen"),
    ]
    return launch.LaunchDescription([*nodes, launch_testing.actions.ReadyToTest()])


class TestGraph(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.probe = Probe()

    @classmethod
    def tearDownClass(cls):
        cls.probe.close()

    # each node starts and publishes what it should -------------------------------------------
    def test_sim_world_publishes_cameras_joints_and_truth(self):
        p = self.probe
        for cam in ("overhead", "wrist"):
            (img,) = p.messages("sensor_msgs/msg/Image", f"{cam}/image_raw", SENSOR)
            self.assertEqual(img.encoding, "bgr8")
            self.assertGreater(img.width, 0)
            (info,) = p.messages("sensor_msgs/msg/CameraInfo", f"{cam}/camera_info", LATCHED)
            self.assertEqual(info.width, img.width)
        (js,) = p.messages("sensor_msgs/msg/JointState", "joint_states", RELIABLE)
        self.assertIn("gripper", list(js.name))
        (truth,) = p.messages("solarian_agent/msg/SimTruth", "sim/ground_truth", LATCHED)
        self.assertIsInstance(json.loads(truth.truth_json), dict)

    def test_camera_node_publishes_the_video(self):
        p = self.probe
        imgs = p.messages("sensor_msgs/msg/Image", "hw/cam/image_raw", SENSOR, count=3)
        self.assertEqual(len(imgs), 3)
        self.assertEqual((imgs[0].width, imgs[0].height), (160, 120))
        (info,) = p.messages("sensor_msgs/msg/CameraInfo", "hw/cam/camera_info", LATCHED)
        self.assertEqual(info.width, 160)

    def test_arm_node_is_active_and_publishes(self):
        p = self.probe
        (js,) = p.messages("sensor_msgs/msg/JointState", "hw/joint_states", RELIABLE)
        self.assertEqual(len(js.name), 6)
        (diag,) = p.messages("diagnostic_msgs/msg/DiagnosticArray", "hw/diagnostics", RELIABLE,
                             timeout_s=10.0)
        self.assertEqual(diag.status[0].name, "arm")
        state = p.call("lifecycle_msgs/srv/GetState", "hw/arm/get_state")
        self.assertEqual(state.current_state.label, "active")
        r = p.call("std_srvs/srv/Trigger", "hw/estop")
        self.assertTrue(r.success)
        r = p.call("std_srvs/srv/Trigger", "hw/estop_reset")
        self.assertTrue(r.success)

    def test_skills_node_serves_catalogue_and_generation(self):
        p = self.probe
        r = p.call("solarian_agent/srv/ToolCatalogue", "skills/catalogue")
        self.assertTrue({"wait", "spin", "point_at"} <= {t.name for t in r.tools})
        self.assertGreaterEqual(p.generation(), 1)

    def test_planner_publishes_latched_state_and_answers(self):
        p = self.probe
        (st,) = p.messages("solarian_agent/msg/AgentState", "agent/state", LATCHED)
        self.assertIn(st.status, ("idle", "running", "succeeded", "failed", "cancelled"))
        cls = srv_type("solarian_agent/srv/AgentCommand")
        r = p.call("solarian_agent/srv/AgentCommand", "agent/message", cls.Request(text=""))
        self.assertFalse(r.ok)
        self.assertIn("empty", r.reason)
        r = p.call("solarian_agent/srv/ObserveScene", "agent/observe_scene")
        self.assertIsNotNone(r)

    def test_monitor_node_is_up(self):
        p = self.probe
        self.assertTrue(p.wait_until(lambda: "monitor" in p.node.get_node_names(), 30.0))

    # skills through ROS actions ----------------------------------------------------------------
    def _goal(self, tool, params, generation, action_id):
        g = action_type("solarian_agent/action/Skill").Goal()
        g.tool = tool
        g.params_json = json.dumps(params)
        g.generation = generation
        g.action_id = action_id
        return g

    def test_skill_goal_succeeds(self):
        p = self.probe
        client = p.action_client("skills/wait")
        gh = p.send_goal(client, self._goal("wait", {"seconds": 0.3}, p.generation(), "t-ok"))
        res = p.result(gh)
        self.assertEqual(res.result.outcome, "succeeded", res.result.reason)
        self.assertEqual(res.status, 4)  # SUCCEEDED

    def test_stale_generation_is_refused_with_the_reason(self):
        p = self.probe
        old = p.generation()
        cls = srv_type("solarian_agent/srv/AdvanceGeneration")
        r = p.call("solarian_agent/srv/AdvanceGeneration", "skills/advance_generation",
                   cls.Request(reason="test", by="test"))
        self.assertEqual(r.generation, old + 1)
        client = p.action_client("skills/wait")
        gh = p.send_goal(client, self._goal("wait", {"seconds": 0.1}, old, "t-stale"))
        res = p.result(gh)
        self.assertEqual(res.result.outcome, "refused")
        self.assertIn("stale generation", res.result.reason)
        self.assertEqual(res.status, 6)  # ABORTED

    def test_cancel_stops_a_running_skill_within_one_control_tick(self):
        p = self.probe
        client = p.action_client("skills/spin")
        feedback: list = []
        gh = p.send_goal(client, self._goal("spin", {}, p.generation(), "t-cancel"),
                         feedback=feedback)
        self.assertTrue(p.wait_until(lambda: feedback, 5.0), "the skill never started")
        time.sleep(0.2)
        done = []
        t0 = time.monotonic()
        fut = gh.cancel_goal_async()
        fut.add_done_callback(lambda _f: done.append(time.monotonic()))
        res = p.result(gh, timeout_s=5.0)
        elapsed = time.monotonic() - t0
        self.assertEqual(res.result.outcome, "stopped", res.result.reason)
        self.assertEqual(res.status, 5)  # CANCELED
        # one control tick (the executor stops it at its next tick) plus the two ROS hops
        self.assertLess(elapsed, CONTROL_PERIOD_S + 0.25)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_nodes_exit_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
