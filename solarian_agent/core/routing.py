"""Urgency routing of planner events (seed 004, "Dinamikus Feldolgozási Stratégia").

Every event the planner receives is routed to one of three strategies:

* ``interrupt`` — stop now: the model call in flight is cut (its reply discarded), tool calls
  not yet answered get an explicit placeholder result, running actions are stopped when the
  event asks to stop, everything pending is delivered together with the urgent event and the
  model is called again at once;
* ``queue`` — wait for the next natural boundary (the model call ends, a tool result arrives)
  and deliver in one batch with ``[Unprocessed event k/N]`` markers and a closing summary;
* ``parallel`` — an independent, cheap question answered by a separate model call while the
  main task carries on; question and answer join the main trajectory marked as answered in
  parallel.

A :class:`Router` decides with a rule table (first match wins) and, for events no rule covers,
an optional light model call (a typed-JSON request; any failure falls back to ``queue``).  Each
decision carries its reason and who decided (``rule``, ``model``, ``fallback``, ``default``);
the planner logs every one as a ``route`` event.

This module is pure: no threads, no clock, no bus.  The planner owns the model calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..models.base import Message, ModelError, ModelReply, ModelRequest, ToolDef
from .events import URGENCIES, Event
from .text import OPERATOR, OPERATOR_CAP, OPERATOR_PREFIX, one_line, quote

# user wording --------------------------------------------------------------------------------
STOP_RE = re.compile(
    r"^\W*(?:please\s+)?(?:stop|halt|cancel|abort|freeze|enough|never\s*mind|forget\s+it|"
    r"emergency|mégse|állj|hagyd\s+abba)\b"
    r"|\b(?:stop|halt|abort)\s*(?:(?:it|that|now|everything)\b|!)"
    r"|\bcancel\s+(?:it|that|everything)\b",
    re.I)
WAIT_RE = re.compile(
    r"^\W*(?:(?:wait|hold\s+on|hang\s+on|not\s+that|wrong|actually|instead|várj)\b"
    r"|no\s*[,!.])", re.I)
SMALL_TALK_RE = re.compile(
    r"\bwhat\s+time\s+is\s+it\b|\bwhat(?:'s|\s+is)\s+the\s+time\b|\bthe\s+time\s+(?:now|please)\b"
    r"|\bwhat(?:'s|\s+is)\s+(?:the\s+|today'?s\s+)?date\b|\bwhat\s+day\s+is\s+(?:it|today)\b"
    r"|\bhow\s+are\s+you\b|\bwho\s+are\s+you\b|\bwhat(?:'s|\s+is)\s+your\s+name\b"
    r"|\b(?:what'?s|what\s+is|how'?s|how\s+is)\s+the\s+weather\b|\bwhat\s+can\s+you\s+do\b"
    r"|\bhány\s+óra\b|\bmilyen\s+idő\b", re.I)
SMALL_TALK_MAX_CHARS = 160


@dataclass(frozen=True)
class RouteDecision:
    urgency: str  # interrupt | queue | parallel
    reason: str
    by: str = "rule"  # rule | model | fallback | default
    rule: str = ""
    stop: bool = False  # the event asks to stop what the robot is doing

    def __post_init__(self) -> None:
        if self.urgency not in URGENCIES:
            raise ValueError(f"RouteDecision.urgency must be one of {URGENCIES}, "
                             f"got {self.urgency!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"urgency": self.urgency, "reason": self.reason, "by": self.by,
                "rule": self.rule, "stop": self.stop}


@dataclass(frozen=True)
class RouteContext:
    """What the router knows about the planner when an event arrives."""

    active: bool = False  # a run is in progress (running, paused or waiting for the user)
    busy: bool = False  # the main task is working: a model call in flight or actions running
    task: str = ""
    running: tuple[str, ...] = ()  # "a3 wait (4.0 s)"


@dataclass(frozen=True)
class Rule:
    """Matches when every given field matches; ``None`` / empty means "any"."""

    name: str
    urgency: str
    reason: str
    sources: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    max_chars: int | None = None
    when: Callable[[Event], bool] | None = None
    stop: bool = False

    def __post_init__(self) -> None:
        if self.urgency not in URGENCIES:
            raise ValueError(f"rule {self.name}: urgency must be one of {URGENCIES}")

    def matches(self, ev: Event) -> bool:
        if self.sources and ev.source not in self.sources:
            return False
        if self.channels and ev.channel not in self.channels:
            return False
        if self.kinds and ev.kind not in self.kinds:
            return False
        if self.max_chars is not None and len(ev.content) > self.max_chars:
            return False
        if self.pattern is not None and not self.pattern.search(ev.content):
            return False
        return self.when is None or bool(self.when(ev))


def _urgent_context(ev: Event) -> bool:
    return bool(ev.context.get("urgent")) or ev.urgency == "interrupt"


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("ui_cancel", "interrupt", "a cancel or reset from the UI ends the run",
         kinds=("cancel", "reset"), stop=True),
    Rule("operator", "interrupt", "operator takeover: the operator always wins",
         sources=("operator",), stop=True),
    Rule("operator_kind", "interrupt", "operator takeover: the operator always wins",
         kinds=("operator",), stop=True),
    Rule("supervisor", "interrupt", "an instruction from a supervisor",
         sources=("supervisor",)),
    Rule("alarm", "interrupt", "an alarm or an event marked urgent",
         kinds=("alarm",)),
    Rule("monitor_fail", "interrupt", "the monitor or a controller check failed a running action",
         kinds=("monitor_flag",), when=lambda ev: ev.urgency == "interrupt"),
    Rule("monitor_flag", "queue", "a monitor flag on a running action: next boundary",
         kinds=("monitor_flag",)),
    Rule("tool_result", "queue", "a tool result: delivered at the next boundary",
         kinds=("action_ended",)),
    Rule("progress", "queue", "a progress report: rides along with the next delivery",
         kinds=("task_progress",)),
    Rule("timer", "queue", "a timer trigger: delivered when no model call is in flight",
         kinds=("timer",)),
    Rule("user_stop", "interrupt", "the user asks to stop", sources=("user",),
         kinds=("message",), pattern=STOP_RE, stop=True),
    Rule("user_wait", "interrupt", "the user interrupts with a correction",
         sources=("user",), kinds=("message",), pattern=WAIT_RE),
    Rule("small_talk", "parallel", "an independent quick question unrelated to the task",
         sources=("user",), kinds=("message",), pattern=SMALL_TALK_RE,
         max_chars=SMALL_TALK_MAX_CHARS),
    Rule("marked_urgent", "interrupt", "the sender marked the event urgent",
         sources=("system", "agent", "webhook"), when=_urgent_context),
)

ROUTER_SYSTEM = """\
You route events for a robot's planner. Answer with one JSON object:
{"urgency": "interrupt" | "queue" | "parallel", "reason": "<short>", "stop": true|false}
- interrupt: the event must be handled now, before the current step goes on (the user stops or
  corrects the robot, an urgent alarm). stop: true only when it asks the robot to stop moving.
