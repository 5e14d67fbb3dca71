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
from solarian_agent.core.model_api import ModelRequest
from solarian_agent.core.model_caller import ModelCaller
from solarian_agent.core.skill import Skill, Tool, TrackerRequest
from solarian_agent.core.transport import LATCHED, Bus, QoS
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness, record_events


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


# ------------------------------------------------------------------ executor services

class Forever(Skill):
    description = "Runs until stopped (test skill)."
    ends_by_itself = False
    resources = ("arm",)

    def on_stop(self, reason: str) -> None:
        STOPS.append(reason)


class Crashes(Skill):
    description = "Its tick raises inside the harness (a non-mapping result; test skill)."
    resources = ("cam",)

    def tick(self) -> None:
        self.result = None  # type: ignore[assignment]
        self.done = True

    def on_stop(self, reason: str) -> None:
        STOPS.append(reason)


STOPS: list[Any] = []


def _executor(trackers: Any = None) -> tuple[Bus, SkillExecutor, list[Any]]:
    STOPS.clear()
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"forever": Tool(Forever), "crash": Tool(Crashes),
                                          "pick": Tool(Pointed)}, {}, trackers=trackers)
    events = record_events(bus)
    return bus, ex, events


def test_the_advance_service_and_operator_events_name_reason_and_who() -> None:
    from solarian_agent.core.messages import OperatorEvent
    bus, ex, events = _executor()
    assert bus.call(names.EXECUTOR_ADVANCE, {"reason": "cancel", "by": "operator"}) == 2
    assert bus.call(names.EXECUTOR_ADVANCE, {}) == 3
    bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT).publish(
        OperatorEvent("key", {"key": "w"}))
    adv = [e.data for e in events if e.kind == "generation_advanced"]
    assert adv == [{"generation": 2, "reason": "cancel", "by": "operator"},
                   {"generation": 3, "reason": "", "by": "agent"},
                   {"generation": 4, "reason": "operator key", "by": "operator"}]


def test_the_conclude_service_answers_exactly() -> None:
    bus, ex, _ = _executor()
    h = bus.send_goal("skills/forever", SkillGoal("forever", {}, 1, "a1"))
    ex.tick()

    def conclude(**req: Any) -> Any:
        return bus.call(names.SKILL_CONCLUDE, req)

    assert conclude(action_id="a1", outcome="done", generation=1) == {
        "ok": False, "reason": "outcome must be succeeded|failed|stopped, got 'done'"}
    assert conclude(action_id="a1", outcome="failed") == {
        "ok": False, "reason": "stale generation -1 < 1"}
    assert conclude(outcome="failed", generation=1) == {
        "ok": False, "reason": "action  is not running"}
    assert conclude(action_id="a9", outcome="failed", generation=1) == {
        "ok": False, "reason": "action a9 is not running"}
    assert conclude(action_id="a1", outcome="failed", generation=1,
                    reason="monitor: dropped") == {"ok": True, "reason": ""}
    assert conclude(action_id="a1", outcome="succeeded", generation=1,
                    reason="monitor: holding after all") == {"ok": True, "reason": ""}
    ex.tick()
    assert h.result.outcome == "failed" and h.result.reason == "monitor: dropped"
    assert h.result.data["skill_reasons"] == ["monitor: holding after all"]
    assert STOPS == ["monitor: dropped"]


def test_cancel_answers_and_reasons() -> None:
    bus, ex, _ = _executor()
    running = bus.send_goal("skills/forever", SkillGoal("forever", {}, 1, "a1"))
    ex.tick()
    waiting = bus.send_goal("skills/crash", SkillGoal("crash", {}, 1, "a2"))
    assert waiting.cancel() is True
    assert waiting.result.outcome == "stopped"
    assert waiting.result.reason == "cancelled before it started"
    assert running.cancel() is True
    assert running.cancel() is True  # asked twice: still accepted, the first reason stands
    ex.tick()
    assert running.result.outcome == "stopped" and running.result.reason == "cancel requested"
    assert STOPS == ["cancel requested"]
    # a handle the executor never had (its goal ended): refused
    assert ex._on_cancel(running) is False


def test_a_crash_in_a_tick_ends_that_action_with_the_reason_and_its_trackers() -> None:
    tracker = RecordingTracker()
    bus, ex, events = _executor(tracker)
    p1 = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a0"))
    h = bus.send_goal("skills/crash", SkillGoal("crash", {}, 1, "a1"))
    ex.tick()  # pick succeeds at once (its tick finishes), crash starts
    ex.tick()
    assert p1.result.outcome == "succeeded"
    assert h.result.outcome == "failed"
    assert h.result.reason.startswith("harness error in crash: ")
    assert h.result.action_id == "a1"
    err = next(e.data for e in events if e.kind == "skill_error")
    assert err["action_id"] == "a1" and err["skill"] == "crash"
    assert err["error"] == h.result.reason and "Traceback" in err["traceback"]
    assert [h.result.reason] == STOPS
    assert ex.running == {}


