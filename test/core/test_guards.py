"""Guards no other test held (issue 23, found by mutation testing): the planner refuses a bad
``watch_for`` before any goal is sent; the executor refuses a goal from a generation ahead of
its own and, at the entry of a start, one that went stale after it was accepted (no tracker is
seeded for it); the planner discards a reply whose turn was made under an older generation even
while the run is still running."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.episode_log import read_events
from solarian_agent.core.executor import SkillExecutor, TrackerResult
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.model_caller import ModelCaller
from solarian_agent.core.skill import Skill, Tool, TrackerRequest
from solarian_agent.core.transport import Bus, QoS
from solarian_agent.models.base import ModelRequest
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness


def _tool_results(req: ModelRequest) -> list[str]:
    return [m.text() for m in req.messages if m.role == "tool"]


# ------------------------------------------------------------------ watch_for, planner side

@pytest.mark.parametrize("watch_for, what", [
    (["arm hits table", "cube falls", "gripper opens", "cube slides"], "too long"),
    (["ab"], "is too short"),
    (["x" * 301], "does not satisfy maxLength"),
    ("cube falls", "is not of type 'array'"),
])
def test_a_bad_watch_for_is_refused_before_a_goal_is_sent(watch_for: Any, what: str) -> None:
    """``watch_for`` is popped off the arguments before the goal is sent, so the executor never
    sees it: the planner's own check is the only one."""
    h = make_harness([reply("", ("wait", {"seconds": 0.1, "watch_for": watch_for})),
                      reply("", ("finish_task", {"summary": "gave up", "success": False}))])
    starts: list[Any] = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: starts.append(e) if e.kind == "skill_started" else None,
                    qos=QoS(depth=100))
    h.say("wait, watching")
    assert h.run_until(lambda: h.planner.status == "failed", 10)
    said = _tool_results(h.provider.calls[1].request)[-1]
    assert said.startswith("refused: invalid arguments for wait at watch_for")
    assert what in said
    assert starts == [] and h.executor.running == {}


def test_watch_for_at_its_limits_is_accepted_and_reaches_the_goal() -> None:
    conditions = ["abc", "y" * 300, "the cube falls off"]
    h = make_harness([reply("", ("wait", {"seconds": 0.1, "watch_for": conditions})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))])
    starts: list[Any] = []
    h.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                    callback=lambda e: starts.append(e.data) if e.kind == "skill_started"
                    else None, qos=QoS(depth=100))
    h.say("wait, watching")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    assert len(starts) == 1
    assert starts[0]["watch_for"] == conditions
    assert "watch_for" not in starts[0]["params"]  # the skill itself never gets it


# ------------------------------------------------------------------ executor generations

class Quick(Skill):
    description = "Ends at once (test skill)."

    def tick(self) -> None:
        self.finish()


class Pointed(Skill):
    description = "Takes a point (test skill)."
    parameters = {"type": "object", "properties": {"point": {"type": "array"}},
                  "required": ["point"]}
    image_points = ("point",)
    camera = "cam"

    @classmethod
    def services_for(cls, params: Any) -> list[TrackerRequest]:
        return [TrackerRequest("cam.target", "cam", "point")]

    def tick(self) -> None:
        self.finish()


class RecordingTracker:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []

    def start(self, req: TrackerRequest, point: tuple[float, float]) -> TrackerResult:
        self.started.append(req.field)
        return TrackerResult(0.01, (1, 2, 3, 4))

    def stop(self, field: str) -> None:
        self.stopped.append(field)


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
    events: list[Any] = []
    bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=events.append,
                  qos=QoS(depth=100))
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


# ------------------------------------------------------------------ planner stale reply

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
