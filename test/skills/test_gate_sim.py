"""The command gate in the embedded simulator, with the real executor and skills: the operator
takes the arm from a running skill (the skill ends cancelled with the reason, and no skill
target reaches the arm after the takeover); an external trajectory with one point out of
limits moves nothing; a good one plays on time and the operator takes it back; an e-stop
request carries its reason."""

from __future__ import annotations

import pytest

from solarian_agent.arm.trajectory import trajectory_from_lists
from solarian_agent.core import names
from solarian_agent.core.messages import JointCommand, SkillGoal
from solarian_agent.core.transport import GoalStatus
from solarian_agent.sim.camera import project
from solarian_agent.system import build_sim_system
from solarian_agent.testing.harness import record_events


@pytest.fixture
def sim():
    s = build_sim_system(seed=7, with_monitor=False)
    s.events = record_events(s.bus, depth=2000)
    s.agent_events = record_events(s.bus, names.AGENT_EVENTS, depth=2000)
    s.op_events = []
    s.bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, s.op_events.append)
    s.applied = []  # (time, source, target) of every command that reached the simulated arm
    real_apply = s.sim.gate_io._apply

    def recording(target, source, mv):
        s.applied.append((s.clock.now(), source, dict(target)))
        real_apply(target, source, mv)

    s.sim.gate_io._apply = recording
    s.runtime.run_for(0.2)
    yield s
    s.shutdown()


def _px(s, name):
    o = s.world.truth()["objects"][name]
    return list(project([o["x"], o["y"], 0.0]))


def test_operator_teleop_takes_the_arm_from_a_running_skill(sim):
    h = sim.bus.send_goal("skills/pick_object", SkillGoal(
        "pick_object", {"point": _px(sim, "red_cup")}, sim.executor.generation, "g1"))
    sim.runtime.run_for(0.5)
    assert h.status == GoalStatus.EXECUTING
    assert sim.sim.gate.holder(sim.clock.now()) == "agent"
    assert any(src == "agent" for _, src, _ in sim.applied)
    # the operator's teleop sends a jog while the skill still runs: it takes the arm at once
    teleop = sim.bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)
    q = sim.world.joint_positions()
    teleop.publish(JointCommand(sim.clock.now(), ("shoulder_pan",),
                                (q["shoulder_pan"] + 0.05,), 0.0, "operator"))
    taken_at = sim.clock.now()
    assert sim.sim.gate.holder(taken_at) == "operator"
    sim.runtime.run_for(0.3)
    # the skill ended cancelled, with the reason
    assert h.done and h.status == GoalStatus.CANCELED
    assert h.result.outcome == "stopped"
    assert "the operator took the arm from the agent" in h.result.reason
    taken = [e for e in sim.op_events if e.kind == "arm_taken"]
    assert len(taken) == 1 and taken[0].detail["by"] == "operator"
    assert taken[0].detail["from"] == "agent"
    # the skill's decision from before is refused by the generation fence
    stale = sim.bus.send_goal("skills/home", SkillGoal("home", {}, h.goal.generation, "g2"))
    assert stale.result.outcome == "refused"
    # the skill's last target no longer steers the arm: only the operator's jog moves it
    q_after = sim.world.joint_positions()
    sim.runtime.run_for(1.0)
    q_later = sim.world.joint_positions()
    for j in ("shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"):
        assert abs(q_later[j] - q_after[j]) < 0.01, (j, q_after[j], q_later[j])
    assert q_later["shoulder_pan"] == pytest.approx(q["shoulder_pan"] + 0.05, abs=0.01)
    # a skill command while the operator holds the arm is refused by name; none reached it
    sim.arm.command({"shoulder_lift": 0.2})
    sim.runtime.run_for(0.5)
    assert "held by operator" in sim.sim.last_rejection
    after = [src for t, src, _ in sim.applied if t >= taken_at]
    assert after and set(after) == {"operator"}
    assert sim.sim.gate.log.totals.get("refused agent held", 0) >= 1
    assert sim.sim.gate.log.totals["preempted agent preempted"] == 1
    # the planner is told (the operator event, with its reason)
    told = [e.data for e in sim.agent_events if e.kind == "operator_takeover"]
    assert told and told[-1]["action"] == "arm_taken"
    assert "the operator took the arm from the agent" in str(told[-1]["detail"])
    # the holder is in agent/state, as the planner publishes it
    sim.planner.state.publish()
    st = sim.bus.subscribe(names.AGENT_STATE, names.T_AGENT_STATE).latest()
    assert st is not None and st.arm_holder == "operator"


