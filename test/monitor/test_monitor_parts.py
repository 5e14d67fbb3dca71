"""The monitor engine's parts on their own: what a tick's answers and a tripwire decide, the
watch list and schedule, the calls in flight and their deadlines, the frames kept per action,
the log and the readings."""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import pytest
from monitor_helpers import pattern

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.event_types import MonitorError, SkillStarted
from solarian_agent.core.messages import Image, JointState
from solarian_agent.core.model_caller import InlineCaller
from solarian_agent.core.monitor_calls import TickCalls
from solarian_agent.core.monitor_frames import ImageEncoding, ShotCache, Viewing
from solarian_agent.core.monitor_framing import FramingRules, MonitorFraming
from solarian_agent.core.monitor_log import MonitorLog
from solarian_agent.core.monitor_request import JointReadings
from solarian_agent.core.monitor_rules import QuestionSpec, Rule, RuleState, watch_for_questions
from solarian_agent.core.monitor_verdicts import (
    MonitorVerdicts,
    VerdictPublisher,
    decide,
    read_tripwire,
)
from solarian_agent.core.monitor_watch import (
    SkillEvent,
    SkillEventInbox,
    TickSchedule,
    ToolCatalogue,
    WatchList,
    active_questions,
    watched_action,
)
from solarian_agent.core.transport import Bus
from solarian_agent.core.vision import (
    MonitorAnswer,
    MonitorQuestion,
    MonitorTickRequest,
    TickReply,
)

FINISH = Rule("finish", "holding", threshold=0.8)
FAIL = Rule("fail", "failed")
ESCALATE = Rule("escalate", "slipping")


def spec(name: str, *rules: Rule) -> QuestionSpec:
    return QuestionSpec(MonitorQuestion(name, "choice", "", (("holding", ""), ("failed", ""),
                                                             ("slipping", ""))), rules)


def action(*questions: QuestionSpec, aid: str = "a1", **data):
    return watched_action(SkillStarted.from_record(
        {"skill": "grip", "action_id": aid, "generation": 3, **data}), 10.0, {},
        {"grip": tuple(questions)})


def answer(name: str, value: str, p: float = 0.9) -> MonitorAnswer:
    return MonitorAnswer(name, value, p, "seen")


class Log:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.log = MonitorLog(self.clock, lambda: None)

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.log.recent]


# -- the decision on a tick's answers -----------------------------------------------------------

def test_an_answer_no_rule_fired_on_is_a_plain_verdict():
    q = spec("progress", FINISH)
    j = decide(action(q), [(q, answer("progress", "failed"), [])], 5.0)
    (v,) = j.verdicts
    assert (v.decision, v.value, v.reason, v.generation, v.stamp) == ("", "failed", "seen", 3,
                                                                      5.0)
    assert j.concluded == ""


def test_an_unanswered_question_gives_no_verdict():
    q = spec("progress", FINISH)
    assert decide(action(q), [(q, None, [])], 0.0).verdicts == ()


def test_escalations_come_before_the_one_finish_or_fail_and_only_the_first_concludes():
    a, b, c = spec("a", FINISH), spec("b", FAIL), spec("c", ESCALATE)
    j = decide(action(a, b, c), [(a, answer("a", "holding"), [(FINISH, 1)]),
                                 (b, answer("b", "failed"), [(FAIL, 1)]),
                                 (c, answer("c", "slipping"), [(ESCALATE, 1)])], 0.0)
    # b's fail comes second: it does not count, so b is only shown as an answer
    assert [(v.question, v.decision) for v in j.verdicts] == [
        ("b", ""), ("c", "escalate"), ("a", "finish")]
    assert j.concluded == "finish"


def test_a_fired_rule_says_why_and_how_many_ticks_in_a_row():
    q = spec("progress", Rule("finish", "holding", consecutive=2))
    (v,) = decide(action(q), [(q, answer("progress", "holding", 0.95),
                               [(q.rules[0], 2)])], 0.0).verdicts
    assert v.reason == "progress = holding (p=0.95) on 2 ticks in a row: seen"


