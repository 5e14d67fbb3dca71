"""The event-driven planner: urgency routing (interrupt / queue / parallel), batches with
"[Unprocessed event k/N]" markers, placeholders for interrupted tool calls, long-running tools
with task ids, progress, task_status / cancel_task, timers, and the guarantee that the planner
never decides on a result that has not arrived.  Driven by the scripted model on a fake clock."""

from __future__ import annotations

import re
import threading
import time

import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.config import load_agent_config
from solarian_agent.core.episode_log import read_events
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.events import Event
from solarian_agent.core.messages import MonitorVerdict, OperatorEvent
from solarian_agent.core.model_api import ModelError, ModelRequest
from solarian_agent.core.planner import PLANNER_TOOLS, ThreadCaller
from solarian_agent.core.routing import (
    PARALLEL_SYSTEM,
    NewsItem,
    RouteContext,
    Router,
    render_news,
)
from solarian_agent.core.skill import Skill, Tool
from solarian_agent.core.text import find_quotes, operator_message
from solarian_agent.core.timers import TimerError, Timers
from solarian_agent.core.transport import QoS
from solarian_agent.models.scripted import ScriptedProvider, reply
from solarian_agent.models.wiring import build_router
from solarian_agent.testing.harness import DEFAULT_TOOLS, last_user_text, make_harness


# --------------------------------------------------------------------------------------------
# toy long-running tools
# --------------------------------------------------------------------------------------------
class Progress(Skill):
    """A long analysis that advances at ``rate`` percent per second and reports progress."""

    description = "Run a long analysis script (test skill)."
    parameters = {"type": "object", "properties": {
        "rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
        "label": {"type": "string"}},
        "required": ["rate"], "additionalProperties": False}
    resources = ()

    def start(self) -> None:
        self.t0 = self.ctx.clock.now()

    def tick(self) -> None:
        p = (self.ctx.clock.now() - self.t0) * float(self.params["rate"]) / 100.0
        if p >= 1.0 - 1e-9:
            self.finish(reason="done", report=f"{self.params.get('label', 'script')} done")
        else:
            self.feedback("working", p)


TOOLS = {**DEFAULT_TOOLS, "progress": Tool(Progress)}
FAST = {"control_period_s": 0.05}


def harness(script, **kw):
    kw.setdefault("tools", TOOLS)
    h = make_harness(script, **kw)
    h.events = []
    h.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=h.events.append,
                    qos=QoS(depth=10_000))
    return h


def logged(h, kind):
    return [e.data for e in h.events if e.kind == kind]


def main_calls(h):
    """The planner's own calls (the parallel answers use their own short system prompt)."""
    return [c for c in h.provider.calls if c.request.system != PARALLEL_SYSTEM]


def all_text(req: ModelRequest) -> str:
    return "\n".join(m.text() for m in req.messages)


def tool_results(req: ModelRequest) -> list[str]:
    return [m.text() for m in req.messages if m.role == "tool"]


def assert_calls_paired(messages):
    """Every assistant tool call has exactly one tool result (the synchronous format)."""
    calls = [c.id for m in messages if m.role == "assistant" for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == "tool"]
    assert sorted(calls) == sorted(results)


# --------------------------------------------------------------------------------------------
# the router
# --------------------------------------------------------------------------------------------
BUSY = RouteContext(active=True, busy=True, task="tidy up", running=("a1 wait (3.0 s)",))
IDLE_RUN = RouteContext(active=True, busy=False, task="tidy up")


def msg(text):
    return Event("user", "chat", text, {"by": "user"}, "queue", "message")


@pytest.mark.parametrize("text, urgency, stop, rule", [
    ("stop!", "interrupt", True, "user_stop"),
    ("Cancel", "interrupt", True, "user_stop"),
    ("please stop now", "interrupt", True, "user_stop"),
    ("Mégse", "interrupt", True, "user_stop"),
    ("Wait, first check tomorrow's weather", "interrupt", False, "user_wait"),
    ("No, the other cup", "interrupt", False, "user_correction"),
    ("what time is it?", "parallel", False, "small_talk"),
    ("Hány óra van?", "parallel", False, "small_talk"),
    ("answer in Japanese", "queue", False, "user_addition"),
    ("format it as a web page", "queue", False, "user_addition"),
    ("keep waiting", "queue", False, "user_addition"),
    ("don't stop believing, put the cup on the tray", "queue", False, "user_addition"),
])
def test_rule_table_routes_user_messages(text, urgency, stop, rule):
    # (the labelled table of hard cases is test/core/test_routing_table.py)
    d = Router().route(msg(text), BUSY)
    assert d is not None
    assert (d.urgency, d.stop, d.rule) == (urgency, stop, rule)
    assert d.reason and d.by == "rule"