def test_external_trajectory_is_checked_whole_and_played_on_time(sim):
    pub = sim.bus.publisher(names.ARM_TRAJECTORY, names.T_JOINT_TRAJECTORY)
    q0 = sim.world.joint_positions()
    names_ = ("shoulder_pan", "elbow_flex")
    pan, elbow = q0["shoulder_pan"], q0["elbow_flex"]
    # one point out of limits (elbow_flex's upper limit is 1.69): nothing moves
    pub.publish(trajectory_from_lists(names_, [(0.5, (pan + 0.1, elbow)),
                                                (1.0, (pan + 0.2, 2.5)),
                                                (1.5, (pan, elbow))]))
    sim.runtime.run_for(1.0)
    assert sim.applied == []
    assert abs(sim.world.joint_positions()["shoulder_pan"] - pan) < 1e-3
    rec = sim.sim.gate.log.recent[-1]
    assert (rec.source, rec.joint, rec.value, rec.code) == ("external", "elbow_flex", 2.5,
                                                              "limit")
    assert "point 1" in rec.reason and "[-1.6900, 1.6900]" in rec.limit
    # a good one: the arm goes to each point on time
    t0 = sim.clock.now()
    pub.publish(trajectory_from_lists(names_, [(1.0, (pan + 0.3, elbow)),
                                                (2.0, (pan + 0.3, elbow - 0.2))]))
    sim.runtime.run_for(1.1)
    assert sim.sim.gate.holder(sim.clock.now()) == "external"
    assert sim.world.joint_positions()["shoulder_pan"] == pytest.approx(pan + 0.3, abs=0.03)
    assert sim.world.joint_positions()["elbow_flex"] == pytest.approx(elbow, abs=0.03)
    sim.runtime.run_for(1.2)
    assert sim.world.joint_positions()["elbow_flex"] == pytest.approx(elbow - 0.2, abs=0.03)
    assert {src for t, src, _ in sim.applied if t >= t0} == {"external"}
    # the agent may not take it while the external stack holds it; the operator may
    sim.arm.command({"shoulder_lift": 0.2})
    sim.runtime.run_for(0.05)
    assert "held by external" in sim.sim.last_rejection
    pub.publish(trajectory_from_lists(names_, [(3.0, (pan - 0.3, elbow))]))
    sim.runtime.run_for(0.2)
    teleop = sim.bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)
    teleop.publish(JointCommand(sim.clock.now(), ("gripper",), (0.3,), 0.0, "operator"))
    back = sim.clock.now()
    sim.runtime.run_for(0.5)
    assert sim.sim.gate.holder(sim.clock.now()) == "operator"
    assert {src for t, src, _ in sim.applied if t > back} <= {"operator"}
    assert sim.sim.gate_io.player is None  # the external trajectory stopped there


def test_estop_request_latches_with_its_reason(sim):
    pub = sim.bus.publisher(names.ESTOP_REQUEST, names.T_STRING)
    pub.publish("MoveIt saw a person in the cell")
    sim.runtime.run_for(0.1)
    assert sim.sim.latch.tripped
    assert "MoveIt saw a person in the cell" in sim.sim.latch.reason
    ev = [e for e in sim.op_events if e.kind == "estop"]
    assert ev and "MoveIt saw a person" in ev[-1].detail["reason"]
    # while latched, an external trajectory neither moves the arm nor takes it
    traj = sim.bus.publisher(names.ARM_TRAJECTORY, names.T_JOINT_TRAJECTORY)
    traj.publish(trajectory_from_lists(("shoulder_pan",), [(1.0, (0.2,))]))
    sim.runtime.run_for(0.3)
    assert sim.applied == [] and sim.sim.gate.holder(sim.clock.now()) == ""
    rec = sim.sim.gate.log.recent[-1]
    assert rec.code == "estop" and "MoveIt saw a person" in rec.reason
