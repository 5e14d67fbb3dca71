"""The executor's published record, field by field (each asserted: mutation testing found
fields no test read).  The viewer draws the running action from ``skill_started`` /
``skill_ended``, the episode log keeps every event as published, the planner reads the goal's
result (action id, outcome, reason, data): so every payload field and every result is asserted
exactly here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import SkillFailed
from solarian_agent.core.executor import SkillExecutor, TrackerResult
from solarian_agent.core.messages import OperatorEvent, SkillFeedback, SkillGoal, SkillResult
from solarian_agent.core.skill import Skill, Tool, TrackerRequest
from solarian_agent.core.transport import LATCHED, Bus, GoalHandle, GoalStatus, QoS
from solarian_agent.testing.harness import record_events


class Pick(Skill):
    description = "Takes a point, runs until told (test skill)."
    parameters = {"type": "object", "properties": {"point": {"type": "array"},
                                                   "fail": {"type": "string"},
                                                   "raise": {"type": "string"}}}
    image_points = ("point",)
    camera = "cam"
    max_target_area = 0.2
    ends_by_itself = False

    @classmethod
    def services_for(cls, params: Any) -> list[TrackerRequest]:
        return [TrackerRequest("cam.target", "cam", "point", {"size": 3})]

    def tick(self) -> None:
        if self.params.get("fail"):
            raise SkillFailed(self.params["fail"])
        if self.params.get("raise"):
            raise ValueError(self.params["raise"])
        self.feedback("reaching", 0.25)


class Timed(Skill):
    description = "Runs until its limit (test skill)."
    max_duration_s = 2.0
    resources = ("cam",)


class Instant(Skill):
    description = "Done inside start (test skill)."
    resources = ()

    def start(self) -> None:
        self.finish(reason="nothing to do", extra=7)


class FailsAtStart(Skill):
    description = "Fails inside start (test skill)."
    resources = ()

    def start(self) -> None:
        self.fail("no cube in view")


class Hidden(Skill):  # no description: operator only, executable but not offered
    resources = ()

    def tick(self) -> None:
        self.finish()


class Tracker:
    def __init__(self, area: float | None = 0.05) -> None:
        self.area = area
        self.started: list[tuple[str, tuple[float, float]]] = []
        self.stopped: list[str] = []
        self.during_start: Callable[[], None] = lambda: None
        self.error: Exception | None = None

    def start(self, req: TrackerRequest, point: tuple[float, float]) -> TrackerResult:
        self.started.append((req.field, point))
        self.during_start()
        if self.error is not None:
            raise self.error
        return TrackerResult(self.area, (1, 2, 3, 4))

    def stop(self, field: str) -> None:
        self.stopped.append(field)


def _rig(tracker: Any = None) -> tuple[Bus, SkillExecutor, list[Any], FakeClock]:
    bus = Bus()
    clock = FakeClock()
    ex = SkillExecutor(bus, clock, {"pick": Tool(Pick), "timed": Tool(Timed),
                                    "instant": Tool(Instant), "failstart": Tool(FailsAtStart),
                                    "hidden": Tool(Hidden)}, {}, trackers=tracker)
    events = record_events(bus)
    return bus, ex, events, clock


def _of(events: list[Any], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == kind]


def test_the_executor_declares_its_graph_and_offers_only_described_tools() -> None:
    bus, ex, _, _ = _rig()
    mine = {(e.kind, e.name): e for e in bus.endpoints if e.node == "skills"}
    ev = mine[("publisher", names.SKILL_EVENTS)]
    assert ev.type == names.T_AGENT_EVENT and ev.qos == QoS(depth=200)
    gen = mine[("publisher", names.EXECUTOR_GENERATION)]
    assert gen.type == names.T_GENERATION and gen.qos == LATCHED
    op = mine[("subscription", names.OPERATOR_EVENTS)]
    assert op.type == names.T_OPERATOR_EVENT and op.qos == QoS(depth=100)
    for tool in ("pick", "timed", "instant", "failstart", "hidden"):
        assert mine[("action_server", names.skill_action(tool))].type == names.T_SKILL_ACTION
    for srv, typ in ((names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE),
                     (names.EXECUTOR_ADVANCE, names.T_ADVANCE_GENERATION),
                     (names.SKILL_CONCLUDE, names.T_CONCLUDE)):
        assert mine[("service", srv)].type == typ
    first = bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION, qos=LATCHED).latest()
    assert (first.value, first.reason) == (1, "start")
    catalogue = bus.call(names.TOOL_CATALOGUE, {})
    assert [c["name"] for c in catalogue] == ["pick", "timed", "instant", "failstart"]
    assert catalogue[0] == {
        "name": "pick", "description": "Takes a point, runs until told (test skill).",
        "parameters": {"type": "object", "properties": {"point": {"type": "array"},
                                                        "fail": {"type": "string"},
                                                        "raise": {"type": "string"}}},
        "image_points": ["point"], "examples": [], "ends_by_itself": False,
        "max_duration_s": None, "max_target_area": 0.2, "monitor": [], "camera": "cam",
        "resources": ["arm"]}
    assert set(ex.all_specs) == {"pick", "timed", "instant", "failstart", "hidden"}
    # the operator-only skill still runs
    h = bus.send_goal("skills/hidden", SkillGoal("hidden", {}, 1, "op-1"))
    ex.tick()
    ex.tick()
    assert h.result == SkillResult("op-1", "succeeded", "", {})


def test_a_refused_goal_ends_aborted_with_its_reason() -> None:
    bus, ex, _, _ = _rig()
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": 3}, 1, "a1"))
    assert h.status == GoalStatus.ABORTED
    assert h.result.action_id == "" and h.result.outcome == "refused"
    assert h.result.reason == "invalid arguments for pick at point: 3 is not of type 'array'"
    wrong = bus.send_goal("skills/pick", {"tool": "pick"})
    assert wrong.result == SkillResult(
        "", "refused", "goal for pick must be a SkillGoal, got dict")


def test_a_pointed_start_publishes_its_service_and_start_exactly() -> None:
    tracker = Tracker(area=0.05)
    bus, ex, events, clock = _rig(tracker)
    fb: list[Any] = []
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [5, 6]}, 1, "a1",
                                               observation_id="obs-3",
                                               watch_for=("cube falls",)),
                      feedback_cb=fb.append)
    ex.tick()
    assert tracker.started == [("cam.target", (5.0, 6.0))]
    assert _of(events, "service_started") == [
        {"by": "agent", "module": "cam", "field": "cam.target",
         "params": {"point": [5, 6], "size": 3}, "action_id": "a1"}]
    assert _of(events, "skill_started") == [
        {"by": "agent", "skill": "pick", "params": {"point": [5, 6]}, "action_id": "a1",
         "generation": 1, "observation_id": "obs-3", "watch_for": ["cube falls"],
         "trackers": ["cam.target"], "start_s": 0.0, "target_area": 0.05}]
    assert h.status == GoalStatus.EXECUTING
    # started, then ticked in the same control period
    assert fb == [SkillFeedback("a1", "started", 0.0), SkillFeedback("a1", "reaching", 0.25)]
    clock.advance(1.23456)
    h.cancel()
    ex.tick()
    assert _of(events, "skill_stop") == [
        {"by": "agent", "skill": "pick", "action_id": "a1", "reason": "cancel requested"}]
    assert _of(events, "skill_ended") == [
        {"skill": "pick", "action_id": "a1", "outcome": "stopped",
         "reason": "cancel requested", "duration_s": 1.235}]
    assert _of(events, "service_stopped") == [{"by": "agent", "field": "cam.target"}]
    assert h.status == GoalStatus.CANCELED
    assert h.result == SkillResult("a1", "stopped", "cancel requested", {})


def test_a_skill_without_a_target_limit_reports_no_target_area() -> None:
    bus, ex, events, _ = _rig(Tracker())
    bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "op-2"))
    ex.tick()
    assert _of(events, "skill_started") == [
        {"by": "operator", "skill": "timed", "params": {}, "action_id": "op-2",
         "generation": 1, "observation_id": "", "watch_for": [], "trackers": [],
         "start_s": 0.0}]


def test_a_point_that_is_not_a_pair_seeds_no_tracker() -> None:
    tracker = Tracker()
    bus, ex, events, _ = _rig(tracker)
    bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2, 3]}, 1, "a1"))
    ex.tick()
    assert tracker.started == [] and _of(events, "service_started") == []
    assert _of(events, "skill_started")[0]["target_area"] is None


def test_an_operator_action_names_the_operator_in_every_event() -> None:
    tracker = Tracker()
    bus, ex, events, _ = _rig(tracker)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "op-5"))
    ex.tick()
    h.cancel()
    ex.tick()
    by = {e.kind: e.data["by"] for e in events if "by" in e.data}
    assert by == {"service_started": "operator", "skill_started": "operator",
                  "skill_stop": "operator", "service_stopped": "operator"}


def test_a_target_too_large_or_missing_is_refused_with_the_area() -> None:
    tracker = Tracker(area=0.5)
    bus, ex, events, _ = _rig(tracker)
    big = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    ex.tick()
    reason = ("refused: the point selected a mask over 50.0% of the image; the target may "
              "cover at most 20.0%. The point probably missed the object: point again at its "
              "centre.")
    assert big.result == SkillResult("a1", "refused", reason, {"target_area": 0.5})
    assert _of(events, "target_rejected") == [
        {"tool": "pick", "action_id": "a1", "target_area": 0.5, "reason": reason}]
    assert tracker.stopped == ["cam.target"]
    assert _of(events, "service_stopped") == [{"by": "agent", "field": "cam.target"}]
    tracker.area = None
    none = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "op-2"))
    ex.tick()
    assert none.result.reason.startswith("refused: the point selected no mask; the target")
    assert none.result.data == {"target_area": None}
    assert _of(events, "service_stopped")[-1] == {"by": "operator", "field": "cam.target"}
    tracker.area = 0.2  # at the limit: accepted
    ok = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a3"))
    ex.tick()
    assert not ok.done and "a3" in ex.running
    assert _of(events, "skill_started")[-1]["target_area"] == 0.2


def test_a_tracker_or_services_failure_refuses_the_start() -> None:
    tracker = Tracker()
    tracker.error = OSError("camera gone")
    bus, ex, events, _ = _rig(tracker)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    ex.tick()
    assert h.result == SkillResult("a1", "refused",
                                   "tracker cam.target failed to start: camera gone", {})
    assert tracker.stopped == ["cam.target"]
    assert ex.running == {} and _of(events, "skill_started") == []

    class BadServices(Pick):
        @classmethod
        def services_for(cls, params: Any) -> list[TrackerRequest]:
            raise KeyError("point")

    bus2 = Bus()
    ex2 = SkillExecutor(bus2, FakeClock(), {"p": Tool(BadServices)}, {}, trackers=Tracker())
    h2 = bus2.send_goal("skills/p", SkillGoal("p", {"point": [1, 2]}, 1, "a2"))
    ex2.tick()
    assert h2.result == SkillResult(
        "a2", "refused", "refused: p could not name its services: KeyError('point')", {})
    # without trackers services_for is never asked
    bus3 = Bus()
    ex3 = SkillExecutor(bus3, FakeClock(), {"p": Tool(BadServices)}, {})
    h3 = bus3.send_goal("skills/p", SkillGoal("p", {"point": [1, 2]}, 1, "a3"))
    ex3.tick()
    assert not h3.done and "a3" in ex3.running


def test_a_cancel_or_advance_while_trackers_seed_never_starts_the_skill() -> None:
    tracker = Tracker()
    bus, ex, events, _ = _rig(tracker)
    handles: list[GoalHandle] = []
    tracker.during_start = lambda: handles[0].cancel() and None
    handles.append(bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1")))
    ex.tick()
    assert handles[0].result == SkillResult("a1", "stopped", "cancelled before it started", {})
    assert handles[0].status == GoalStatus.CANCELED
    assert tracker.stopped == ["cam.target"]
    tracker.during_start = lambda: ex.advance_generation("reset") and None
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a2"))
    ex.tick()
    assert h.result == SkillResult("a2", "refused", "refused: stale generation 1 (current 2) "
                                   "by the time it was due to start", {})
    assert tracker.stopped == ["cam.target", "cam.target"]
    assert _of(events, "skill_started") == [] and ex.running == {} and not ex.busy


def test_a_cancel_or_advance_during_start_stops_it_in_the_same_tick() -> None:
    box: dict[str, Any] = {}

    class Slow(Skill):
        description = "Its start lets something else happen (test skill)."
        ends_by_itself = False

        def start(self) -> None:
            box["during"]()

    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"slow": Tool(Slow)}, {})
    box["during"] = lambda: ex.advance_generation("takeover", "operator")
    h = bus.send_goal("skills/slow", SkillGoal("slow", {}, 1, "a1"))
    ex.tick()
    assert h.result == SkillResult(
        "a1", "stopped", "generation advanced to 2 while it was starting", {})
    box["during"] = lambda: h2.cancel()
    h2 = bus.send_goal("skills/slow", SkillGoal("slow", {}, 2, "a2"))
    ex.tick()
    assert h2.result == SkillResult("a2", "stopped", "cancel requested", {})


def test_a_skill_done_in_start_succeeds_with_its_result() -> None:
    bus, ex, events, clock = _rig()
    h = bus.send_goal("skills/instant", SkillGoal("instant", {}, 1, "a1"))
    ex.tick()
    assert h.result == SkillResult("a1", "succeeded", "nothing to do",
                                   {"reason": "nothing to do", "extra": 7})
    assert _of(events, "skill_ended") == [
        {"skill": "instant", "action_id": "a1", "outcome": "succeeded",
         "reason": "nothing to do", "duration_s": 0.0}]
    assert ex.running == {}


def test_a_failed_start_ends_the_action_failed_with_an_event() -> None:
    bus, ex, events, _ = _rig()
    h = bus.send_goal("skills/failstart", SkillGoal("failstart", {}, 1, "a1"))
    ex.tick()
    assert h.result == SkillResult("a1", "failed", "no cube in view", {})
    assert _of(events, "skill_ended") == [
        {"skill": "failstart", "action_id": "a1", "outcome": "failed",
         "reason": "no cube in view"}]
    assert _of(events, "skill_started") == [] and ex.running == {}


def test_a_failing_or_raising_tick_ends_the_action_with_the_reason() -> None:
    bus, ex, events, _ = _rig()
    f = bus.send_goal("skills/pick", SkillGoal("pick", {"fail": "lost grip"}, 1, "a1"))
    ex.tick()
    ex.tick()
    assert f.result == SkillResult("a1", "failed", "lost grip", {})
    assert _of(events, "skill_stop")[-1] == {"by": "agent", "skill": "pick", "action_id": "a1",
                                             "reason": "lost grip"}
    r = bus.send_goal("skills/pick", SkillGoal("pick", {"raise": "boom"}, 1, "a2"))
    ex.tick()
    ex.tick()
    reason = "skill pick raised ValueError: boom"
    assert r.result == SkillResult("a2", "failed", reason, {})
    err = _of(events, "skill_error")
    assert len(err) == 1 and set(err[0]) == {"action_id", "skill", "traceback"}
    assert err[0]["action_id"] == "a2" and err[0]["skill"] == "pick"
    assert "ValueError: boom" in err[0]["traceback"]
    assert _of(events, "skill_ended")[-1] == {"skill": "pick", "action_id": "a2",
                                              "outcome": "failed", "reason": reason,
                                              "duration_s": 0.0}


def test_a_skill_past_its_limit_times_out_at_the_limit() -> None:
    bus, ex, events, clock = _rig()
    h = bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a1"))
    ex.tick()
    clock.advance(1.999)
    ex.tick()
    assert not h.done
    clock.advance(0.001)
    ex.tick()
    assert h.result == SkillResult("a1", "timed_out", "ran its limit of 2 s", {})
    assert h.status == GoalStatus.ABORTED
    assert _of(events, "skill_stop") == [{"by": "agent", "skill": "timed", "action_id": "a1",
                                          "reason": "ran its limit of 2 s"}]
    assert _of(events, "skill_ended")[0]["duration_s"] == 2.0


def test_a_busy_resource_is_refused_naming_who_holds_it() -> None:
    bus, ex, _, _ = _rig(Tracker())
    bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    waiting = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a2"))
    assert waiting.result.reason == ("refused: arm busy with a starting action; stop it first "
                                     "or wait for it to end")
    ex.tick()
    busy = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a3"))
    assert busy.result.reason == ("refused: arm busy with a1 (pick); stop it first or wait "
                                  "for it to end")
    # a different resource is free meanwhile, and an action being stopped frees its own
    t = bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a4"))
    assert not t.done
    ex.stop_all("operator stop")
    again = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a5"))
    assert not again.done
    ex.tick()
    assert "a5" in ex.running and "a1" not in ex.running


class ArmLog(Skill):
    """Logs its start and stop in order, as an arm skill's command and hold (test skill)."""

    description = "Commands the arm until stopped (test skill)."
    resources = ("arm",)
    ends_by_itself = False
    log: list[str] = []

    def start(self) -> None:
        ArmLog.log.append(f"command by {self.ctx.action_id}")

    def on_stop(self, reason: str) -> None:
        ArmLog.log.append(f"hold by {self.ctx.action_id}")


