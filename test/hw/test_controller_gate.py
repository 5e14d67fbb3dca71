"""The command gate on the real arm's path without ROS: the arm node's core (``ArmCore``: the
Feetech controller) over the simulated servo bus on a pseudo-terminal.  The agent moves a joint,
the operator takes the arm in the middle of the motion: the agent's target is dropped (the joint
stops where it was, it does not go on to the agent's target), only the operator's command moves
the arm, the agent is refused ``held by operator`` until the operator's lease lapses."""

from __future__ import annotations

import time

from solarian_agent.core import names
from solarian_agent.core.clock import SystemClock
from solarian_agent.core.messages import JointCommand
from solarian_agent.ros import components as C


def test_the_operator_takes_the_real_arm_in_mid_motion():
    core = C.build_arm_core(SystemClock(), simulated_bus=True)
    arm = core.parts["arm"]
    js = core.bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE)
    ops = core.bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    cmd = core.bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)

    def send(source: str, **joints: float) -> None:
        cmd.publish(JointCommand(0.0, tuple(joints), tuple(joints.values()), 0.0, source))

    def run(seconds: float, operator: dict[str, float] | None = None, **again: float) -> None:
        """Step the control loop; ``again``: the agent's target, sent again every tick (as
        a skill refreshes its command); ``operator``: the operator's, likewise (a teleop
        repeats its command: one left alone goes quiet and the arm holds)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if operator:
                send("operator", **operator)
            if again:
                send("agent", **again)
            arm.step()
            time.sleep(0.01)

    try:
        arm.configure()
        arm.activate()
        run(0.3)
        start = js.latest().as_dict()["elbow_flex"]
        target = {"elbow_flex": start + 0.6}  # ~0.4 s at the joint's 1.5 rad/s
        run(0.15, **target)
        mid = js.latest().as_dict()["elbow_flex"]
        assert 0.05 < mid - start < 0.45, (start, mid)
        assert arm.gate.holder(arm.clock.now()) == "agent"
        send("operator", gripper=0.3)
        assert arm.gate.holder(arm.clock.now()) == "operator"
        run(1.2, {"gripper": 0.3}, **target)  # the skill goes on sending: refused, every time
        q = js.latest().as_dict()
        # the agent's target was dropped at the takeover: the elbow stopped near where it was
        assert q["elbow_flex"] - mid < 0.1, (mid, q["elbow_flex"], start + 0.6)
        assert abs(q["gripper"] - 0.3) < 0.03
        assert [e.kind for e in ops.drain()] == ["arm_taken"]
        # the agent is refused by name while the operator's lease (3 s) lives
        send("agent", elbow_flex=start)
        assert arm.last_refusal.startswith("held by operator")
        held = js.latest().as_dict()["elbow_flex"]
        run(0.3)
        assert abs(js.latest().as_dict()["elbow_flex"] - held) < 0.02
        totals = arm.gate.log.totals
        assert totals["preempted agent preempted"] == 1 and totals["refused agent held"] > 10
    finally:
        arm.deactivate()
        arm.cleanup()