def test_a_watch_for_verdict_names_its_condition():
    (q,) = watch_for_questions(["the cup tips over"])
    (v,) = decide(action(q), [(q, answer(q.name, "true"), [(q.rules[0], 2)])], 0.0).verdicts
    assert v.reason.startswith("watch_for condition 'the cup tips over' holds (p=0.90)")


# -- the tripwires -----------------------------------------------------------------------------

def test_a_tripwire_that_flags_nothing_is_none():
    assert read_tripwire(None, lambda t: True) is None


@pytest.mark.parametrize("res", [("stop", "why"), ("fail",), ("fail", 3), ["fail", "why"]])
def test_a_malformed_tripwire_result_is_an_error(res):
    call = read_tripwire(res, lambda t: True)
    assert call is not None and "must return None" in call.error and call.decision == ""


def test_a_tripwire_follow_up_naming_no_tool_is_dropped_and_the_verdict_stands():
    call = read_tripwire(("fail", "stalled", "go_home"), lambda t: t == "carry")
    assert call is not None
    assert (call.decision, call.then, call.dropped) == ("fail", "", "'go_home' names no tool")
    call = read_tripwire(("fail", "stalled", "carry"), lambda t: t == "carry")
    assert call is not None and (call.then, call.dropped) == ("carry", "")


def test_an_escalating_tripwire_starts_no_tool():
    call = read_tripwire(("escalate", "odd", "carry"), lambda t: True)
    assert call is not None and (call.then, call.dropped) == ("", "escalate starts no tool")


def _verdicts(tripwire):
    bus, log = Bus(), Log()
    sub = bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    mv = MonitorVerdicts(VerdictPublisher(bus, "m"), log.clock, log.log, tripwire=tripwire,
                         has_tool=lambda t: False)
    return mv, sub, log


def test_a_tripwire_escalates_an_action_once_and_a_fail_concludes_it():
    results = iter([("escalate", "odd"), ("escalate", "odd again"), ("fail", "stalled")])
    mv, sub, log = _verdicts(lambda aid, tool, t: next(results))
    act = action()
    mv.watch(act)
    for _ in range(3):
        mv.tripwire(act, 1.0)
    assert [(v.decision, v.source) for v in sub.drain()] == [("escalate", "controller"),
                                                             ("fail", "controller")]
    assert mv.concluded("a1") == "fail" and mv.published == 2
    mv.forget("a1")
    assert mv.concluded("a1") == ""


def test_a_raising_tripwire_is_counted_and_logged():
    def broken(aid, tool, t):
        raise RuntimeError("no arm")

    mv, sub, log = _verdicts(broken)
    mv.watch(action())
    mv.tripwire(action(), 0.0)
    assert log.log.errors == 1 and log.kinds() == ["monitor_error"] and sub.drain() == []


def test_judging_feeds_only_the_questions_asked_and_concludes_on_a_finish():
    q, other = spec("progress", FINISH), spec("other", FAIL)
    mv, sub, _ = _verdicts(None)
    act = action(q, other)
    mv.watch(act)
    out = mv.judge(act, {"progress"}, 2.0, {"progress": answer("progress", "holding"),
                                            "other": answer("other", "failed")})
    assert [r["decision"] for r in out] == ["finish"] and mv.concluded("a1") == "finish"
    assert [v.question for v in sub.drain()] == ["progress"]


# -- what is watched and when ------------------------------------------------------------------

def test_a_watched_action_asks_its_tools_questions_then_its_watch_for_conditions():
    act = action(spec("progress", FINISH), watch_for=["cup tips", "  "], trackers=["cam.t"])
    assert [q.name for q in act.questions] == ["progress", "watch_for_1"]
    assert act.watch_for == ("cup tips",) and act.trackers == ("cam.t",) and act.by == "agent"


def test_a_malformed_start_event_raises():
    with pytest.raises(ValueError):
        action(generation="x")