def test_a_replaced_arm_skill_holds_before_the_new_one_commands() -> None:
    """The old skill's stop (an arm hold) reaches the arm before the new skill's first
    command in the same tick: a hold after it would cancel the new command on a real arm."""
    ArmLog.log = []
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"move": Tool(ArmLog)}, {})
    first = bus.send_goal("skills/move", SkillGoal("move", {}, 1, "a1"))
    ex.tick()
    first.cancel()
    second = bus.send_goal("skills/move", SkillGoal("move", {}, 1, "a2"))
    assert not second.done  # the stopping action no longer claims the arm
    ex.tick()
    assert ArmLog.log == ["command by a1", "hold by a1", "command by a2"]
    assert first.result == SkillResult("a1", "stopped", "cancel requested", {})
    assert list(ex.running) == ["a2"]


def test_stop_all_stops_every_running_action_with_the_reason() -> None:
    bus, ex, events, _ = _rig(Tracker())
    a = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    b = bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a2"))
    ex.tick()
    ex.stop_all("shutdown")
    ex.stop_all("second")  # the first reason stands
    ex.tick()
    assert a.result == SkillResult("a1", "stopped", "shutdown", {})
    assert b.result == SkillResult("a2", "stopped", "shutdown", {})
    assert not ex.busy


def test_a_tracker_another_action_still_reads_is_left_running() -> None:
    class Watch(Pick):
        resources = ("cam",)
        max_target_area = None

    tracker = Tracker()
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"pick": Tool(Pick), "watch": Tool(Watch)}, {},
                       trackers=tracker)
    a = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    bus.send_goal("skills/watch", SkillGoal("watch", {"point": [1, 2]}, 1, "a2"))
    ex.tick()
    a.cancel()
    ex.tick()
    assert a.done and tracker.stopped == []
    ex.stop_all("done")
    ex.tick()
    assert tracker.stopped == ["cam.target"]