def test_rule_table_routes_system_events():
    r = Router()
    verdict_fail = Event("monitor", "verdict", "dropped", {}, "interrupt", "monitor_flag")
    verdict_flag = Event("monitor", "verdict", "odd", {}, "queue", "monitor_flag")
    cases = [
        (Event("operator", "teleop", "key", {}, "interrupt", "operator"), "interrupt"),
        (Event("user", "ui", "cancel", {}, "interrupt", "cancel"), "interrupt"),
        (Event("supervisor", "chat", "pause the line", {}, "queue", "instruction"),
         "interrupt"),
        (Event("system", "alarm", "battery low", {}, "queue", "alarm"), "interrupt"),
        (verdict_fail, "interrupt"), (verdict_flag, "queue"),
        (Event("skills", "action", "succeeded", {}, "queue", "action_ended"), "queue"),
        (Event("timer", "timer", "check", {}, "queue", "timer"), "queue"),
        (Event("skills", "task", "50%", {}, "queue", "task_progress"), "queue"),
    ]
    for ev, urgency in cases:
        d = r.route(ev, BUSY)
        assert d is not None and d.urgency == urgency, (ev, d)


def test_parallel_only_while_the_main_task_works_and_idle_messages_start_runs():
    r = Router()
    d = r.route(msg("what time is it?"), IDLE_RUN)
    assert d is not None and d.urgency == "queue" and "nothing is running" in d.reason
    d = r.route(msg("stop"), RouteContext(active=False))
    assert d is not None and d.urgency == "queue" and d.rule == "idle"


def test_router_model_decides_messages_and_failures_fall_back_to_the_rules():
    model = ScriptedProvider([reply('{"urgency": "parallel", "reason": "small talk"}'),
                              reply("not json"),
                              reply('{"urgency": "soon", "reason": "x"}'),
                              ModelError("timeout", "slow")])
    r = Router(model=model)
    tool_result = Event("skills", "action", "succeeded", {}, "queue", "action_ended")
    assert r.route(tool_result, BUSY).by == "rule"  # a system event: the rules, no model call
    assert r.route(msg("stop"), BUSY).by == "rule"  # a stop of everything: at once
    assert r.route(msg("don't stop, keep going"), BUSY) is None  # the model decides
    ev = msg("tell me a joke")
    assert r.route(ev, BUSY) is None
    req = r.request(ev, BUSY)
    assert req.purpose == "router" and req.response_schema is not None and not req.tools
    d = r.parse(model.complete(req, timeout_s=1), None, BUSY, ev)
    assert (d.urgency, d.by, d.reason) == ("parallel", "model", "small talk")
    for _ in range(2):
        d = r.parse(model.complete(req, timeout_s=1), None, BUSY, msg("No, the other cup"))
        # the rules decide in the model's place: a correction still interrupts
        assert (d.urgency, d.by, d.stop) == ("interrupt", "fallback", False)
        assert "answered badly" in d.reason and "the rules decided" in d.reason
    with pytest.raises(ModelError) as e:
        model.complete(req, timeout_s=1)
    d = r.parse(None, e.value, BUSY, ev)
    assert (d.urgency, d.by) == ("queue", "fallback") and "timeout" in d.reason
    assert len(model.calls) == 4
    # an event that is no message, with the model failing: queued
    webhook = Event("webhook", "http", "ping", {}, "queue", "ping")
    assert r.route(webhook, BUSY).by == "default"  # not the user's: no model call
    assert r.parse(None, e.value, BUSY, webhook).urgency == "queue"
    # without a model, messages are read by the rules
    d = Router().route(ev, BUSY)
    assert d is not None and (d.urgency, d.by) == ("queue", "rule")


def test_router_config_and_build():
    cfg = load_agent_config({"agent": {"events": {
        "router": {"provider": "openai", "model": "small", "base_url": "http://127.0.0.1:9"},
        "progress_step": 0.1, "max_hold_s": 30, "parallel": False}}})
    assert cfg.events.router is not None and cfg.events.router.model == "small"
    assert cfg.events.progress_step == 0.1 and cfg.events.parallel is False
    assert build_router(load_agent_config({"agent": {}}).events).model is None
    # the planner builds the configured router model itself (a local server needs no key)
    h = make_harness(config={"events": {"router": {
        "provider": "openai", "model": "small", "base_url": "http://127.0.0.1:9",
        "timeout_s": 3}}})
    assert h.planner.router.model is not None and h.planner.router.model.model == "small"
    assert h.planner.router.model.purpose == "router" and h.planner.router.timeout_s == 3
    assert make_harness().planner.router.model is None
    for bad, path in [({"progress_step": 0}, "agent.events.progress_step"),
                      ({"router": {"provider": "gpt"}}, "agent.events.router.provider"),
                      ({"max_timers": 0}, "agent.events.max_timers")]:
        with pytest.raises(ConfigError) as e:
            load_agent_config({"agent": {"events": bad}})
        assert e.value.path == path


# --------------------------------------------------------------------------------------------
# batch markers
# --------------------------------------------------------------------------------------------
def test_batch_markers_and_summary():
    items = [NewsItem("Action a3 (search) succeeded.", "tool result", "search a3", "a3"),
             NewsItem(operator_message("only Beijing data"), "user message", "user"),
             NewsItem("Timer t1 fired: report due in 30 min", "timer trigger", "timer t1"),
             NewsItem(operator_message("what is the progress?"), "user message", "user")]
    text = render_news(items)
    assert "[Unprocessed event 1/4] tool result from search a3: Action a3" in text
    assert ('[Unprocessed event 2/4] user message from user: ⟦operator: "only Beijing data"⟧'
            in text)
    assert ('[Unprocessed event 4/4] user message from user: ⟦operator: "what is the '
            'progress?"⟧' in text)
    assert text.splitlines()[-1].startswith(
        "4 unprocessed events: 1 tool result, 2 user messages, 1 timer trigger.")
    # one event is not a batch: the plain list
    assert render_news([operator_message("hi")]) == (
        'What happened:\n- Operator message: ⟦operator: "hi"⟧')


