"""ArmController against the pty sim: tracking a target at each joint's speed limit and within
its lead of where the arm really is; commands refused or taken (per-command speed); the step
limit and the calibrated windows; the first step."""

from __future__ import annotations

import math

import pytest
from hw_helpers import PERIOD, make, pan_with_lead, settle, tick

from solarian_agent.arm.safety import UnsafeCommandError
from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import ArmController, ArmControllerConfig, FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_a_target_is_tracked_at_the_joints_speed_limit(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    r = ctl.step()
    settle(sim, arm.bus)
    assert r.mode == "holding" and all(sim.torque(i) for i in range(1, 7))
    ctl.command({"shoulder_pan": 1.0})
    r = tick(ctl, clock)
    assert r.mode == "tracking"
    assert r.goal["shoulder_pan"] == pytest.approx(1.5 * PERIOD)  # max_velocity * dt
    for _ in range(40):
        ctl.command({"shoulder_pan": 1.0})
        r = tick(ctl, clock)
    assert r.state.positions["shoulder_pan"] == pytest.approx(1.0, abs=2e-3)
    assert r.diagnostics.level == "ok" and r.joint_state is not None


def test_the_first_step_takes_no_time_so_a_waiting_command_moves_nothing_yet(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A command that arrived before the loop started: the first step has no elapsed time to
    move by (max_velocity x 0), so it takes the torque holding where the arm is; the motion
    begins on the next tick, one period's worth.  Each reading is stamped with its step's
    time."""
    ctl, clock, _ = make(arm)
    ctl.command({"shoulder_pan": 1.0})
    r = ctl.step()
    assert r.stamp == clock.now()
    assert r.mode == "tracking" and r.target == {"shoulder_pan": 1.0}
    start = r.state.positions["shoulder_pan"]
    assert r.goal["shoulder_pan"] == pytest.approx(start, abs=1e-12)
    r = tick(ctl, clock)
    assert r.stamp == clock.now() and r.mode == "tracking"
    assert r.goal["shoulder_pan"] - start == pytest.approx(1.5 * PERIOD)


def test_bad_commands_are_refused(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    with pytest.raises(UnsafeCommandError, match="wrist_flex"):
        ctl.command({"wrist_flex": math.nan})
    with pytest.raises(UnsafeCommandError, match="'knee'"):
        ctl.command({"knee": 0.1})
    assert tick(ctl, clock).mode == "holding"  # nothing was stored


def test_a_bad_max_velocity_is_refused_with_its_message_and_nothing_is_stored(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    for v in (-0.5, math.inf, -math.inf, math.nan):
        with pytest.raises(UnsafeCommandError) as ei:
            ctl.command({"shoulder_pan": 1.0}, max_velocity=v)
        assert str(ei.value) == f"max_velocity {v!r} must be finite and >= 0"
        assert ei.value.value is v
    assert [k for k, _ in events if k == "command"] == []
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None
    assert r.goal["shoulder_pan"] == pytest.approx(0.0, abs=2e-3)


def test_a_command_max_velocity_lowers_the_speed_and_zero_means_the_joint_limit(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """JointCommand.msg: ``max_velocity`` 0 is the unset field, the joint's own limit."""
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_pan": 1.0}, max_velocity=0.5)
    r1 = tick(ctl, clock)
    assert r1.mode == "tracking"
    assert r1.goal["shoulder_pan"] == pytest.approx(0.5 * PERIOD)
    ctl.command({"shoulder_pan": 1.0}, max_velocity=0.0)
    r2 = tick(ctl, clock)
    assert r2.goal["shoulder_pan"] - r1.goal["shoulder_pan"] == pytest.approx(1.5 * PERIOD)
    assert [k for k, _ in events if k == "command"] == ["command", "command"]


def test_the_goal_never_runs_ahead_of_a_blocked_arm(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """The last goal is kept within lead_time_s x max_velocity of where the arm really is: a
    blocked arm's goal stops there, instead of running on toward the target (and the arm
    jumping there once it is free)."""
    sim, arm, frozen = blocked
    ctl, clock, start, lead, step = pan_with_lead(arm)
    goals = []
    for _ in range(50):  # 1 s: unblocked, the goal would be 1.5 rad away by now
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
        present = r.state.positions["shoulder_pan"]
        assert present == pytest.approx(start, abs=2e-3)  # it really is blocked
        assert r.goal["shoulder_pan"] - present <= lead + step + 2e-3
        goals.append(r.goal["shoulder_pan"])
    assert goals[-1] - start == pytest.approx(lead + step, abs=3e-3)  # it went up to the lead


def test_the_goal_follows_a_lagging_arm(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """An arm much slower than its goal (a heavy load): the goal keeps its lead over the arm,
    at most one lead (plus one step) ahead however long the motion lasts."""
    sim, arm, frozen = blocked
    ctl, clock, start, lead, step = pan_with_lead(arm)
    for _ in range(60):
        ctl.command({"shoulder_pan": start + 1.0})
        r = tick(ctl, clock)
        frozen.advance(PERIOD / 20)  # the servos get a twentieth of the time: about 0.26 rad/s
        present = r.state.positions["shoulder_pan"]
        assert r.goal["shoulder_pan"] - present <= lead + step + 3e-3
    assert 0.1 < present - start < 0.6  # it moved, slower than the goal could


def test_step_limit_is_the_smaller_of_max_step_and_max_velocity_times_the_period(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, _, _ = make(arm)  # 50 Hz: the speed limits are below max_step (0.1)
    assert ctl.step_limit("shoulder_pan") == pytest.approx(1.5 * PERIOD)
    assert ctl.step_limit("wrist_roll") == pytest.approx(2.5 * PERIOD)
    assert ctl.step_limit("gripper") == pytest.approx(2.0 * PERIOD)
    slow = ArmController(arm, FakeClock(), ArmControllerConfig(rate_hz=10.0), workspace=False)
    assert slow.step_limit("shoulder_pan") == pytest.approx(0.1)  # 0.15 > max_step
    assert slow.step_limit("gripper") == pytest.approx(0.1)  # 0.2 rad > max_step


def test_outside_window_describes_each_joint_beyond_its_window_by_more_than_a_step(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, _, _ = make(arm)
    assert ctl.outside_window({"shoulder_pan": 0.0, "gripper": 0.03}) == []
    assert ctl.outside_window({"shoulder_pan": 1.94, "elbow_flex": -1.71}) == []  # < a step
    assert ctl.outside_window({"shoulder_pan": 2.0, "elbow_flex": -1.8, "wrist_flex": 0.0}) == [
        "shoulder_pan at 2.000 is 0.080 above its calibrated window -1.920..1.920 "
        "(more than one 0.030 step)",
        "elbow_flex at -1.800 is 0.110 below its calibrated window -1.690..1.690 "
        "(more than one 0.030 step)",
    ]


def test_outside_window_allows_exactly_one_step_and_its_rounding_tolerance(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The boundary is one step plus 1e-9 (far above the float error of ``lower - p``)."""
    ctl, _, _ = make(arm)
    s = ctl.step_limit("gripper")
    lo = -0.174533  # the jaw's -10 degree limit
    assert ctl.outside_window({"gripper": lo - s}) == []  # exactly one step out
    assert ctl.outside_window({"gripper": lo - (s + 0.9e-9)}) == []  # and the tolerance
    assert ctl.outside_window({"gripper": lo - (s + 2e-9)}) == [
        "gripper at -0.215 is 0.040 below its calibrated window -0.175..1.745 "
        "(more than one 0.040 step)"]