def test_a_harness_error_while_running_stops_the_action_and_its_trackers() -> None:
    """A viewer's feedback callback that raises (a harness bug, not the skill's) fails that
    action only: stopped, its tracker released, the reason and the traceback published."""
    tracker = Tracker()
    bus, ex, events, clock = _rig(tracker)
    calls: list[Any] = []

    def broken(fb: Any) -> None:
        calls.append(fb)
        if fb.phase == "reaching":
            raise RuntimeError("viewer gone")

    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "op-1"),
                      feedback_cb=broken)
    ex.tick()
    reason = "harness error in pick: RuntimeError: viewer gone"
    assert h.result == SkillResult("op-1", "failed", reason)
    assert tracker.stopped == ["cam.target"]
    assert _of(events, "service_stopped") == [{"by": "operator", "field": "cam.target"}]
    err = _of(events, "skill_error")
    assert [(e["action_id"], e["skill"], e["error"]) for e in err] == [("op-1", "pick", reason)]
    assert "RuntimeError: viewer gone" in err[0]["traceback"]
    assert ex.running == {} and not ex.busy
    # the same harness bug while it starts (the 'started' feedback) ends it the same way
    def broken_at_start(fb: Any) -> None:
        raise OSError("socket closed")

    s = bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a2"),
                      feedback_cb=broken_at_start)
    ex.tick()
    assert s.result == SkillResult("a2", "failed",
                                   "harness error in timed: OSError: socket closed")
    assert ex.running == {}


