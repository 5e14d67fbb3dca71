"""A stand-in for the small part of rclpy the bridge uses, kept only for the faults real rclpy
cannot produce on demand (test_bridge_fake.py): ``cancel_delay_s`` (rclpy applies an accepted
cancel, CANCELING, only some time after the cancel callback returned, and a goal may end in
between), ``goal_response_delay_s`` and ``lose_results`` (rclpy's action client can lose or
delay a response, ros2/rclpy#1123), and an action server removed between a goal and its
cancel.  It is not rclpy: it delivers through one in-memory graph, runs callbacks on worker
threads (like a MultiThreadedExecutor), serializes every message through CDR with the rosbags
classes, and enforces what rclpy enforces where the bridge depends on it (a goal may only end
CANCELED after a cancel was accepted; a service reply must be of the response type; an
exception out of a callback would stop rclpy's executor: collected in ``GRAPH.errors``).
Everything else runs on real rclpy (test_bridge.py, test_common.py, test_graph_*.py).
"""

from __future__ import annotations

import concurrent.futures as cf
import enum
import itertools
import threading
import types
import uuid
from collections import defaultdict
from typing import Any

from solarian_agent.rosmsg.interfaces import typestore


class Future:
    def __init__(self) -> None:
        self._done = threading.Event()
        self._result: Any = None
        self._cbs: list[Any] = []
        self._lock = threading.Lock()

    def set_result(self, value: Any) -> None:
        with self._lock:
            self._result = value
            self._done.set()
            cbs, self._cbs = self._cbs, []
        for cb in cbs:
            GRAPH.submit(cb, self)

    def add_done_callback(self, cb: Any) -> None:
        with self._lock:
            if not self._done.is_set():
                self._cbs.append(cb)
                return
        GRAPH.submit(cb, self)

    def result(self) -> Any:
        return self._result

    def done(self) -> bool:
        return self._done.is_set()


class Graph:
    def __init__(self) -> None:
        self.pool = cf.ThreadPoolExecutor(max_workers=32, thread_name_prefix="fake-exec")
        self.store = typestore()
        self.subs: dict[str, list[tuple[str, Any, Any]]] = defaultdict(list)
        self.latched: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
        self.services: dict[str, Any] = {}
        self.actions: dict[str, Any] = {}
        self.published: dict[str, int] = defaultdict(int)
        # what rclpy would raise inside its executor (and so stop spinning): must stay empty
        self.errors: list[str] = []
        # the time between a cancel callback returning ACCEPT and rclpy applying it
        self.cancel_delay_s = 0.0
        # rclpy/#1123: the action client can lose a response (taken by the executor before
        # the request was registered); here a goal response comes late, result requests lost
        self.goal_response_delay_s = 0.0
        self.lose_results = 0

    def submit(self, fn: Any, *args: Any) -> None:
        """Run a callback on a worker thread; an exception is recorded, as rclpy's
        MultiThreadedExecutor would re-raise it out of spin()."""

        def run() -> None:
            try:
                fn(*args)
            except Exception as e:
                self.errors.append(f"{getattr(fn, '__name__', fn)}: {type(e).__name__}: {e}")

        self.pool.submit(run)

    def cdr(self, msg: Any) -> Any:
        t = msg.__msgtype__
        return self.store.deserialize_cdr(self.store.serialize_cdr(msg, t), t)


GRAPH = Graph()


def reset() -> None:
    global GRAPH
    GRAPH.pool.shutdown(wait=False, cancel_futures=True)
    GRAPH = Graph()


class _Logger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, t: str) -> None:
        self.lines.append(t)

    warning = error = debug = info


class _Publisher:
    def __init__(self, name: str, qos: Any) -> None:
        self.name = name
        self.qos = qos

    def publish(self, msg: Any) -> None:
        msg = GRAPH.cdr(msg)
        GRAPH.published[self.name] += 1
        if self.qos.durability == DurabilityPolicy.TRANSIENT_LOCAL:
            GRAPH.latched[self.name] = [msg]
        for _t, cb, _q in list(GRAPH.subs[self.name]):
            GRAPH.submit(cb, msg)