def test_watch_for_questions_are_asked_from_six_seconds():
    qs = (spec("progress"), *watch_for_questions(["cup tips"]))
    assert [q.name for q in active_questions(qs, 5.9)] == ["progress"]
    assert [q.name for q in active_questions(qs, 6.0)] == ["progress", "watch_for_1"]


def test_operator_actions_are_watched_only_when_asked():
    assert WatchList().watches("agent") and not WatchList().watches("operator")
    assert WatchList(watch_operator=True).watches("operator")


def test_ticks_are_counted_per_action_and_restart_with_the_action():
    w = WatchList()
    w.add(action(aid="a1"))
    w.add(action(aid="a2"))
    assert [w.next_tick("a1"), w.next_tick("a1"), w.next_tick("a2")] == [1, 2, 1]
    w.add(action(aid="a1"))
    assert w.next_tick("a1") == 1
    assert w.remove("a1") is not None and w.remove("a1") is None and list(w.ids()) == ["a2"]


def test_the_schedule_is_due_at_once_then_every_period_and_restarts_when_idle():
    s = TickSchedule(1.5)
    assert s.due(0.0, True) and not s.due(1.0, True) and s.due(1.5, True)
    assert not s.due(2.0, False) and s.due(2.1, True)


def test_the_catalogue_is_read_once_and_validated():
    from monitor_helpers import PROGRESS, grip_tool

    from solarian_agent.core.monitor_rules import MonitorConfigError

    reads: list[int] = []
    good = [grip_tool([{**PROGRESS, "when": {"do": "finish", "value": "holding"}}])]

    def fetch():
        reads.append(1)
        return good

    cat = ToolCatalogue(fetch)
    assert not cat.loaded and cat.tools == frozenset() and cat.questions == {}
    cat.fetch()
    cat.fetch()
    assert reads == [1] and cat.has_tool("grip") and cat.spec("grip") is good[0]
    assert [q.name for q in cat.questions["grip"]] == ["progress"]
    bad = ToolCatalogue(lambda: [grip_tool([{**PROGRESS, "when": {
        "do": "finish", "value": "holding", "then": "nope"}}])])
    with pytest.raises(MonitorConfigError):
        bad.fetch()
    assert not bad.loaded
    bad.give_up()  # watched with no questions from then on
    assert bad.loaded and bad.questions == {} and not bad.has_tool("grip")


def test_the_inbox_hands_each_event_over_once():
    box = SkillEventInbox()
    box.put(SkillEvent(SkillStarted(action_id="a1"), 0.0, {}))
    assert [e.event.action_id for e in box.take()] == ["a1"] and box.take() == []


# -- the calls in flight -----------------------------------------------------------------------

class Held:
    """A caller whose calls stay in flight until the test completes them."""

    def __init__(self) -> None:
        self.futures: list[cf.Future] = []

    def submit(self, fn):
        fut: cf.Future = cf.Future()
        fut.fn = fn  # type: ignore[attr-defined]
        self.futures.append(fut)
        return fut

    def shutdown(self) -> None:
        pass


class Backend:
    model = "fake-vision"

    def answer_tick(self, request, *, timeout_s):
        return TickReply({"progress": answer("progress", "holding")})


def _request(aid: str = "a1") -> MonitorTickRequest:
    return MonitorTickRequest(aid, "grip", 1.0, (spec("progress").question,), (), {"j": 1})


def test_a_tick_waits_while_its_action_has_a_call_in_flight():
    log, caller = Log(), Held()
    calls = TickCalls(Backend(), caller, 10.0, log.log)
    act = action()
    assert not calls.busy(act, 1, 0.0)
    calls.submit(act, 1, _request(), [], [], 1.0, 0.0)
    assert calls.busy(act, 2, 5.0) and calls.skipped == 1 and calls.calls == 1
    assert log.kinds() == ["monitor_skip"]
    assert list(calls.poll(["a1"])) == []  # not back yet


