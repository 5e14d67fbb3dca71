"""The small interface every front end (web panel, terminal chat) talks to the agent through.

A front end only ever *sends* the three agent commands (``agent/message`` {text},
``agent/cancel`` {by}, ``agent/reset`` {by}), the arm's e-stop (``estop`` {reason} and
``estop_reset``, std_srvs Trigger services served by the arm driver or the simulator, not by
the agent) and operator events (``operator/events``: pause, takeover; the executor stops the
running skill at its next tick and the planner pauses the run until the next message), and
*reads* ``agent/state`` (latched), ``agent/events``, ``monitor/verdicts``, ``operator/events``
and image topics.  :class:`AgentLink` names exactly that; :class:`BusLink` implements it on the
in-process :class:`Bus` (the embedded default).  A ROS graph is reached through
``solarian_agent.ros.ui_link.RosLink`` (the only package that imports rclpy): the same
BusLink on a private Bus that a bridge joins to the graph.  This package never imports the
ROS one: a front end that can attach to a graph is handed an :data:`OpenGraphLink` (what
opens a :class:`GraphLink` to a :class:`GraphTarget`) by the ROS front end that starts it.

Callbacks registered here run on whatever thread publishes (the control loop in-process, an
executor thread under ROS): they must be cheap and must never raise, so every callback is
wrapped and its errors counted instead of propagated into the publisher.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..core import names
from ..core.clock import Clock
from ..core.errors import ServiceUnavailableError
from ..core.messages import AgentEvent, AgentState, Image, MonitorVerdict, OperatorEvent
from ..core.transport import LATCHED, QoS

log = logging.getLogger(__name__)

Reply = dict[str, Any]


class AgentLink(Protocol):
    """What a front end needs from the agent, whatever carries it."""

    def message(self, text: str) -> Reply: ...

    def cancel(self, by: str = "operator") -> Reply: ...

    def reset(self, by: str = "operator") -> Reply: ...

    def estop_available(self) -> bool:
        """Whether something serves the e-stop (the arm driver or the simulator)."""
        ...

    def estop(self, reason: str = "") -> Reply:
        """Latch the arm's e-stop.  The reply also has ``message`` (the driver's answer) and,
        when nothing serves the e-stop, ``unavailable: True`` with a reason that says so."""
        ...

    def estop_reset(self) -> Reply:
        """Release a latched e-stop (``ok`` False when it was not latched)."""
        ...

    def operator_event(self, kind: str, detail: Mapping[str, Any] | None = None) -> Reply:
        """Publish an operator event (``pause``, ``takeover``): the running skill stops at the
        next control tick, the run pauses and the planner is told; the next message resumes
        it."""
        ...

    def agent_available(self) -> bool:
        """Whether the agent's services are there (the planner is running)."""
        ...

    def on_state(self, cb: Callable[[AgentState], None]) -> None: ...

    def on_event(self, cb: Callable[[AgentEvent], None]) -> None: ...

    def on_verdict(self, cb: Callable[[MonitorVerdict], None]) -> None: ...

    def on_operator(self, cb: Callable[[OperatorEvent], None]) -> None: ...

    def image_topics(self) -> list[str]: ...

    def latest_image(self, topic: str) -> Image | None: ...

    def close(self) -> None: ...


class GraphLink(AgentLink, Protocol):
    """An :class:`AgentLink` to a running ROS graph: its node's clock, and whether the node
    stopped (the front end then ends)."""

    clock: Clock

    @property
    def failed(self) -> bool: ...


@dataclass(frozen=True)
class GraphTarget:
    """Where a front end attaches to a running graph: its own node ``node`` in ``namespace``;
    ``cameras`` None: the configuration's ``agent.cameras`` (``config_file``, default the
    shipped one), as the agent's nodes read them."""

    node: str
    namespace: str = ""
    cameras: tuple[str, ...] | None = ()
    config_file: str = ""


# opens a link to the graph (ImportError: no rclpy or interfaces; MissingExtraError: the ROS
# extra is not installed; ConfigError: the configuration names no cameras it can read)
OpenGraphLink = Callable[[GraphTarget], GraphLink]


ESTOP_UNAVAILABLE = ("e-stop unavailable: nothing serves {service!r} on this bus (is the arm "
                     "driver or the simulator running?); Cancel still stops the agent")