def test_every_event_carries_the_clock_s_wall_time() -> None:
    bus, ex, events, clock = _rig()
    clock.advance(10.0)
    ex.advance_generation("reset")
    assert [(e.t, e.kind, e.data) for e in events] == [
        (clock.wall(), "generation_advanced", {"generation": 2, "reason": "reset",
                                               "by": "agent"})]


def test_an_operator_event_without_a_kind_still_advances_the_generation() -> None:
    bus, ex, events, _ = _rig()
    bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT).publish(object())
    assert _of(events, "generation_advanced") == [
        {"generation": 2, "reason": "operator event", "by": "operator"}]


def test_conclude_without_outcome_or_reason() -> None:
    bus, ex, _, _ = _rig()
    h = bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a1"))
    ex.tick()
    assert bus.call(names.SKILL_CONCLUDE, {"action_id": "a1", "generation": 1}) == {
        "ok": False, "reason": "outcome must be succeeded|failed|stopped, got ''"}
    assert bus.call(names.SKILL_CONCLUDE, {"action_id": "a1", "generation": 1,
                                           "outcome": "succeeded"}) == {"ok": True,
                                                                        "reason": ""}
    ex.tick()
    assert h.result == SkillResult("a1", "succeeded", "", {})


def test_a_tracker_that_fails_to_stop_is_reported_so_and_its_field_freed() -> None:
    class StuckTracker(Tracker):
        def stop(self, field: str) -> None:
            super().stop(field)
            raise OSError("tracker process gone")

    tracker = StuckTracker()
    bus, ex, events, _ = _rig(tracker)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    ex.tick()
    h.cancel()
    ex.tick()
    assert h.result == SkillResult("a1", "stopped", "cancel requested", {})
    assert _of(events, "service_stopped") == []
    assert _of(events, "service_stop_failed") == [
        {"by": "agent", "field": "cam.target", "error": "OSError: tracker process gone"}]
    # the field is free: the next pick seeds its tracker again
    bus.send_goal("skills/pick", SkillGoal("pick", {"point": [3, 4]}, 1, "a2"))
    ex.tick()
    assert "a2" in ex.running and len(tracker.started) == 2


