"""The executor's services and how its actions end: the advance service and operator events
(each naming its reason and who), conclude's exact answers, cancel, the operator's e-stop
latch, a generation advance stopping a running action, and a tick that crashes or a stop
that raises: each ends its action with the reason, and the loop goes on."""

from __future__ import annotations

from typing import Any

from executor_helpers import Pointed, RecordingTracker

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.executor import SkillExecutor
from solarian_agent.core.messages import SkillGoal
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.core.transport import LATCHED, Bus
from solarian_agent.testing.harness import record_events


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