- queue: routine; it can wait until the current step ends (a tool result, an addition to the
  task such as a format or language request).
- parallel: an independent, quick question unrelated to the task that can be answered at once
  without tools while the task continues (the time, small talk).
"""

ROUTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"urgency": {"type": "string", "enum": list(URGENCIES)},
                   "reason": {"type": "string", "maxLength": 300},
                   "stop": {"type": "boolean"}},
    "required": ["urgency", "reason"],
    "additionalProperties": False,
}


class Router:
    """Rule table first; an optional light model for the rest; ``queue`` when in doubt."""

    def __init__(self, rules: Sequence[Rule] | None = None, model: Any = None,
                 timeout_s: float = 10.0, max_tokens: int = 200) -> None:
        self.rules: tuple[Rule, ...] = tuple(DEFAULT_RULES if rules is None else rules)
        self.model = model  # a ModelProvider, or None: rules only
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens

    def route(self, ev: Event, ctx: RouteContext) -> RouteDecision | None:
        """The rule decision, or ``None`` when only the router model can decide (then call
        :meth:`request` / :meth:`parse`).  Without a model, unmatched events are queued."""
        if ev.kind == "message" and not ctx.active:
            return RouteDecision("queue", "no run in progress: the message starts one",
                                 "rule", "idle")
        for rule in self.rules:
            if rule.matches(ev):
                return self._fit(RouteDecision(rule.urgency, rule.reason, "rule", rule.name,
                                               rule.stop), ctx)
        if self.model is not None and ev.source == "user":
            return None
        return RouteDecision("queue", "no rule matched: routine, delivered at the next "
                             "boundary", "default")

    def _fit(self, d: RouteDecision, ctx: RouteContext) -> RouteDecision:
        if d.urgency == "parallel" and not ctx.busy:
            return RouteDecision("queue", f"{d.reason}; nothing is running, so it is answered "
                                 "as a normal turn", d.by, d.rule, d.stop)
        return d

    def request(self, ev: Event, ctx: RouteContext) -> ModelRequest:
        body = {"event": {"source": ev.source, "channel": ev.channel, "kind": ev.kind,
                          "content": ev.content[:2000]},
                "task": ctx.task[:500], "running": list(ctx.running),
                "busy": ctx.busy}
        return ModelRequest(ROUTER_SYSTEM, (Message.user(json.dumps(body)),), (),
                            self.max_tokens, response_schema=ROUTE_SCHEMA,
                            response_name="route", purpose="router")

    def parse(self, reply: ModelReply | None, error: BaseException | None,
              ctx: RouteContext) -> RouteDecision:
        """The router model's decision; any failure is a ``queue`` fallback naming why."""
        if error is not None:
            what = (f"{error.kind}: {error.message}" if isinstance(error, ModelError)
                    else f"{type(error).__name__}: {error}")
            return self.fallback(f"router model failed ({what})")
        if reply is None:
            return self.fallback("router model gave no reply")
        try:
            data = reply.json()
        except ModelError as e:
            return self.fallback(f"router model answered badly: {e.message}")
        if not isinstance(data, dict):
            return self.fallback("router model answered badly: not a JSON object")
        urgency = data.get("urgency")
        if urgency not in URGENCIES:
            return self.fallback(f"router model answered badly: urgency {urgency!r}")
        reason = str(data.get("reason", ""))[:300] or "router model"
        return self._fit(RouteDecision(str(urgency), reason, "model", "",
                                       bool(data.get("stop", False))), ctx)

    @staticmethod
    def fallback(why: str) -> RouteDecision:
        return RouteDecision("queue", f"{why}; queued", "fallback")