def test_one_tracker_failing_to_stop_does_not_keep_the_others_running() -> None:
    class TwoViews(Pick):
        @classmethod
        def services_for(cls, params: Any) -> list[TrackerRequest]:
            return [TrackerRequest("cam.target", "cam", "point", {"size": 3}),
                    TrackerRequest("cam.hand", "cam", "point", {"size": 3})]

    class FirstStuck(Tracker):
        def stop(self, field: str) -> None:
            super().stop(field)
            if field == "cam.target":
                raise OSError("tracker process gone")

    tracker = FirstStuck()
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"two": Tool(TwoViews)}, {}, trackers=tracker)
    events = record_events(bus)
    h = bus.send_goal("skills/two", SkillGoal("two", {"point": [1, 2]}, 1, "a1"))
    ex.tick()
    h.cancel()
    ex.tick()
    assert tracker.stopped == ["cam.target", "cam.hand"]
    assert _of(events, "service_stop_failed") == [
        {"by": "agent", "field": "cam.target", "error": "OSError: tracker process gone"}]
    assert _of(events, "service_stopped") == [{"by": "agent", "field": "cam.hand"}]


class Probe(Skill):
    """Reports what its context gives it; fails, raises or never constructs on request."""

    description = "Reports its context (test skill)."
    parameters = {"type": "object", "properties": {"mode": {"type": "string"}}}
    resources = ()
    stops: list[str] = []

    def __init__(self, params: dict[str, Any], ctx: Any) -> None:
        if params.get("mode") == "no_init":
            raise ValueError("bad wiring")
        super().__init__(params, ctx)

    def start(self) -> None:
        self.ctx.emit("probe", {"action_id": self.ctx.action_id,
                                "generation": self.ctx.generation,
                                "arm": self.ctx.port("arm")})
        mode = self.params.get("mode")
        if mode == "fail":
            self.fail("no cube in view")
        if mode == "raise":
            raise RuntimeError("start broke")
        if mode == "done":
            self.finish()

    def on_stop(self, reason: str) -> None:
        Probe.stops.append(reason)