# --------------------------------------------------------------------------------------------
# timers
# --------------------------------------------------------------------------------------------
def test_timers_one_shot_repeat_no_burst_and_limits():
    clock = FakeClock()
    t = Timers(clock, max_timers=2)
    one = t.set(2.0, "once")
    rep = t.set(1.0, "tick", repeat=True)
    clock.advance(1.0)
    assert [x.timer_id for x in t.pop_due()] == [rep.timer_id]
    clock.advance(1.0)
    fired = t.pop_due()
    assert {x.timer_id for x in fired} == {one.timer_id, rep.timer_id}
    assert t.get(one.timer_id) is None and t.get(rep.timer_id) is not None
    clock.advance(10.0)  # far behind: fires once, rescheduled from now
    fired = t.pop_due()
    assert len(fired) == 1 and fired[0].fired == 3
    assert t.get(rep.timer_id).due == pytest.approx(clock.now() + 1.0)
    assert t.cancel(rep.timer_id) is not None and len(t) == 0
    with pytest.raises(TimerError, match="repeating"):
        t.set(0.1, repeat=True)
    with pytest.raises(TimerError, match="between"):
        t.set(-1)
    t.set(5)
    t.set(5)
    with pytest.raises(TimerError, match="cancel one first"):
        t.set(5)


# --------------------------------------------------------------------------------------------
# validation scenario 1: a quick question while a long skill runs is answered in parallel
# --------------------------------------------------------------------------------------------
def test_time_question_answered_in_parallel_while_skill_keeps_running():
    h = harness([reply("", ("progress", {"rate": 10, "label": "analysis"})),
                 reply("It is 2026-09-22 13:20 UTC."),
                 reply("", ("finish_task", {"summary": "analysis done", "success": True}))],
                config=FAST)
    h.say("run the analysis")
    assert h.run_until(lambda: h.planner.actions, 2)
    h.runtime.run_for(2.0)
    asked_at = h.clock.now()
    h.say("what time is it?")
    assert h.run_until(lambda: any(c.get("parallel") for c in h.planner.conversation), 0.2)
    assert h.clock.now() - asked_at <= 0.11  # answered at once: within two control ticks
    side = h.provider.calls[1].request
    assert side.system == PARALLEL_SYSTEM
    assert {t.name for t in side.tools} == {"task_status", "observe"}  # read-only ones only
    assert "Now: " in side.messages[0].text() and "what time is it?" in side.messages[0].text()
    assert h.planner.conversation[-1] == {"role": "agent", "text": "It is 2026-09-22 13:20 UTC.",
                                          "parallel": True}
    # the main task was not disturbed: no planner turn, the skill still runs
    assert h.planner.turns == 1 and h.executor.running and h.planner.status == "running"
    route = [r for r in logged(h, "route") if r["event"] == "message"][-1]
    assert route["urgency"] == "parallel" and route["by"] == "rule"
    assert logged(h, "parallel_answer")[0]["answer"].startswith("It is")
    assert h.run_until(lambda: h.planner.status == "succeeded", 15)
    assert h.planner.turns == 2
    woke = last_user_text(main_calls(h)[1].request)
    assert ('[answered in parallel] Q: ⟦operator: "what time is it?"⟧ A: ⟦parallel answer: '
            '"It is 2026-09-22 13:20 UTC."⟧' in woke)
    assert "analysis done" in woke


def test_side_answer_uses_read_only_tools_and_the_main_task_is_undisturbed():
    def side_first(req):
        aid = re.search(r"Running: (a\d+)", req.messages[0].text()).group(1)
        return reply("", ("task_status", {"task_id": aid}), ("observe", {}))

    def side_second(req):
        status, images = tool_results(req)[-2:]
        assert "state running" in status and "progress" in status
        assert "fresh images" in images
        assert any(getattr(p, "observation_id", "") for m in req.messages for p in m.content)
        return reply("The analysis is about 20% done.")

    h = harness([reply("", ("progress", {"rate": 10, "label": "analysis"})), side_first,
                 side_second,
                 reply("", ("finish_task", {"summary": "done", "success": True}))], config=FAST)
    h.say("run the analysis")
    assert h.run_until(lambda: h.planner.actions, 2)
    h.runtime.run_for(2.0)
    h.say("how far along is it?")
    assert h.run_until(lambda: any(c.get("parallel") for c in h.planner.conversation), 0.5)
    assert h.planner.conversation[-1]["text"] == "The analysis is about 20% done."
    assert logged(h, "parallel_tools")[0]["tools"] == ["task_status", "observe"]
    assert h.planner.turns == 1 and h.executor.running
    assert h.run_until(lambda: h.planner.status == "succeeded", 15)


