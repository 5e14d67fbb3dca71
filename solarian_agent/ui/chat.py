"""``solarian-agent chat``: talk to the agent from a terminal.

Type a task and press Enter; the agent's messages and its events print as they come.
``/cancel`` stops the run, ``/reset`` also forgets the conversation, ``/estop [reason]`` latches
the arm's e-stop (the arm holds and every skill is refused until ``/estop-reset``),
``/status`` shows the plan and running actions, ``/events`` toggles the event lines, ``/quit``
(or Ctrl-D) leaves.  An e-stop latched or released by anyone prints as it happens.

The chat talks through an :class:`~.link.AgentLink`, so the same code works against the
embedded default (an in-process Bus) and, with ``--ros``, against the ROS graph.  Link
callbacks run on the publisher's thread; they only queue lines (bounded, drop-oldest, counted)
and a printer thread writes them, so a slow terminal never stalls the control loop.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..core import names
from ..core.messages import AgentEvent, AgentState, OperatorEvent
from ..core.text import for_terminal, indented
from .link import AgentLink, BusLike, BusLink, Reply, describe_event, estop_unavailable

HELP = """\
commands: /cancel  stop the run          /reset   stop and forget the conversation
          /status  plan and actions       /events  show / hide event lines
          /estop [reason]  latch the arm's e-stop: it holds, every skill is refused
          /estop-reset     release the e-stop
          /help    this text              /quit    leave (Ctrl-D too)
anything else is sent to the agent."""

DIM, BOLD, OP, ALERT, RESET = "\033[2m", "\033[1m", "\033[35m", "\033[1;41;97m", "\033[0m"

# the embedded default: returns a bus the agent runs on and a function that stops it
EmbeddedFactory = Callable[[], "tuple[BusLike, Callable[[], None]]"]


def _new_entries(prev: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of ``new`` not yet seen: ``new`` is the last N of a growing (or reset) list."""
    for k in range(min(len(prev), len(new)), 0, -1):
        if prev[-k:] == new[:k]:
            return new[k:]
    return new


