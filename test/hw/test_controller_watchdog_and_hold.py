"""ArmController holding: the watchdog on a stale command stream drops the target and ramps
the arm to rest, hold() holds where the arm is; neither resumes the old target, and the hold
resists a push."""

from __future__ import annotations

import pytest
from hw_helpers import make, settle, tick

from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import FeetechArm
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_watchdog_holds_and_never_resumes_old_target(sim: SimulatedBus,
                                                     arm: FeetechArm) -> None:
    ctl, clock, events = make(arm, command_timeout_s=0.1)
    ctl.step()
    ctl.command({"elbow_flex": 1.5})
    tick(ctl, clock, 4)  # 0.08 s: still fresh
    r = tick(ctl, clock, 2)  # 0.12 s: stale
    assert r.mode == "holding" and r.diagnostics.watchdog_expired
    assert any(k == "watchdog" for k, _ in events)
    tripped = r.goal["elbow_flex"]
    # a smooth ramp to rest (arm/stopping.py), no further than the stopping distance at the
    # joint's top speed, 1.5² / (2 × 50) = 0.0225 rad, and no further than 2 ticks' motion
    speeds = []
    for _ in range(5):
        before = r.goal["elbow_flex"]
        r = tick(ctl, clock)
        speeds.append((r.goal["elbow_flex"] - before) / 0.02)
    held = r.goal["elbow_flex"]
    assert 0 < tripped <= held <= tripped + 0.0225 and held < 0.3
    assert all(b <= a for a, b in zip(speeds, speeds[1:], strict=False))  # slowing, never a jerk
    assert speeds[-1] == 0.0
    settle(sim, arm.bus)
    sim.clear_frames()
    for _ in range(20):
        r = tick(ctl, clock)
        assert r.mode == "holding" and r.goal["elbow_flex"] == held
    settle(sim, arm.bus)
    goals3 = {raw for sid, raw in sim.goal_writes() if sid == 3}
    assert len(goals3) == 1  # the same hold goal, never further toward 1.5
    # a fresh command starts from where the arm is
    ctl.command({"elbow_flex": 0.0})
    r = tick(ctl, clock)
    assert r.mode == "tracking" and r.goal["elbow_flex"] < held


def test_the_watchdog_event_says_how_stale_and_what_was_done_once(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, events = make(arm, command_timeout_s=0.1)
    ctl.step()
    ctl.command({"elbow_flex": 1.0})
    t0 = clock.now()
    tick(ctl, clock, 5)
    events.clear()
    r = tick(ctl, clock)  # 0.12 s: stale
    assert r.mode == "holding" and r.stamp == clock.now()
    assert events == [("watchdog", {
        "age_s": pytest.approx(clock.now() - t0), "timeout_s": 0.1,
        "action": "ramping to rest, the jaw keeps its command; target dropped"})]
    for _ in range(5):
        r = tick(ctl, clock)
        assert (r.mode, r.stamp, r.target) == ("holding", clock.now(), None)
    assert [k for k, _ in events] == ["watchdog"]  # said once: the target is gone


def test_hold_drops_the_target_and_holds_where_the_arm_is(sim: SimulatedBus,
                                                          arm: FeetechArm) -> None:
    ctl, clock, events = make(arm)
    ctl.step()
    ctl.command({"elbow_flex": 1.0})
    r = tick(ctl, clock, 3)
    assert r.mode == "tracking"
    ctl.hold("operator asked")
    assert ("hold", {"reason": "operator asked"}) in events
    r = tick(ctl, clock)
    at = r.state.positions["elbow_flex"]
    assert r.mode == "holding" and r.goal["elbow_flex"] == pytest.approx(at, abs=2e-3)
    for _ in range(5):
        r = tick(ctl, clock)
        assert r.mode == "holding" and r.goal["elbow_flex"] < 0.5
    assert "watchdog" not in [k for k, _ in events]  # dropped by hold, not timed out


def test_a_hold_stays_where_it_began_when_the_arm_is_pushed(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """After hold(), the goal is where the arm was at the next step, and stays there: a push
    (the servos here do not move on their own) does not drag the hold along."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm)
    ctl.step()
    ctl.command({"elbow_flex": 1.0})
    tick(ctl, clock, 3)
    ctl.hold("operator asked")
    r = tick(ctl, clock)
    at = r.state.positions["elbow_flex"]
    assert r.mode == "holding" and r.goal["elbow_flex"] == at
    sim.set_position(3, 2300)  # pushed away
    for _ in range(3):
        r = tick(ctl, clock)
        assert r.state.positions["elbow_flex"] > at + 0.3  # it really is pushed
        assert r.mode == "holding" and r.goal["elbow_flex"] == at


def test_a_command_right_after_a_hold_leaves_the_other_joints_where_the_arm_is(
        blocked: tuple[SimulatedBus, FeetechArm, FakeClock]) -> None:
    """hold() then, before the next step, a command for another joint: the joints it does not
    name hold where the arm is, never the old goal (a lead ahead of a blocked arm)."""
    sim, arm, frozen = blocked
    ctl, clock, _ = make(arm, lead_time_s=0.1)
    start = ctl.step().state.positions["shoulder_pan"]
    for _ in range(3):
        ctl.command({"shoulder_pan": start + 1.5})
        r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] - r.state.positions["shoulder_pan"] > 0.05  # leads the arm
    ctl.hold()
    ctl.command({"elbow_flex": r.state.positions["elbow_flex"] + 0.5})
    r = tick(ctl, clock)
    assert r.goal["shoulder_pan"] == pytest.approx(r.state.positions["shoulder_pan"], abs=2e-3)