def test_a_side_session_that_tries_to_start_or_stop_a_skill_is_refused():
    def side_first(req):
        aid = re.search(r"Running: (a\d+)", req.messages[0].text()).group(1)
        return reply("", ("wait", {"seconds": 1}), ("cancel_task", {"task_id": aid}),
                     ("stop_action", {"action_id": aid}), ("update_plan", {"steps": []}))

    def side_second(req):
        results = tool_results(req)[-4:]
        assert all(r.startswith("refused:") and "read-only" in r for r in results)
        return reply("", ("set_timer", {"seconds": 1}))

    def side_last(req):
        assert req.tools == ()  # the last round of a side session offers no tools
        return reply("I cannot do that from here; the main task will handle it.")

    h = harness([reply("", ("progress", {"rate": 10, "label": "analysis"})), side_first,
                 side_second, side_last,
                 reply("", ("finish_task", {"summary": "done", "success": True}))], config=FAST)
    h.say("run the analysis")
    assert h.run_until(lambda: h.planner.actions, 2)
    aid = next(iter(h.planner.actions))
    h.runtime.run_for(1.0)
    h.say("what time is it?")
    assert h.run_until(lambda: any(c.get("parallel") for c in h.planner.conversation), 0.5)
    refused = [e["tool"] for e in logged(h, "parallel_tool_refused")]
    assert refused == ["wait", "cancel_task", "stop_action", "update_plan", "set_timer"]
    from solarian_agent.ui.event_lines import describe_event

    assert describe_event("parallel_tool_refused", logged(h, "parallel_tool_refused")[0]) \
        .startswith("side answer refused wait: it is read-only")
    # nothing started, nothing stopped, the plan untouched: the main task goes on
    assert [e["skill"] for e in logged(h, "skill_started")] == ["progress"]
    assert not logged(h, "stop_action") and not logged(h, "plan_changed")
    assert list(h.planner.actions) == [aid] and h.executor.running
    assert len(h.planner.timers) == 0 and h.planner.turns == 1
    assert h.run_until(lambda: h.planner.status == "succeeded", 15)


# --------------------------------------------------------------------------------------------
# validation scenario 2: routine additions during a long action reach the model in one batch
# --------------------------------------------------------------------------------------------
def test_two_additions_during_long_action_arrive_in_one_batch_at_the_boundary():
    h = harness([reply("", ("wait", {"seconds": 5})),
                 reply("", ("finish_task", {"summary": "日本語のウェブページ", "success": True}))])
    h.say("write the report")
    assert h.run_until(lambda: h.planner.actions, 2)
    h.runtime.run_for(1.0)
    h.say("answer in Japanese")
    h.runtime.run_for(1.0)
    h.say("format it as a web page")
    h.runtime.run_for(1.0)
    assert len(h.provider.calls) == 1  # queued: nobody woke the planner
    assert [e["content"] for e in logged(h, "event_held")] == ["answer in Japanese",
                                                               "format it as a web page"]
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    assert len(h.provider.calls) == 2
    woke = last_user_text(h.provider.calls[1].request)
    assert ('[Unprocessed event 1/3] user message from user: ⟦operator: "answer in Japanese"⟧'
            in woke)
    assert ('[Unprocessed event 2/3] user message from user: ⟦operator: "format it as a web '
            'page"⟧' in woke)
    assert re.search(r"\[Unprocessed event 3/3\] tool result from wait a\d+: Action a\d+ "
                     r"\(wait\) succeeded", woke)
    assert "3 unprocessed events: 2 user messages, 1 tool result." in woke
    routes = [r for r in logged(h, "route") if r["event"] == "message"][1:]
    assert [(r["urgency"], r["by"]) for r in routes] == [("queue", "rule")] * 2


def test_queued_addition_is_not_held_past_max_hold():
    h = harness([reply("", ("wait", {"seconds": 30})),
                 reply("ok, noted"),
                 reply("", ("finish_task", {"summary": "x", "success": True}))],
                config={"events": {"max_hold_s": 2.0}})
    h.say("wait long")
    assert h.run_until(lambda: h.planner.actions and h.planner.turn is None, 2)
    h.say("also note the time")
    h.runtime.run_for(1.5)
    assert len(h.provider.calls) == 1
    assert h.run_until(lambda: len(h.provider.calls) == 2, 1.0)
    assert "also note the time" in last_user_text(h.provider.calls[1].request)
    assert h.executor.running  # the action was not disturbed