def _probe_rig(tracker: Any = None) -> tuple[Bus, SkillExecutor, list[Any]]:
    Probe.stops = []
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"probe": Tool(Probe)}, {"arm": "the-arm"},
                       trackers=tracker)
    events = record_events(bus)
    return bus, ex, events


def test_a_skill_s_context_carries_its_ports_events_action_and_generation() -> None:
    bus, ex, events = _probe_rig()
    h = bus.send_goal("skills/probe", SkillGoal("probe", {"mode": "done"}, 1, "a1"))
    ex.tick()
    assert _of(events, "probe") == [{"action_id": "a1", "generation": 1, "arm": "the-arm"}]
    assert h.result == SkillResult("a1", "succeeded", "", {})  # done in start, no reason


def test_a_start_that_fails_or_raises_stops_the_skill_with_the_reason() -> None:
    bus, ex, events = _probe_rig()
    f = bus.send_goal("skills/probe", SkillGoal("probe", {"mode": "fail"}, 1, "a1"))
    ex.tick()
    assert f.result == SkillResult("a1", "failed", "no cube in view", {})
    assert Probe.stops == ["no cube in view"]
    r = bus.send_goal("skills/probe", SkillGoal("probe", {"mode": "raise"}, 1, "a2"))
    ex.tick()
    assert r.result == SkillResult("a2", "failed",
                                   "skill probe could not start: RuntimeError('start broke')")
    assert Probe.stops[-1] == "could not start: RuntimeError('start broke')"
    n = bus.send_goal("skills/probe", SkillGoal("probe", {"mode": "no_init"}, 1, "a3"))
    ex.tick()  # never constructed: nothing to stop, the goal still ends with the reason
    assert n.result == SkillResult("a3", "failed",
                                   "skill probe could not start: ValueError('bad wiring')")
    assert len(Probe.stops) == 2 and ex.running == {}


