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
        # the arm driver's command gate: who holds the arm, the last refusals (the panel)
        self._gate = bus.subscribe(names.ARM_GATE, names.T_STRING, None, LATCHED, node)
        self._subs.append(self._gate)

    def arm_gate(self) -> dict[str, Any]:
        """The arm driver's last ``arm/gate`` (holder, last refusals); {} before one came."""
        g = self._gate.latest()
        return dict(g) if isinstance(g, Mapping) else {}

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
    def approve(self, text: str, by: str = "operator") -> Reply:
        """approve: skills -- ``approve [action_id]`` / ``refuse [action_id] [why]``."""
        return self._call(names.SKILL_APPROVE, {"text": text, "by": by})

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
