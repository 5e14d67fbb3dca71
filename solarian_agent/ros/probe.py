"""A node of one's own on the running graph (rclpy): the ROS benchmarks and the graph tests
watch topics, call services and send skill goals through it.  Its own context, in the graph's
domain, spun on its own thread; every wait has a timeout."""

from __future__ import annotations

import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from .ros_types import interface_class


def qos(name: str) -> QoSProfile:
    """``sensor`` (best effort, depth 1), ``latched`` (transient local, depth 1) or reliable
    (depth 100)."""
    if name == "sensor":
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                          reliability=ReliabilityPolicy.BEST_EFFORT,
                          durability=DurabilityPolicy.VOLATILE)
    if name == "latched":
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                          reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def ros_type(name: str) -> Any:
    return interface_class(name)


class Probe:
    """A node on its own context in the graph's domain (None: ROS_DOMAIN_ID's).

    Concurrency: one thread spins the node; the caller's thread only waits on events.  Every
    subscription, client and action client is created and destroyed *on the spin thread* (as
    an executor task): rclpy's executor walks the node's entity lists between two waits, and a
    subscription or client destroyed from another thread in that window raised InvalidHandle
    out of ``spin()``, which ended the spin thread and left the probe deaf for the rest of the
    run (seen in CI: one camera frame, then nothing).  An error out of one spin is recorded in
    :attr:`spin_errors` and the loop goes on."""

    def __init__(self, domain: int | None, name: str = "test_probe", namespace: str = ""
                 ) -> None:
        self.context = rclpy.Context()
        if domain is None:
            rclpy.init(context=self.context)
        else:
            rclpy.init(context=self.context, domain_id=domain)
        self.node = Node(name, namespace=namespace or None, context=self.context)
        # one thread, as the nodes spin: the probe's callbacks only append or set an event
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spin_errors: list[str] = []
        self._closing = threading.Event()
        self.thread = threading.Thread(target=self._spin, name="probe-spin", daemon=True)
        self.thread.start()
        self._subs: dict[tuple[str, str], Any] = {}

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException, ShutdownException

        while not self._closing.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except (ExternalShutdownException, ShutdownException):
                return
            except Exception as e:  # noqa: BLE001 -- recorded; the probe keeps listening
                if self._closing.is_set():
                    return
                self.spin_errors.append(f"{type(e).__name__}: {e}")
                if len(self.spin_errors) <= 3:  # the first few in full, for the test's output
                    print(f"probe {self.node.get_name()}: an error out of spin_once (the probe "
                          f"goes on):\n{traceback.format_exc()}", file=sys.stderr, flush=True)

    def on_spin_thread(self, fn: Callable[[], Any], timeout_s: float = 10.0) -> Any:
        """Run ``fn`` on the spin thread (between two waits) and return what it returns."""
        if threading.current_thread() is self.thread:
            return fn()
        done = threading.Event()
        task = self.executor.create_task(fn)
        task.add_done_callback(lambda _t: done.set())
        if not done.wait(timeout_s):
            raise TimeoutError(f"the probe's spin thread did not run {fn!r} within "
                               f"{timeout_s} s (spin errors: {self.spin_errors})")
        return task.result()

    def subscribe(self, typename: str, topic: str, callback: Callable[[Any], None],
                  qos_name: str = "reliable") -> Any:
        cls = ros_type(typename)
        return self.on_spin_thread(
            lambda: self.node.create_subscription(cls, topic, callback, qos(qos_name)))

    def unsubscribe(self, sub: Any) -> None:
        self.on_spin_thread(lambda: self.node.destroy_subscription(sub))

    def close(self) -> None:
        if self._closing.is_set():
            return
        if self.spin_errors:
            warnings.warn(f"probe {self.node.get_name()}: {len(self.spin_errors)} error(s) out "
                          f"of spin_once, first: {self.spin_errors[0]}", RuntimeWarning,
                          stacklevel=2)
        self._closing.set()
        self.thread.join(5.0)  # the loop ends within one spin_once (0.1 s)
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()

    # topics --------------------------------------------------------------------------------
    def listen(self, typename: str, topic: str, qos_name: str = "reliable") -> list[Any]:
        """Every message on ``topic`` from now on (a list the subscription appends to)."""
        key = (topic, qos_name)
        if key not in self._subs:
            got: list[Any] = []
            self._subs[key] = (self.subscribe(typename, topic, got.append, qos_name), got)
        return self._subs[key][1]  # type: ignore[no-any-return]

    def messages(self, typename: str, topic: str, qos_name: str = "reliable", count: int = 1,
                 timeout_s: float = 30.0) -> list[Any]:
        got: list[Any] = []
        done = threading.Event()

        def cb(m: Any) -> None:
            got.append(m)
            if len(got) >= count:
                done.set()

        sub = self.subscribe(typename, topic, cb, qos_name)
        try:
            done.wait(timeout_s)
        finally:
            self.unsubscribe(sub)
        return got[:count]  # one more may have come in before the subscription went

    def publisher(self, typename: str, topic: str, qos_name: str = "reliable") -> Any:
        cls = ros_type(typename)
        return self.on_spin_thread(lambda: self.node.create_publisher(cls, topic, qos(qos_name)))

    # services ------------------------------------------------------------------------------
    def call(self, typename: str, name: str, timeout_s: float = 30.0, **fields: Any) -> Any:
        cls = ros_type(typename)
        client = self.on_spin_thread(lambda: self.node.create_client(cls, name))
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"no service {name}"
            done = threading.Event()
            fut = client.call_async(cls.Request(**fields))
            fut.add_done_callback(lambda _f: done.set())
            assert done.wait(timeout_s), f"{name} did not answer within {timeout_s} s"
            return fut.result()
        finally:
            self.on_spin_thread(lambda: self.node.destroy_client(client))

    # actions -------------------------------------------------------------------------------
    def action_client(self, name: str, timeout_s: float = 30.0) -> Any:
        from rclpy.action import ActionClient

        cls = ros_type("solarian_agent/action/Skill")
        client = self.on_spin_thread(lambda: ActionClient(self.node, cls, name))
        assert client.wait_for_server(timeout_sec=timeout_s), f"no action server {name}"
        return client

    def goal(self, tool: str, params: str, generation: int, action_id: str) -> Any:
        return ros_type("solarian_agent/action/Skill").Goal(
            tool=tool, params_json=params, generation=generation, action_id=action_id)

    def send_goal(self, client: Any, goal: Any, feedback: list[Any] | None = None,
                  timeout_s: float = 30.0) -> Any:
        done = threading.Event()
        fut = client.send_goal_async(
            goal, feedback_callback=(lambda f: feedback.append((time.monotonic(), f.feedback)))
            if feedback is not None else None)
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "the goal was not answered"
        gh = fut.result()
        assert gh is not None and gh.accepted, "the goal was rejected"
        return gh

    @staticmethod
    def result(goal_handle: Any, timeout_s: float = 30.0) -> Any:
        done = threading.Event()
        fut = goal_handle.get_result_async()
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "no result in time"
        return fut.result()

    def generation(self, timeout_s: float = 30.0) -> int:
        got = self.messages("solarian_agent/msg/Generation", "skills/generation", "latched",
                            timeout_s=timeout_s)
        assert got, (f"no latched skills/generation (probe spin thread alive: "
                     f"{self.thread.is_alive()}, spin errors: {self.spin_errors})")
        return int(got[-1].value)

    # the graph -----------------------------------------------------------------------------
    def node_names(self) -> set[str]:
        return {f"{ns.rstrip('/')}/{n}" for n, ns in
                self.node.get_node_names_and_namespaces()}

    def wait_for_nodes(self, names: Sequence[str], timeout_s: float = 60.0) -> set[str]:
        """Wait until every fully qualified node name is in the graph; the ones missing."""
        want = set(names)
        wait_until(lambda: want <= self.node_names(), timeout_s, 0.2)
        return want - self.node_names()


def wait_until(pred: Callable[[], Any], timeout_s: float, poll_s: float = 0.05) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(poll_s)
    return bool(pred())


__all__ = ["Probe", "qos", "ros_type", "wait_until"]
