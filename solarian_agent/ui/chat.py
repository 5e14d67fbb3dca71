"""``solarian-agent chat``: talk to the agent from a terminal.

Type a task and press Enter; the agent's messages and its events print as they come.  The
commands (the same over the embedded robot and, with ``--ros``, over a running ROS graph) are
in :data:`HELP`; a word starting with ``/`` that is not one of them is an error, never a
message to the agent.  An e-stop latched or released by anyone prints as it happens; while it
is latched no message is sent (the run would resume into refused skills).

The chat talks through an :class:`~.link.AgentLink`, so the same code works against the
embedded default (an in-process Bus) and against the ROS graph
(``solarian_agent.ros.ui_link``).  Link callbacks run on the publisher's thread; they only
queue lines (:class:`~.terminal.TerminalPrinter`), so a slow terminal never stalls the control
loop.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ..core import names
from ..core.messages import AgentEvent, AgentState, OperatorEvent
from ..core.statuses import RUN_ENDED as ENDED
from ..core.text import for_terminal, indented
from .event_lines import describe_event
from .link import AgentLink, BusLike, Reply, estop_unavailable, is_internal, new_entries
from .terminal import TerminalPrinter

_new_entries = new_entries  # the name the tests know

HELP = """\
commands: /cancel  stop the run          /reset   stop and forget the conversation
          /pause   stop the running skill and pause the run (the next message resumes it)
          /resume  resume a paused run    /takeover [note]  you take over: as /pause, and
                                                            the agent is told your note
          /state   plan and actions (/status too)
          /events  show / hide event lines (/events all: the harness's internal ones too)
          /estop [reason]  latch the arm's e-stop: it holds, every skill is refused
          /estop-reset     release the e-stop
          /approve [id]  /refuse [id] [why]  answer a skill waiting for you (approve: skills)
          /help    this text              /quit    leave (Ctrl-D too)
anything else is sent to the agent."""

COMMANDS = ("/cancel", "/reset", "/pause", "/resume", "/takeover", "/state", "/status",
            "/events", "/estop", "/estop-reset", "/approve", "/refuse", "/help", "/quit",
            "/exit", "/q")
RESUME_TEXT = "resume"
ALWAYS_SHOWN = ("planner_silent", "planner_model_ok")

DIM, BOLD, OP, ALERT, RESET = "\033[2m", "\033[1m", "\033[35m", "\033[1;41;97m", "\033[0m"

# the embedded default: returns a bus the agent runs on and a function that stops it
EmbeddedFactory = Callable[[], "tuple[BusLike, Callable[[], None]]"]


class ChatSession:
    def __init__(self, link: AgentLink, out: TextIO, *, show_events: bool = True,
                 color: bool = False, prompt: str = "> ", queue_size: int = 1000) -> None:
        self.link = link
        self.show_events = show_events
        self.show_internal = False
        self.color = color
        self.printer = TerminalPrinter(out, prompt, queue_size)
        self._conv: list[dict[str, Any]] = []
        self._status = ""
        self.state: AgentState | None = None
        self.state_changed = threading.Event()
        self.estop_latched = ""  # the reason while latched (as far as this chat has seen)

    @property
    def prompt(self) -> str:
        return self.printer.prompt

    @property
    def dropped(self) -> int:
        return self.printer.dropped

    # output ------------------------------------------------------------------------------
    def _style(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self.color else text

    def emit(self, line: str) -> None:
        """Queue a line for the terminal (any thread, never blocks)."""
        self.printer.emit(line)

    def flush(self, timeout_s: float = 2.0) -> None:
        self.printer.flush(timeout_s)

    # what arrives ------------------------------------------------------------------------
    def _on_state(self, st: AgentState) -> None:
        self.state = st
        conv = [dict(m) for m in st.conversation]
        for m in new_entries(self._conv, conv):
            if m.get("role") != "user":
                self.emit(self._style("agent: ", BOLD)
                          + indented(m.get("text", ""), " " * len("agent: ")))
        self._conv = conv
        if st.status != self._status:
            if self._status:
                self.emit(self._style(for_terminal(f"[{self._status} → {st.status}]"), DIM))
            self._status = st.status
        self.state_changed.set()

    def _on_event(self, ev: AgentEvent) -> None:
        if ev.kind in ALWAYS_SHOWN:  # why the agent says nothing: shown with event lines off
            self.emit(self._style(for_terminal(describe_event(ev.kind, dict(ev.data))), BOLD))
            return
        if not self.show_events or (is_internal(ev.kind) and not self.show_internal):
            return
        t = ev.t.split("T")[-1].rstrip("Z") if "T" in ev.t else ev.t
        line = for_terminal(f"  {t} {describe_event(ev.kind, dict(ev.data))}")
        by = ev.data.get("by") if isinstance(ev.data, dict) else None
        self.emit(self._style(line, OP if by == "operator" else DIM))

    def _on_operator(self, ev: OperatorEvent) -> None:
        # always shown (even with event lines off): whoever latched it, the arm now holds
        if ev.kind == "estop":
            reason = for_terminal(dict(ev.detail).get("reason", "") or "e-stop pressed")
            self.estop_latched = reason
            self.emit(self._style(f"*** E-STOP LATCHED: {reason} — every skill is refused "
                                  "until /estop-reset ***", ALERT))
        elif ev.kind == "estop_reset":
            self.estop_latched = ""
            self.emit(self._style("*** e-stop released ***", BOLD))

    def start(self) -> None:
        self.link.on_state(self._on_state)
        self.link.on_event(self._on_event)
        on_operator = getattr(self.link, "on_operator", None)
        if on_operator is not None:
            on_operator(self._on_operator)
        self.printer.start()

    def close(self) -> None:
        self.printer.close()

    # what the operator types -------------------------------------------------------------
    def status_text(self) -> str:
        st = self.state
        if st is None:
            return "no agent state yet"
        lines = [f"status: {st.status}  generation: {st.generation}  task: {st.task or '-'}"]
        for s in st.plan:
            lines.append(f"  {s.get('step', '?')}. [{s.get('status', '')}] "
                         f"{s.get('description', '')}" + (f" ({s['tool']})" if s.get("tool")
                                                          else ""))
        if not st.plan:
            lines.append("  (no plan yet)")
        for a in st.actions:
            lines.append(f"  running {a.get('tool')} {a.get('action_id')} "
                         f"({a.get('elapsed_s', 0)} s at the last update)")
        if self.estop_latched:
            lines.append(f"  e-stop LATCHED: {self.estop_latched}")
        return "\n".join(lines)

    def handle_line(self, line: str) -> bool:
        """Act on one typed line; False when the operator leaves."""
        text = line.strip()
        if not text:
            return True
        word, _, rest = text.partition(" ")
        word = word.lower()
        rest = rest.strip()
        if word in ("/quit", "/exit", "/q"):
            return False
        if word.startswith("/") and word not in COMMANDS:
            self.emit(f"unknown command {for_terminal(word[:40])}; /help lists them")
            return True
        handler = {"/help": self._help, "/status": self._state_cmd, "/state": self._state_cmd,
                   "/events": self._events, "/estop": self._estop,
                   "/estop-reset": self._estop_reset, "/pause": self._pause,
                   "/takeover": self._takeover, "/resume": self._resume,
                   "/cancel": self._cancel, "/reset": self._reset,
                   "/approve": self._approve, "/refuse": self._refuse}.get(word, self._message)
        handler(text if handler == self._message else rest)
        return True

    def _help(self, _rest: str) -> None:
        self.emit(HELP)

    def _state_cmd(self, _rest: str) -> None:
        self.emit(for_terminal(self.status_text(), newlines=True))

    def _events(self, rest: str) -> None:
        if rest == "all":
            self.show_events = self.show_internal = True
        elif rest in ("off", "on"):
            self.show_events, self.show_internal = rest == "on", False
        else:
            self.show_events, self.show_internal = not self.show_events, False
        self.emit(f"event lines {'on' if self.show_events else 'off'}"
                  + (" (internal ones too)" if self.show_internal else ""))

    def _estop(self, note: str) -> None:
        reason = "operator e-stop from the chat" + (f": {note[:200]}" if note else "")
        self._estop_reply("/estop", self._link_call("estop", reason))

    def _approve(self, rest: str) -> None:
        self._estop_reply("/approve", self._link_call("approve", f"approve {rest}".strip(),
                                                      "operator (chat)"))

    def _refuse(self, rest: str) -> None:
        self._estop_reply("/refuse", self._link_call("approve", f"refuse {rest}".strip(),
                                                     "operator (chat)"))

    def _estop_reset(self, _rest: str) -> None:
        self._estop_reply("/estop-reset", self._link_call("estop_reset"))

    def _pause(self, _rest: str) -> None:
        self._operator("pause", {"by": "chat"}, "paused: the running skill stops; /resume "
                                                "or a message resumes the run")

    def _takeover(self, note: str) -> None:
        detail = {"by": "chat", **({"note": note[:500]} if note else {})}
        self._operator("takeover", detail, "operator takeover sent: the running skill stops, "
                                           "the run pauses until your next message")

    def _resume(self, _rest: str) -> None:
        st = self.state
        if st is not None and st.status != "paused":
            self.emit(f"not sent: nothing to resume (the run is {st.status})")
            return
        self._message(RESUME_TEXT)

    def _cancel(self, _rest: str) -> None:
        self._answer(self.link.cancel("operator"))

    def _reset(self, _rest: str) -> None:
        r = self.link.reset("operator")
        if r.get("ok"):
            self._conv = []
        self._answer(r)

    def _message(self, text: str) -> None:
        if self.estop_latched:
            self.emit(f"not sent: the e-stop is latched ({self.estop_latched}); every skill "
                      "would be refused. /estop-reset first")
            return
        self._answer(self.link.message(text))

    def _answer(self, r: Reply) -> None:
        if not r.get("ok"):
            self.emit(f"not sent: {for_terminal(r.get('reason', 'refused'))}")

    def _operator(self, kind: str, detail: dict[str, Any], done: str) -> None:
        r = self._link_call("operator_event", kind, detail)
        self.emit(done if r.get("ok") else f"/{kind} failed: "
                  f"{for_terminal(r.get('reason') or 'refused')}")

    def _link_call(self, method: str, *args: Any) -> Reply:
        fn = getattr(self.link, method, None)
        if fn is None:  # a link without the method
            if method in ("estop", "estop_reset"):
                return estop_unavailable(names.ESTOP if method == "estop" else
                                         names.ESTOP_RESET)
            return {"ok": False, "reason": f"this link cannot send {method}"}
        try:
            return dict(fn(*args))
        except Exception as e:  # the chat stays up whatever the link does
            return {"ok": False, "reason": f"{type(e).__name__}: {e}"}

    def _estop_reply(self, word: str, r: Reply) -> None:
        if r.get("ok"):
            self.emit(for_terminal(r.get("message") or f"{word}: done"))
        else:
            self.emit(f"{word} failed: {for_terminal(r.get('reason') or 'refused')}")


def run_chat(link: AgentLink, *, input_fn: Callable[[str], str] = input,
             out: TextIO | None = None, show_events: bool = True, color: bool | None = None,
             banner: bool = True) -> int:
    """The chat loop: read lines until /quit or end of input (0); Ctrl-C leaves with 130."""
    out = out if out is not None else sys.stdout
    if color is None:
        color = bool(getattr(out, "isatty", lambda: False)())
    session = ChatSession(link, out, show_events=show_events, color=color)
    session.start()
    if banner:
        session.emit("Type a task for the agent; /help for commands.")
    code = 0
    try:
        while True:
            session.flush(0.2)
            session.printer.prompt_shown = True
            try:
                line = input_fn(session.prompt)
            except EOFError:
                break
            except KeyboardInterrupt:
                session.emit("")
                code = 130
                break
            finally:
                session.printer.prompt_shown = False
            if not session.handle_line(line):
                break
    finally:
        session.close()
    return code


def send_and_wait(link: AgentLink, text: str, wait_s: float, out: TextIO) -> int:
    """``--send``: one message, then wait for the run it starts to end: 0 when it succeeded,
    1 when it ended otherwise or was refused, 124 when it did not end in ``wait_s``."""
    session = ChatSession(link, out, show_events=True)
    session.start()
    try:
        end = time.monotonic() + wait_s
        available = getattr(link, "agent_available", None)
        while available is not None and not available():
            if time.monotonic() > end:
                session.emit("not sent: the agent is not there (is the planner running?)")
                return 1
            time.sleep(0.2)
        r = link.message(text)
        if not r.get("ok"):
            session.emit(f"not sent: {for_terminal(r.get('reason', 'refused'))}")
            return 1
        started = False
        while time.monotonic() < end:
            session.state_changed.wait(0.5)
            session.state_changed.clear()
            st = session.state
            if st is not None and st.status == "running":
                started = True
            if st is not None and started and st.status in ENDED:
                session.emit(f"run ended: {st.status}")
                return 0 if st.status == "succeeded" else 1
        session.emit(f"the run did not end within {wait_s:g} s")
        return 124
    finally:
        session.close()


def sim_embedded(seed: int = 7, log_root: Path | None = Path("recordings") / "controller",
                 config: Path | None = None, planner: str | None = None
                 ) -> tuple[BusLike, Callable[[], None]]:
    """The embedded default: the simulated robot with the configured (offline by default)
    models, stepped in real time on a background thread.  Returns its bus and a stop
    function that ends the run cleanly and joins the thread (bounded)."""
    from ..system import build_sim_system, load_config

    system = build_sim_system(config=load_config(config), seed=seed, realtime=True,
                              log_root=log_root, planner_name=planner)
    stop_event = system.runtime.stop_event
    errors: list[BaseException] = []

    def spin() -> None:
        try:
            while not stop_event.is_set():
                system.runtime.step()
        except BaseException as e:  # reported when the chat ends
            errors.append(e)

    thread = threading.Thread(target=spin, name="embedded-runtime", daemon=True)
    thread.start()

    def stop() -> None:
        stop_event.set()
        thread.join(5.0)
        system.shutdown()
        if errors:
            print(f"the embedded runtime failed: {errors[0]!r}", file=sys.stderr)

    return system.bus, stop


__all__ = ["COMMANDS", "HELP", "ChatSession", "run_chat", "send_and_wait",
           "sim_embedded"]
