"""The guided arm calibration's user interface in a terminal."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping

from solarian_agent.hw.tables import format_table


class TerminalCalibrationUI:
    """Enter confirms; the range step shows min < now < max per joint (whole names) and ends
    when Enter is pressed (checked without blocking between samples)."""

    def __init__(self, refresh_s: float = 0.05) -> None:
        self._done = threading.Event()
        self.refresh_s = refresh_s
        self._lines = 0

    def instruct(self, step: str, message: str) -> None:
        print(f"\n[{step}] {message}", flush=True)
        if step == "range":
            self._done.clear()
            threading.Thread(target=self._wait_enter, daemon=True).start()

    def _wait_enter(self) -> None:
        sys.stdin.readline()
        self._done.set()

    def confirm(self, step: str) -> bool:
        try:
            return input("Press Enter to continue (q to abort): ").strip().lower() != "q"
        except EOFError:
            return False

    def progress(self, ranges: Mapping[str, tuple[int, int, int]]) -> bool:
        table = format_table(["joint", "min", "now", "max"],
                             [[n, lo, now, hi] for n, (lo, now, hi) in ranges.items()],
                             right=(1, 2, 3))
        up = f"\x1b[{self._lines}F" if self._lines else ""  # redraw the table in place
        print(up + table, flush=True)
        self._lines = table.count("\n") + 1
        return not self._done.wait(self.refresh_s)
