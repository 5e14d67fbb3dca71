"""The lines a person reads for agent events: one renderer for every front end.

:func:`describe` is the event line the terminal chat, the operator panel and the episode viewer
show (every kind gets one; a kind with no line of its own, or a record its line cannot read, is
shown as its kind and data).  :func:`progress_line` is the demo's running commentary: only the
kinds a person follows a run by, indented by how deep they sit (run, step, skill, check), and
``None`` for the rest.

Each line reads its event's typed fields (:mod:`.event_types`); a record read back from a log
is taken as written, so a line guards what it computes with (a probability that is no number
is left out, never a crash).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from . import event_types as et
from .event_record import GenericEvent, TypedEvent, parse
from .liveness import NodeChange, NodeChanged, NodeState


def compact(obj: Any, limit: int = 160) -> str:
    """``obj`` as one line of JSON, cut to ``limit`` characters."""
    try:
        s = json.dumps(obj, ensure_ascii=False, separators=(", ", ": "), default=str)
    except Exception:
        s = repr(obj)
    return s if len(s) <= limit else s[:limit - 1] + "…"


E = TypeVar("E", bound=TypedEvent)
F = TypeVar("F", bound=Callable[..., str])
_LINES: dict[type[TypedEvent], Callable[[Any], str]] = {}


def _line(*types: type[TypedEvent]) -> Callable[[F], F]:
    """Register ``fn`` as the line of each type in ``types``."""
    def register(fn: F) -> F:
        for t in types:
            _LINES[t] = fn
        return fn
    return register


def _spaced(kind: str) -> str:
    return kind.replace("_", " ")


# --- episodes, runs, the planner's turns and its plan ---------------------------------------

@_line(et.EpisodeStarted)
def _episode_started(e: et.EpisodeStarted) -> str:
    return f"episode {e.episode} opened: {e.task or '(no task yet)'}"


@_line(et.EpisodeEnded)
def _episode_ended(e: et.EpisodeEnded) -> str:
    return f"episode {e.episode} closed"


@_line(et.RunStarted)
def _run_started(e: et.RunStarted) -> str:
    return f"run {e.run_id} started: {e.task}"


@_line(et.RunContinued)
def _run_continued(e: et.RunContinued) -> str:
    return f"run {e.run_id} continues from {e.continues_from}"


@_line(et.RunEnded)
def _run_ended(e: et.RunEnded) -> str:
    return f"run ended {e.status}: {e.summary}"


@_line(et.PlannerTurn)
def _planner_turn(e: et.PlannerTurn) -> str:
    tools = ", ".join(e.tools or []) or "no tools"
    s = f"planner turn {e.turn} ({e.latency_s} s) → {tools}"
    return s + (f" error: {compact(e.error, 120)}" if e.error else "")


def _plan_text(plan: Any) -> str:
    if not isinstance(plan, list):
        return compact(plan)
    return "; ".join(f"{st.get('step', '?')}. {st.get('description', '')} "
                     f"[{st.get('status', '')}]" for st in plan if isinstance(st, Mapping))


@_line(et.PlanChanged)
def _plan_changed(e: et.PlanChanged) -> str:
    return "plan: " + _plan_text(e.plan)


# --- actions and skills starting and ending -------------------------------------------------

@_line(et.PlanStep)
def _plan_step(e: et.PlanStep) -> str:
    return f"plan step {e.step} started {e.tool} {e.action_id}"


@_line(et.ActionStarted)
def _action_started(e: et.ActionStarted) -> str:
    who = " (plan)" if e.by_harness else ""
    return f"started {e.tool} {e.action_id} {compact(e.params, 80)}{who}"


@_line(et.ActionEnded)
def _action_ended(e: et.ActionEnded) -> str:
    r = f": {e.reason}" if e.reason else ""
    return f"{e.tool} {e.action_id} {e.outcome}{r}"


@_line(et.SkillStarted, et.SkillStop, et.SkillEnded)
def _skill(e: et.SkillStarted | et.SkillStop | et.SkillEnded) -> str:
    reason = getattr(e, "reason", "")
    r = f": {reason}" if reason else ""
    extra = f" {e.outcome}" if isinstance(e, et.SkillEnded) else ""
    return f"{_spaced(e.kind)} {e.skill} {e.action_id}{extra}{r}"


# --- the operator, the monitor's answers and decisions --------------------------------------

@_line(et.OperatorEventSeen)
def _operator_event(e: et.OperatorEventSeen) -> str:
    return f"operator: {e.action} {compact(e.detail or {}, 80)}"


@_line(et.MonitorAnswer, et.MonitorVerdictSeen)
def _monitor_answer(e: et.MonitorAnswer | et.MonitorVerdictSeen) -> str:
    dec = f" → {e.decision}" if e.decision else ""
    p = e.probability
    ps = f" p={float(p):.2f}" if isinstance(p, (int, float)) else ""
    return f"{e.source} {e.action_id}: {e.question} = {e.value}{ps}{dec}"


@_line(et.MonitorDecision)
def _monitor_decision(e: et.MonitorDecision) -> str:
    ok = "" if e.accepted else " (not accepted)"
    return f"{e.source} {e.decision} {e.action_id}{ok}"


@_line(et.OperatorTakeover)
def _operator_takeover(e: et.OperatorTakeover) -> str:
    if e.action == "estop":
        return f"operator e-stop latched: {(e.detail or {}).get('reason', '')}"
    if e.action == "estop_reset":
        return "operator released the e-stop"
    detail = dict(e.detail or {})
    note = str(detail.pop("note", "") or "")
    by = str(detail.pop("by", "") or "")
    s = "operator paused the run" if e.action == "pause" else f"operator took over: {e.action}"
    s += f" ({by})" if by else ""
    s += f": {compact(note, 300)}" if note else ""
    return s + (f" {compact(detail, 80)}" if detail else "")


# --- the run pausing and resuming, the agent asking the operator, refusals ------------------

@_line(et.RunPaused)
def _run_paused(e: et.RunPaused) -> str:
    return f"run paused: {e.reason}"


@_line(et.RunResumed)
def _run_resumed(e: et.RunResumed) -> str:
    return "run resumed"


@_line(et.AskUser)
def _ask_user(e: et.AskUser) -> str:
    return f"agent asks: {e.question}"


@_line(et.WaitingUser)
def _waiting_user(e: et.WaitingUser) -> str:
    return f"waiting for the operator: {e.question}"


@_line(et.ToolRefused, et.ActionRefused, et.TargetRejected)
def _refused(e: et.ToolRefused | et.ActionRefused | et.TargetRejected) -> str:
    return f"{_spaced(e.kind)} {e.tool}: {e.reason}"


# --- how the harness stops, observes, watches and routes ------------------------------------

@_line(et.StopAction)
def _stop_action(e: et.StopAction) -> str:
    return f"stop {e.action_id}: {e.reason}"


@_line(et.Observe)
def _observe(e: et.Observe) -> str:
    return "observed " + ", ".join(e.observations or [])


@_line(et.MonitorTick)
def _monitor_tick(e: et.MonitorTick) -> str:
    qs = ", ".join(str(q) for q in (e.questions or []))
    return f"monitor tick {e.tick} {e.tool} {e.action_id} at {e.elapsed_s} s: {qs}"


@_line(et.MonitorFrame)
def _monitor_frame(e: et.MonitorFrame) -> str:
    cams = ", ".join(f"{i.get('camera', '')} {i.get('label', '')}".strip()
                     for i in (e.images or []) if isinstance(i, Mapping))
    return f"monitor frame {e.tool} {e.action_id}: {cams}"


@_line(et.Route)
def _route(e: et.Route) -> str:
    return f"route {e.event} from {e.source} → {e.urgency}" + (
        f" ({e.reason})" if e.reason else "")


@_line(et.Interrupt)
def _interrupt(e: et.Interrupt) -> str:
    return f"interrupt by {e.event}: {e.content}"


@_line(et.EventHeld)
def _event_held(e: et.EventHeld) -> str:
    return f"held {e.event}: {e.reason}"


# --- progress, side questions, timers, services, generations, the planner model -------------

@_line(et.TaskProgress)
def _task_progress(e: et.TaskProgress) -> str:
    p = e.progress
    ps = f" {float(p) * 100:.0f}%" if isinstance(p, (int, float)) and p >= 0 else ""
    return f"{e.tool} {e.action_id} {e.phase}{ps}"


@_line(et.ToolPlaceholder)
def _tool_placeholder(e: et.ToolPlaceholder) -> str:
    return f"placeholder for {e.tool} {e.action_id}: {e.text}"


@_line(et.ParallelQuestion)
def _parallel_question(e: et.ParallelQuestion) -> str:
    return f"side question: {e.question}"


@_line(et.ParallelAnswer)
def _parallel_answer(e: et.ParallelAnswer) -> str:
    return f"side answer: {e.answer}"


@_line(et.ParallelTools)
def _parallel_tools(e: et.ParallelTools) -> str:
    return f"side question uses {', '.join(e.tools or [])}: {e.question}"


@_line(et.ParallelToolRefused)
def _parallel_tool_refused(e: et.ParallelToolRefused) -> str:
    return f"side answer refused {e.tool}: it is read-only (never starts or stops a skill)"


@_line(et.TimerSet, et.TimerFired, et.TimerCancelled)
def _timer(e: et.TimerSet | et.TimerFired | et.TimerCancelled) -> str:
    return f"{_spaced(e.kind)} {e.timer_id} {getattr(e, 'note', '')}".strip()


@_line(et.PlannerReplyDiscarded)
def _reply_discarded(e: et.PlannerReplyDiscarded) -> str:
    return f"planner reply discarded ({e.turn}): {e.reason}"


@_line(et.ServiceStarted, et.ServiceStopped)
def _service(e: et.ServiceStarted | et.ServiceStopped) -> str:
    if isinstance(e, et.ServiceStarted):
        params = f" {compact(e.params, 80)}" if e.params else ""
        return f"{e.module} {e.field} started{params}".strip()
    return f"{e.module or ''} {e.field} stopped".strip()


@_line(et.ServiceStopFailed)
def _service_stop_failed(e: et.ServiceStopFailed) -> str:
    return f"{e.field} did not stop ({e.error}): it may still run"


@_line(et.GenerationAdvanced)
def _generation_advanced(e: et.GenerationAdvanced) -> str:
    return f"generation → {e.generation}: {e.reason}"


@_line(et.ConversationReset)
def _conversation_reset(e: et.ConversationReset) -> str:
    return "conversation reset"


@_line(et.HarnessError)
def _harness_error(e: et.HarnessError) -> str:
    return f"harness error: {e.error}"


@_line(NodeChanged)
def _node_changed(e: NodeChanged) -> str:
    return NodeChange(e.node, NodeState(e.state), e.silent_s, e.restarted).describe()


@_line(et.PlannerModelRetry)
def _model_retry(e: et.PlannerModelRetry) -> str:
    return (f"planner model failed ({e.error}); call {e.attempt} of {e.attempts} in "
            f"{float(e.retry_in_s or 0):.1f} s")


@_line(et.PlannerSilent)
def _planner_silent(e: et.PlannerSilent) -> str:
    return f"planner silent: {e.reason} (last error: {e.error})"


@_line(et.PlannerModelOk)
def _model_ok(e: et.PlannerModelOk) -> str:
    return f"planner model answers again (after {e.after_failures} failed calls)"


def _generic(name: str, record: Mapping[str, Any]) -> str:
    rest = {k: v for k, v in record.items() if k not in ("t", "kind")}
    return f"{name} {compact(rest)}" if rest else name


def describe(ev: TypedEvent) -> str:
    """The event line for ``ev``: its own line, or its kind and data."""
    fn = _LINES.get(type(ev))
    if fn is not None:
        try:
            return fn(ev)
        except Exception:  # a malformed record still gets a line
            pass
    return _generic(ev.kind, ev.to_record())


def describe_record(name: str, data: Mapping[str, Any]) -> str:
    """The event line for a record as written (an episode-log line, an ``AgentEvent``'s data):
    when its own line cannot read it, its kind and data as they came."""
    ev = parse(name, data)
    fn = _LINES.get(type(ev))
    if fn is not None and not isinstance(ev, GenericEvent):
        try:
            return fn(ev)
        except Exception:  # a malformed record still gets a line
            pass
    return _generic(name, data)


# --- the demo's running commentary ----------------------------------------------------------
# the kinds a person follows a run by, each on one line indented by depth (run, step, skill,
# check); a kind absent here is not part of the commentary

Progress = Callable[[Any, bool], "str | None"]
_PROGRESS: dict[type[TypedEvent], Progress] = {}


def _progress(t: type[E]) -> Callable[[Callable[[E, bool], str | None]],
                                      Callable[[E, bool], str | None]]:
    def register(fn: Callable[[E, bool], str | None]) -> Callable[[E, bool], str | None]:
        _PROGRESS[t] = fn
        return fn
    return register


@_progress(et.RunStarted)
def _p_run_started(e: et.RunStarted, verbose: bool) -> str:
    return f"run {e.run_id} started: {e.task!r}"


@_progress(et.PlannerTurn)
def _p_planner_turn(e: et.PlannerTurn, verbose: bool) -> str:
    tools = ", ".join(e.tools or []) or "(no tools)"
    line = f"planner turn {e.turn}: {tools}"
    if e.error:
        line += f"  error: {e.error.get('kind')}: {e.error.get('message')}"
    return line


@_progress(et.PlanChanged)
def _p_plan_changed(e: et.PlanChanged, verbose: bool) -> str | None:
    if not verbose:
        return None
    return "plan: " + " | ".join(f"{s['step']}.{s['status'][0]} {s['description']}"
                                 for s in e.plan)


@_progress(et.PlanStep)
def _p_plan_step(e: et.PlanStep, verbose: bool) -> str:
    return f"  plan step {e.step} started by the harness: {e.tool}"


@_progress(et.SkillStarted)
def _p_skill_started(e: et.SkillStarted, verbose: bool) -> str:
    return f"  > {e.action_id} {e.skill} {json.dumps(e.params)}"


@_progress(et.SkillEnded)
def _p_skill_ended(e: et.SkillEnded, verbose: bool) -> str:
    duration = e.duration_s or 0
    return f"  < {e.action_id} {e.skill} {e.outcome} ({e.reason}, {duration:.1f} s)"


@_progress(et.ActionEnded)
def _p_action_ended(e: et.ActionEnded, verbose: bool) -> str | None:
    if e.tool != "verify_state" or not e.data:
        return None
    rep = e.data.get("report", {})
    return "    verify_state: " + ", ".join(
        f"{o}={rep[o]['location']}" for o in ("red_cup", "yellow_paper") if o in rep)


@_progress(et.MonitorAnswer)
def _p_monitor_answer(e: et.MonitorAnswer, verbose: bool) -> str | None:
    if not (e.decision or verbose):
        return None
    p = e.probability if e.probability is not None else 0
    return f"    monitor [{e.source}] {e.question}={e.value} p={p:.2f} {e.decision}"


@_progress(et.AskUser)
def _p_ask_user(e: et.AskUser, verbose: bool) -> str:
    return f"planner asks the user: {e.question}"


@_progress(et.WaitingUser)
def _p_waiting_user(e: et.WaitingUser, verbose: bool) -> str:
    return f"planner waits for the user: {e.question}"


@_progress(et.PlanStepFailed)
def _p_plan_step_failed(e: et.PlanStepFailed, verbose: bool) -> str:
    return f"  plan step {e.step} failed {e.failures} times in a row: {e.description}"


@_progress(et.ToolRefused)
def _p_tool_refused(e: et.ToolRefused, verbose: bool) -> str:
    return f"  refused {e.tool}: {e.reason}"


@_progress(et.TargetRejected)
def _p_target_rejected(e: et.TargetRejected, verbose: bool) -> str:
    return f"  target rejected: {e.reason}"


@_progress(et.RunEnded)
def _p_run_ended(e: et.RunEnded, verbose: bool) -> str:
    return f"run ended: {e.status} - {e.summary} ({e.turns} turns)"


def progress_line(ev: TypedEvent, verbose: bool = False) -> str | None:
    """The demo's line for ``ev``, or None when the commentary leaves it out (``verbose``
    adds every plan change and every monitor answer)."""
    fn = _PROGRESS.get(type(ev))
    return fn(ev, verbose) if fn is not None else None


__all__ = ["compact", "describe", "describe_record", "progress_line"]
