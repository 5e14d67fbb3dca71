"""``chat``: a terminal chat client against the running graph.

Type a task and press Enter; ``/cancel`` and ``/reset`` go to the planner's services,
``/takeover [note]`` publishes an operator event (the executor stops the running skill at its
next tick and the planner pauses until the next message), ``/state`` prints the plan,
``/quit`` leaves.  The agent's replies, plan changes and action starts / ends are printed as
they arrive on ``agent/state`` and ``agent/events``.

Non-interactive use (scripts, tests): ``ros2 run solarian_agent chat --send "tidy up" --wait 300``
sends one message and exits when the run ends (status 0 when it succeeded).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.utilities import remove_ros_args

from ..core import names
from ..core.messages import AgentEvent, AgentState, OperatorEvent
from ..core.text import for_terminal
from ..core.transport import QoS
from . import convert as cv
from .bridge import ros_qos
from .graph import chat_node

FINAL = ("succeeded", "failed", "cancelled", "budget_exhausted")
SHOWN_EVENTS = ("action_started", "skill_ended", "tool_refused", "monitor_flag", "run_ended",
                "operator_takeover", "harness_error")


class ChatClient:
    def __init__(self, node: Node, out: Any = sys.stdout) -> None:
        self.node = node
        self.out = out
        self.codec = cv.rclpy_codec()
        self.state: AgentState | None = None
        self._seen_conv = 0
        self.changed = threading.Event()
        spec = {e.name: e for e in chat_node().endpoints}
        self.clients = {n: node.create_client(_srv(names.T_AGENT_COMMAND), n)
                        for n in (names.AGENT_MESSAGE, names.AGENT_CANCEL, names.AGENT_RESET)}
        e = spec[names.AGENT_STATE]
        node.create_subscription(self.codec.cls(e.type), e.name, self._safe(self._on_state),
                                 ros_qos(e.qos or QoS()))
        e = spec[names.AGENT_EVENTS]
        node.create_subscription(self.codec.cls(e.type), e.name, self._safe(self._on_event),
                                 ros_qos(e.qos or QoS()))
        e = spec[names.OPERATOR_EVENTS]
        self.operator = node.create_publisher(self.codec.cls(e.type), e.name,
                                              ros_qos(e.qos or QoS()))

    def print(self, text: str) -> None:
        """One message to the terminal; control characters in it escaped."""
        print(for_terminal(text, newlines=True), file=self.out, flush=True)

    def _safe(self, fn: Any) -> Any:
        # a malformed message must not raise into the executor (rclpy re-raises it out of
        # spin(), and the client would go deaf)
        def cb(msg: Any) -> None:
            try:
                fn(msg)
            except Exception as e:
                self.print(f"(dropped a message: {type(e).__name__}: {e})")

        return cb

    def _on_state(self, msg: Any) -> None:
        st = cv.from_ros(names.T_AGENT_STATE, msg)
        prev = self.state
        self.state = st
        conv = list(st.conversation)
        if len(conv) < self._seen_conv:
            self._seen_conv = 0
        for m in conv[self._seen_conv:]:
            if m.get("role") == "agent":
                self.print("agent> " + str(m.get("text", "")).replace("\n", "\n       "))
        self._seen_conv = len(conv)
        if prev is None or prev.status != st.status:
            self.print(f"[{st.status}] {st.task}")
        if prev is None or prev.plan != st.plan:
            self.print(render_plan(st))
        self.changed.set()

    def _on_event(self, msg: Any) -> None:
        ev: AgentEvent = cv.from_ros(names.T_AGENT_EVENT, msg)
        if ev.kind in SHOWN_EVENTS:
            d = ev.data
            what = d.get("tool") or d.get("skill") or ""
            extra = d.get("outcome") or d.get("reason") or d.get("summary") or ""
            self.print(f"  * {ev.kind} {d.get('action_id', '')} {what} {extra}".rstrip())

    def call(self, service: str, text: str = "", timeout_s: float = 5.0) -> dict[str, Any]:
        client = self.clients[service]
        if not client.wait_for_service(timeout_sec=timeout_s):
            return {"ok": False, "reason": f"no {service} service (is the planner running?)"}
        done = threading.Event()
        fut = client.call_async(cv.to_ros(self.codec, f"{names.T_AGENT_COMMAND}_Request",
                                          {"text": text, "by": "operator"}))
        fut.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s) or fut.result() is None:
            return {"ok": False, "reason": f"{service} did not answer within {timeout_s:g} s"}
        reply: dict[str, Any] = cv.from_ros(f"{names.T_AGENT_COMMAND}_Response", fut.result())
        return reply

    def takeover(self, note: str = "") -> None:
        ev = OperatorEvent("takeover", {"note": note} if note else {},
                           self.node.get_clock().now().nanoseconds * 1e-9)
        self.operator.publish(cv.to_ros(self.codec, names.T_OPERATOR_EVENT, ev))

    def handle(self, line: str) -> bool:
        """One input line; False to quit."""
        line = line.strip()
        if not line:
            return True
        if line in ("/quit", "/exit"):
            return False
        if line == "/state":
            self.print(render_plan(self.state) if self.state else "(no agent state yet)")
            return True
        if line.startswith("/takeover"):
            self.takeover(line[len("/takeover"):].strip())
            self.print("(operator takeover sent)")
            return True
        if line == "/cancel":
            r = self.call(names.AGENT_CANCEL)
        elif line == "/reset":
            r = self.call(names.AGENT_RESET)
        else:
            r = self.call(names.AGENT_MESSAGE, line)
        if not r.get("ok"):
            self.print(f"(not sent: {r.get('reason')})")
        return True


def _srv(typename: str) -> Any:
    from .ros_types import interface_class

    return interface_class(typename)


def render_plan(st: AgentState | None) -> str:
    if st is None:
        return "(no agent state yet)"
    lines = [f"plan ({st.status}, generation {st.generation}):"]
    for p in st.plan:
        tool = f" -> {p['tool']}" if p.get("tool") else ""
        lines.append(f"  {p.get('step')}. [{p.get('status')}] {p.get('description')}{tool}")
    if not st.plan:
        lines.append("  (no plan yet)")
    return "\n".join(lines)


def main(args: Sequence[str] | None = None) -> int:
    argv = list(sys.argv if args is None else args)
    ap = argparse.ArgumentParser(prog="ros2 run solarian_agent chat")
    ap.add_argument("--send", help="send this message and exit when the run ends")
    ap.add_argument("--wait", type=float, default=600.0, help="seconds to wait with --send")
    opts = ap.parse_args(remove_ros_args(argv)[1:])
    rclpy.init(args=argv)
    node = Node("chat")
    client = ChatClient(node)
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    threading.Thread(target=executor.spin, daemon=True).start()
    code = 0
    try:
        if opts.send:
            r = client.call(names.AGENT_MESSAGE, opts.send, timeout_s=30.0)
            if not r.get("ok"):
                client.print(f"(not sent: {r.get('reason')})")
                return 1
            end = time.monotonic() + opts.wait
            started = False
            while time.monotonic() < end:
                client.changed.wait(0.5)
                client.changed.clear()
                st = client.state
                if st is not None and st.status == "running":
                    started = True
                if st is not None and started and st.status in FINAL:
                    return 0 if st.status == "succeeded" else 1
            client.print("(timed out waiting for the run to end)")
            return 124
        client.print("chat with the agent: type a task; /cancel /reset /takeover /state /quit")
        for line in sys.stdin:
            if not client.handle(line):
                break
    except KeyboardInterrupt:
        pass
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