class ChatSession:
    def __init__(self, link: AgentLink, out: TextIO, *, show_events: bool = True,
                 color: bool = False, prompt: str = "> ", queue_size: int = 1000) -> None:
        self.link = link
        self.out = out
        self.show_events = show_events
        self.color = color
        self.prompt = prompt
        self._lines: collections.deque[str] = collections.deque(maxlen=queue_size)
        self._cond = threading.Condition()
        self.dropped = 0
        self._writing = False
        self._stop = threading.Event()
        self._printer = threading.Thread(target=self._print_loop, name="chat-printer",
                                         daemon=True)
        self._conv: list[dict[str, Any]] = []
        self._status = ""
        self.state: AgentState | None = None
        self.prompt_shown = False
        self._readline: Any = None
        if getattr(out, "isatty", lambda: False)():
            with contextlib.suppress(ImportError):
                import readline

                self._readline = readline

    # output ------------------------------------------------------------------------------
    def _style(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self.color else text

    def emit(self, line: str) -> None:
        """Queue a line for the terminal (any thread, never blocks)."""
        with self._cond:
            if len(self._lines) == self._lines.maxlen:
                self.dropped += 1
            self._lines.append(line)
            self._cond.notify()

    def _print_loop(self) -> None:
        reported = 0
        while not self._stop.is_set():
            with self._cond:
                if not self._lines:
                    self._cond.wait(0.5)
                lines = list(self._lines)
                self._lines.clear()
                dropped = self.dropped
                self._writing = bool(lines)
            if dropped > reported:
                lines.insert(0, f"… {dropped - reported} lines dropped (terminal too slow)")
                reported = dropped
            if lines:
                self._write(lines)
            with self._cond:
                self._writing = False

    def _write(self, lines: list[str]) -> None:
        try:
            redraw = self._readline is not None and self.prompt_shown
            if redraw:
                self.out.write("\r\033[K")
            self.out.write("\n".join(lines) + "\n")
            if redraw:
                self.out.write(self.prompt + self._readline.get_line_buffer())
            self.out.flush()
        except Exception:  # a closed terminal must not kill the printer
            pass

    def flush(self, timeout_s: float = 2.0) -> None:
        """Wait until queued lines are written (bounded)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._cond:
                if not self._lines and not self._writing:
                    return
            time.sleep(0.01)

    # what arrives ------------------------------------------------------------------------
    def _on_state(self, st: AgentState) -> None:
        self.state = st
        conv = [dict(m) for m in st.conversation]
        for m in _new_entries(self._conv, conv):
            if m.get("role") != "user":
                self.emit(self._style("agent: ", BOLD)
                          + indented(m.get("text", ""), " " * len("agent: ")))
        self._conv = conv
        if st.status != self._status:
            if self._status:
                self.emit(self._style(for_terminal(f"[{self._status} → {st.status}]"), DIM))
            self._status = st.status

    def _on_event(self, ev: AgentEvent) -> None:
        if not self.show_events:
            return
        t = ev.t.split("T")[-1].rstrip("Z") if "T" in ev.t else ev.t
        line = for_terminal(f"  {t} {describe_event(ev.kind, dict(ev.data))}")
        by = ev.data.get("by") if isinstance(ev.data, dict) else None
        self.emit(self._style(line, OP if by == "operator" else DIM))

    def _on_operator(self, ev: OperatorEvent) -> None:
        # always shown (even with event lines off): whoever latched it, the arm now holds
        if ev.kind == "estop":
            reason = for_terminal(dict(ev.detail).get("reason", "") or "e-stop pressed")
            self.emit(self._style(f"*** E-STOP LATCHED: {reason} — every skill is refused "
                                  "until /estop-reset ***", ALERT))
        elif ev.kind == "estop_reset":
            self.emit(self._style("*** e-stop released ***", BOLD))

    def start(self) -> None:
        self.link.on_state(self._on_state)
        self.link.on_event(self._on_event)
        on_operator = getattr(self.link, "on_operator", None)
        if on_operator is not None:
            on_operator(self._on_operator)
        self._printer.start()

    def close(self) -> None:
        self.flush()
        self._stop.set()
        with self._cond:
            self._cond.notify()
        self._printer.join(2.0)

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
        for a in st.actions:
            lines.append(f"  running {a.get('tool')} {a.get('action_id')} "
                         f"({a.get('elapsed_s', 0)} s at the last update)")
        return "\n".join(lines)

    def handle_line(self, line: str) -> bool:
        """Act on one typed line; False when the operator leaves."""
        text = line.strip()
        if not text:
            return True
        word = text.split()[0].lower()
        if word in ("/quit", "/exit", "/q"):
            return False
        if word == "/help":
            self.emit(HELP)
            return True
        if word == "/status":
            self.emit(for_terminal(self.status_text(), newlines=True))
            return True
        if word == "/events":
            self.show_events = not self.show_events
            self.emit(f"event lines {'on' if self.show_events else 'off'}")
            return True
        if word == "/estop":
            note = " ".join(text.split()[1:])[:200]
            reason = "operator e-stop from the chat" + (f": {note}" if note else "")
            self._estop_reply(word, self._link_call("estop", reason))
            return True
        if word == "/estop-reset":
            self._estop_reply(word, self._link_call("estop_reset"))
            return True
        if word == "/cancel":
            r = self.link.cancel("operator")
        elif word == "/reset":
            r = self.link.reset("operator")
            if r.get("ok"):
                self._conv = []
        elif word.startswith("/"):
            self.emit(f"unknown command {for_terminal(word)}; /help lists them")
            return True
        else:
            r = self.link.message(text)
        if not r.get("ok"):
            self.emit(f"not sent: {for_terminal(r.get('reason', 'refused'))}")
        return True

    def _link_call(self, method: str, *args: Any) -> Reply:
        fn = getattr(self.link, method, None)
        if fn is None:  # a link without the e-stop methods
            return estop_unavailable(names.ESTOP if method == "estop" else names.ESTOP_RESET)
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
    """The chat loop: read lines until /quit or end of input.  Returns an exit status."""
    out = out if out is not None else sys.stdout
    if color is None:
        color = bool(getattr(out, "isatty", lambda: False)())
    session = ChatSession(link, out, show_events=show_events, color=color)
    session.start()
    if banner:
        session.emit("Type a task for the agent; /help for commands.")
    try:
        while True:
            session.flush(0.2)
            session.prompt_shown = True
            try:
                line = input_fn(session.prompt)
            except EOFError:
                break
            except KeyboardInterrupt:
                session.emit("")
                break
            finally:
                session.prompt_shown = False
            if not session.handle_line(line):
                break
    finally:
        session.close()
    return 0


def sim_embedded(seed: int = 7, log_root: Path | None = Path("recordings") / "controller"
                 ) -> tuple[BusLike, Callable[[], None]]:
    """The embedded default: the simulated robot with the configured (offline by default)
    models, stepped in real time on a background thread.  Returns its bus and a stop
    function that ends the run cleanly and joins the thread (bounded)."""
    from ..system import build_sim_system

    system = build_sim_system(seed=seed, realtime=True, log_root=log_root)
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


def main_chat(argv: Sequence[str] | None = None, *, link: AgentLink | None = None,
              embedded: EmbeddedFactory | None = None,
              input_fn: Callable[[str], str] = input, out: TextIO | None = None) -> int:
    """``solarian-agent chat [--ros] [--quiet] [--no-color]``.

    Without ``--ros`` it chats with the embedded default: ``embedded`` when given (a function
    that starts it and returns its bus and a stop function), else :func:`sim_embedded`.
    ``--ros`` uses ``solarian_agent.ros.ui_link.make_ros_link()``.
    """
    p = argparse.ArgumentParser(prog="solarian-agent chat",
                                description="Chat with the agent from the terminal.")
    p.add_argument("--ros", action="store_true",
                   help="talk to a running ROS graph instead of the embedded default")
    p.add_argument("--quiet", action="store_true", help="show only the conversation")
    p.add_argument("--no-color", action="store_true", help="plain text output")
    p.add_argument("--seed", type=int, default=7, help="the simulated table's seed")
    p.add_argument("--log-root", type=Path, default=Path("recordings") / "controller",
                   help="where episode logs go (default recordings/controller)")
    p.add_argument("--no-log", action="store_true", help="keep no episode log")
    args = p.parse_args(list(argv) if argv is not None else None)
    err = sys.stderr
    stop: Callable[[], None] | None = None
    own_link = link is None
    if link is None:
        if args.ros:
            try:
                from ..ros.ui_link import make_ros_link
            except ImportError:
                try:  # the ROS package's own chat client, until ros.ui_link exists
                    from ..ros.chat import main as ros_chat_main

                    return int(ros_chat_main([]) or 0)
                except ImportError as e2:  # no rclpy, or the interfaces are not built
                    print(f"chat --ros needs rclpy and the package's ROS interfaces: {e2}",
                          file=err)
                    return 2
            link = make_ros_link()
        else:
            try:
                if embedded is not None:
                    bus, stop = embedded()
                else:
                    bus, stop = sim_embedded(args.seed, None if args.no_log else args.log_root)
            except Exception as e:
                print(f"solarian-agent chat: could not start the embedded robot: {e}",
                      file=err)
                return 2
            link = BusLink(bus, [])
    try:
        return run_chat(link, input_fn=input_fn, out=out, show_events=not args.quiet,
                        color=False if args.no_color else None)
    finally:
        if own_link:
            link.close()
        if stop is not None:
            stop()
