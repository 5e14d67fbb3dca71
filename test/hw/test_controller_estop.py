"""ArmController's e-stop latch: it wins over commands until reset; the hold action keeps the
pose it tripped at, the torque_off action releases the joints once (retrying a failed
release); what each writes, or says it failed to write."""

from __future__ import annotations

import pytest
from hw_helpers import TORQUE_ERR, FailWriteArm, SpyArm, make, settle, tick

from solarian_agent.arm.safety import EStopLatchedError
from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_estop_latch_wins_until_reset(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"shoulder_lift": 1.0})
    r = tick(ctl, clock, 3)
    ctl.estop("operator pressed stop")
    r = tick(ctl, clock)
    assert r.mode == "estop" and r.estop
    hold = r.goal["shoulder_lift"]
    with pytest.raises(EStopLatchedError, match="operator pressed stop"):
        ctl.command({"shoulder_lift": 1.0})
    for _ in range(10):
        r = tick(ctl, clock)
        assert r.mode == "estop" and r.goal["shoulder_lift"] == hold
    assert "e-stop latched: operator pressed stop" in r.diagnostics.message
    assert r.diagnostics.level == "error"
    assert ctl.reset_estop() is True
    r = tick(ctl, clock)
    assert r.mode == "holding" and r.goal["shoulder_lift"] == pytest.approx(hold, abs=2e-3)
    r = tick(ctl, clock, 5)
    assert r.goal["shoulder_lift"] == pytest.approx(hold, abs=2e-3)  # old target is gone
    assert [k for k, _ in events if k.startswith("estop")] == ["estop", "estop_reset"]


def test_a_torque_off_estop_releases_the_joints_and_a_reset_holds_where_the_arm_sagged(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm, estop_action="torque_off")
    ctl.step()
    ctl.estop("test")
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert r.mode == "estop" and not any(sim.torque(i) for i in range(1, 7))
    sim.set_position(2, 2300)  # the arm sagged while limp
    tick(ctl, clock, 3)
    ctl.reset_estop()
    r = tick(ctl, clock)
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))
    assert sim.goal(2) == 2300  # torque came back holding where it is: no jump


def test_a_hold_estop_keeps_the_pose_it_tripped_at_when_the_arm_is_pushed(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.estop("operator pressed stop")
    r = tick(ctl, clock)
    held = dict(r.goal)
    assert r.mode == "estop" and r.stamp == clock.now() and held == r.state.positions
    sim.set_position(3, 2300)  # pushed away
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.state.positions["elbow_flex"] > held["elbow_flex"] + 0.3
        assert r.mode == "estop" and r.goal == held and r.stamp == clock.now()


def test_a_hold_estop_with_the_joints_free_writes_no_goal(sim: SimulatedBus,
                                                          arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.disable_torque()
    tick(ctl, clock)
    settle(sim, arm.bus)
    sim.clear_frames()
    ctl.estop("stop")
    r = tick(ctl, clock, 3)
    settle(sim, arm.bus)
    assert (r.mode, r.goal, r.faults) == ("estop", {}, ())
    assert sim.goal_writes() == []


def test_a_hold_estop_whose_goal_write_fails_says_so(sim: SimulatedBus,
                                                     arm: FeetechArm) -> None:
    spy = FailWriteArm(arm)
    ctl, clock, events = make(spy)  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("stop")
    spy.fail_write = True
    events.clear()
    r = tick(ctl, clock)
    assert (r.mode, r.goal) == ("estop", {})
    assert r.faults == ("write failed: goal write failed (test)",)
    assert events == [("fault", {"error": "goal write failed (test)"})]


def test_a_torque_off_estop_releases_once_and_retries_a_failed_release(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    """The release is written on the first latched tick; one that fails is said and tried
    again every tick until the joints are free; then nothing more is written."""
    spy = SpyArm(arm)
    ctl, clock, events = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    events.clear()
    ctl.estop("stop")
    spy.fail_torque = True
    r = tick(ctl, clock)
    assert (r.mode, r.goal, r.stamp) == ("estop", {}, clock.now())
    assert r.faults == (f"torque off failed: {TORQUE_ERR}",)
    assert events == [("estop", {"reason": "stop"}), ("fault", {"error": TORQUE_ERR})]
    assert spy.torque_calls == [(True, None), (False, None)]
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7))  # still on: the release must be retried
    spy.fail_torque = False
    r = tick(ctl, clock)
    assert (r.mode, r.goal, r.faults, r.stamp) == ("estop", {}, (), clock.now())
    assert spy.torque_calls == [(True, None), (False, None), (False, None)]
    settle(sim, arm.bus)
    assert not any(sim.torque(i) for i in range(1, 7))
    tick(ctl, clock, 3)
    assert len(spy.torque_calls) == 3  # released: nothing more is written


def test_a_torque_off_estop_writes_no_release_while_the_joints_stay_free(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    spy = SpyArm(arm)
    ctl, clock, _ = make(spy, estop_action="torque_off")  # type: ignore[arg-type]
    ctl.step()
    ctl.estop("stop")
    tick(ctl, clock, 4)
    assert spy.torque_calls == [(True, None), (False, None)]
