"""A decision from another generation is never carried out: the executor refuses a goal from
a generation ahead of its own and, at the entry of a start, one that went stale after it was
accepted (no tracker is seeded for it; a fresh one's is); the planner discards a reply whose
turn was made under an older generation even while the run is still running."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from pathlib import Path
from typing import Any

from executor_helpers import Pointed, RecordingTracker

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.episode_log import read_events
from solarian_agent.core.executor import SkillExecutor
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.model_caller import ModelCaller
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.core.transport import Bus
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness, record_events


class Quick(Skill):
    description = "Ends at once (test skill)."

    def tick(self) -> None:
        self.finish()


def test_a_goal_from_a_generation_ahead_of_the_executor_is_refused() -> None:
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"quick": Tool(Quick)}, {})
    h = bus.send_goal("skills/quick", SkillGoal("quick", {}, ex.generation + 1, "a1"))
    assert h.done and h.result.outcome == "refused"
    assert h.result.reason == "refused: generation 2 is ahead of the executor's 1"
    ex.tick()
    assert ex.running == {}
    ok = bus.send_goal("skills/quick", SkillGoal("quick", {}, ex.generation, "a2"))
    ex.tick()
    assert ok.result.outcome == "succeeded"


def test_a_goal_gone_stale_before_its_start_seeds_no_tracker() -> None:
    """Accepted under generation 1; a takeover advances it before the tick: the start is
    refused at its entry, before any tracker is seeded for the stale decision."""
    bus = Bus()
    tracker = RecordingTracker()
    ex = SkillExecutor(bus, FakeClock(), {"pick": Tool(Pointed)}, {}, trackers=tracker)
    events = record_events(bus, depth=100)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [5, 6]}, 1, "a1"))
    assert not h.done  # accepted, waiting for the tick
    ex.advance_generation("takeover", "operator")
    ex.tick()
    assert h.result.outcome == "refused"
    assert h.result.reason == ("refused: stale generation 1 (current 2) by the time it was "
                               "due to start")
    assert tracker.started == [] and tracker.stopped == []
    kinds = [e.kind for e in events]
    assert "service_started" not in kinds and "skill_started" not in kinds


def test_a_fresh_pointed_goal_seeds_its_tracker() -> None:
    """The counterpart: the same goal, not stale, does seed its tracker."""
    bus = Bus()
    tracker = RecordingTracker()
    ex = SkillExecutor(bus, FakeClock(), {"pick": Tool(Pointed)}, {}, trackers=tracker)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [5, 6]}, 1, "a1"))
    ex.tick()
    ex.tick()
    assert h.result.outcome == "succeeded"
    assert tracker.started == ["cam.target"] and tracker.stopped == ["cam.target"]


class HeldCaller(ModelCaller):
    """Holds every call until the test releases it (deterministic, no threads)."""

    def __init__(self) -> None:
        self.held: list[tuple[Callable[[], Any], cf.Future[Any]]] = []

    def submit(self, fn: Callable[[], Any]) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        self.held.append((fn, fut))
        return fut

    def release(self) -> None:
        held, self.held = self.held, []
        for fn, fut in held:
            fut.set_result(fn())


def test_a_reply_from_an_older_generation_is_discarded_while_the_run_goes_on(
        tmp_path: Path) -> None:
    """The generation moved on while the model was thinking, the run still running: the reply
    belongs to the old generation and none of its calls is executed."""
    caller = HeldCaller()
    h = make_harness([reply("", ("wait", {"seconds": 0.1}))], caller=caller, log_root=tmp_path)
    h.say("wait")
    assert h.run_until(lambda: caller.held, 5)
    old = h.planner.generation
    h.planner.runs.advance_generation("test: decisions so far are void", "agent")
    assert h.planner.generation == old + 1 == h.executor.generation
    assert h.planner.status == "running"
    caller.release()
    h.runtime.run_for(0.5)
    assert h.planner.actions == {} and h.executor.running == {}
    assert h.planner.status == "running"
    log = next(tmp_path.glob("*/episodes/*/logs/events.jsonl"))
    kinds = [e["kind"] for e in read_events(log)]
    assert "planner_reply_discarded" in kinds
    assert "skill_started" not in kinds