class _Client:
    def __init__(self, cls: Any, name: str) -> None:
        self.cls = cls
        self.name = name

    def service_is_ready(self) -> bool:
        return self.name in GRAPH.services

    def wait_for_service(self, timeout_sec: float = 0.0) -> bool:
        ev = threading.Event()
        end = timeout_sec
        while end > 0 and not self.service_is_ready():
            ev.wait(0.01)
            end -= 0.01
        return self.service_is_ready()

    def call_async(self, request: Any) -> Future:
        fut = Future()
        handler, cls = GRAPH.services[self.name]
        req = GRAPH.cdr(request)

        def run() -> None:
            resp = handler(req, cls.Response())
            assert resp.__msgtype__ == cls.Response.__msgtype__, "wrong response type"
            fut.set_result(GRAPH.cdr(resp))

        GRAPH.submit(run)
        return fut

    def remove_pending_request(self, fut: Future) -> None:
        pass


class ParameterException(Exception):
    pass


class InvalidParameterTypeException(ParameterException):
    pass


class ParameterDescriptor:
    def __init__(self, description: str = "", dynamic_typing: bool = False) -> None:
        self.description = description
        self.dynamic_typing = dynamic_typing


def _param_type(value: Any) -> str:
    # rclpy's Parameter.Type.from_parameter_value: bool, int and float are distinct types
    if isinstance(value, (list, tuple)):
        return f"{_param_type(value[0]) if value else 'byte'}_array"
    return {bool: "bool", int: "integer", float: "double", str: "string"}[type(value)]


class Node:
    def __init__(self, name: str, parameter_overrides: dict[str, Any] | None = None) -> None:
        self.name = name
        self.log = _Logger()
        self.overrides = dict(parameter_overrides or {})
        self.parameters: dict[str, Any] = {}
        self.destroyed = False

    def get_logger(self) -> _Logger:
        return self.log

    def get_name(self) -> str:
        return self.name

    def destroy_node(self) -> None:
        self.destroyed = True

    # parameters, statically typed as in rclpy (the default's type; no int -> double)
    def has_parameter(self, name: str) -> bool:
        return name in self.parameters

    def declare_parameter(self, name: str, value: Any, descriptor: Any = None) -> Any:
        if name in self.overrides:
            given = self.overrides[name]
            if not (descriptor and descriptor.dynamic_typing) and \
                    _param_type(given) != _param_type(value):
                raise InvalidParameterTypeException(
                    f"Trying to set parameter '{name}' to '{given}' of type "
                    f"'{_param_type(given).upper()}', expecting type "
                    f"'{_param_type(value).upper()}'")
            value = given
        self.parameters[name] = value
        return types.SimpleNamespace(value=value)

    def get_parameter(self, name: str) -> Any:
        return types.SimpleNamespace(value=self.parameters[name])

    def create_publisher(self, cls: Any, name: str, qos: Any) -> _Publisher:
        return _Publisher(name, qos)

    def create_subscription(self, cls: Any, name: str, cb: Any, qos: Any,
                            callback_group: Any = None) -> Any:
        incompatible = (qos.reliability == ReliabilityPolicy.RELIABLE
                        and name.endswith("image_raw"))
        assert not incompatible, f"{name}: reliable subscription to a best-effort camera"
        GRAPH.subs[name].append((cls.__msgtype__, cb, qos))
        if qos.durability == DurabilityPolicy.TRANSIENT_LOCAL:
            for m in GRAPH.latched.get(name, []):
                GRAPH.submit(cb, m)
        return (name, cb)

    def create_service(self, cls: Any, name: str, cb: Any, callback_group: Any = None) -> Any:
        assert name not in GRAPH.services, f"two servers for {name}"
        GRAPH.services[name] = (cb, cls)
        return name

    def create_client(self, cls: Any, name: str, callback_group: Any = None) -> _Client:
        return _Client(cls, name)


# ------------------------------------------------------------------------------------------
# actions
# ------------------------------------------------------------------------------------------
class GoalResponse(enum.Enum):
    REJECT = 1
    ACCEPT = 2


class CancelResponse(enum.Enum):
    REJECT = 1
    ACCEPT = 2