# ---------------------------------------------------------------------------------------------
# what the planner is told
# ---------------------------------------------------------------------------------------------
class NewsItem(str):
    """A line of "what happened", tagged with the kind of event it reports and its source, so
    a batch can be rendered with ``[Unprocessed event k/N]`` markers and a summary."""

    label: str
    source: str
    task_id: str

    def __new__(cls, text: str, label: str, source: str = "", task_id: str = "") -> NewsItem:
        obj = super().__new__(cls, text)
        obj.label = label
        obj.source = source
        obj.task_id = task_id
        return obj


EVENT_LABELS: dict[str, str] = {
    "message": "user message",
    "action_ended": "tool result",
    "monitor_flag": "monitor flag",
    "operator": "operator event",
    "timer": "timer trigger",
    "task_progress": "progress report",
    "parallel": "parallel answer",
    "alarm": "alarm",
}


def label_for(ev: Event, urgency: str) -> str:
    label = EVENT_LABELS.get(ev.kind, "event")
    return f"urgent {label}" if urgency == "interrupt" and ev.kind == "message" else label


def render_news(items: Sequence[str]) -> str:
    """One item: the plain "What happened" list.  A batch: every item behind an
    ``[Unprocessed event k/N]`` marker, then a summary by kind, so the model answers all."""
    if len(items) == 1:
        return "What happened:\n- " + items[0]
    n = len(items)
    lines = [f"What happened ({n} unprocessed events, oldest first):"]
    counts: dict[str, int] = {}
    for k, it in enumerate(items, start=1):
        label = it.label if isinstance(it, NewsItem) else "harness note"
        source = one_line(it.source, 80) if isinstance(it, NewsItem) else ""
        text = str(it)
        if label.endswith("user message") and text.startswith(OPERATOR_PREFIX):
            text = text[len(OPERATOR_PREFIX):]
        head = f"[Unprocessed event {k}/{n}] {label}" + (f" from {source}" if source else "")
        lines.append(f"{head}: {text}")
        counts[label] = counts.get(label, 0) + 1
    parts = [f"{c} {lab}{'s' if c != 1 else ''}" for lab, c in counts.items()]
    lines.append(f"{n} unprocessed events: {', '.join(parts)}. Make sure your answer covers "
                 "every one of them.")
    return "\n".join(lines)


