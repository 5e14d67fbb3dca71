"""ArmController and the servos' torque: released joints are followed (not undone), torque
comes back holding where the arm is; a release or torque-on that fails leaves no stale
target, and the arm holds where it is."""

from __future__ import annotations

import pytest
from hw_helpers import PERIOD, TORQUE_ERR, SpyArm, make, settle, tick

from solarian_agent.arm.safety import EStopLatchedError
from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_torque_off_follows_the_arm_and_torque_on_holds_where_it_is(sim: SimulatedBus,
                                                                    arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.command({"wrist_flex": 1.0})
    ctl.disable_torque()
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    sim.set_position(4, 2300)  # moved by hand while limp
    r = tick(ctl, clock, 2)
    assert r.mode == "torque_off"
    moved = r.state.positions["wrist_flex"]
    assert ctl.setpoint()["wrist_flex"] == pytest.approx(moved)  # no old target survives
    ctl.enable_torque()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))
    assert r.mode == "holding" and sim.goal(4) == 2300  # no jump back, no old target
    ctl.estop("stop")
    with pytest.raises(EStopLatchedError):
        ctl.enable_torque()


def test_disable_torque_releases_every_joint(sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    assert spy.torque_calls == [(True, None)]
    ctl.disable_torque()
    assert spy.torque_calls == [(True, None), (False, None)]
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    assert tick(ctl, clock).mode == "torque_off"


def test_disable_torque_drops_the_target_even_when_the_torque_write_fails(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.command({"shoulder_pan": 1.0})
    tick(ctl, clock)
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    r = tick(ctl, clock)  # torque is still on: the arm holds, it does not go on to 1.0
    assert r.mode == "holding" and r.target is None and not ctl.latch.tripped
    assert r.goal["shoulder_pan"] == pytest.approx(r.state.positions["shoulder_pan"], abs=2e-3)


def test_a_failed_release_of_a_blocked_arm_holds_where_the_arm_is(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """disable_torque() whose torque write fails: the torque stays on, the target is dropped,
    and the arm must hold where it is (as hold() and the watchdog do), not keep pushing
    toward the last goal, which leads a blocked arm by up to lead_time_s x max_velocity."""
    sim, arm, frozen = blocked
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    start = ctl.step().state.positions["shoulder_pan"]
    for _ in range(15):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] - start > 0.3  # the goal leads the blocked arm
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None
    assert r.goal["shoulder_pan"] == pytest.approx(r.state.positions["shoulder_pan"], abs=2e-3)


def test_a_failed_release_while_latched_holds_where_the_arm_is(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("test")
    tick(ctl, clock, 2)
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.goal == r.state.positions and len(r.goal) == 6


def test_a_command_after_a_failed_release_goes_on_from_the_last_goal(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """disable_torque() whose torque write fails leaves the torque on and resumes nothing: a
    new command tracks from the last goal written (kept within the lead of the arm), as any
    command does, not from a reset to where the arm is."""
    sim, arm, frozen = blocked
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy, lead_time_s=0.1)  # type: ignore[arg-type]
    start = ctl.step().state.positions["shoulder_pan"]
    for _ in range(3):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    g = r.goal["shoulder_pan"]
    assert g - start == pytest.approx(3 * 1.5 * PERIOD, abs=2e-3)
    spy.fail_torque = True
    with pytest.raises(HardwareError, match="torque write failed"):
        ctl.disable_torque()
    ctl.command({"shoulder_pan": start + 1.5})
    r = tick(ctl, clock)
    assert r.mode == "tracking"
    assert r.goal["shoulder_pan"] == pytest.approx(g + 1.5 * PERIOD)


def test_a_release_outside_the_controller_is_followed_not_undone(sim: SimulatedBus,
                                                                 arm: FeetechArm) -> None:
    """Torque switched off on the arm itself (a calibration tool): the controller follows the
    free joints and never takes the torque back on its own, until enable_torque()."""
    ctl, clock, _ = make(arm)
    ctl.step()
    tick(ctl, clock)
    arm.set_torque(False)
    for _ in range(3):
        r = tick(ctl, clock)
        assert (r.mode, r.goal, r.stamp) == ("torque_off", {}, clock.now())
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7)) and not arm.torque_enabled
    ctl.enable_torque()
    r = tick(ctl, clock)
    assert r.mode == "holding" and arm.torque_enabled


def test_a_torque_on_that_fails_leaves_no_stale_target_for_the_watchdog(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The first torque-on fails: the joints stay free and followed, with no target; when it
    goes through at the next step the arm holds, with nothing for the watchdog to drop."""
    spy = SpyArm(arm)
    ctl, clock, events = make(spy)  # type: ignore[arg-type]
    spy.fail_torque = True
    r = ctl.step()
    assert r.mode == "torque_off" and r.target is None
    assert r.faults == (f"torque on failed: {TORQUE_ERR}",)
    spy.fail_torque = False
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None and r.faults == ()
    assert [k for k, _ in events] == ["fault"]


def test_with_torque_on_start_off_the_first_steps_leave_the_joints_free(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy, enable_torque_on_start=False)  # type: ignore[arg-type]
    r = ctl.step()
    r = tick(ctl, clock, 2)
    settle(sim, arm.bus)
    assert r.mode == "torque_off" and spy.torque_calls == []
    assert not any(sim.torque(i) for i in range(1, 7))
