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
                   the result and cancels are mapped onto the core's GoalHandle
=================  =========================================================================

Threading: every ROS callback runs in one ReentrantCallbackGroup on a MultiThreadedExecutor;
callbacks only convert and hand over (the core's inputs only queue).  A skill goal's
execute callback waits on the core's GoalHandle with a short timeout and re-checks shutdown,
never on a ROS future.  Every wait has a timeout.  :meth:`Bridge.close` aborts the goals still
running with a result (outcome ``stopped``, "node shutting down").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..core import names
from ..core.errors import ServiceTimeoutError, ServiceUnavailableError, TransportError
from ..core.messages import SkillResult
from ..core.transport import ActionServer as BusActionServer
from ..core.transport import Bus, GoalHandle, GoalStatus, QoS
from . import convert as cv
from .graph import Endpoint

BRIDGE_NODE = "ros_bridge"

# action_msgs/msg/GoalStatus
_STATUS_SUCCEEDED = 4
_STATUS_CANCELED = 5


def ros_qos(q: QoS) -> QoSProfile:
    """The core's QoS as an rclpy profile (KEEP_LAST ``depth``)."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=q.depth,
        reliability=ReliabilityPolicy.BEST_EFFORT if q.best_effort
        else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if q.transient_local
        else DurabilityPolicy.VOLATILE)


def _service_class(typename: str) -> Any:
    from rosidl_runtime_py.utilities import get_service

    return get_service(typename)


def _action_class(typename: str) -> Any:
    from rosidl_runtime_py.utilities import get_action

    return get_action(typename)


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
        self.codec = codec or cv.rclpy_codec()
        self.service_timeout_s = service_timeout_s
        self.goal_poll_s = goal_poll_s
        self.group = ReentrantCallbackGroup()
        self.log = node.get_logger()
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._server_goals: dict[bytes, GoalHandle] = {}
        self._client_goals: dict[str, dict[str, Any]] = {}
        self._entities: list[Any] = []
        self._warned: dict[str, float] = {}

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
            self.codec.cls(e.type), e.name, receive, ros_qos(e.qos),
            callback_group=self.group))

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
                return cv.to_ros(self.codec, resp_t, error_response(e.type, str(ex)))

        self._entities.append(self.node.create_service(
            _service_class(e.type), e.name, handle, callback_group=self.group))

    def _add_client(self, e: Endpoint) -> None:
        req_t, resp_t = f"{e.type}_Request", f"{e.type}_Response"
        client = self.node.create_client(_service_class(e.type), e.name,
                                         callback_group=self.group)
        self._entities.append(client)

        def call(request: Any) -> Any:
            # runs on a node loop thread (planner / monitor tick), never in a ROS callback
            if self.closing.is_set():
                raise ServiceUnavailableError(f"{e.name}: node shutting down")
            if not client.service_is_ready() and not client.wait_for_service(
                    timeout_sec=min(1.0, self.service_timeout_s)):
                raise ServiceUnavailableError(f"no server for service {e.name!r} in the graph")
            done = threading.Event()
            future = client.call_async(cv.to_ros(self.codec, req_t, request))
            future.add_done_callback(lambda _f: done.set())
            if not done.wait(self.service_timeout_s):
                remove = getattr(client, "remove_pending_request", None)
                if remove is not None:
                    remove(future)
                raise ServiceTimeoutError(f"service {e.name!r} did not answer within "
                                          f"{self.service_timeout_s:g} s")
            reply = future.result()
            if reply is None:
                raise ServiceUnavailableError(f"service {e.name!r} returned no reply")
            return cv.from_ros(resp_t, reply)

        self.bus.create_service(e.name, e.type, call, node=BRIDGE_NODE)

    # actions: serving (skills node) -----------------------------------------------------------
    def _add_action_server(self, e: Endpoint) -> None:
        action_cls = _action_class(e.type)

        def goal_cb(_goal_request: Any) -> GoalResponse:
            # every well-formed goal is accepted: refusals come back as a result with a reason
            return GoalResponse.REJECT if self.closing.is_set() else GoalResponse.ACCEPT

        def cancel_cb(goal_handle: Any) -> CancelResponse:
            with self._lock:
                h = self._server_goals.get(bytes(goal_handle.goal_id.uuid))
            if h is None:  # not handed to the core yet: execute sees is_cancel_requested
                return CancelResponse.ACCEPT
            return CancelResponse.ACCEPT if h.cancel() else CancelResponse.REJECT

        def execute_cb(goal_handle: Any) -> Any:
            return self._execute(e, goal_handle)

        server = ActionServer(self.node, action_cls, e.name, execute_callback=execute_cb,
                              goal_callback=goal_cb, cancel_callback=cancel_cb,
                              callback_group=self.group)
        self._entities.append(server)

    def _execute(self, e: Endpoint, goal_handle: Any) -> Any:
        key = bytes(goal_handle.goal_id.uuid)
        try:
            goal = cv.from_ros(cv.T_GOAL, goal_handle.request)
        except cv.ConvertError as ex:
            goal_handle.abort()
            return cv.to_ros(self.codec, cv.T_RESULT, SkillResult(
                str(getattr(goal_handle.request, "action_id", "")), "refused", f"refused: {ex}"))

        def feedback(f: Any) -> None:
            if goal_handle.is_active:
                try:
                    goal_handle.publish_feedback(cv.to_ros(self.codec, cv.T_FEEDBACK, f))
                except Exception as ex:  # feedback is advisory
                    self._warn(e.name, f"feedback on {e.name} failed: {ex}")

        try:
            h = self.bus.send_goal(e.name, goal, feedback_cb=feedback)
        except Exception as ex:
            goal_handle.abort()
            return cv.to_ros(self.codec, cv.T_RESULT,
                             SkillResult(goal.action_id, "refused", f"refused: {ex}"))
        with self._lock:
            self._server_goals[key] = h
        try:
            if goal_handle.is_cancel_requested:
                h.cancel()
            shutdown_at: float | None = None
            while not h.wait(self.goal_poll_s):
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
            result = h.result if isinstance(h.result, SkillResult) else SkillResult(
                goal.action_id, "stopped", "node shutting down")
            if not h.done:
                goal_handle.abort()
            elif h.status == GoalStatus.SUCCEEDED:
                goal_handle.succeed()
            elif h.status == GoalStatus.CANCELED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            return cv.to_ros(self.codec, cv.T_RESULT, result)
        finally:
            with self._lock:
                self._server_goals.pop(key, None)

    # actions: calling (planner node) ----------------------------------------------------------
    def _add_action_client(self, e: Endpoint) -> None:
        client = ActionClient(self.node, _action_class(e.type), e.name,
                              callback_group=self.group)
        self._entities.append(client)

        def finish(h: GoalHandle, how: str, result: Any) -> None:
            try:
                getattr(h, how)(result)
            except TransportError:
                pass  # already ended (a race with a refusal or a cancel)

        def on_goal(h: GoalHandle) -> str | None:
            if self.closing.is_set():
                return "refused: node shutting down"
            if not client.server_is_ready():
                return (f"refused: no action server for {e.name} in the graph (is the skills "
                        "node running?)")
            state: dict[str, Any] = {"ros": None, "cancel": False}
            with self._lock:
                self._client_goals[h.goal_id] = state
            action_id = str(getattr(h.goal, "action_id", ""))

            def on_feedback(fb: Any) -> None:
                try:
                    f = cv.from_ros(cv.T_FEEDBACK, fb.feedback)
                except cv.ConvertError:
                    return
                h.execute()
                h.publish_feedback(f)

            def on_result(fut: Any) -> None:
                with self._lock:
                    self._client_goals.pop(h.goal_id, None)
                res = fut.result()
                if res is None:
                    finish(h, "abort", SkillResult(action_id, "failed", "no result"))
                    return
                try:
                    r = cv.from_ros(cv.T_RESULT, res.result)
                except cv.ConvertError as ex:
                    r = SkillResult(action_id, "failed", str(ex))
                h.execute()
                if res.status == _STATUS_SUCCEEDED:
                    finish(h, "succeed", r)
                elif res.status == _STATUS_CANCELED:
                    finish(h, "canceled", r)
                else:
                    finish(h, "abort", r)

            def on_response(fut: Any) -> None:
                gh = fut.result()
                if gh is None or not gh.accepted:
                    with self._lock:
                        self._client_goals.pop(h.goal_id, None)
                    finish(h, "abort", SkillResult(action_id, "refused",
                                                   f"refused: {e.name} rejected the goal"))
                    return
                state["ros"] = gh
                if state["cancel"]:
                    gh.cancel_goal_async()
                gh.get_result_async().add_done_callback(on_result)

            try:
                goal_msg = cv.to_ros(self.codec, cv.T_GOAL, h.goal)
            except cv.ConvertError as ex:
                return f"refused: {ex}"
            client.send_goal_async(goal_msg, feedback_callback=on_feedback).add_done_callback(
                on_response)
            return None

        def on_cancel(h: GoalHandle) -> bool:
            with self._lock:
                state = self._client_goals.get(h.goal_id)
            if state is None:
                return False
            if state["ros"] is not None:
                state["ros"].cancel_goal_async()
            else:
                state["cancel"] = True
            return True

        self.bus.create_action_server(BusActionServer(
            e.name, e.type, on_goal, on_cancel,
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


__all__ = ["BRIDGE_NODE", "Bridge", "error_response", "ros_qos"]