def replace_progress(news: list[str], item: NewsItem) -> None:
    """Add a progress report, dropping an undelivered older one for the same task."""
    news[:] = [n for n in news if not (isinstance(n, NewsItem) and n.label == "progress report"
                                       and n.task_id == item.task_id)]
    news.append(item)


# placeholders (seed 004: an interrupted tool call gets an explicit result, never a fake success)
def placeholder_running(tool: str, task_id: str, why: str) -> str:
    return (f"interrupted ({why}): {tool} was still starting as task {task_id} when a new event "
            "arrived. It goes on in the background and has NOT finished; whether it started, "
            f"and its result, arrive later as their own events for task {task_id}. Handle the "
            "new event first.")


def placeholder_cancelled(tool: str, task_id: str, who: str) -> str:
    return (f"cancelled {who} before it started: {tool} (task {task_id}) did not run and has "
            "no result.")


# parallel answers ----------------------------------------------------------------------------
PARALLEL_SYSTEM = """\
You are the voice of a robot that is busy with a task. The user asked a quick side question.
Answer it briefly and directly from what you are given; you have no tools and the task goes
on without you. If answering needs the robot to look or act, say that it will be handled by
the main task.
"""


def parallel_note(question: str, answer: str) -> str:
    return (f"[answered in parallel] Q: {quote(OPERATOR, question, OPERATOR_CAP)} "
            f"A: {quote('parallel answer', answer)}")


# tools ----------------------------------------------------------------------------------------
TASK_TOOLS: dict[str, ToolDef] = {
    "task_status": ToolDef(
        "task_status",
        "Where a task (an action started by a skill tool) stands now: state, phase, progress "
        "and elapsed time. Answered at once. It never contains the task's result: that "
        "arrives as its own event when the task ends.",
        {"type": "object", "properties": {"task_id": {"type": "string", "minLength": 1,
                                                      "maxLength": 64}},
         "required": ["task_id"], "additionalProperties": False}),
    "cancel_task": ToolDef(
        "cancel_task",
        "Cancel a running task by its task id. It stops at the next control tick; its end "
        "arrives as its own event and you are woken then.",
        {"type": "object", "properties": {
            "task_id": {"type": "string", "minLength": 1, "maxLength": 64},
            "reason": {"type": "string", "maxLength": 300}},
         "required": ["task_id"], "additionalProperties": False}),
    "set_timer": ToolDef(
        "set_timer",
        "Set a one-shot (or repeating) timer. Returns its timer id at once; when it fires "
        "you are woken with the note as its own event.",
        {"type": "object", "properties": {
            "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
            "note": {"type": "string", "maxLength": 300},
            "repeat": {"type": "boolean"}},
         "required": ["seconds"], "additionalProperties": False}),
    "cancel_timer": ToolDef(
        "cancel_timer", "Cancel a timer by its id.",
        {"type": "object", "properties": {"timer_id": {"type": "string", "minLength": 1,
                                                       "maxLength": 64}},
         "required": ["timer_id"], "additionalProperties": False}),
}

TASK_INSTRUCTIONS = """\
- A skill tool starts a task and returns its task id (the action id) at once; the task's result
  arrives later as its own event. Never act on a result that has not arrived: task_status tells
  where a task stands, cancel_task cancels it. set_timer wakes you later with a note.
- Several events may arrive together, each marked [Unprocessed event k/N]: answer all of them.
  A tool result that says "interrupted" or "cancelled" is a placeholder, not a success. Lines
  marked [answered in parallel] were already answered to the user.
"""


def describe_async(text: str) -> str:
    """The sentence every skill description gets (seed 004: initiate/start semantics)."""
    return (f"{text} Starts a task and returns its task id at once; the result arrives later "
            "as its own event.").strip()


def pct(progress: float) -> str:
    return f"{max(0.0, min(1.0, progress)) * 100:.0f}%"
