"""ArmController's setpoint (where a jog starts from) and positions: empty before the first
read, then the measured pose; kept through failed reads and failed writes."""

from __future__ import annotations

from hw_helpers import NAMES, FailWriteArm, SpyArm, make, tick

from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_the_setpoint_is_empty_before_the_first_read_then_where_the_free_arm_is(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    assert ctl.setpoint() == {}
    ctl.disable_torque()
    r = tick(ctl, clock)
    assert ctl.setpoint() == r.state.positions


def test_the_setpoint_of_an_arm_tripped_before_its_first_step_is_where_the_arm_is(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """Tripped (torque_off) before the first step: no goal was ever written, the setpoint is
    the measured pose, not empty."""
    ctl, clock, _ = make(arm, estop_action="torque_off")
    ctl.estop("stop before start")
    r = ctl.step()
    assert r.mode == "estop" and r.goal == {} and r.state is not None
    assert ctl.setpoint() == r.state.positions and set(ctl.setpoint()) == set(NAMES)


def test_positions_are_empty_before_the_first_read_then_the_measured_ones(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    assert ctl.positions() == {}
    r = ctl.step()
    assert ctl.positions() == r.state.positions and set(ctl.positions()) == set(NAMES)


def test_the_setpoint_survives_a_failed_read_while_the_joints_are_free(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.disable_torque()
    r = tick(ctl, clock)
    assert r.mode == "torque_off"
    spy.fail_read = True
    assert tick(ctl, clock).state is None
    assert ctl.setpoint() == r.state.positions


def test_the_setpoint_after_a_reset_is_where_the_arm_is_even_before_a_goal_goes_out(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """A reset takes the pose as the new setpoint at once: a hold write that fails and a read
    that fails after it leave a jog starting from where the arm is, not from nothing."""
    spy = FailWriteArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("stop")
    tick(ctl, clock)
    assert ctl.reset_estop() is True
    spy.fail_write = True
    r = tick(ctl, clock)
    assert (r.mode, r.goal) == ("holding", {})
    assert r.faults == ("write failed: goal write failed (test)",)
    spy.fail_read = True
    assert tick(ctl, clock).state is None
    assert ctl.setpoint() == r.state.positions