def test_the_stop_after_a_failed_start_that_raises_is_reported() -> None:
    class Fragile(Probe):
        def on_stop(self, reason: str) -> None:
            raise OSError("servo gone")

    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"fragile": Tool(Fragile)}, {"arm": 1})
    events = record_events(bus, depth=50)
    h = bus.send_goal("skills/fragile", SkillGoal("fragile", {"mode": "fail"}, 1, "a1"))
    ex.tick()
    assert h.result == SkillResult("a1", "failed", "no cube in view", {})
    assert _of(events, "skill_error") == [{"action_id": "a1", "skill": "fragile",
                                           "error": "on_stop raised OSError('servo gone')"}]


def test_an_operator_start_that_ends_early_releases_its_trackers_as_the_operator() -> None:
    """Every way a pointed start ends before running releases its tracker in the name of
    whoever asked (the viewer shows who started and who stopped each service)."""

    class PointedProbe(Pick):
        parameters = {"type": "object", "properties": {"point": {"type": "array"},
                                                       "mode": {"type": "string"}}}
        max_target_area = None

        def start(self) -> None:
            if self.params.get("mode") == "fail":
                self.fail("no cube")
            if self.params.get("mode") == "raise":
                raise RuntimeError("broke")

    tracker = Tracker()
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"p": Tool(PointedProbe)}, {}, trackers=tracker)
    events = record_events(bus, depth=200)
    handles: list[GoalHandle] = []

    def goal(aid: str, **params: Any) -> GoalHandle:
        h = bus.send_goal("skills/p", SkillGoal("p", {"point": [1, 2], **params},
                                                ex.generation, aid))
        handles.append(h)
        return h

    goal("op-1", mode="fail")
    ex.tick()
    goal("op-2", mode="raise")
    ex.tick()
    tracker.during_start = lambda: handles[-1].cancel() and None
    goal("op-3")
    ex.tick()
    tracker.during_start = lambda: ex.advance_generation("reset") and None
    goal("op-4")
    ex.tick()
    tracker.during_start = lambda: None
    tracker.error = OSError("camera gone")
    goal("op-5")
    ex.tick()
    assert [h.result.action_id for h in handles] == ["op-1", "op-2", "op-3", "op-4", "op-5"]
    assert [h.result.outcome for h in handles] == ["failed", "failed", "stopped", "refused",
                                                   "refused"]
    assert _of(events, "service_stopped") == [{"by": "operator", "field": "cam.target"}] * 5


def test_services_get_the_bound_params_and_a_bad_point_skips_only_its_own() -> None:
    class Two(Skill):
        description = "Two trackers, the camera bound by the controller (test skill)."
        parameters = {"type": "object", "properties": {"a": {}, "b": {}}}
        ends_by_itself = False

        @classmethod
        def services_for(cls, params: Any) -> list[TrackerRequest]:
            cam = params["camera"]
            return [TrackerRequest(f"{cam}.first", cam, "a"),
                    TrackerRequest(f"{cam}.second", cam, "b")]

    tracker = Tracker()
    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"two": Tool(Two, {"camera": "top"})}, {},
                       trackers=tracker)
    bus.send_goal("skills/two", SkillGoal("two", {"a": "nowhere", "b": [3, 4]}, 1, "a1"))
    ex.tick()
    assert tracker.started == [("top.second", (3.0, 4.0))]
    assert ex.running["a1"].trackers == ["top.second"]


def test_the_start_time_counts_the_tracker_seeding() -> None:
    tracker = Tracker()
    bus, ex, events, clock = _rig(tracker)
    tracker.during_start = lambda: clock.advance(0.12345) and None
    bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    ex.tick()
    assert _of(events, "skill_started")[0]["start_s"] == 0.1235


def test_a_stale_goal_at_its_start_is_refused_under_its_own_id() -> None:
    bus, ex, _, _ = _rig()
    h = bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a1"))
    ex.advance_generation("reset")
    ex.tick()
    assert h.result == SkillResult("a1", "refused", "refused: stale generation 1 (current 2) "
                                   "by the time it was due to start", {})


def test_a_busy_refusal_names_only_the_actions_holding_that_resource() -> None:
    bus, ex, _, _ = _rig(Tracker())
    bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a1"))  # the camera
    bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a2"))  # the arm
    ex.tick()
    busy = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a3"))
    assert busy.result.reason == ("refused: arm busy with a2 (pick); stop it first or wait "
                                  "for it to end")


def _deep(n: int) -> None:
    if n == 0:
        raise ValueError("deep")
    _deeper(n - 1)


