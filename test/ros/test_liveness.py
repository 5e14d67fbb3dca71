"""The planner's heartbeat and the skills node's watchdog, without ROS (fake clock): a lost
planner stops the running skills once, a skills node that never heard a planner is left
alone, and the next beat re-arms the watchdog."""

from __future__ import annotations

import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.executor import SkillExecutor
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.skill import Tool
from solarian_agent.core.transport import Bus
from solarian_agent.ros.liveness import HeartbeatPublisher, PlannerWatchdog
from solarian_agent.testing.harness import Spin


def _setup(timeout_s=2.0):
    clock, bus = FakeClock(), Bus()
    ex = SkillExecutor(bus, clock, {"spin": Tool(Spin)}, {})
    dog = PlannerWatchdog(bus, clock, ex, timeout_s)
    beats = HeartbeatPublisher(bus, clock, "planner", lambda: ("running", ex.generation))
    return clock, bus, ex, dog, beats


def _spin(bus, ex, aid="a1"):
    h = bus.send_goal(names.skill_action("spin"), SkillGoal("spin", {}, ex.generation, aid))
    ex.tick()
    assert ex.running, h.result
    return h


def _run(clock, ex, dog, seconds, beats=None, dt=0.05):
    for _ in range(int(round(seconds / dt))):
        clock.advance(dt)
        if beats is not None:
            beats.tick()
        dog.tick()
        ex.tick()


def test_a_silent_planner_stops_the_running_skill_once():
    clock, bus, ex, dog, beats = _setup()
    beats.tick()
    h = _spin(bus, ex)
    _run(clock, ex, dog, 1.0, beats)  # beating: the skill runs on
    assert ex.running and not h.done
    gen = ex.generation
    _run(clock, ex, dog, 1.9)  # silent, but not long enough
    assert ex.running
    _run(clock, ex, dog, 0.3)
    assert h.done and h.result.outcome == "stopped"
    assert "planner lost" in h.result.reason and "planner" in h.result.reason
    assert ex.generation == gen + 1  # what the planner decided before is refused from now on
    _run(clock, ex, dog, 5.0)
    assert ex.generation == gen + 1  # once per silence


def test_the_next_beat_rearms_the_watchdog():
    clock, bus, ex, dog, beats = _setup()
    beats.tick()
    _spin(bus, ex, "a1")
    _run(clock, ex, dog, 3.0)
    assert not ex.running and dog.tripped
    _run(clock, ex, dog, 0.5, beats)  # the planner is back
    assert not dog.tripped
    h = _spin(bus, ex, "a2")
    _run(clock, ex, dog, 3.0)
    assert h.done and "planner lost" in h.result.reason


def test_without_a_planner_goals_from_other_nodes_run_on():
    clock, bus, ex, dog, _ = _setup()
    h = _spin(bus, ex)
    _run(clock, ex, dog, 2.9)  # Spin ends by its own limit at 3 s, not by the watchdog
    assert ex.running and not h.done


def test_timeout_zero_disables_and_negative_is_refused():
    clock, bus, ex, dog, beats = _setup(timeout_s=0.0)
    beats.tick()
    _spin(bus, ex)
    _run(clock, ex, dog, 2.5)
    assert ex.running
    with pytest.raises(ValueError, match="planner_timeout_s"):
        PlannerWatchdog(bus, clock, ex, -1.0)


def test_heartbeats_come_at_their_period_with_the_planner_state():
    clock, bus = FakeClock(), Bus()
    got = bus.subscribe(names.AGENT_HEARTBEAT, names.T_HEARTBEAT)
    seen = []
    bus.subscribe(names.AGENT_HEARTBEAT, names.T_HEARTBEAT, seen.append)
    beats = HeartbeatPublisher(bus, clock, "planner", lambda: ("idle", 4), period_s=0.25)
    for _ in range(40):  # 1 s at 40 Hz
        beats.tick()
        clock.advance(0.025)
    assert 4 <= len(seen) <= 5
    assert got.latest().status == "idle" and got.latest().generation == 4