def test_a_call_past_its_deadline_is_given_up_and_still_awaited():
    log, caller = Log(), Held()
    calls = TickCalls(Backend(), caller, 10.0, log.log)
    act = action()
    calls.submit(act, 1, _request(), [], [], 1.0, 0.0)
    assert calls.busy(act, 2, 11.0)  # within the second of grace
    assert not calls.busy(act, 3, 11.1)
    assert log.log.errors == 1 and log.log.recent[-1]["error"]["kind"] == "timeout"
    assert calls.in_flight("a1") is None and calls.orphans == 1
    caller.futures[0].set_result(Backend().answer_tick(None, timeout_s=1))
    (done,) = calls.poll(["a1"])
    assert done.orphan and done.reply is not None and calls.orphans == 0


def test_the_calls_back_come_in_the_order_given_and_a_failure_is_counted():
    log = Log()
    calls = TickCalls(Backend(), InlineCaller(), 10.0, log.log)
    calls.submit(action(aid="a1"), 1, _request("a1"), [], [], 1.0, 0.0)
    calls.submit(action(aid="a2"), 1, _request("a2"), [], [], 1.0, 0.0)
    assert [d.act.action_id for d in calls.poll(["a2", "a1"])] == ["a2", "a1"]

    class Failing(Backend):
        def answer_tick(self, request, *, timeout_s):
            raise TimeoutError("slow")

    calls = TickCalls(Failing(), InlineCaller(), 10.0, log.log)
    calls.submit(action(), 1, _request(), [], [], 1.0, 0.0)
    (done,) = calls.poll(["a1"])
    assert done.reply is None and done.error == {"kind": "error", "message": "slow"}
    assert log.log.errors == 1
    rec = done.record([], live=True)
    assert rec["model"] == "fake-vision" and rec["error"] == done.error
    assert "discarded" in done.record([], live=False)


def test_an_action_that_ended_has_its_call_awaited_to_be_logged():
    log, caller = Log(), Held()
    calls = TickCalls(Backend(), caller, 10.0, log.log)
    calls.submit(action(), 1, _request(), [], [], 1.0, 0.0)
    calls.orphan("a1")
    calls.orphan("a1")  # nothing more in flight
    caller.futures[0].set_result(Backend().answer_tick(None, timeout_s=1))
    assert [d.orphan for d in calls.poll([])] == [True]


def test_the_images_are_saved_on_the_worker_before_the_model_is_asked():
    saved: list[str] = []

    class Episode:
        def has_image(self, name):
            return name in saved

        def save_image(self, name, data):
            saved.append(name)

        def event(self, kind, **data):
            return {"kind": kind, **data}

    ep = Episode()
    log = MonitorLog(FakeClock(), lambda: ep)  # type: ignore[arg-type,return-value]
    calls = TickCalls(Backend(), InlineCaller(), 10.0, log)
    calls.submit(action(), 1, _request(), [], [("a.jpg", b"1"), ("a.jpg", b"1"),
                                             ("b.jpg", b"2")], 1.0, 0.0)
    assert saved == ["a.jpg", "b.jpg"]


# -- the frames kept ---------------------------------------------------------------------------

class Latest:
    def __init__(self, frame):
        self.frame = frame

    def latest(self):
        return self.frame


def _framing(history: int = 2, cameras=("cam",), **kw) -> tuple[MonitorFraming, dict]:
    subs = {c: Latest(Image(pattern(48, 64, i), 1.0, c, i)) for i, c in enumerate(cameras)}
    viewing = Viewing({}, 32, ImageEncoding("png"))
    f = MonitorFraming(subs, list(cameras), viewing, FramingRules(history, False, False),
                       target_box=None, tool_spec=lambda t: None, log=Log().log, **kw)
    return f, subs


def test_a_frame_is_scaled_and_encoded_once_for_every_action():
    f, _ = _framing()
    a, b = action(aid="a1"), action(aid="a2")
    assert f.take(a)[0][1] is f.take(b)[0][1]


def test_the_shot_cache_lets_the_oldest_go():
    cache = ShotCache(Viewing({}, 32, ImageEncoding("png")), capacity=2)
    for seq in range(3):
        cache.shot("cam", Image(pattern(48, 64, seq), float(seq), "cam", seq))
    assert len(cache) == 2 and cache.get(("cam", 0, 0.0)) is None
    assert cache.get(("cam", 2, 2.0)) is not None