# --------------------------------------------------------------------------------------------
# validation scenario 3: "cancel" during an action stops it at once; the trajectory says so
# --------------------------------------------------------------------------------------------
def test_cancel_message_stops_the_action_at_once_and_is_recorded(tmp_path):
    h = harness([reply("", ("wait", {"seconds": 30})),
                 reply("Stopped as you asked.",
                       ("finish_task", {"summary": "cancelled by the user", "success": False}))],
                log_root=tmp_path)
    h.say("wait long")
    assert h.run_until(lambda: h.planner.actions, 2)
    aid = next(iter(h.planner.actions))
    h.runtime.run_for(1.0)
    said = h.clock.now()
    h.say("cancel")
    assert h.run_until(lambda: not h.executor.running, 0.1)
    assert h.clock.now() - said <= 2 * h.runtime.period_s + 1e-9  # within two control ticks
    assert h.run_until(lambda: h.planner.status == "failed", 2)
    assert len(h.provider.calls) == 2  # one re-plan call that saw the stop and its result
    woke = last_user_text(h.provider.calls[1].request)
    assert woke.startswith("[woken: interrupt, message, action_stopped]")
    assert 'urgent user message from user: ⟦operator: "cancel"⟧' in woke
    assert (f'Action {aid} (wait) was stopped: ⟦skill: "cancelled by the user '
            '(\\u27e6operator: \\"cancel\\"\\u27e7)"⟧' in woke), woke
    logs = tmp_path / "0001_test" / "episodes" / "000001" / "logs"
    events = read_events(logs / "events.jsonl")
    route = next(e for e in events if e["kind"] == "route" and e["content"] == "cancel")
    assert (route["urgency"], route["by"], route["rule"], route["stop"]) == (
        "interrupt", "rule", "user_stop", True)
    stop = next(e for e in events if e["kind"] == "stop_action")
    assert stop["by"] == "user" and stop["action_id"] == aid and stop["accepted"]
    interrupt = next(e for e in events if e["kind"] == "interrupt")
    assert interrupt["stopped"] == [aid]
    ended = next(e for e in events if e["kind"] == "skill_ended")
    assert ended["outcome"] == "stopped" and "cancelled by the user" in ended["reason"]
    assert [e["kind"] for e in events].index("interrupt") < [
        e["kind"] for e in events].index("skill_ended")


# --------------------------------------------------------------------------------------------
# validation scenario 4: three tasks at 3 %, 2 % and 1 % per second
# --------------------------------------------------------------------------------------------
class ThreeScripts:
    """A model that does what the user asked: start all three; when the first finishes, query
    the others and cancel any under 50 %; report when everything has ended."""

    def __init__(self) -> None:
        self.statuses: dict[str, float] = {}
        self.cancelled: list[str] = []
        self.report = ""

    def __call__(self, req: ModelRequest):
        last = req.messages[-1]
        text = last_user_text(req)
        if not [m for m in req.messages if m.role == "assistant"]:
            return reply("starting all three", *[("progress", {"rate": r, "label": f"s{r}"})
                                                 for r in (3, 2, 1)])
        if last.role == "tool" and "state running" in last.text():
            results = tool_results(req)[-2:]
            for r in results:
                m = re.match(r"task (a\d+) .*progress (\d+)%", r)
                self.statuses[m.group(1)] = float(m.group(2))
            low = [t for t, p in self.statuses.items() if p < 50]
            self.cancelled = low
            return reply("", *[("cancel_task", {"task_id": t, "reason": "under 50 %"})
                               for t in low])
        running = re.search(r"Running: (.*)", text).group(1)
        ids = re.findall(r"(a\d+) progress", running)
        if "succeeded" in text and not self.statuses and ids:
            return reply("", *[("task_status", {"task_id": t}) for t in ids])
        if ids:
            return reply("waiting for the remaining script")
        done = re.findall(r"Result: ⟦skill: ", all_text(req))
        self.report = f"{len(done)} scripts finished, {len(self.cancelled)} cancelled"
        return reply("", ("finish_task", {"summary": self.report, "success": True}))


def test_three_tasks_first_done_queries_others_and_cancels_the_slow_one():
    model = ThreeScripts()
    h = harness([model] * 8, config=FAST)
    h.say("Run these three scripts at once. When one finishes, check the others and cancel "
          "any under 50 %.")
    assert h.run_until(lambda: len(h.planner.actions) == 3, 2)
    t0 = h.clock.now()
    ids = list(h.planner.actions)
    assert h.run_until(lambda: model.statuses, 40)
    assert 33.0 <= h.clock.now() - t0 <= 34.5  # the 3 %/s script finished at ~33 s
    s2, s1 = model.statuses[ids[1]], model.statuses[ids[2]]
    assert 64 <= s2 <= 70 and 31 <= s1 <= 36
    assert model.cancelled == [ids[2]]
    assert h.run_until(lambda: h.planner.status == "succeeded", 30)
    assert model.report == "2 scripts finished, 1 cancelled"
    ended = {e["action_id"]: e["outcome"] for e in logged(h, "action_ended")}
    assert ended == {ids[0]: "succeeded", ids[1]: "succeeded", ids[2]: "stopped"}
    cancel = next(e for e in logged(h, "stop_action") if e["action_id"] == ids[2])
    assert cancel["by"] == "agent" and "under 50 %" in cancel["reason"]
    # progress arrived as rate-limited queue events (25 % steps) and never woke the planner
    prog = logged(h, "task_progress")
    assert {round(e["progress"] * 4) for e in prog if e["action_id"] == ids[1]} == {1, 2, 3}
    assert h.planner.turns == 5  # start, query, cancel, "waiting" after the stop, report
    woke = last_user_text(h.provider.calls[1].request)
    assert "progress report from progress" in woke and "still running, no result yet" in woke


