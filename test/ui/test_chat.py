"""The terminal chat against the embedded default (an in-process Bus with the toy harness,
or the simulated robot for the e-stop)."""

from __future__ import annotations

import io
import queue
import threading

import pytest
from ui_helpers import ChatLink, Stepper, wait_for

from solarian_agent.core.messages import AgentState
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import Harness, make_harness
from solarian_agent.ui.chat import ChatSession, _new_entries
from solarian_agent.ui.chat_cli import main_chat


class Typist:
    """input() for tests: lines are fed from a queue; end of input after ``close``."""

    def __init__(self) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()

    def __call__(self, prompt: str) -> str:
        line = self.q.get(timeout=20)
        if line is None:
            raise EOFError
        return line

    def type(self, line: str) -> None:
        self.q.put(line)

    def close(self) -> None:
        self.q.put(None)


class LockedIO(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, s: str) -> int:
        with self.lock:
            return super().write(s)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()


def test_chat_task_events_cancel_reset_and_quit(tmp_path):
    h = make_harness([reply("On it: waiting a long time.", ("wait", {"seconds": 30}))],
                     log_root=tmp_path)
    typist, out = Typist(), LockedIO()
    rc: list[int] = []
    with Stepper(h, max_s=30) as stepper:
        def embedded():
            return h.bus, stepper.stop_event.set

        t = threading.Thread(target=lambda: rc.append(main_chat(
            ["--no-color"], embedded=embedded, input_fn=typist, out=out)))
        t.start()
        try:
            _drive(h, typist, out)
        finally:
            typist.close()
            t.join(10)
        assert not t.is_alive() and rc == [0]
        assert stepper.stop_event.is_set()  # the embedded runtime was stopped on the way out
    text = out.text()
    assert "/cancel  stop the run" in text
    assert "[running → cancelled]" in text


def _drive(h: Harness, typist: Typist, out: LockedIO) -> None:
    typist.type("/help")
    typist.type("wait for a while")
    wait_for(lambda: h.planner.actions, 10, "the wait to start")
    wait_for(lambda: "agent: On it: waiting a long time." in out.text(), 5, "the reply")
    aid = next(iter(h.planner.actions))
    wait_for(lambda: f"started wait {aid}" in out.text(), 5, "the action event")
    typist.type("/status")
    wait_for(lambda: f"running wait {aid}" in out.text(), 5, "the status")
    typist.type("/cancel")
    wait_for(lambda: h.planner.status == "cancelled" and not h.planner.actions, 10,
             "the cancel")
    wait_for(lambda: "run ended cancelled" in out.text(), 5, "the run end event")
    wait_for(lambda: f"wait {aid} stopped" in out.text(), 5, "the action stop event")
    typist.type("/reset")
    wait_for(lambda: "conversation reset" in out.text(), 5, "the reset event")
    assert h.planner.conversation == []
    typist.type("/bogus")
    wait_for(lambda: "unknown command /bogus" in out.text(), 5, "the unknown command")
    typist.type("/quit")


def test_chat_on_the_embedded_simulated_robot(tmp_path):
    typist, out = Typist(), LockedIO()
    typist.type("/status")
    typist.type("/events")
    typist.close()  # Ctrl-D
    assert main_chat(["--no-log", "--no-color"], input_fn=typist, out=out) == 0
    text = out.text()
    assert "no agent state yet" in text or "status: idle" in text
    assert "event lines off" in text


