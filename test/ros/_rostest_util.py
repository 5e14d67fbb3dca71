"""Helpers for the launch_testing tests: a test-side rclpy node spun on its own thread, and
bounded waits for messages, services and actions (never a wait without a timeout)."""

from __future__ import annotations

import threading
import time
from typing import Any

import rclpy
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

SENSOR = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                    reliability=ReliabilityPolicy.BEST_EFFORT,
                    durability=DurabilityPolicy.VOLATILE)
LATCHED = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
RELIABLE = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def msg_type(name: str) -> Any:
    from rosidl_runtime_py.utilities import get_message

    return get_message(name)


def srv_type(name: str) -> Any:
    from rosidl_runtime_py.utilities import get_service

    return get_service(name)


def action_type(name: str) -> Any:
    from rosidl_runtime_py.utilities import get_action

    return get_action(name)


class Probe:
    """The test's own node."""

    def __init__(self, name: str = "test_probe") -> None:
        if not rclpy.ok():
            rclpy.init()
        self.node = Node(name)
        self.executor = MultiThreadedExecutor(num_threads=4)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown()

    def messages(self, typename: str, topic: str, qos: QoSProfile, count: int = 1,
                 timeout_s: float = 30.0) -> list[Any]:
        got: list[Any] = []
        done = threading.Event()

        def cb(m: Any) -> None:
            got.append(m)
            if len(got) >= count:
                done.set()

        sub = self.node.create_subscription(msg_type(typename), topic, cb, qos)
        try:
            done.wait(timeout_s)
        finally:
            self.node.destroy_subscription(sub)
        return got

    def call(self, typename: str, name: str, request: Any = None, timeout_s: float = 30.0
             ) -> Any:
        cls = srv_type(typename)
        client = self.node.create_client(cls, name)
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"no service {name}"
            done = threading.Event()
            fut = client.call_async(request if request is not None else cls.Request())
            fut.add_done_callback(lambda _f: done.set())
            assert done.wait(timeout_s), f"{name} did not answer within {timeout_s} s"
            return fut.result()
        finally:
            self.node.destroy_client(client)

    def action_client(self, name: str) -> ActionClient:
        client = ActionClient(self.node, action_type("solarian_agent/action/Skill"), name)
        assert client.wait_for_server(timeout_sec=30.0), f"no action server {name}"
        return client

    def send_goal(self, client: ActionClient, goal: Any, feedback: list[Any] | None = None,
                  timeout_s: float = 10.0) -> Any:
        done = threading.Event()
        fut = client.send_goal_async(
            goal, feedback_callback=(lambda f: feedback.append((time.monotonic(), f.feedback)))
            if feedback is not None else None)
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "the goal was not answered"
        gh = fut.result()
        assert gh is not None and gh.accepted
        return gh

    @staticmethod
    def result(goal_handle: Any, timeout_s: float = 30.0) -> Any:
        done = threading.Event()
        fut = goal_handle.get_result_async()
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "no result in time"
        return fut.result()

    def generation(self) -> int:
        (g,) = self.messages("solarian_agent/msg/Generation", "skills/generation", LATCHED)
        return int(g.value)

    def wait_until(self, pred: Any, timeout_s: float, poll_s: float = 0.1) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if pred():
                return True
            time.sleep(poll_s)
        return bool(pred())