# --------------------------------------------------------------------------------------------
# the planner never decides on a result that has not arrived
# --------------------------------------------------------------------------------------------
def test_answer_depending_on_a_pending_task_waits_for_its_result():
    seen: dict[str, float] = {}
    h = None

    def at_timer(req):
        text = all_text(req)
        assert "survey done" not in text  # the result has not arrived: nothing claims it
        assert "Timer t" in last_user_text(req) and "Running: a" in last_user_text(req)
        aid = re.search(r"Running: (a\d+)", last_user_text(req)).group(1)
        return reply("", ("task_status", {"task_id": aid}))

    def after_status(req):
        status = tool_results(req)[-1]
        assert "state running" in status and "No result yet" in status
        assert "progress 30%" in status
        assert "survey done" not in all_text(req)
        return reply("The survey is still running; I will report when its result arrives.")

    def at_result(req):
        seen["at"] = h.clock.now()
        assert not h.executor.running
        m = re.search(r"Result: (⟦skill: .*?⟧)", last_user_text(req))
        assert m and "survey done" in find_quotes(m.group(1))[0][1]
        return reply("", ("finish_task", {"summary": "survey done", "success": True}))

    h = harness([reply("", ("progress", {"rate": 10, "label": "survey"}),
                       ("set_timer", {"seconds": 3, "note": "report progress"})),
                 at_timer, after_status, at_result], config=FAST)
    h.say("run the survey and tell me what it found")
    assert h.run_until(lambda: h.planner.actions, 2)
    t0 = h.clock.now()
    assert h.run_until(lambda: len(h.provider.calls) == 3, 5)
    h.runtime.run_for(5.0)
    assert len(h.provider.calls) == 3  # nothing woke the planner with a result
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    assert seen["at"] - t0 >= 10.0 - 1e-6
    started = tool_results(h.provider.calls[1].request)[0]
    assert "no result yet" in started and "task id a" in started


def test_task_status_and_cancel_task_refuse_unknown_and_ended_tasks():
    h = harness([reply("", ("wait", {"seconds": 0.5})),
                 lambda req: reply("", ("task_status", {"task_id": "a99999"}),
                                   ("cancel_task", {"task_id": _first_task(req)}),
                                   ("cancel_timer", {"timer_id": "t9"})),
                 reply("", ("task_status", {"task_id": "a0"}),
                       ("finish_task", {"summary": "x", "success": True}))])
    h.say("go")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    r = tool_results(h.provider.calls[2].request)[-3:]
    # the ids the planner named come back quoted as its own words
    assert r[0].startswith('refused: no task ⟦planner: "a99999"⟧')
    assert "already ended (succeeded: waited)" in r[1]
    assert r[2].startswith('refused: no timer ⟦planner: "t9"⟧')


def _first_task(req):
    return re.search(r"started action (a\d+)", "\n".join(tool_results(req))).group(1)


# --------------------------------------------------------------------------------------------
# interrupts: cut the model call, placeholders for tool calls still starting
# --------------------------------------------------------------------------------------------
def test_interrupt_discards_the_reply_of_the_model_call_in_flight():
    holder = {}

    def thinking(req):
        holder["h"].say("Wait, use the blue bin instead")  # arrives while the model thinks
        return reply("", ("wait", {"seconds": 1}))

    h = harness([thinking, reply("", ("finish_task", {"summary": "ok", "success": True}))])
    holder["h"] = h
    h.say("put it in the red bin")
    assert h.run_until(lambda: h.planner.status == "succeeded", 2)
    assert not logged(h, "skill_started")  # the reply decided before the interrupt never ran
    assert logged(h, "interrupt")[0]["cut"] == "model_call"
    assert "interrupted by user message" in logged(h, "planner_reply_discarded")[0]["reason"]
    second = h.provider.calls[1].request
    assert not [m for m in second.messages if m.role == "assistant"]
    assert "urgent user message" not in last_user_text(second)  # one event: no batch
    assert "Wait, use the blue bin instead" in last_user_text(second)
    assert last_user_text(second).startswith("[woken: interrupt, message]")


def test_interrupt_cuts_a_threaded_call_by_token_and_never_runs_its_late_reply():
    gate = threading.Event()
    h = harness([lambda req: (gate.wait(5), reply("", ("wait", {"seconds": 1})))[1],
                 reply("stopping", ("finish_task", {"summary": "stopped", "success": False}))],
                caller=ThreadCaller())
    h.say("wait a bit")
    assert h.run_until(lambda: h.planner.turn is not None, 1)
    h.say("stop!")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and h.planner.status == "running":
        h.runtime.step()
    assert h.planner.status == "failed"
    gate.set()  # the first call's thread ends now; its reply has no turn to land in
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        h.runtime.step()
    assert not logged(h, "skill_started") and h.planner.turns == 2
    h.planner.shutdown()


def _hold_at_pending(h):
    """Run until the planner handled a reply whose skill has not started yet."""
    assert h.run_until(lambda: h.planner.turn is not None and h.planner.turn.pending, 2)


def test_tool_call_still_starting_gets_a_running_placeholder_then_its_real_events():
    h = harness([reply("", ("wait", {"seconds": 2})),
                 reply("Tomorrow looks sunny."),
                 reply("", ("finish_task", {"summary": "done", "success": True}))])
    h.say("wait two seconds")
    _hold_at_pending(h)
    aid = h.planner.turn.pending[0].action_id
    h.say("wait, first check tomorrow's weather")
    h.planner.tick()  # the executor has not ticked: the skill is still starting
    assert len(h.provider.calls) == 2  # called again at once
    req = h.provider.calls[1].request
    placeholder = tool_results(req)[-1]
    assert placeholder.startswith("interrupted (user message")
    assert "has NOT finished" in placeholder
    assert f"task {aid}" in placeholder
    assert "first check tomorrow's weather" in last_user_text(req)
    assert_calls_paired(req.messages)
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    started = [e for e in logged(h, "action_started") if e.get("after_placeholder")]
    assert started and started[0]["action_id"] == aid
    woke = last_user_text(h.provider.calls[2].request)
    assert f"Task {aid} (wait) has now started" in woke
    assert f"Action {aid} (wait) succeeded" in woke
    assert_calls_paired(h.planner.messages)


