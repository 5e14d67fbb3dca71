"""Lines to a terminal from any thread: queued (bounded, drop-oldest, counted) and written by a
printer thread of their own, so a slow terminal never stalls whoever publishes; a line printed
while the operator types redraws the prompt and what was typed (readline)."""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import Any, TextIO


class TerminalPrinter:
    def __init__(self, out: TextIO, prompt: str = "> ", queue_size: int = 1000) -> None:
        self.out = out
        self.prompt = prompt
        self._lines: collections.deque[str] = collections.deque(maxlen=queue_size)
        self._cond = threading.Condition()
        self.dropped = 0
        self._writing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="terminal-printer", daemon=True)
        self.prompt_shown = False
        self._readline: Any = None
        if getattr(out, "isatty", lambda: False)():
            with contextlib.suppress(ImportError):
                import readline

                self._readline = readline

    def start(self) -> None:
        self._thread.start()

    def emit(self, line: str) -> None:
        """Queue a line (any thread, never blocks)."""
        with self._cond:
            if len(self._lines) == self._lines.maxlen:
                self.dropped += 1
            self._lines.append(line)
            self._cond.notify()

    def _loop(self) -> None:
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

    def close(self) -> None:
        self.flush()
        self._stop.set()
        with self._cond:
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(2.0)


__all__ = ["TerminalPrinter"]