def test_an_operator_estop_latches_the_executor_until_its_reset() -> None:
    """The arm driver announces its latched e-stop as an operator event: no skill starts,
    whoever asks, until the reset is announced."""
    from solarian_agent.core.messages import OperatorEvent
    bus, ex, events = _executor()
    ops = bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    ops.publish(OperatorEvent("estop", {}))
    assert ex.estop_latched is True
    h = bus.send_goal("skills/forever", SkillGoal("forever", {}, ex.generation, "op-1"))
    assert h.result.outcome == "refused"
    assert h.result.reason == "refused: the e-stop is latched; the operator must reset it first"
    ops.publish(OperatorEvent("key", {"key": "w"}))  # any other event leaves the latch alone
    assert ex.estop_latched is True
    ops.publish(OperatorEvent("estop_reset", {}))
    assert ex.estop_latched is False
    ops.publish(OperatorEvent("click", {}))
    assert ex.estop_latched is False
    ok = bus.send_goal("skills/forever", SkillGoal("forever", {}, ex.generation, "op-2"))
    ex.tick()
    assert not ok.done and "op-2" in ex.running
    reasons = [e.data["reason"] for e in events if e.kind == "generation_advanced"]
    assert reasons == ["operator estop", "operator key", "operator estop_reset",
                       "operator click"]
    gen = bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION, qos=LATCHED).latest()
    assert (gen.value, gen.reason) == (ex.generation, "operator click")


def test_advancing_the_generation_stops_a_running_action_with_the_reason() -> None:
    bus, ex, events = _executor()
    h = bus.send_goal("skills/forever", SkillGoal("forever", {}, 1, "a1"))
    ex.tick()
    bus.call(names.SKILL_CONCLUDE, {"action_id": "a1", "outcome": "succeeded",
                                    "generation": 1, "reason": "first"})
    ex.advance_generation("reset", "operator")  # a stop already asked for stands
    ex.tick()
    assert h.result.outcome == "succeeded" and h.result.reason == "first"
    h2 = bus.send_goal("skills/forever", SkillGoal("forever", {}, 2, "a2"))
    ex.tick()
    ex.advance_generation("takeover", "operator")
    ex.tick()
    assert h2.result.outcome == "stopped"
    assert h2.result.reason == "takeover (generation advanced to 3)"
    stop = [e for e in events if e.kind == "skill_stop"][-1]
    assert stop.data == {"by": "agent", "skill": "forever", "action_id": "a2",
                         "reason": "takeover (generation advanced to 3)"}
    assert STOPS == ["first", "takeover (generation advanced to 3)"]


class StopRaises(Skill):
    description = "on_stop raises (test skill)."
    ends_by_itself = False
    parameters = {"type": "object", "properties": {"fail_start": {"type": "boolean"}}}

    def start(self) -> None:
        if self.params.get("fail_start"):
            raise RuntimeError("start broke after moving")

    def on_stop(self, reason: str) -> None:
        STOPS.append(reason)
        raise OSError("servo gone")


def test_a_stop_that_raises_is_reported_and_the_loop_goes_on() -> None:
    STOPS.clear()
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"s": Tool(StopRaises)}, {})
    events = record_events(bus, depth=100)
    h = bus.send_goal("skills/s", SkillGoal("s", {}, 1, "op-7"))
    ex.tick()
    h.cancel()
    ex.tick()
    assert h.result.outcome == "stopped" and STOPS == ["cancel requested"]
    stop = next(e.data for e in events if e.kind == "skill_stop")
    assert stop["by"] == "operator" and stop["action_id"] == "op-7"
    err = next(e.data for e in events if e.kind == "skill_error")
    assert err == {"action_id": "op-7", "skill": "s",
                   "error": "on_stop raised OSError('servo gone')"}
    f = bus.send_goal("skills/s", SkillGoal("s", {"fail_start": True}, 1, "a8"))
    ex.tick()
    assert f.result.outcome == "failed"
    assert f.result.reason == "skill s could not start: RuntimeError('start broke after moving')"
    assert STOPS[-1] == "could not start: RuntimeError('start broke after moving')"
    errs = [e.data for e in events if e.kind == "skill_error"]
    assert errs[-1] == {"action_id": "a8", "skill": "s",
                        "error": "on_stop raised OSError('servo gone')"}