# agent events about how the harness routes and books its work, not about what the robot or
# the agent does: front ends hide them unless asked (the panel's "internal" switch, the chat's
# "/events all")
INTERNAL_KINDS = frozenset({
    "route", "event_held", "interrupt", "generation_advanced", "monitor_tick", "monitor_frame",
    "service_started", "service_stopped", "planner_reply_discarded", "tool_placeholder",
    "task_progress", "skill_started", "skill_stop", "skill_ended", "timer_set",
    "timer_cancelled", "episode_started", "episode_ended", "parallel_tools"})


def is_internal(kind: str) -> bool:
    return kind in INTERNAL_KINDS


def estop_unavailable(service: str = names.ESTOP) -> Reply:
    return {"ok": False, "reason": ESTOP_UNAVAILABLE.format(service=service), "message": "",
            "unavailable": True}


class BusLike(Protocol):
    endpoints: Any

    def subscribe(self, name: str, msg_type: str, callback: Callable[[Any], None] | None = ...,
                  qos: QoS = ..., node: str = ...) -> Any: ...

    def call(self, name: str, request: Any, timeout_s: float = ...) -> Any: ...

    def publisher(self, name: str, msg_type: str, qos: QoS = ..., node: str = ...) -> Any: ...


def discover_cameras(bus: BusLike) -> list[str]:
    """Image topics published on the bus, agent/view excluded, in creation order."""
    out: list[str] = []
    for e in list(getattr(bus, "endpoints", ())):
        if (getattr(e, "kind", "") == "publisher" and getattr(e, "type", "") == names.T_IMAGE
                and e.name != names.AGENT_VIEW and e.name not in out):
            out.append(e.name)
    return out


