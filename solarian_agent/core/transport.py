"""The in-process transport: named topics, services and actions with the ROS semantics that matter.

The embedded default and the tests join every component through a :class:`Bus`; the ROS node
shells map the same names and message types onto rclpy, so no component is rewritten for ROS.

Semantics kept from ROS 2:

* Topics are typed by their ROS type name (``"sensor_msgs/msg/Image"``); a publisher and a
  subscriber that disagree on the type raise :class:`TransportError` at creation, as a real graph
  would never match them.
* A subscription keeps the last ``depth`` messages (KEEP_LAST); the oldest is dropped when full
  and the drop is counted, never blocking the publisher.  ``depth=1`` is a latest-value topic.
* ``transient_local`` (latched) publishers hand their last message to late subscribers.
* Messages are passed by reference: a camera frame crosses the bus without a copy.  Publishers
  must not mutate a message after publishing it (numpy frames are marked read-only).
* Services are request/response with a timeout; actions have goal / feedback / result / cancel
  and goal status (``action_msgs/GoalStatus`` values).

Concurrency: callbacks run synchronously on the publishing thread, like rclpy's intra-process
delivery with a single-threaded executor.  A callback that raises is logged and counted
(``Subscription.callback_errors``), never raised into the publisher: a failing subscriber (a
full disk under the episode log, a broken viewer) must not break the control loop that
published, just as in ROS it never reaches the publishing node.  Registration is guarded by
one lock; delivery iterates a snapshot, so a callback may subscribe or unsubscribe without
deadlocking.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Generic, TypeVar

from .errors import ServiceTimeoutError, ServiceUnavailableError, TransportError

log = logging.getLogger(__name__)


def _run_callback(what: str, cb: Callable[[Any], None], arg: Any) -> bool:
    """Run a subscriber's callback; its exception is logged, never raised into the
    publisher (in ROS a subscriber's failure never reaches the node that published).  Returns
    False when the callback raised."""
    try:
        cb(arg)
        return True
    except Exception:
        log.exception("callback on %s raised; the publisher carries on", what)
        return False

T = TypeVar("T")


@dataclass(frozen=True)
class QoS:
    """The QoS choices that matter in-process and are mapped 1:1 onto rclpy profiles."""

    depth: int = 10
    transient_local: bool = False
    best_effort: bool = False

    def __post_init__(self) -> None:
        if self.depth < 1:
            raise ValueError(f"QoS depth must be >= 1, got {self.depth}")


LATEST = QoS(depth=1)
SENSOR_DATA = QoS(depth=1, best_effort=True)
LATCHED = QoS(depth=1, transient_local=True)
EVENTS = QoS(depth=100)


class Subscription(Generic[T]):
    """A bounded KEEP_LAST queue of messages plus an optional callback."""

    def __init__(
        self,
        bus: Bus,
        name: str,
        msg_type: str,
        qos: QoS,
        callback: Callable[[T], None] | None,
    ) -> None:
        self.bus = bus
        self.name = name
        self.msg_type = msg_type
        self.qos = qos
        self.callback = callback
        self._queue: collections.deque[T] = collections.deque(maxlen=qos.depth)
        self._last: T | None = None
        self._lock = threading.Lock()
        self.dropped = 0
        self.received = 0
        self.callback_errors = 0

    def _deliver(self, msg: T) -> None:
        with self._lock:
            if len(self._queue) == self._queue.maxlen:
                self.dropped += 1
            self._queue.append(msg)
            self._last = msg
            self.received += 1
        if self.callback is not None and not _run_callback(self.name, self.callback, msg):
            with self._lock:
                self.callback_errors += 1

    def take(self) -> T | None:
        """Pop the oldest unread message, or None."""
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def drain(self) -> list[T]:
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
            return out

    def latest(self) -> T | None:
        """The newest message ever received (read or not)."""
        with self._lock:
            return self._last

    def close(self) -> None:
        self.bus._remove_subscription(self)


class Publisher(Generic[T]):
    def __init__(self, bus: Bus, name: str, msg_type: str, qos: QoS) -> None:
        self.bus = bus
        self.name = name
        self.msg_type = msg_type
        self.qos = qos
        self.count = 0

    def publish(self, msg: T) -> None:
        self.count += 1
        self.bus._publish(self, msg)


class GoalStatus(IntEnum):
    """action_msgs/msg/GoalStatus values."""

    UNKNOWN = 0
    ACCEPTED = 1
    EXECUTING = 2
    CANCELING = 3
    SUCCEEDED = 4
    CANCELED = 5
    ABORTED = 6

    @property
    def terminal(self) -> bool:
        return self in (GoalStatus.SUCCEEDED, GoalStatus.CANCELED, GoalStatus.ABORTED)


class GoalHandle:
    """Shared by server and client in-process; the server drives it, the client reads it."""

    _ids = itertools.count(1)

    def __init__(self, action: str, goal: Any) -> None:
        self.goal_id = f"{action}#{next(self._ids)}"
        self.action = action
        self.goal = goal
        self.status = GoalStatus.ACCEPTED
        self.result: Any = None
        self.feedback: Any = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._feedback_cbs: list[Callable[[Any], None]] = []
        self._done_cbs: list[Callable[[GoalHandle], None]] = []
        self._cancel_cb: Callable[[GoalHandle], bool] | None = None

    # server side -------------------------------------------------------------------------
    def execute(self) -> None:
        with self._lock:
            if self.status == GoalStatus.ACCEPTED:
                self.status = GoalStatus.EXECUTING

    def publish_feedback(self, feedback: Any) -> None:
        self.feedback = feedback
        for cb in list(self._feedback_cbs):
            cb(feedback)

    def _finish(self, status: GoalStatus, result: Any) -> None:
        with self._lock:
            if self.status.terminal:
                raise TransportError(
                    f"goal {self.goal_id} already ended as {self.status.name}; "
                    f"cannot end it again as {status.name}"
                )
            self.status = status
            self.result = result
        self._done.set()
        for cb in list(self._done_cbs):
            cb(self)

    def succeed(self, result: Any) -> None:
        self._finish(GoalStatus.SUCCEEDED, result)

    def abort(self, result: Any) -> None:
        self._finish(GoalStatus.ABORTED, result)

    def canceled(self, result: Any) -> None:
        self._finish(GoalStatus.CANCELED, result)

    # client side -------------------------------------------------------------------------
    def add_feedback_callback(self, cb: Callable[[Any], None]) -> None:
        self._feedback_cbs.append(cb)

    def add_done_callback(self, cb: Callable[[GoalHandle], None]) -> None:
        with self._lock:
            done = self.status.terminal
            if not done:
                self._done_cbs.append(cb)
        if done:
            cb(self)

    def cancel(self) -> bool:
        """Request cancellation; True if the server accepted the request."""
        with self._lock:
            if self.status.terminal:
                return False
            cb = self._cancel_cb
        accepted = cb(self) if cb is not None else False
        if accepted:
            with self._lock:
                if not self.status.terminal:
                    self.status = GoalStatus.CANCELING
        return accepted

    def wait(self, timeout_s: float) -> bool:
        """Block for the result; only for callers that own no control loop (CLI, tests)."""
        return self._done.wait(timeout_s)

    @property
    def done(self) -> bool:
        return self.status.terminal


class ActionServer:
    """Register with ``Bus.create_action_server``.

    ``on_goal(handle)`` decides synchronously: return None to accept (the server then drives the
    handle from its own loop) or a reason string to reject.  A rejected goal ends ABORTED with the
    result built by ``rejected_result(reason)``, so the reason always reaches the client.
    ``on_cancel(handle)`` returns whether the cancel request is accepted; an accepted cancel is
    honoured by the server at its next step.
    """

    def __init__(
        self,
        name: str,
        action_type: str,
        on_goal: Callable[[GoalHandle], str | None],
        on_cancel: Callable[[GoalHandle], bool],
        rejected_result: Callable[[str], Any],
    ) -> None:
        self.name = name
        self.action_type = action_type
        self.on_goal = on_goal
        self.on_cancel = on_cancel
        self.rejected_result = rejected_result


@dataclass
class Endpoint:
    # publisher | subscription | service | service_client | action_server | action_client
    kind: str
    name: str
    type: str
    qos: QoS | None = None
    node: str = ""


@dataclass
class _Service:
    name: str
    srv_type: str
    handler: Callable[..., Any]
    timed: bool = False  # the handler takes (request, timeout_s): it forwards the wait


class Bus:
    """One in-process graph.  Thread-safe; see the module docstring for semantics."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._subs: dict[str, list[Subscription[Any]]] = collections.defaultdict(list)
        self._pubs: dict[str, list[Publisher[Any]]] = collections.defaultdict(list)
        self._latched: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self._services: dict[str, _Service] = {}
        self._actions: dict[str, ActionServer] = {}
        self.endpoints: list[Endpoint] = []

    def _check_type(self, name: str, msg_type: str) -> None:
        known = self._types.setdefault(name, msg_type)
        if known != msg_type:
            raise TransportError(f"topic {name!r} carries {known}, not {msg_type}")

    def publisher(self, name: str, msg_type: str, qos: QoS = QoS(), node: str = ""
                  ) -> Publisher[Any]:
        with self._lock:
            self._check_type(name, msg_type)
            pub: Publisher[Any] = Publisher(self, name, msg_type, qos)
            self._pubs[name].append(pub)
            self.endpoints.append(Endpoint("publisher", name, msg_type, qos, node))
            return pub

    def subscribe(
        self,
        name: str,
        msg_type: str,
        callback: Callable[[Any], None] | None = None,
        qos: QoS = QoS(),
        node: str = "",
    ) -> Subscription[Any]:
        with self._lock:
            self._check_type(name, msg_type)
            sub: Subscription[Any] = Subscription(self, name, msg_type, qos, callback)
            self._subs[name].append(sub)
            self.endpoints.append(Endpoint("subscription", name, msg_type, qos, node))
            latched = self._latched.get(name)
        if latched is not None:
            sub._deliver(latched)
        return sub

    def _remove_subscription(self, sub: Subscription[Any]) -> None:
        with self._lock:
            if sub in self._subs[sub.name]:
                self._subs[sub.name].remove(sub)

    def _publish(self, pub: Publisher[Any], msg: Any) -> None:
        with self._lock:
            if pub.qos.transient_local:
                self._latched[pub.name] = msg
            subs = list(self._subs.get(pub.name, ()))
        for sub in subs:
            sub._deliver(msg)

    # services ------------------------------------------------------------------------------
    def create_service(
        self, name: str, srv_type: str, handler: Callable[..., Any], node: str = "",
        timed: bool = False,
    ) -> None:
        """``timed``: ``handler(request, timeout_s)`` gets the caller's timeout (a handler
        that waits on another process, as the ROS bridge's client does, waits no longer than
        the caller asked)."""
        with self._lock:
            if name in self._services:
                raise TransportError(f"service {name!r} already has a server")
            self._services[name] = _Service(name, srv_type, handler, timed)
            self.endpoints.append(Endpoint("service", name, srv_type, None, node))

    def call(self, name: str, request: Any, timeout_s: float = 5.0) -> Any:
        """Call a service.  In-process handlers answer synchronously; ``timeout_s`` is kept so
        callers are written as they must be for ROS, where every wait is bounded."""
        if timeout_s <= 0:
            raise ServiceTimeoutError(f"service {name!r}: timeout must be positive")
        with self._lock:
            svc = self._services.get(name)
        if svc is None:
            raise ServiceUnavailableError(f"no server for service {name!r}")
        if svc.timed:
            return svc.handler(request, timeout_s)
        return svc.handler(request)

    def has_service(self, name: str) -> bool:
        with self._lock:
            return name in self._services

    # actions -------------------------------------------------------------------------------
    def create_action_server(self, server: ActionServer, node: str = "") -> None:
        with self._lock:
            if server.name in self._actions:
                raise TransportError(f"action {server.name!r} already has a server")
            self._actions[server.name] = server
            self.endpoints.append(Endpoint("action_server", server.name,
                                           server.action_type, None, node))

    def remove_action_server(self, name: str) -> None:
        with self._lock:
            self._actions.pop(name, None)

    def has_action(self, name: str) -> bool:
        with self._lock:
            return name in self._actions

    def send_goal(
        self,
        name: str,
        goal: Any,
        feedback_cb: Callable[[Any], None] | None = None,
        done_cb: Callable[[GoalHandle], None] | None = None,
    ) -> GoalHandle:
        with self._lock:
            server = self._actions.get(name)
        if server is None:
            raise ServiceUnavailableError(f"no server for action {name!r}")
        handle = GoalHandle(name, goal)
        handle._cancel_cb = server.on_cancel
        if feedback_cb is not None:
            handle.add_feedback_callback(feedback_cb)
        if done_cb is not None:
            handle.add_done_callback(done_cb)
        reason = server.on_goal(handle)
        if reason is not None:
            handle.abort(server.rejected_result(reason))
        return handle
