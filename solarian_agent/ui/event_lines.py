"""One-line descriptions of agent events, shared by the chat, the panel and the episode viewer
(episode-log kinds and their data; a malformed record still gets a line)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any


def compact(obj: Any, limit: int = 160) -> str:
    try:
        s = json.dumps(obj, ensure_ascii=False, separators=(", ", ": "), default=str)
    except Exception:
        s = repr(obj)
    return s if len(s) <= limit else s[:limit - 1] + "…"


def _plan_text(plan: Any) -> str:
    if not isinstance(plan, list):
        return compact(plan)
    parts = []
    for st in plan:
        if isinstance(st, Mapping):
            parts.append(f"{st.get('step', '?')}. {st.get('description', '')} "
                         f"[{st.get('status', '')}]")
    return "; ".join(parts)


# an event's data, read as ``data.get``
Getter = Callable[..., Any]


def _run_line(kind: str, g: Getter) -> str | None:
    """Episodes, runs, the planner's turns and its plan: their line (None: another kind)."""
    if kind == "episode_started":
        return f"episode {g('episode', '')} opened: {g('task', '') or '(no task yet)'}"
    if kind == "episode_ended":
        return f"episode {g('episode', '')} closed"
    if kind == "run_started":
        return f"run {g('run_id', '')} started: {g('task', '')}"
    if kind == "run_continued":
        return f"run {g('run_id', '')} continues from {g('continues_from', '')}"
    if kind == "run_ended":
        return f"run ended {g('status', '')}: {g('summary', '')}"
    if kind == "planner_turn":
        tools = ", ".join(g("tools") or []) or "no tools"
        s = f"planner turn {g('turn', '')} ({g('latency_s', 0)} s) → {tools}"
        if g("error"):
            s += f" error: {compact(g('error'), 120)}"
        return s
    if kind == "plan_changed":
        return "plan: " + _plan_text(g("plan"))
    return None


def _action_line(kind: str, g: Getter) -> str | None:
    """Actions and skills starting and ending: their line (None: another kind)."""
    if kind == "plan_step":
        return f"plan step {g('step')} started {g('tool')} {g('action_id', '')}"
    if kind == "action_started":
        who = " (plan)" if g("by_harness") else ""
        return f"started {g('tool')} {g('action_id', '')} {compact(g('params', {}), 80)}{who}"
    if kind == "action_ended":
        r = f": {g('reason')}" if g("reason") else ""
        return f"{g('tool')} {g('action_id', '')} {g('outcome')}{r}"
    if kind in ("skill_started", "skill_stop", "skill_ended"):
        r = f": {g('reason')}" if g("reason") else ""
        extra = f" {g('outcome')}" if kind == "skill_ended" else ""
        return f"{kind.replace('_', ' ')} {g('skill')} {g('action_id', '')}{extra}{r}"
    return None


def _monitor_line(kind: str, g: Getter) -> str | None:
    """Operator events, the monitor's answers and decisions: their line (None: another
    kind)."""
    if kind == "operator_event":
        return f"operator: {g('action')} {compact(g('detail') or {}, 80)}"
    if kind in ("monitor_answer", "monitor_verdict"):
        dec = f" → {g('decision')}" if g("decision") else ""
        p = g("probability")
        ps = f" p={float(p):.2f}" if isinstance(p, (int, float)) else ""
        return f"{g('source', 'monitor')} {g('action_id', '')}: {g('question')} = " \
               f"{g('value')}{ps}{dec}"
    if kind == "monitor_decision":
        ok = "" if g("accepted", True) else " (not accepted)"
        return f"{g('source', 'monitor')} {g('decision')} {g('action_id', '')}{ok}"
    return None


def _operator_line(kind: str, g: Getter) -> str | None:
    """The operator taking over (pause, e-stop, its release): their line (None: another kind)."""
    if kind == "operator_takeover" and g("action") == "estop":
        return f"operator e-stop latched: {(g('detail') or {}).get('reason', '')}"
    if kind == "operator_takeover" and g("action") == "estop_reset":
        return "operator released the e-stop"
    if kind == "operator_takeover":
        detail = dict(g("detail") or {})
        note = str(detail.pop("note", "") or "")
        by = str(detail.pop("by", "") or "")
        s = ("operator paused the run" if g("action") == "pause"
             else f"operator took over: {g('action')}")
        s += f" ({by})" if by else ""
        s += f": {compact(note, 300)}" if note else ""
        return s + (f" {compact(detail, 80)}" if detail else "")
    return None


