"""The bridge under faults real rclpy cannot be made to produce on demand, over a stand-in for
rclpy (test/ros/_fake_rclpy.py: in-memory delivery on worker threads, every message through CDR):
an accepted cancel that rclpy applies late (so the goal ends in between), an action server that
vanishes between the goal and its cancel, a goal response that comes late and a result response
that is lost (ros2/rclpy#1123).  Everything else the bridge does is tested on real rclpy in
test_bridge.py and the graph tests (test_graph_*.py)."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _fake_rclpy as fake  # noqa: E402

from solarian_agent.core import names  # noqa: E402
from solarian_agent.core.clock import SystemClock  # noqa: E402
from solarian_agent.core.messages import SkillGoal  # noqa: E402
from solarian_agent.core.transport import Bus, GoalStatus  # noqa: E402
from solarian_agent.ros import components  # noqa: E402
from solarian_agent.rosmsg import convert as cv  # noqa: E402
from solarian_agent.rosmsg import graph  # noqa: E402


@pytest.fixture
def bridge_mod(monkeypatch):
    fake.reset()
    for name, mod in fake.modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "solarian_agent.ros.bridge", raising=False)
    mod = importlib.import_module("solarian_agent.ros.bridge")
    yield mod
    sys.modules.pop("solarian_agent.ros.bridge", None)
    # nothing rclpy would have raised inside its executor (which would stop the node)
    assert fake.GRAPH.errors == []


class Graph:
    """A skills node (toy tools, its control loop on a thread) and a planner-side bus with the
    planner's client endpoints, bridged through the fake graph."""

    def __init__(self, bridge_mod):
        cfg = components.load_config(overrides={"cameras": ["overhead"]})
        self.skills = components.build_skills_core(SystemClock(), cfg, tools="toy")
        self.sb = bridge_mod.Bridge(fake.Node("skills"), self.skills.bus,
                                    cv.rosbags_codec(fake.GRAPH.store), goal_poll_s=0.002)
        self.sb.add(self.skills.spec.endpoints)
        self.bus = Bus()
        self.pb = bridge_mod.Bridge(fake.Node("planner"), self.bus,
                                    cv.rosbags_codec(fake.GRAPH.store), service_timeout_s=3.0)
        spec = graph.planner_node(["overhead"], list(self.skills.parts["executor"].tools))
        self.pb.add([e for e in spec.endpoints if e.kind in ("client", "action_client")
                     or e.name == names.EXECUTOR_GENERATION])
        self.gen = self.bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION)
        self.stop = threading.Event()
        self.ticks = 0

        def loop():
            while not self.stop.is_set():
                self.skills.loops[0].fn()
                self.ticks += 1
                self.stop.wait(0.02)

        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join(2)

    def goal(self, tool, params, gen, aid):
        return self.bus.send_goal(names.skill_action(tool), SkillGoal(tool, params, gen, aid))


def _wait(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.005)
    return pred()




















def _ros_goal_sent(g, h):
    """True once the planner side holds the ROS goal handle (so a cancel goes over ROS)."""
    return _wait(lambda: getattr(g.pb._sent_goals.goals.get(h.goal_id), "ros", None)
                 is not None)


def test_cancel_of_a_goal_the_core_ends_at_once_reaches_rclpy_first(bridge_mod):
    """rclpy applies an accepted cancel (-> CANCELING) only after the cancel callback returned.
    A goal not started yet is cancelled by the core synchronously; ending the ROS goal before
    rclpy applied the cancel made rclpy's transition raise inside its executor."""
    g = Graph(bridge_mod)
    g.close()  # no control ticks: the goal stays queued in the executor
    fake.GRAPH.cancel_delay_s = 0.1
    h = g.goal("spin", {}, 1, "c1")
    assert _ros_goal_sent(g, h) and _wait(lambda: g.sb.running_goals == 1)
    assert h.cancel()
    assert h.wait(5.0)
    assert h.status == GoalStatus.CANCELED, h.result
    assert h.result.outcome == "stopped" and "before it started" in h.result.reason
    assert fake.GRAPH.errors == []


def test_a_goal_ending_while_its_cancel_is_in_flight(bridge_mod):
    """The goal ends on its own (here: the node shuts down) between the cancel callback's ACCEPT
    and rclpy applying it: the bridge ends it only after rclpy did (CANCELING -> ABORTED)."""
    g = Graph(bridge_mod)
    g.close()
    fake.GRAPH.cancel_delay_s = 0.3
    h = g.goal("spin", {}, 1, "c2")
    assert _ros_goal_sent(g, h) and _wait(lambda: g.sb.running_goals == 1)
    assert h.cancel()
    time.sleep(0.05)  # the cancel callback has accepted; rclpy has not applied it yet
    g.skills.shutdown()  # the core ends every goal now
    assert h.wait(5.0)
    assert h.status == GoalStatus.ABORTED and h.result.outcome in ("stopped", "refused")
    assert fake.GRAPH.errors == []




def test_cancel_when_the_server_is_gone_ends_the_goal(bridge_mod):
    g = Graph(bridge_mod)
    g.close()
    h = g.goal("spin", {}, 1, "c4")
    assert _ros_goal_sent(g, h)
    del fake.GRAPH.actions[names.skill_action("spin")]  # the skills node went away
    try:
        assert h.cancel()
        assert h.done and h.status == GoalStatus.ABORTED and "is gone" in h.result.reason
    finally:
        g.sb.close()
        g.skills.shutdown()  # ends the goal the fake server still runs
        assert _wait(lambda: g.sb.running_goals == 0)


def test_a_goal_whose_response_never_comes_in_time_is_refused_then_cancelled(bridge_mod):
    """The goal response is late (rclpy/#1123 can lose it): the planner's goal ends refused
    after service_timeout_s, and when the response still comes the goal is cancelled."""
    g = Graph(bridge_mod)
    g.pb.service_timeout_s = 0.4
    fake.GRAPH.goal_response_delay_s = 1.2
    try:
        t0 = time.monotonic()
        h = g.goal("spin", {}, 1, "w1")
        assert h.wait(3.0)
        assert time.monotonic() - t0 < 1.2
        assert h.status == GoalStatus.ABORTED and "did not answer the goal" in h.result.reason
        # the late response: the running skill is cancelled, not left moving the arm
        assert _wait(lambda: g.sb.running_goals == 0, 5.0)
        assert any("late goal response" in line for line in g.pb.node.log.lines)
    finally:
        g.close()


def test_a_lost_result_is_asked_for_again(bridge_mod):
    g = Graph(bridge_mod)
    fake.GRAPH.lose_results = 1
    try:
        h = g.goal("wait", {"seconds": 0.1}, 1, "w2")
        assert h.wait(6.0), "the result was never asked for again"
        assert h.status == GoalStatus.SUCCEEDED and h.result.outcome == "succeeded"
    finally:
        g.close()
