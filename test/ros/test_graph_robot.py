"""``robot.launch.py``'s graph on real rclpy with simulated hardware: one camera node per
camera on a video file and the arm node on its simulated servo bus (a pseudo-terminal), with
the skills, monitor and planner, started from :func:`launch_plan.robot_plan` as the launch
file starts them.  Every node comes up under the name the launch file gives it, the cameras
publish their videos under the agent's camera names, the arm is active and a skill goal runs."""

from __future__ import annotations

import json

import pytest
from _rostest_util import NodeProcesses, Probe, video_file

from solarian_agent.ros import launch_plan
from solarian_agent.ros.components import share_dir

pytestmark = pytest.mark.usefixtures("real_ros")



@pytest.fixture(scope="module")
def robot(real_ros, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("robot")
    cams = (f"overhead={video_file(tmp / 'o.avi', (320, 240))},"
            f"wrist={video_file(tmp / 'w.avi', (240, 180), step=3)}")
    plan = launch_plan.robot_plan({"cameras": cams, "simulated_bus": "true",
                                   "planner_provider": "rules",
                                   "robot_state_publisher": "false"}, share_dir())
    g = NodeProcesses(tmp)
    g.start_plan(plan)
    p = Probe(g.domain)
    try:
        want = ["/camera_overhead", "/camera_wrist", "/arm", "/skills", "/monitor", "/planner"]
        missing = p.wait_for_nodes(want, 90.0)
        assert not missing, f"{missing}\n{g.outputs()}"
        assert g.procs["planner"].wait_for_output("planner running", 90.0), g.outputs()
        yield g, p
    finally:
        p.close()
        g.close()


def test_the_cameras_publish_their_videos_under_the_agents_camera_names(robot):
    g, p = robot
    for cam, size in (("overhead", (320, 240)), ("wrist", (240, 180))):
        (img,) = p.messages("sensor_msgs/msg/Image", f"{cam}/image_raw", "sensor")
        assert (img.width, img.height) == size
        (info,) = p.messages("sensor_msgs/msg/CameraInfo", f"{cam}/camera_info", "latched")
        assert info.header.frame_id == f"{cam}_camera_optical"


def test_the_arm_is_active_on_its_servo_bus(robot):
    g, p = robot
    state = p.call("lifecycle_msgs/srv/GetState", "arm/get_state")
    assert state.current_state.label == "active"
    (js,) = p.messages("sensor_msgs/msg/JointState", "joint_states")
    assert list(js.name)[-1] == "gripper"


def test_a_skill_goal_runs_against_the_hardware_drivers(robot):
    g, p = robot
    client = p.action_client("skills/verify_state")
    res = p.result(p.send_goal(client, p.goal("verify_state", "{}", p.generation(), "r1")))
    assert res.result.outcome == "succeeded", res.result.reason
    assert "report" in json.loads(res.result.data_json)


def test_every_node_exits_0(robot):
    g, p = robot
    codes = g.close()
    assert all(c == 0 for c in codes.values()), (codes, g.outputs())
