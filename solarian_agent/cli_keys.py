"""Single keys from a terminal, without Enter (``label-ticks``).

:class:`KeyReader` reads one key at a time when its stream is a terminal (the terminal in
cbreak mode for that read only: no echo of a line, Ctrl-C still interrupts), and one line per
key otherwise (a pipe, a file, a test's StringIO), so scripted input keeps working.  Input that
needs several characters (a box's four numbers) is read as a line either way.
"""

from __future__ import annotations

import os
from typing import IO


class KeyReader:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        try:
            self._fd: int | None = stream.fileno() if stream.isatty() else None
        except (AttributeError, OSError, ValueError):  # a StringIO has no descriptor
            self._fd = None

    @property
    def raw(self) -> bool:
        """Whether keys are read one by one (a terminal)."""
        return self._fd is not None

    def key(self) -> str | None:
        """The next key, lower-cased ("" for a bare Enter); None at the end of the input."""
        if self._fd is None:
            line = self.stream.readline()
            return None if not line else line.strip().lower()
        import termios
        import tty

        old = termios.tcgetattr(self._fd)
        try:
            # TCSANOW: a key typed ahead (while the last tick printed) is kept, not flushed
            tty.setcbreak(self._fd, termios.TCSANOW)
            data = os.read(self._fd, 1)
        finally:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, old)
        if not data or data == b"\x04":  # end of input, or Ctrl-D
            return None
        ch = data.decode("utf-8", "replace")
        return "" if ch in "\r\n" else ch.lower()

    def line(self) -> str | None:
        """A whole line (the terminal as it is: echo, editing); None at the end of input."""
        line = self.stream.readline()
        return line if line else None


__all__ = ["KeyReader"]