def _deeper(n: int) -> None:
    # alternating with _deep: no two consecutive frames are the same line, so Python never
    # folds them into "[Previous line repeated N more times]" and every kept frame is printed
    if n == 0:
        raise ValueError("deep")
    _deep(n - 1)


def test_published_tracebacks_are_bounded_to_five_frames() -> None:
    class Deep(Skill):
        description = "Raises from deep inside (test skill)."
        resources = ()

        def tick(self) -> None:
            _deep(10)

    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"deep": Tool(Deep), "pick": Tool(Pick)}, {})
    events = record_events(bus, depth=50)
    h = bus.send_goal("skills/deep", SkillGoal("deep", {}, 1, "a1"))
    ex.tick()
    assert h.result.reason == "skill deep raised ValueError: deep"
    assert _of(events, "skill_stop") == [{"by": "agent", "skill": "deep", "action_id": "a1",
                                          "reason": "skill deep raised ValueError: deep"}]
    # and a harness error from deep inside a feedback callback
    g = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a2"),
                      feedback_cb=lambda fb: _deep(10) if fb.phase == "reaching" else None)
    ex.tick()
    assert g.result.reason == "harness error in pick: ValueError: deep"
    tracebacks = [e["traceback"] for e in _of(events, "skill_error")]
    assert len(tracebacks) == 2
    assert [t.count('  File "') for t in tracebacks] == [5, 5]
    assert not any("repeated" in t for t in tracebacks)  # nothing folded away
    # the five outermost frames, from the executor's own (their names differ under mutmut's
    # trampolines) down into the skill
    frames = [line.rsplit(" in ", 1)[1] for line in tracebacks[0].splitlines()
              if line.startswith('  File "')]
    assert frames[-2:] == ["_deeper", "_deep"]
    assert tracebacks[0].endswith("ValueError: deep\n")


def test_a_refusal_over_several_resources_lists_them_and_every_holder() -> None:
    class Both(Skill):
        description = "Needs the arm and the camera (test skill)."
        resources = ("cam", "arm")

    bus = Bus()
    ex = SkillExecutor(bus, FakeClock(), {"pick": Tool(Pick), "timed": Tool(Timed),
                                          "both": Tool(Both)}, {})
    bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 1, "a1"))
    bus.send_goal("skills/timed", SkillGoal("timed", {}, 1, "a2"))
    ex.tick()
    h = bus.send_goal("skills/both", SkillGoal("both", {}, 1, "a3"))
    assert h.result.reason == ("refused: arm, cam busy with a1 (pick), a2 (timed); stop it "
                               "first or wait for it to end")


def test_a_new_executor_keeps_its_bus_and_starts_with_the_e_stop_clear() -> None:
    bus, ex, _, _ = _rig()
    assert ex.bus is bus
    assert ex.estop_latched is False  # exactly False, not merely falsy, until an estop arrives
    op = bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    op.publish(OperatorEvent("estop"))
    assert ex.estop_latched is True
    op.publish(OperatorEvent("estop_reset"))
    assert ex.estop_latched is False


def test_a_running_action_records_the_generation_it_was_decided_in() -> None:
    bus, ex, _, clock = _rig(Tracker())
    ex.advance_generation("reset")
    clock.advance(3.0)
    h = bus.send_goal("skills/pick", SkillGoal("pick", {"point": [1, 2]}, 2, "op-7"))
    ex.tick()
    ra = ex.running["op-7"]
    assert (ra.action_id, ra.tool, ra.generation, ra.started_at, ra.by, ra.trackers,
            ra.deadline, ra.stop_request) == ("op-7", "pick", 2, clock.now(), "operator",
                                              ["cam.target"], None, None)
    assert ra.handle is h and ra.spec == ex.all_specs["pick"] and isinstance(ra.skill, Pick)


def test_a_skill_that_never_constructs_has_nothing_to_stop_and_reports_no_error() -> None:
    bus, ex, events = _probe_rig()
    n = bus.send_goal("skills/probe", SkillGoal("probe", {"mode": "no_init"}, 1, "a1"))
    ex.tick()
    assert n.result == SkillResult("a1", "failed",
                                   "skill probe could not start: ValueError('bad wiring')")
    # no skill object: no on_stop is tried, so no "on_stop raised ..." error is published
    assert [e.kind for e in events] == []
    assert Probe.stops == [] and ex.running == {}


def test_the_executor_counts_its_control_ticks_one_per_tick() -> None:
    _, ex, _, _ = _rig()
    assert ex.ticks == 0
    for _ in range(3):
        ex.tick()
    assert ex.ticks == 3