def _dialogue_line(kind: str, g: Getter) -> str | None:
    """The run pausing and resuming, the agent asking the operator, refusals: their line
    (None: another kind)."""
    if kind == "run_paused":
        return f"run paused: {g('reason', '')}"
    if kind == "run_resumed":
        return "run resumed"
    if kind == "ask_user":
        return f"agent asks: {g('question', '')}"
    if kind == "waiting_user":
        return f"waiting for the operator: {g('question', '')}"
    if kind in ("tool_refused", "action_refused", "target_rejected"):
        return f"{kind.replace('_', ' ')} {g('tool', '')}: {g('reason', '')}"
    return None


def _harness_line(kind: str, g: Getter) -> str | None:
    """How the harness stops, observes, watches and routes: their line (None: another kind)."""
    if kind == "stop_action":
        return f"stop {g('action_id')}: {g('reason', '')}"
    if kind == "observe":
        return "observed " + ", ".join(g("observations") or [])
    if kind == "monitor_tick":
        qs = ", ".join(str(q) for q in (g("questions") or []))
        return f"monitor tick {g('tick', '')} {g('tool', '')} {g('action_id', '')} " \
               f"at {g('elapsed_s', '?')} s: {qs}"
    if kind == "monitor_frame":
        imgs = g("images") or []
        cams = ", ".join(f"{i.get('camera', '')} {i.get('label', '')}".strip()
                         for i in imgs if isinstance(i, Mapping))
        return f"monitor frame {g('tool', '')} {g('action_id', '')}: {cams}"
    if kind == "route":
        return f"route {g('event', '')} from {g('source', '')} → {g('urgency', '')}" + (
            f" ({g('reason')})" if g("reason") else "")
    if kind == "interrupt":
        return f"interrupt by {g('event', '')}: {g('content', '')}"
    if kind == "event_held":
        return f"held {g('event', '')}: {g('reason', '')}"
    return None


def _services_line(kind: str, g: Getter) -> str | None:
    """Progress, side questions, timers, services, generations, the planner model: their
    line (None: another kind)."""
    if kind == "task_progress":
        p = g("progress")
        ps = f" {float(p) * 100:.0f}%" if isinstance(p, (int, float)) and p >= 0 else ""
        return f"{g('tool', '')} {g('action_id', '')} {g('phase', '')}{ps}"
    if kind == "tool_placeholder":
        return f"placeholder for {g('tool', '')} {g('action_id', '')}: {g('text', '')}"
    if kind == "parallel_question":
        return f"side question: {g('question', '')}"
    if kind == "parallel_answer":
        return f"side answer: {g('answer', '')}"
    if kind == "parallel_tools":
        return f"side question uses {', '.join(g('tools') or [])}: {g('question', '')}"
    if kind == "parallel_tool_refused":
        return (f"side answer refused {g('tool', '')}: it is read-only (never starts or "
                "stops a skill)")
    if kind in ("timer_set", "timer_fired", "timer_cancelled"):
        return f"{kind.replace('_', ' ')} {g('timer_id', '')} {g('note', '')}".strip()
    if kind == "planner_reply_discarded":
        return f"planner reply discarded ({g('turn', '')}): {g('reason', '')}"
    if kind in ("service_started", "service_stopped"):
        verb = "started" if kind == "service_started" else "stopped"
        params = f" {compact(g('params'), 80)}" if g("params") else ""
        return f"{g('module', '')} {g('field', '')} {verb}{params}".strip()
    if kind == "service_stop_failed":
        return f"{g('field', '')} did not stop ({g('error', '')}): it may still run"
    if kind == "generation_advanced":
        return f"generation → {g('generation')}: {g('reason', '')}"
    if kind == "conversation_reset":
        return "conversation reset"
    if kind == "harness_error":
        return f"harness error: {g('error')}"
    if kind == "planner_model_retry":
        return (f"planner model failed ({g('error', '')}); call {g('attempt')} of "
                f"{g('attempts')} in {float(g('retry_in_s') or 0):.1f} s")
    if kind == "planner_silent":
        return f"planner silent: {g('reason', '')} (last error: {g('error', '')})"
    if kind == "planner_model_ok":
        return f"planner model answers again (after {g('after_failures')} failed calls)"
    return None

# one describer per family of kinds, tried in turn: each kind belongs to one family
_LINES: tuple[Callable[[str, Getter], str | None], ...] = (
    _run_line, _action_line, _monitor_line, _operator_line, _dialogue_line, _harness_line,
    _services_line)


def describe_event(kind: str, data: Mapping[str, Any]) -> str:
    """A short human line for an agent event (episode-log kinds and their data)."""
    try:
        for line in _LINES:
            text = line(kind, data.get)
            if text is not None:
                return text
    except Exception:  # a malformed record still gets a line
        pass
    rest = {k: v for k, v in data.items() if k not in ("t", "kind")}
    return f"{kind} {compact(rest)}" if rest else kind


__all__ = ["compact", "describe_event"]