class _ServerGoalHandle:
    _ids = itertools.count()

    def __init__(self, server: ActionServer, request: Any) -> None:
        self.server = server
        self.request = request
        self.goal_id = types.SimpleNamespace(uuid=list(uuid.uuid4().bytes))
        self.status = 2  # EXECUTING
        self.feedback_cb: Any = None
        self.result_future = Future()
        self._lock = threading.Lock()

    @property
    def is_active(self) -> bool:
        return self.status in (1, 2, 3)

    @property
    def is_cancel_requested(self) -> bool:  # as rclpy: the goal is CANCELING
        return self.status == 3

    def publish_feedback(self, fb: Any) -> None:
        fb = GRAPH.cdr(fb)
        if self.feedback_cb is not None:
            GRAPH.submit(self.feedback_cb, types.SimpleNamespace(feedback=fb))

    def _update(self, status: int) -> None:
        # rcl_action's state machine: a terminal goal takes no further event
        with self._lock:
            if not self.is_active:
                raise RuntimeError(f"goal_handle attempted invalid transition from state "
                                   f"{self.status} to {status}")
            self.status = status

    def succeed(self) -> None:
        self._update(4)

    def canceled(self) -> None:
        assert self.is_cancel_requested, "rclpy: canceled() needs an accepted cancel request"
        self._update(5)

    def abort(self) -> None:
        self._update(6)


class _ClientGoalHandle:
    def __init__(self, sgh: _ServerGoalHandle | None) -> None:
        self.sgh = sgh
        self.accepted = sgh is not None

    @property
    def status(self) -> int:  # as rclpy: kept up to date from the status topic
        assert self.sgh is not None
        return self.sgh.status

    def get_result_async(self) -> Future:
        assert self.sgh is not None
        if GRAPH.lose_results > 0:
            GRAPH.lose_results -= 1
            return Future()  # never completes
        return self.sgh.result_future

    def cancel_goal_async(self) -> Future:
        assert self.sgh is not None
        sgh = self.sgh
        fut = Future()

        def run() -> None:
            if not sgh.is_active:
                fut.set_result("rejected")
                return
            r = sgh.server.cancel_callback(sgh)
            if r == CancelResponse.ACCEPT:
                if GRAPH.cancel_delay_s:
                    threading.Event().wait(GRAPH.cancel_delay_s)
                try:  # rclpy: goal_handle._update_state(GoalEvent.CANCEL_GOAL)
                    sgh._update(3)
                except RuntimeError as e:
                    # in rclpy this raises inside the executor: no cancel response is sent
                    GRAPH.errors.append(f"cancel of an ended goal: {e}")
                    return
            fut.set_result(r)

        GRAPH.submit(run)
        return fut


class ActionServer:
    def __init__(self, node: Node, cls: Any, name: str, execute_callback: Any,
                 goal_callback: Any, cancel_callback: Any, callback_group: Any = None) -> None:
        self.cls = cls
        self.name = name
        self.execute_callback = execute_callback
        self.goal_callback = goal_callback
        self.cancel_callback = cancel_callback
        assert name not in GRAPH.actions
        GRAPH.actions[name] = self


class ActionClient:
    def __init__(self, node: Node, cls: Any, name: str, callback_group: Any = None) -> None:
        self.cls = cls
        self.name = name

    def server_is_ready(self) -> bool:
        return self.name in GRAPH.actions

    def send_goal_async(self, goal: Any, feedback_callback: Any = None) -> Future:
        fut = Future()
        server = GRAPH.actions[self.name]
        goal = GRAPH.cdr(goal)

        def run() -> None:
            if server.goal_callback(goal) != GoalResponse.ACCEPT:
                fut.set_result(_ClientGoalHandle(None))
                return
            sgh = _ServerGoalHandle(server, goal)
            sgh.feedback_cb = feedback_callback
            if GRAPH.goal_response_delay_s:
                delay = GRAPH.goal_response_delay_s
                threading.Timer(delay, fut.set_result, (_ClientGoalHandle(sgh),)).start()
            else:
                fut.set_result(_ClientGoalHandle(sgh))
            result = server.execute_callback(sgh)
            with sgh._lock:
                if sgh.is_active:  # rclpy aborts a goal the callback left running
                    sgh.status = 6
            sgh.result_future.set_result(types.SimpleNamespace(status=sgh.status,
                                                               result=GRAPH.cdr(result)))

        GRAPH.submit(run)
        return fut


