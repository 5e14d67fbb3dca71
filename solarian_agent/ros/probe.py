"""A node of one's own on the running graph (rclpy): the ROS benchmarks and the graph tests
watch topics, call services and send skill goals through it.  Its own context, in the graph's
domain, spun on its own thread; every wait has a timeout."""

from __future__ import annotations

import threading
import time
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
    """A node on its own context in the graph's domain (None: ROS_DOMAIN_ID's)."""

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
        self.thread = threading.Thread(target=self.executor.spin, name="probe-spin",
                                       daemon=True)
        self.thread.start()
        self._subs: dict[tuple[str, str], Any] = {}

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self.thread.join(5.0)

    # topics --------------------------------------------------------------------------------
    def listen(self, typename: str, topic: str, qos_name: str = "reliable") -> list[Any]:
        """Every message on ``topic`` from now on (a list the subscription appends to)."""
        key = (topic, qos_name)
        if key not in self._subs:
            got: list[Any] = []
            sub = self.node.create_subscription(ros_type(typename), topic, got.append,
                                                qos(qos_name))
            self._subs[key] = (sub, got)
        return self._subs[key][1]  # type: ignore[no-any-return]

    def messages(self, typename: str, topic: str, qos_name: str = "reliable", count: int = 1,
                 timeout_s: float = 30.0) -> list[Any]:
        got: list[Any] = []
        done = threading.Event()

        def cb(m: Any) -> None:
            got.append(m)
            if len(got) >= count:
                done.set()

        sub = self.node.create_subscription(ros_type(typename), topic, cb, qos(qos_name))
        try:
            done.wait(timeout_s)
        finally:
            self.node.destroy_subscription(sub)
        return got[:count]  # callbacks run on several threads: one more may have come in

    def publisher(self, typename: str, topic: str, qos_name: str = "reliable") -> Any:
        pub = self.node.create_publisher(ros_type(typename), topic, qos(qos_name))
        return pub

    # services ------------------------------------------------------------------------------
    def call(self, typename: str, name: str, timeout_s: float = 30.0, **fields: Any) -> Any:
        cls = ros_type(typename)
        client = self.node.create_client(cls, name)
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"no service {name}"
            done = threading.Event()
            fut = client.call_async(cls.Request(**fields))
            fut.add_done_callback(lambda _f: done.set())
            assert done.wait(timeout_s), f"{name} did not answer within {timeout_s} s"
            return fut.result()
        finally:
            self.node.destroy_client(client)

    # actions -------------------------------------------------------------------------------
    def action_client(self, name: str, timeout_s: float = 30.0) -> Any:
        from rclpy.action import ActionClient

        client = ActionClient(self.node, ros_type("solarian_agent/action/Skill"), name)
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
        assert got, "no latched skills/generation"
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