@pytest.mark.parametrize("argv", [["chat", "--ros"], ["panel", "--ros", "--port", "0"]])
def test_ros_front_ends_without_rclpy_give_an_install_hint(argv):
    """Where rclpy is missing, ``chat --ros`` and ``panel --ros`` say what they need and how to
    get it, and exit 2, never a traceback."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'rclpy':\n"
            "            raise ImportError('rclpy is not installed (blocked by the test)')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from solarian_agent.cli import main\n"
            f"sys.exit(main({argv!r}))\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), input="",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{argv[0]} --ros needs rclpy, which is not installed: ROS 2 Jazzy: `make ros`" \
        in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_quiet_chat_prints_only_the_conversation():
    link = ChatLink()
    out = LockedIO()
    s = ChatSession(link, out, show_events=False)  # type: ignore[arg-type]
    s.start()
    from solarian_agent.core.messages import AgentEvent

    link.cbs["event"](AgentEvent("2026-01-01T00:00:00.000Z", "plan_changed", {"plan": []}))
    link.cbs["state"](AgentState(1, "running", "t", (), (), (
        {"role": "user", "text": "hi"}, {"role": "agent", "text": "hello"})))
    link.cbs["state"](AgentState(1, "running", "t", (), (), (
        {"role": "user", "text": "hi"}, {"role": "agent", "text": "hello"},
        {"role": "agent", "text": "again"})))
    s.handle_line("go")
    s.close()
    text = out.text()
    assert text.count("agent: hello") == 1 and "agent: again" in text
    assert "plan" not in text and "not sent: the agent is not running" in text


def test_new_entries_handles_a_sliding_window_and_a_reset():
    a = [{"n": i} for i in range(5)]
    assert _new_entries([], a) == a
    assert _new_entries(a, a + [{"n": 5}]) == [{"n": 5}]
    assert _new_entries(a, a[2:] + [{"n": 5}, {"n": 6}]) == [{"n": 5}, {"n": 6}]
    assert _new_entries(a, [{"n": 9}]) == [{"n": 9}]
    assert _new_entries(a, []) == []


def test_chat_estop_and_estop_reset_on_the_simulated_robot():
    """/estop latches the simulator's e-stop (the executor then refuses every skill) and the
    chat prints the latch as it happens; /estop-reset releases it; /help lists both."""
    from solarian_agent.system import build_sim_system

    system = build_sim_system(seed=7, log_root=None)  # FakeClock, stepped by the Stepper
    typist, out = Typist(), LockedIO()
    rc: list[int] = []
    with Stepper(system, max_s=30) as stepper:  # type: ignore[arg-type]
        t = threading.Thread(target=lambda: rc.append(main_chat(
            ["--no-color"], embedded=lambda: (system.bus, stepper.stop_event.set),
            input_fn=typist, out=out)))
        t.start()
        try:
            typist.type("/help")
            wait_for(lambda: "/estop [reason]" in out.text() and "/estop-reset" in out.text(),
                     5, "the help text")
            typist.type("/estop-reset")  # nothing latched yet: the driver's answer is shown
            wait_for(lambda: "/estop-reset failed: e-stop was not latched" in out.text(), 5,
                     "the refusal")
            typist.type("/estop   the cup is slipping")
            wait_for(lambda: system.sim.latch.tripped, 5, "the latch")
            assert system.sim.latch.reason == "operator e-stop from the chat: the cup is slipping"
            wait_for(lambda: system.executor.estop_latched, 5, "the executor to hear it")
            wait_for(lambda: "*** E-STOP LATCHED: operator e-stop from the chat: the cup is "
                     "slipping" in out.text(), 5, "the latch line")
            assert "e-stop latched: operator e-stop from the chat" in out.text()  # the reply
            typist.type("/estop-reset")
            wait_for(lambda: not system.sim.latch.tripped and not system.executor.estop_latched,
                     5, "the release")
            wait_for(lambda: "*** e-stop released ***" in out.text(), 5, "the release line")
            typist.type("/estop")  # no reason: the chat still names itself
            wait_for(lambda: system.sim.latch.reason == "operator e-stop from the chat", 5,
                     "the second latch")
            typist.type("/quit")
        finally:
            typist.close()
            t.join(10)
        assert not t.is_alive() and rc == [0]
    assert stepper.error is None, stepper.error
    system.shutdown()


def test_chat_estop_when_nothing_serves_it():
    from solarian_agent.core.transport import Bus
    from solarian_agent.ui.link import BusLink

    link = BusLink(Bus(), [])
    out = LockedIO()
    s = ChatSession(link, out, show_events=False)
    s.start()
    s.handle_line("/estop now")
    s.handle_line("/estop-reset")
    s.close()
    link.close()
    text = out.text()
    assert "/estop failed: e-stop unavailable: nothing serves 'estop'" in text
    assert "/estop-reset failed: e-stop unavailable: nothing serves 'estop_reset'" in text


def test_a_silent_planner_is_explained_even_with_event_lines_off():
    from solarian_agent.core.messages import AgentEvent

    link = ChatLink()
    out = LockedIO()
    s = ChatSession(link, out, show_events=False)  # type: ignore[arg-type]
    s.start()
    link.cbs["event"](AgentEvent("2026-01-01T00:00:00.000Z", "planner_silent", {
        "failures": 3, "error": "server: HTTP 503 overloaded",
        "reason": "the planner model failed 3 times in a row; it is called again when the "
                  "next event wakes it"}))
    link.cbs["event"](AgentEvent("2026-01-01T00:00:01.000Z", "planner_model_ok",
                                 {"after_failures": 3}))
    s.close()
    text = out.text()
    assert "planner silent: the planner model failed 3 times in a row" in text
    assert "HTTP 503 overloaded" in text
    assert "planner model answers again (after 3 failed calls)" in text