# ------------------------------------------------------------------------------------------
# qos, groups, rosidl utilities
# ------------------------------------------------------------------------------------------
class HistoryPolicy(enum.Enum):
    KEEP_LAST = 1


class ReliabilityPolicy(enum.Enum):
    RELIABLE = 1
    BEST_EFFORT = 2


class DurabilityPolicy(enum.Enum):
    TRANSIENT_LOCAL = 1
    VOLATILE = 2


class QoSProfile:
    def __init__(self, history: Any, depth: int, reliability: Any, durability: Any) -> None:
        self.history, self.depth = history, depth
        self.reliability, self.durability = reliability, durability


class ReentrantCallbackGroup:
    pass


def _classes(kind: str, name: str, parts: tuple[str, ...]) -> Any:
    from solarian_agent.rosmsg.codec import rosbags_codec

    codec = rosbags_codec(GRAPH.store)

    def maker(t: str) -> Any:
        cls = GRAPH.store.types[t]

        def make(**kw: Any) -> Any:
            return codec.new(t, **kw)

        make.__msgtype__ = cls.__msgtype__  # type: ignore[attr-defined]
        return make

    return types.SimpleNamespace(**{p: maker(f"{name}_{p}") for p in parts})


class MultiThreadedExecutor:
    """Only what the node shells call; ``spin`` runs ``spin_fn`` (tests make it fail)."""

    spin_fn: Any = None

    def __init__(self, num_threads: int | None = None) -> None:
        self.num_threads = num_threads
        self.nodes: list[Any] = []
        self._stop = threading.Event()

    def add_node(self, node: Any) -> None:
        self.nodes.append(node)

    def spin(self) -> None:
        if MultiThreadedExecutor.spin_fn is not None:
            MultiThreadedExecutor.spin_fn()
        self._stop.wait()

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        self._stop.set()
        return True


def modules() -> dict[str, types.ModuleType]:
    """The fake modules to put in sys.modules."""
    mods = {n: types.ModuleType(n) for n in (
        "rclpy", "rclpy.action", "rclpy.callback_groups", "rclpy.node", "rclpy.qos",
        "rclpy.service",
        "rclpy.executors", "rclpy.exceptions", "rcl_interfaces", "rcl_interfaces.msg",
        "solarian_agent.ros.ros_types")}
    r = mods["rclpy"]
    r.ok = lambda: True
    r.try_shutdown = lambda: None
    mods["rclpy.executors"].MultiThreadedExecutor = MultiThreadedExecutor
    ex = mods["rclpy.exceptions"]
    ex.ParameterException = ParameterException
    ex.InvalidParameterTypeException = InvalidParameterTypeException
    mods["rcl_interfaces.msg"].ParameterDescriptor = ParameterDescriptor
    a = mods["rclpy.action"]
    a.ActionClient, a.ActionServer = ActionClient, ActionServer
    a.CancelResponse, a.GoalResponse = CancelResponse, GoalResponse
    mods["rclpy.callback_groups"].ReentrantCallbackGroup = ReentrantCallbackGroup
    mods["rclpy.node"].Node = Node
    mods["rclpy.service"].Service = type("Service", (), {})  # (only the slow services use it)
    q = mods["rclpy.qos"]
    q.DurabilityPolicy, q.HistoryPolicy = DurabilityPolicy, HistoryPolicy
    q.QoSProfile, q.ReliabilityPolicy = QoSProfile, ReliabilityPolicy
    mods["solarian_agent.ros.ros_types"].interface_class = interface_class
    return mods


def interface_class(typename: str) -> Any:
    """What :func:`solarian_agent.ros.ros_types.interface_class` returns, for the fake."""
    kind = typename.split("/")[1]
    if kind == "srv":
        return _classes("srv", typename, ("Request", "Response"))
    if kind == "action":
        return _classes("action", typename, ("Goal", "Result", "Feedback"))
    return GRAPH.store.types[typename]