def test_the_first_frames_are_only_kept_with_history_and_the_history_is_bounded():
    f, subs = _framing(history=2)
    act = action()
    f.watch("a1")
    assert f.keep("a1", f.take(act)) is True
    for seq in (5, 6):
        subs["cam"].frame = Image(pattern(48, 64, seq), float(seq), "cam", seq)
        assert f.keep("a1", f.take(act)) is False
    sent = f.tick_images(act, 7.0)
    assert [i.label for i in sent.images] == ["previous", "current"]
    assert [s.frame.seq for s in sent.shots] == [5, 6] and not sent.has_reference
    f.forget("a1")
    assert f.tick_images(act, 7.0).images == ()


def test_with_history_1_every_frame_is_judged():
    f, _ = _framing(history=1)
    f.watch("a1")
    assert f.keep("a1", f.take(action())) is False


def test_reference_frames_are_made_once_and_aged():
    subs = {"cam": Latest(Image(pattern(48, 64, 1), 3.0, "cam", 1))}
    start = {"cam": Image(pattern(48, 64, 0), 1.0, "cam", 0)}
    f = MonitorFraming(subs, ["cam"], Viewing({}, 32, ImageEncoding("png")),
                       FramingRules(1, False, True), target_box=None,
                       tool_spec=lambda t: None, log=Log().log)
    act = watched_action(SkillStarted(skill="grip", action_id="a1"), 1.0, start, {})
    f.watch("a1")
    f.keep("a1", f.take(act))
    first = f.tick_images(act, 3.0)
    later = f.tick_images(act, 4.5)
    assert [i.label for i in first.images] == ["reference", "current"]
    assert first.has_reference and first.images[0].age_s == 2.0
    assert later.images[0].age_s == 3.5 and later.images[0].data is first.images[0].data
    assert [name for name, _ in first.files][-1] == "monitor_a1_reference_cam.png"


def test_a_raising_target_box_leaves_the_frame_unmarked_and_is_logged():
    def broken(*a):
        raise RuntimeError("tracker lost")

    log = Log()
    subs = {"cam": Latest(Image(pattern(48, 64, 1), 1.0, "cam", 1))}
    f = MonitorFraming(subs, ["cam"], Viewing({}, 32, ImageEncoding("png")),
                       FramingRules(1, True, False), target_box=broken,
                       tool_spec=lambda t: None, log=log.log)
    ((cam, shot, mark),) = f.take(action())
    assert mark is None and log.kinds() == ["monitor_error"] and log.log.errors == 0


# -- the log and the readings ------------------------------------------------------------------

def test_a_broken_event_hook_does_not_stop_the_log():
    def hook(kind, rec):
        raise RuntimeError("ui gone")

    log = MonitorLog(FakeClock(), lambda: None, hook)
    log.error(MonitorError(error="x"))
    assert log.errors == 1 and [e["kind"] for e in log.recent] == ["monitor_error"]


def test_the_readings_keep_the_planners_state_fields():
    js = JointState(0.0, ("j1", "gripper"), (0.123456, 0.02))
    assert JointReadings(Latest(js)).read() == {"joints": {"j1": 0.1235, "gripper": 0.02}}
    only = JointReadings(Latest(js), state_fields={"joints": ["gripper"]})
    assert only.read() == {"joints": {"gripper": 0.02}}
    assert JointReadings(Latest(None)).read() == {}
    assert JointReadings(Latest(None), lambda js: {"m": {"x": 1.0}}).read() == {"m": {"x": 1.0}}


def test_rule_states_are_fed_once_per_tick():
    # the verdicts keep one RuleState per question: two ticks in a row make a run of two
    q = spec("progress", Rule("finish", "holding", consecutive=2))
    s = RuleState(q)
    assert s.feed(answer("progress", "holding"), 0.0) == []
    assert s.feed(answer("progress", "holding"), 1.0) == [(q.rules[0], 2)]
    assert np.array_equal(s.streaks, [2])