class BusLink:
    """:class:`AgentLink` over a :class:`~solarian_agent.core.transport.Bus` (or a look-alike).

    ``cameras`` are camera names (``cam`` -> ``cam/image_raw``) or full topic names; ``None``
    discovers the image topics already published on the bus.  ``agent/view`` is always
    included.
    """

    def __init__(self, bus: BusLike, cameras: Iterable[str] | None = None, *,
                 service_timeout_s: float = 2.0, node: str = "ui",
                 clock: Clock | None = None) -> None:
        self.bus = bus
        self.node = node
        self.clock = clock
        self._operator_pub: Any = None
        self.service_timeout_s = service_timeout_s
        self.callback_errors = 0
        self._lock = threading.Lock()
        self._cbs: dict[str, list[Callable[[Any], None]]] = {
            "state": [], "event": [], "verdict": [], "operator": []}
        self._subs: list[Any] = []
        if cameras is None:
            topics = discover_cameras(bus)
        else:
            topics = [c if c.endswith("/image_raw") or "/" in c else names.image_topic(c)
                      for c in cameras]
        self._topics = [*topics, names.AGENT_VIEW]
        self._images: dict[str, Any] = {}
        for t in self._topics:
            self._images[t] = bus.subscribe(t, names.T_IMAGE, None, QoS(depth=1), node)
        self._subs.extend(self._images.values())
        self._subs.append(bus.subscribe(names.AGENT_STATE, names.T_AGENT_STATE,
                                        self._dispatcher("state"), LATCHED, node))
        self._subs.append(bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT,
                                        self._dispatcher("event"), QoS(depth=1), node))
        self._subs.append(bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                                        self._dispatcher("verdict"), QoS(depth=1), node))
        self._subs.append(bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT,
                                        self._dispatcher("operator"), QoS(depth=1), node))
        self._last_state: AgentState | None = None

    # reading -----------------------------------------------------------------------------
    def _dispatcher(self, kind: str) -> Callable[[Any], None]:
        def deliver(msg: Any) -> None:
            if kind == "state":
                self._last_state = msg
            with self._lock:
                cbs = list(self._cbs[kind])
            for cb in cbs:
                try:
                    cb(msg)
                except Exception:  # never into the publisher's thread
                    self.callback_errors += 1
                    log.exception("ui callback for %s failed", kind)
        return deliver

    def _add(self, kind: str, cb: Callable[[Any], None]) -> None:
        with self._lock:
            self._cbs[kind].append(cb)
        if kind == "state" and self._last_state is not None:
            try:
                cb(self._last_state)
            except Exception:
                self.callback_errors += 1
                log.exception("ui state callback failed")

    def on_state(self, cb: Callable[[AgentState], None]) -> None:
        self._add("state", cb)

    def on_event(self, cb: Callable[[AgentEvent], None]) -> None:
        self._add("event", cb)

    def on_verdict(self, cb: Callable[[MonitorVerdict], None]) -> None:
        self._add("verdict", cb)

    def on_operator(self, cb: Callable[[OperatorEvent], None]) -> None:
        self._add("operator", cb)

    def image_topics(self) -> list[str]:
        return list(self._topics)

    def latest_image(self, topic: str) -> Image | None:
        sub = self._images.get(topic)
        if sub is None:
            return None
        img = sub.latest()
        return img if isinstance(img, Image) else None

    # commands ----------------------------------------------------------------------------
    def _call(self, service: str, request: Mapping[str, Any]) -> Reply:
        try:
            r = self.bus.call(service, dict(request), timeout_s=self.service_timeout_s)
        except Exception as e:
            return {"ok": False, "reason": f"{service}: {type(e).__name__}: {e}"}
        if isinstance(r, Mapping):
            return {"ok": bool(r.get("ok", True)), "reason": str(r.get("reason", ""))}
        return {"ok": True, "reason": ""}

    def message(self, text: str) -> Reply:
        return self._call(names.AGENT_MESSAGE, {"text": text})

    def cancel(self, by: str = "operator") -> Reply:
        return self._call(names.AGENT_CANCEL, {"by": by})

    def reset(self, by: str = "operator") -> Reply:
        return self._call(names.AGENT_RESET, {"by": by})

    def _has_service(self, name: str) -> bool:
        has = getattr(self.bus, "has_service", None)
        if has is None:  # a bus that cannot tell: the call itself will
            return True
        try:
            return bool(has(name))
        except Exception:
            log.debug("has_service(%r) failed", name, exc_info=True)
            return False

    def _trigger(self, service: str, request: Mapping[str, Any]) -> Reply:
        """Call a std_srvs Trigger service: {success, message} -> {ok, reason, message}."""
        if not self._has_service(service):
            return estop_unavailable(service)
        try:
            r = self.bus.call(service, dict(request), timeout_s=self.service_timeout_s)
        except ServiceUnavailableError:
            return estop_unavailable(service)
        except Exception as e:
            return {"ok": False, "reason": f"{service}: {type(e).__name__}: {e}", "message": ""}
        if isinstance(r, Mapping):
            ok = bool(r.get("success", r.get("ok", False)))
            message = str(r.get("message", r.get("reason", "")))
        else:
            ok, message = bool(getattr(r, "success", False)), str(getattr(r, "message", ""))
        return {"ok": ok, "reason": "" if ok else (message or f"{service} refused"),
                "message": message}

    def estop_available(self) -> bool:
        return self._has_service(names.ESTOP)

    def agent_available(self) -> bool:
        return self._has_service(names.AGENT_MESSAGE)

    def operator_event(self, kind: str, detail: Mapping[str, Any] | None = None) -> Reply:
        try:
            if self._operator_pub is None:
                self._operator_pub = self.bus.publisher(
                    names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, QoS(depth=100), self.node)
            stamp = self.clock.now() if self.clock is not None else time.time()
            self._operator_pub.publish(OperatorEvent(kind, dict(detail or {}), stamp))
        except Exception as e:  # the front end reports it; nothing raises into it
            return {"ok": False, "reason": f"operator event not sent: {type(e).__name__}: {e}"}
        return {"ok": True, "reason": ""}

    def estop(self, reason: str = "") -> Reply:
        return self._trigger(names.ESTOP, {"reason": reason} if reason else {})

    def estop_reset(self) -> Reply:
        return self._trigger(names.ESTOP_RESET, {})

    def close(self) -> None:
        with self._lock:
            for k in self._cbs:
                self._cbs[k].clear()
        for s in self._subs:
            try:
                s.close()
            except Exception:
                log.debug("closing a ui subscription failed", exc_info=True)
        self._subs.clear()


def new_entries(prev: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of ``new`` not yet seen: ``new`` is the last N of a growing (or reset) list."""
    for k in range(min(len(prev), len(new)), 0, -1):
        if prev[-k:] == new[:k]:
            return new[k:]
    return new


# ----------------------------------------------------------------------------------------
# one-line descriptions shared by the chat, the panel and the episode viewer
# ----------------------------------------------------------------------------------------
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


def describe_event(kind: str, data: Mapping[str, Any]) -> str:
    """A short human line for an agent event (episode-log kinds and their data)."""
    d = data
    g = d.get
    try:
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
    except Exception:  # a malformed record still gets a line
        pass
    rest = {k: v for k, v in d.items() if k not in ("t", "kind")}
    return f"{kind} {compact(rest)}" if rest else kind
