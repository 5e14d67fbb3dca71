"""Skill against teleop at once, on real rclpy: the simulator and the skill executor as their
own processes, a separate node (the probe) as the planner sending a skill goal and as the
operator's teleop sending a joint command while the skill runs.  The operator wins: the skill's
goal ends ``stopped`` with the reason (ROS's action state machine reports a goal stopped
without a client's cancel request as aborted), the arm holds where it was apart from the
operator's jog (the skill's target no longer steers it), and the skill's commands after the
takeover are refused by the gate (``held by operator``)."""

from __future__ import annotations

import json
import time

import pytest
from _rostest_util import NodeProcesses, graph_up, ros_type, wait_until

pytestmark = [pytest.mark.usefixtures("real_ros"), pytest.mark.timeout(300)]

NS = "gs"


@pytest.fixture(scope="module")
def graph(real_ros, tmp_path_factory):
    g = NodeProcesses(tmp_path_factory.mktemp("gate_skill"), namespace=NS)
    g.start("sim_node", "sim_world", {"seed": 7})
    g.start("skills_node", "skills", {"tool_set": "tidy", "planner_timeout_s": 0.0})
    with graph_up(g, ("sim_world", "skills"), ("skills", "skills running")) as p:
        yield g, p


def _joints(p):
    (js,) = p.messages("sensor_msgs/msg/JointState", f"{NS}/joint_states")
    return dict(zip(js.name, js.position, strict=True))


def test_the_operator_takes_the_arm_from_a_running_skill(graph):
    g, p = graph
    events = p.listen("solarian_agent/msg/OperatorEvent", f"{NS}/operator/events")
    gate = p.listen("std_msgs/msg/String", f"{NS}/arm/gate", "latched")
    cmd = p.publisher("solarian_agent/msg/JointCommand", f"{NS}/joint_commands")
    assert wait_until(lambda: cmd.get_subscription_count() > 0, 10.0)
    client = p.action_client(f"{NS}/skills/move_to_pose")
    gen = int(p.messages("solarian_agent/msg/Generation", f"{NS}/skills/generation",
                         "latched")[-1].value)
    feedback: list = []
    start = _joints(p)
    gh = p.send_goal(client, p.goal("move_to_pose", json.dumps({"pose": "ready"}), gen, "gt1"),
                     feedback=feedback)
    result = gh.get_result_async()
    # the skill is moving the arm (as the agent)
    assert wait_until(lambda: abs(_joints(p)["shoulder_lift"] - start["shoulder_lift"]) > 0.05,
                      20.0), g.outputs()
    assert not result.done()
    assert wait_until(lambda: gate and json.loads(gate[-1].data)["holder"] == "agent", 5.0)
    # the operator's teleop jogs the gripper while the skill runs
    jog = _joints(p)["gripper"] + 0.1
    cmd.publish(ros_type("solarian_agent/msg/JointCommand")(
        name=["gripper"], position=[jog], max_velocity=0.0, source="operator"))
    assert wait_until(result.done, 10.0), "the takeover did not stop the skill"
    res = result.result()
    assert res.result.outcome == "stopped"
    assert "the operator took the arm from the agent" in res.result.reason
    assert res.status in (5, 6)  # canceled / aborted: ended by the executor, not succeeded
    print(f"\nskill goal status {res.status}: {res.result.reason}")
    taken = [json.loads(e.detail_json) for e in events if e.kind == "arm_taken"]
    assert taken and (taken[0]["by"], taken[0]["from"]) == ("operator", "agent")
    assert json.loads(gate[-1].data)["holder"] == "operator"
    # the arm holds where the takeover found it: the skill's target steers it no more
    time.sleep(0.5)
    held = _joints(p)
    time.sleep(1.0)
    later = _joints(p)
    for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll"):
        assert abs(later[j] - held[j]) < 0.01, (j, held[j], later[j])
    # a skill command now is refused by name (the operator's lease lives 3 s)
    agent = ros_type("solarian_agent/msg/JointCommand")(
        name=["shoulder_lift"], position=[0.3], max_velocity=0.0, source="agent")
    cmd.publish(agent)
    assert wait_until(lambda: any(
        r["source"] == "agent" and r["reason"].startswith("held by operator")
        for r in json.loads(gate[-1].data)["last_refusals"]), 5.0)
    assert abs(_joints(p)["shoulder_lift"] - later["shoulder_lift"]) < 0.01
