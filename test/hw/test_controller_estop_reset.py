"""ArmController's e-stop reset: it drops the old target (even within one period of the trip,
or when the latch is reset behind the controller's back), clears the bus-fault count, and
holds, or starts the next command, from where the arm is."""

from __future__ import annotations

import pytest
from hw_helpers import NAMES, SpyArm, make, pan_with_lead, tick

from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_an_estop_reset_within_one_period_drops_the_old_target(sim: SimulatedBus,
                                                               arm: FeetechArm) -> None:
    """Tripped and reset before the loop ran once (another thread, within one period): the
    step never saw the latch, so only reset_estop can drop the target."""
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    r = tick(ctl, clock, 3)
    held = r.state.positions["shoulder_lift"]
    ctl.estop("operator pressed stop")
    assert ctl.reset_estop() is True
    # at once, not only at the next step: a jog taken from the setpoint now (teleop) starts
    # from where the arm aims, never from the old target
    assert ctl.setpoint()["shoulder_lift"] < 0.5
    for _ in range(10):
        r = tick(ctl, clock)
        assert r.mode == "holding"
    assert r.goal["shoulder_lift"] == pytest.approx(held, abs=0.05)
    assert r.goal["shoulder_lift"] < 0.5  # never on toward the old target (1.0)
    assert [k for k, _ in events if k.startswith("estop")] == ["estop", "estop_reset"]
    assert "watchdog" not in [k for k, _ in events]  # the reset dropped it, not the watchdog


def test_a_latch_released_behind_the_controllers_back_never_resumes_the_old_target(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The e-stop branch itself drops the target: a latch reset directly (not through
    reset_estop) finds no target to go on to, and no stale one for the watchdog to drop."""
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    tick(ctl, clock, 3)
    ctl.estop("stop")
    tick(ctl, clock)
    assert ctl.latch.reset() is True
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.target is None
    assert r.goal == r.state.positions and r.goal["shoulder_lift"] < 0.5
    assert "watchdog" not in [k for k, _ in events]


def test_a_trip_right_after_a_reset_holds_where_the_arm_is(sim: SimulatedBus,
                                                           arm: FeetechArm) -> None:
    """Reset and tripped again before the loop ran: the e-stop holds where the arm is now."""
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    tick(ctl, clock, 3)
    ctl.estop("first")
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.goal == r.state.positions
    assert ctl.reset_estop() is True
    ctl.estop("second")
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.mode == "estop" and r.goal == r.state.positions
        assert set(r.goal) == set(NAMES)


def test_after_a_reset_a_new_command_starts_from_where_the_arm_is(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """Tripped and reset within one period: the goal the arm was chasing (a lead ahead of a
    blocked arm) is forgotten; the next command moves one step from where the arm is."""
    sim, arm, frozen = blocked
    ctl, clock, start, lead, step = pan_with_lead(arm)
    for _ in range(20):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] - start == pytest.approx(lead + step, abs=3e-3)
    ctl.estop("operator pressed stop")
    assert ctl.reset_estop() is True
    ctl.command({"shoulder_pan": start + 1.5})
    r = tick(ctl, clock)
    assert r.mode == "tracking"
    assert r.state.positions["shoulder_pan"] == pytest.approx(start, abs=2e-3)
    assert r.goal["shoulder_pan"] - r.state.positions["shoulder_pan"] == \
        pytest.approx(step, abs=2e-3)


def test_after_a_reset_the_hold_stays_where_it_began_when_the_arm_is_pushed(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """The reset takes the pose once, at the first step after it; it does not keep following
    the arm (a push must be resisted, as in any hold)."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.estop("stop")
    tick(ctl, clock)
    assert ctl.reset_estop() is True
    r = tick(ctl, clock)
    at = dict(r.goal)
    assert r.mode == "holding" and at == r.state.positions
    sim.set_position(3, 2300)  # pushed away
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.state.positions["elbow_flex"] > at["elbow_flex"] + 0.3
        assert r.mode == "holding" and r.goal == at


def test_an_estop_reset_clears_the_bus_fault_count(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, max_consecutive_faults=2)
    ctl.step()
    sim.inject(1, "no_answer", count=None)
    tick(ctl, clock, 2)
    assert ctl.bus_lost and ctl.latch.tripped
    sim.clear_faults()
    assert ctl.reset_estop() is True
    assert not ctl.bus_lost


def test_an_estop_reset_clears_a_single_fault_bus_loss(sim: SimulatedBus,
                                                       arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy, max_consecutive_faults=1)  # type: ignore[arg-type]
    ctl.step()
    spy.fail_read = True
    r = tick(ctl, clock)
    assert r.mode == "fault" and ctl.bus_lost and ctl.latch.tripped
    assert r.diagnostics.consecutive_faults == 1
    spy.fail_read = False
    assert ctl.reset_estop() is True
    assert not ctl.bus_lost