def test_stop_while_a_tool_call_is_starting_cancels_it_with_a_placeholder():
    h = harness([reply("", ("wait", {"seconds": 2})),
                 reply("", ("finish_task", {"summary": "cancelled", "success": False}))])
    h.say("wait two seconds")
    _hold_at_pending(h)
    aid = h.planner.turn.pending[0].action_id
    h.say("stop")
    h.planner.tick()
    assert h.run_until(lambda: h.planner.status == "failed", 2)
    assert not logged(h, "skill_started")
    req = h.provider.calls[1].request
    placeholder = [m for m in req.messages if m.role == "tool"][-1]
    assert placeholder.is_error
    assert placeholder.text().startswith(
        'cancelled by the user (⟦operator: "stop"⟧) before it started')
    assert "did not run and has no result" in placeholder.text()
    # the cancel is its own event tied to the same task id, seen in the same re-plan call
    assert (f'Action {aid} (wait) was stopped: ⟦skill: "cancelled before it started'
            in last_user_text(req))
    assert len(h.provider.calls) == 2
    assert_calls_paired(req.messages)


def test_operator_takeover_while_a_call_is_starting_keeps_the_trajectory_paired():
    h = harness([reply("", ("wait", {"seconds": 2})),
                 reply("", ("finish_task", {"summary": "ok", "success": True}))])
    h.say("wait two seconds")
    _hold_at_pending(h)
    h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT).publish(
        OperatorEvent("key", {"key": "w"}))
    h.planner.tick()
    assert h.planner.status == "paused"
    assert_calls_paired(h.planner.messages)
    assert "by the operator's takeover" in h.planner.messages[-1].text()
    h.say("carry on")
    assert h.run_until(lambda: h.planner.status == "succeeded", 3)
    assert_calls_paired(h.provider.calls[1].request.messages)


def test_monitor_fail_interrupts_the_model_call_in_flight():
    holder = {}

    def thinking(req):
        v = MonitorVerdict(action_id=holder["aid"], tool="wait", question="is it ok",
                           value="no", probability=0.9, decision="fail", source="monitor",
                           reason="the cup fell", stamp=holder["h"].clock.now())
        holder["h"].bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT).publish(v)
        return reply("", ("observe", {}))

    h = harness([reply("", ("wait", {"seconds": 10})), thinking,
                 reply("", ("finish_task", {"summary": "x", "success": False}))],
                config={"planner_heartbeat_s": 1.0})
    holder["h"] = h
    h.say("wait")
    assert h.run_until(lambda: h.planner.actions, 2)
    holder["aid"] = next(iter(h.planner.actions))
    assert h.run_until(lambda: h.planner.status == "failed", 5)
    assert logged(h, "interrupt")[0]["cut"] == "model_call"
    assert not logged(h, "observe")  # the heartbeat reply decided before the flag never ran
    woke = last_user_text(h.provider.calls[2].request)
    assert "The monitor failed action" in woke and "the cup fell" in woke


def test_a_monitor_verdict_with_its_fields_in_the_wrong_order_is_refused():
    # the order an earlier version of the test above used: decision, source, reason, then, stamp
    with pytest.raises((TypeError, ValueError), match="MonitorVerdict"):
        MonitorVerdict("a1", "wait", "is it ok", "no", 0.9, "fail", "monitor", "the cup fell",
                       "", 12.5)
    with pytest.raises(ValueError, match="decision"):
        MonitorVerdict("a1", "wait", "is it ok", "no", 0.9, "the cup fell")
    ok = MonitorVerdict("a1", "wait", "is it ok", "no", 0.9, "fail", "the cup fell", 12.5)
    assert (ok.decision, ok.reason, ok.stamp, ok.source) == ("fail", "the cup fell", 12.5,
                                                             "monitor")


# --------------------------------------------------------------------------------------------
# the router model inside the planner; timers; tools; the event log
# --------------------------------------------------------------------------------------------
def test_router_model_routes_what_rules_do_not_and_decisions_are_logged(tmp_path):
    h = harness([reply("", ("wait", {"seconds": 5})),
                 reply("Why did the robot cross the road? It was programmed to."),
                 reply("", ("finish_task", {"summary": "x", "success": True}))],
                log_root=tmp_path)
    router_model = ScriptedProvider([reply('{"urgency": "parallel", "reason": "a joke"}')])
    h.planner.router = Router(model=router_model)
    h.say("wait five seconds")
    assert h.run_until(lambda: h.planner.actions, 2)
    h.say("tell me a joke")
    assert h.run_until(lambda: any(c.get("parallel") for c in h.planner.conversation), 0.2)
    assert router_model.calls[0].request.purpose == "router"
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    events = read_events(tmp_path / "0001_test/episodes/000001/logs/events.jsonl")
    routes = [e for e in events if e["kind"] == "route"]
    assert {"urgency", "reason", "by", "event", "source"} <= set(routes[0])
    joke = next(e for e in routes if e["content"] == "tell me a joke")
    assert (joke["urgency"], joke["by"], joke["reason"]) == ("parallel", "model", "a joke")
    assert any(e["event"] == "action_ended" and e["urgency"] == "queue" for e in routes)
    assert len(router_model.calls) == 1  # the tool result was routed by rule


