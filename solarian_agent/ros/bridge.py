"""Forward a node's private in-process Bus to rclpy along its graph spec.

Each node builds its core component on a private :class:`~solarian_agent.core.transport.Bus`
(:mod:`.components`); :class:`Bridge` then creates, for every bridged endpoint of the node's
:class:`~.graph.NodeSpec`:

=================  =========================================================================
``publisher``      a ROS publisher fed by a Bus subscription (core -> graph)
``subscription``   a ROS subscription feeding a Bus publisher (graph -> core)
``service``        a ROS service answered by ``bus.call`` (the core's handler)
``client``         a Bus service whose handler calls the ROS service (``call_async`` + a
                   bounded wait; only ever called from the node's loop threads)
``action_server``  a ROS action server whose goals go to ``bus.send_goal``: goals are always
                   accepted so a refusal (stale generation, busy arm) comes back as a result
                   with outcome ``refused`` and its reason; cancels are accepted and forwarded
                   at once, and the core stops the skill at its next control tick
``action_client``  a Bus action server whose goals are sent with ``send_goal_async``; feedback,
                   the result and cancels are mapped onto the core's GoalHandle; a watchdog
                   thread bounds every wait (:mod:`.bridge_client`)
=================  =========================================================================

Threading: every ROS callback runs on the node's one executor thread (a SingleThreadedExecutor:
rclpy's MultiThreadedExecutor rebuilds its wait set two or three times per message, which cost
three times the CPU of the same traffic on one thread); callbacks only convert and hand over
(the core's inputs only queue), so none blocks.  The one long callback, a skill goal's execute
callback, runs on a thread of its own per goal (:class:`ThreadedActionServer`): it waits on the
core's GoalHandle with a short timeout and re-checks shutdown, never on a ROS future.  A bridged
service *client* waits for its response, which the executor thread delivers, so it is called
only from the node's loop threads, never from a callback (refused if it is).  No callback lets
an exception escape: rclpy re-raises a callback's exception out of ``spin()``, which would stop
the node's executor for good.  Every wait has a timeout.  :meth:`Bridge.close` aborts the goals
still running with a result (outcome ``stopped``, "node shutting down").

Cancels (action server): rclpy calls the cancel callback and, once it returned ACCEPT, moves the
goal to CANCELING.  A goal that reached a terminal state in between makes that transition raise
inside the executor (no cancel response, the executor stops).  So the cancel callback only
records the request; the execute loop forwards it to the core once the goal handle reports
``is_cancel_requested`` (at most one poll later), and a goal with a cancel in flight is ended
only after rclpy has moved it to CANCELING.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.service import Service

from ..core import names
from ..core.errors import ServiceTimeoutError, ServiceUnavailableError, TransportError
from ..core.messages import SkillResult
from ..core.transport import ActionServer as BusActionServer
from ..core.transport import Bus, GoalHandle, GoalStatus, QoS
from ..rosmsg import convert as cv
from ..rosmsg.graph import Endpoint
from .bridge_client import ActionCaller, SentGoals
from .codec import rclpy_codec
from .ros_types import interface_class

BRIDGE_NODE = "ros_bridge"
RESULT_GRACE_S = 0.3  # see Bridge.wait_for_goals


class ThreadedActionServer(ActionServer):  # type: ignore[misc]
    """An rclpy ActionServer whose execute callback runs on a thread of its own per goal.

    rclpy schedules ``_execute_goal`` (which awaits the execute callback, then stores the
    result) as a task of the node's executor; on a single-threaded executor a callback that
    lasts the whole skill would stall every other callback of the node, and a coroutine would
    be polled by Jazzy's executor on every wake (a busy loop).  So the same coroutine is driven
    here on a goal thread instead: with a plain (not async) execute callback it completes in
    one step; the result response is then sent from the executor, as rclpy does."""

    def __init__(self, node: Node, action_type: Any, name: str, **kw: Any) -> None:
        super().__init__(node, action_type, name, **kw)
        self.name = name

    def notify_execute(self, goal_handle: Any, execute_callback: Any) -> None:
        if execute_callback is None:
            execute_callback = self._execute_callback
            if execute_callback is None:
                return
        coro = self._execute_goal(execute_callback, goal_handle)

        def run() -> None:
            try:
                while True:
                    coro.send(None)
                    time.sleep(0.005)  # an async execute callback that awaited: poll it
            except StopIteration:
                pass

        threading.Thread(target=run, name=f"goal-{self.name}", daemon=True).start()


# services whose core handler may take long (a vision model call): answered off the executor
# thread, so the node's other callbacks (goal responses, results, images) go on meanwhile
SLOW_SERVICES = frozenset({names.OBSERVE_SCENE})


class _Deferred:
    """A service reply computed on another thread (see :class:`DeferredService`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: Any = None
        self._ready = False
        self._send: Callable[[Any], None] | None = None

    def set(self, value: Any) -> None:
        with self._lock:
            self._value, self._ready = value, True
            send = self._send
        if send is not None:
            send(value)

    def on_ready(self, send: Callable[[Any], None]) -> None:
        with self._lock:
            self._send = send
            ready, value = self._ready, self._value
        if ready:
            send(value)


class DeferredService(Service):  # type: ignore[misc]
    """An rclpy Service whose callback may return a :class:`_Deferred`: rclpy's executor hands
    the callback's return value to ``send_response`` together with the request header, so the
    reply is sent when the deferred value is set, from that thread, and the executor goes on
    at once.  (rclpy's Python API has no deferred service response.)"""

    def send_response(self, response: Any, header: Any) -> None:
        if isinstance(response, _Deferred):
            response.on_ready(lambda value: self._send_quietly(value, header))
            return
        super().send_response(response, header)

    def _send_quietly(self, value: Any, header: Any) -> None:
        try:
            Service.send_response(self, value, header)
        except Exception:  # the node is shutting down, or the client went away
            pass


def ros_qos(q: QoS) -> QoSProfile:
    """The core's QoS as an rclpy profile (KEEP_LAST ``depth``)."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=q.depth,
        reliability=ReliabilityPolicy.BEST_EFFORT if q.best_effort
        else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if q.transient_local
        else DurabilityPolicy.VOLATILE)


def _service_class(typename: str) -> Any:
    return interface_class(typename)


def _action_class(typename: str) -> Any:
    return interface_class(typename)


def error_response(typename: str, reason: str) -> Any:
    """What a service answers when the core's handler failed (always a well-formed reply)."""
    if typename in (names.T_TRIGGER, cv.T_SET_BOOL):
        return {"success": False, "message": reason}
    if typename == names.T_TOOL_CATALOGUE:
        return []
    if typename == names.T_ADVANCE_GENERATION:
        return -1
    if typename in (cv.T_SIM_RESET, cv.T_INJECT_FAULT):
        return {"ok": False, "message": reason}
    if typename == names.T_OBSERVE_SCENE:
        return {"ok": False, "error": reason}
    return {"ok": False, "reason": reason}


class Bridge:
    def __init__(self, node: Node, bus: Bus, codec: cv.Codec | None = None, *,
                 service_timeout_s: float = 5.0, goal_poll_s: float = 0.005) -> None:
        self.node = node
        self.bus = bus
        self.codec = codec or rclpy_codec()
        self.service_timeout_s = service_timeout_s
        self.goal_poll_s = goal_poll_s
        self.group = ReentrantCallbackGroup()
        self.log = node.get_logger()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._server_goals: dict[bytes, GoalHandle] = {}
        self._cancels: set[bytes] = set()  # cancel accepted, rclpy may not have applied it yet
        self._finishing: set[bytes] = set()  # about to end: further cancels are refused
        self._sent_goals = SentGoals(self.closing, self._warn)  # action clients' goals
        self._entities: list[Any] = []
        self.clients: dict[str, Any] = {}  # service name -> its rclpy client (bridged clients)
        self.action_clients: dict[str, Any] = {}  # action name -> its rclpy action client
        self._warned: dict[str, float] = {}
        self._served_any = False  # an action server of this node ended a goal recently
        self.executor_thread: int | None = None  # set by the node's Spinner

    # ---------------------------------------------------------------------------------------
    def add(self, endpoints: Iterable[Endpoint]) -> None:
        for e in endpoints:
            if not e.bridged:
                continue
            getattr(self, f"_add_{e.kind}")(e)

    def _warn(self, key: str, text: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(key, -1e9) > 5.0:
            self._warned[key] = now
            self.log.warning(text)

    def _guarded(self, what: str, fn: Callable[..., Any], fallback: Any = None
                 ) -> Callable[..., Any]:
        """``fn`` as a ROS callback that never raises into the executor (rclpy's
        executor re-raises it out of ``spin()``): the error is logged and
        ``fallback`` returned."""

        def cb(*args: Any) -> Any:
            try:
                return fn(*args)
            except Exception as ex:
                self._warn(f"cb:{what}", f"{what}: {type(ex).__name__}: {ex}")
                return fallback

        return cb

    # topics --------------------------------------------------------------------------------
    def _add_publisher(self, e: Endpoint) -> None:
        assert e.qos is not None
        pub = self.node.create_publisher(self.codec.cls(e.type), e.name, ros_qos(e.qos))
        self._entities.append(pub)

        def forward(value: Any) -> None:
            if self.closing.is_set():
                return
            try:
                pub.publish(cv.to_ros(self.codec, e.type, value))
            except Exception as ex:  # a bad message is dropped and reported, never raised
                self._warn(e.name, f"not publishing {e.name}: {ex}")

        self.bus.subscribe(e.name, e.type, forward, QoS(depth=1), node=BRIDGE_NODE)

    def _add_subscription(self, e: Endpoint) -> None:
        assert e.qos is not None
        bus_pub = self.bus.publisher(e.name, e.type, e.qos, node=BRIDGE_NODE)

        def receive(msg: Any) -> None:
            try:
                value = cv.from_ros(e.type, msg)
            except cv.ConvertError as ex:
                self._warn(e.name, f"dropped a message on {e.name}: {ex}")
                return
            bus_pub.publish(value)

        self._entities.append(self.node.create_subscription(
            self.codec.cls(e.type), e.name, self._guarded(f"subscription {e.name}", receive),
            ros_qos(e.qos), callback_group=self.group))

    # services ------------------------------------------------------------------------------
    def _add_service(self, e: Endpoint) -> None:
        req_t, resp_t = f"{e.type}_Request", f"{e.type}_Response"

        def handle(request: Any, response: Any) -> Any:
            try:
                result = self.bus.call(e.name, cv.from_ros(req_t, request),
                                       timeout_s=self.service_timeout_s)
            except Exception as ex:  # the caller gets a reply naming the error
                self._warn(e.name, f"service {e.name} failed: {ex}")
                result = error_response(e.type, f"{type(ex).__name__}: {ex}")
            try:
                return cv.to_ros(self.codec, resp_t, result)
            except cv.ConvertError as ex:
                self._warn(e.name, f"service {e.name}: bad reply: {ex}")
                try:
                    return cv.to_ros(self.codec, resp_t, error_response(e.type, str(ex)))
                except cv.ConvertError:
                    return response  # the default-constructed reply rclpy passed in

        if e.name not in SLOW_SERVICES:
            self._entities.append(self.node.create_service(
                _service_class(e.type), e.name, handle, callback_group=self.group))
            return

        def handle_off_thread(request: Any, response: Any) -> _Deferred:
            reply = _Deferred()
            threading.Thread(target=lambda: reply.set(handle(request, response)),
                             name=f"service-{e.name}", daemon=True).start()
            return reply

        srv = self.node.create_service(_service_class(e.type), e.name, handle_off_thread,
                                       callback_group=self.group)
        srv.__class__ = DeferredService  # same object, its send_response understands _Deferred
        self._entities.append(srv)

    def _add_client(self, e: Endpoint) -> None:
        req_t, resp_t = f"{e.type}_Request", f"{e.type}_Response"
        client = self.node.create_client(_service_class(e.type), e.name,
                                         callback_group=self.group)
        self._entities.append(client)
        self.clients[e.name] = client

        def call(request: Any, timeout_s: float) -> Any:
            # runs on a node loop thread (planner / monitor tick), never in a ROS callback:
            # the response comes through the executor thread, which would be the one waiting.
            # The caller's timeout bounds the whole call, the wait for the server included (a
            # 2 s request never blocks its loop for longer); service_timeout_s caps it
            if threading.get_ident() == self.executor_thread:
                raise TransportError(f"service {e.name!r} called from a ROS callback (it "
                                     "would wait on its own executor); call it from a loop")
            if self.closing.is_set():
                raise ServiceUnavailableError(f"{e.name}: node shutting down")
            timeout_s = min(timeout_s, self.service_timeout_s)
            end = time.monotonic() + timeout_s
            if not client.service_is_ready() and not client.wait_for_service(
                    timeout_sec=min(1.0, timeout_s)):
                raise ServiceUnavailableError(f"no server for service {e.name!r} in the graph")
            done = threading.Event()
            future = client.call_async(cv.to_ros(self.codec, req_t, request))
            future.add_done_callback(lambda _f: done.set())
            if not done.wait(max(0.0, end - time.monotonic())):
                remove = getattr(client, "remove_pending_request", None)
                if remove is not None:
                    remove(future)
                raise ServiceTimeoutError(f"service {e.name!r} did not answer within "
                                          f"{timeout_s:g} s")
            reply = future.result()
            if reply is None:
                raise ServiceUnavailableError(f"service {e.name!r} returned no reply")
            return cv.from_ros(resp_t, reply)

        self.bus.create_service(e.name, e.type, call, node=BRIDGE_NODE, timed=True)

    # actions: serving (skills node) -----------------------------------------------------------
    def _add_action_server(self, e: Endpoint) -> None:
        action_cls = _action_class(e.type)

        def goal_cb(_goal_request: Any) -> GoalResponse:
            # every well-formed goal is accepted: refusals come back as a result with a reason
            return GoalResponse.REJECT if self.closing.is_set() else GoalResponse.ACCEPT

        def cancel_cb(goal_handle: Any) -> CancelResponse:
            # only recorded here: rclpy applies the cancel (-> CANCELING) after this returns,
            # and the execute loop forwards it to the core once it has (see the module doc)
            key = bytes(goal_handle.goal_id.uuid)
            with self._lock:
                if key in self._finishing:
                    return CancelResponse.REJECT  # ending now: its result is on the way
                self._cancels.add(key)
            return CancelResponse.ACCEPT

        def execute_cb(goal_handle: Any) -> Any:
            return self._execute(e, goal_handle)

        server = ThreadedActionServer(
            self.node, action_cls, e.name, execute_callback=execute_cb,
            goal_callback=self._guarded(f"goal {e.name}", goal_cb, GoalResponse.REJECT),
            cancel_callback=self._guarded(f"cancel {e.name}", cancel_cb, CancelResponse.REJECT),
            callback_group=self.group)
        self._entities.append(server)

    def _settle(self, key: bytes, goal_handle: Any) -> bool:
        """Before a goal is ended: refuse cancels from now on and, when one was accepted just
        before, wait (bounded) until rclpy has moved the goal to CANCELING, so rclpy's own
        transition never meets an ended goal.  Returns ``is_cancel_requested``."""
        with self._lock:
            self._finishing.add(key)
            pending = key in self._cancels
        if pending:
            end = time.monotonic() + 1.0
            while not goal_handle.is_cancel_requested and time.monotonic() < end:
                time.sleep(0.001)
        return bool(goal_handle.is_cancel_requested)

    def _execute(self, e: Endpoint, goal_handle: Any) -> Any:
        key = bytes(goal_handle.goal_id.uuid)
        try:
            return self._execute_goal(e, goal_handle, key)
        finally:
            self._served_any = True
            with self._lock:
                self._server_goals.pop(key, None)
                self._cancels.discard(key)
                self._finishing.discard(key)

    def _execute_goal(self, e: Endpoint, goal_handle: Any, key: bytes) -> Any:
        try:
            goal = cv.from_ros(cv.T_GOAL, goal_handle.request)
        except cv.ConvertError as ex:
            self._settle(key, goal_handle)
            goal_handle.abort()
            return cv.to_ros(self.codec, cv.T_RESULT, SkillResult(
                str(getattr(goal_handle.request, "action_id", "")), "refused", f"refused: {ex}"))

        def feedback(f: Any) -> None:
            # runs on the core's loop thread; feedback is advisory
            try:
                if goal_handle.is_active:
                    goal_handle.publish_feedback(cv.to_ros(self.codec, cv.T_FEEDBACK, f))
            except Exception as ex:
                self._warn(e.name, f"feedback on {e.name} failed: {ex}")

        try:
            h = self.bus.send_goal(e.name, goal, feedback_cb=feedback)
        except Exception as ex:
            self._settle(key, goal_handle)
            goal_handle.abort()
            return cv.to_ros(self.codec, cv.T_RESULT,
                             SkillResult(goal.action_id, "refused", f"refused: {ex}"))
        with self._lock:
            self._server_goals[key] = h
        forwarded = False
        shutdown_at: float | None = None
        while True:
            if not forwarded and goal_handle.is_cancel_requested:
                forwarded = True
                h.cancel()  # the core stops the skill at its next control tick
            if h.wait(self.goal_poll_s):
                break
            if not self.closing.is_set():
                continue
            # shutting down: the core stops its goals ("node shutting down"); if it has
            # not within a second, cancel, and after two give up and abort here
            if shutdown_at is None:
                shutdown_at = time.monotonic()
            elapsed = time.monotonic() - shutdown_at
            if elapsed > 2.0:
                break
            if elapsed > 1.0:
                h.cancel()
        cancel_requested = self._settle(key, goal_handle)
        result = h.result if isinstance(h.result, SkillResult) else SkillResult(
            goal.action_id, "stopped", "node shutting down")
        if not h.done:
            goal_handle.abort()
        elif h.status == GoalStatus.SUCCEEDED:
            goal_handle.succeed()
        elif h.status == GoalStatus.CANCELED and cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return cv.to_ros(self.codec, cv.T_RESULT, result)

    # actions: calling (planner node) ----------------------------------------------------------
    def wait_for_action_servers(self, timeout_s: float, stop: threading.Event
                                ) -> list[str]:
        """Wait (bounded; ends on ``stop``) until every action client has matched its server;
        the names still without one.  Not on the executor thread: it would hold every callback.
        A goal sent before the match is refused ("no action server"), and a planner that
        answers at once can spend its refusal budget before discovery ends on a loaded
        machine."""
        if threading.get_ident() == self.executor_thread:
            raise TransportError("wait_for_action_servers on the executor thread would block it")
        end = time.monotonic() + timeout_s
        while True:
            missing = [n for n, c in self.action_clients.items() if not c.server_is_ready()]
            if not missing or stop.is_set() or time.monotonic() >= end:
                return missing
            stop.wait(0.05)

    def _add_action_client(self, e: Endpoint) -> None:
        client = ActionClient(self.node, _action_class(e.type), e.name,
                              callback_group=self.group)
        self._entities.append(client)
        self.action_clients[e.name] = client
        caller = ActionCaller(client, e.name, self.codec, self._sent_goals, self._guarded,
                              self._warn, self.closing, lambda: self.service_timeout_s)
        self.bus.create_action_server(BusActionServer(
            e.name, e.type, caller.on_goal, caller.on_cancel,
            rejected_result=lambda reason: SkillResult("", "refused", reason)),
            node=BRIDGE_NODE)

    # ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop forwarding and refuse new goals.  Running goals end with a result: the core
        stops them at shutdown (outcome ``stopped``); one it leaves running is cancelled after
        a second and aborted after two."""
        self.closing.set()

    @property
    def running_goals(self) -> int:
        with self._lock:
            return len(self._server_goals)

    def wait_for_goals(self, timeout_s: float) -> None:
        """At shutdown, after :meth:`close`: wait (bounded) until every goal this node serves
        has ended, then a little longer.  rclpy sends a goal's result response from an
        executor task it schedules after the execute callback returned, and exposes no way to
        see it sent, so the executor keeps spinning for ``RESULT_GRACE_S`` more."""
        end = time.monotonic() + timeout_s
        had = self.running_goals > 0 or self._served_any
        while self.running_goals and time.monotonic() < end:
            time.sleep(0.01)
        if had:
            time.sleep(RESULT_GRACE_S)


__all__ = ["BRIDGE_NODE", "Bridge", "error_response", "ros_qos"]