def test_router_model_failure_falls_back_to_queue():
    # (the planner waits for the wait to end before finishing: finish_task(success=true)
    # while an action runs is refused)
    h = harness([reply("", ("wait", {"seconds": 1})), reply("hello, once the wait ends"),
                 reply("", ("finish_task", {"summary": "x", "success": True}))])
    h.planner.router = Router(model=ScriptedProvider([ModelError("server", "boom")]))
    h.say("wait a second")
    assert h.run_until(lambda: h.planner.actions, 2)
    h.say("and then say hello")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    route = next(r for r in logged(h, "route") if r["content"] == "and then say hello")
    assert route["by"] == "fallback" and route["urgency"] == "queue"
    assert "server: boom" in route["reason"]
    assert "and then say hello" in last_user_text(h.provider.calls[1].request)


def test_timers_wake_the_planner_repeat_and_are_cancelled():
    h = harness([
        reply("", ("set_timer", {"seconds": 2, "note": "look again"}),
              ("set_timer", {"seconds": 1.5, "note": "tick", "repeat": True})),
        reply("", ("cancel_timer", {"timer_id": "t2"})),
        reply("two timers seen"),
        reply("", ("finish_task", {"summary": "x", "success": True})),
    ], config=FAST)
    h.say("remind me")
    assert h.run_until(lambda: len(h.provider.calls) == 2, 3)
    assert 1.5 <= h.clock.now() - 1000.0 <= 1.8
    assert 'Timer t2 fired (#1, repeats every 1.5 s): ⟦timer note: "tick"⟧' in last_user_text(
        h.provider.calls[1].request)
    results = tool_results(h.provider.calls[1].request)
    assert results[0].startswith(
        'timer t1 set: t1 fires in 2.0 s, note \u27e6planner: "look again"\u27e7')
    assert h.run_until(lambda: len(h.provider.calls) == 3, 2)
    # after cancel_timer the continuation call, then the one-shot fires; the repeat is gone
    h.runtime.run_for(1.0)
    assert len(h.provider.calls) == 4
    assert ('Timer t1 fired: ⟦timer note: "look again"⟧'
            in last_user_text(h.provider.calls[3].request))
    assert h.planner.status == "succeeded" and len(h.planner.timers) == 0
    assert [e["timer_id"] for e in logged(h, "timer_fired")] == ["t2", "t1"]


def test_timers_are_cleared_when_the_run_ends():
    h = harness([reply("", ("set_timer", {"seconds": 5, "note": "later"}),
                       ("finish_task", {"summary": "x", "success": True}))])
    h.say("go")
    assert h.run_until(lambda: h.planner.status == "succeeded", 2)
    h.runtime.run_for(0.1)
    assert len(h.planner.timers) == 0 and logged(h, "timers_cleared")
    h.runtime.run_for(6.0)
    assert not logged(h, "timer_fired")


def test_skill_tools_say_they_start_a_task_and_the_task_tools_are_offered():
    h = harness([reply("", ("finish_task", {"summary": "x", "success": True}))])
    h.say("hi")
    assert h.run_until(lambda: h.planner.status == "succeeded", 2)
    req = h.provider.calls[0].request
    tools = {t.name: t for t in req.tools}
    assert {"task_status", "cancel_task", "set_timer", "cancel_timer"} <= set(tools)
    assert set(PLANNER_TOOLS) <= set(tools)
    assert "returns its task id at once" in tools["progress"].description
    assert "[Unprocessed event k/N]" in req.system and "task_status" in req.system


def test_progress_reports_ride_along_and_never_wake_the_planner():
    h = harness([reply("", ("progress", {"rate": 20, "label": "fast"}),
                       ("progress", {"rate": 10, "label": "slow"})),
                 reply("waiting for the slow one"),
                 reply("", ("finish_task", {"summary": "x", "success": True}))], config=FAST)
    h.say("go")
    assert h.run_until(lambda: len(h.planner.actions) == 2, 1)
    fast, slow = list(h.planner.actions)
    assert h.run_until(lambda: h.planner.status == "succeeded", 12)
    assert h.planner.turns == 3  # start, the fast one's result, the slow one's result
    prog = logged(h, "task_progress")
    assert [round(e["progress"], 2) for e in prog if e["action_id"] == slow] == [0.25, 0.5, 0.75]
    assert [round(e["progress"], 2) for e in prog if e["action_id"] == fast] == [0.25, 0.5, 0.75]
    woke = last_user_text(h.provider.calls[1].request)
    assert woke.startswith("[woken: task_done]")
    # only the newest undelivered report per running task; none for a task that has ended
    assert woke.count("] progress report from") == 1
    assert f"Task {slow} (progress) is 50% done" in woke and f"Task {fast} (progress) is" \
        not in woke
    assert "2 unprocessed events: 1 tool result, 1 progress report." in woke
    assert 'Result: ⟦skill: "{report: fast done}"⟧' in woke  # the result, quoted as the skill's
