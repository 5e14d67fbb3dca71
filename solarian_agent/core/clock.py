"""Clocks are passed in, never read from globals, so tests never sleep.

``Clock.now()`` is monotonic seconds used for every deadline and age; ``Clock.wall()`` is the
ISO 8601 timestamp written into episode logs.  Both come from one clock so that a log's ``t``
and the harness's deadlines agree.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> str:
        """ISO 8601 UTC timestamp of ``now()``."""
        ...

    def epoch(self) -> float:
        """Unix seconds of ``now()`` (rosbag timestamps)."""
        ...

    def sleep_until(self, t: float, stop: threading.Event | None = None) -> None:
        """Block until ``now() >= t`` (a fake clock jumps there), or until ``stop`` is set."""
        ...


def _iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.timezone.utc).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")


class SystemClock:
    """Real time: monotonic for deadlines, anchored to the epoch once for ISO stamps."""

    def __init__(self) -> None:
        self._mono0 = time.monotonic()
        self._epoch0 = time.time()

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> str:
        return _iso(self.epoch())

    def epoch(self) -> float:
        return self._epoch0 + (time.monotonic() - self._mono0)

    def sleep_until(self, t: float, stop: threading.Event | None = None) -> None:
        delay = t - time.monotonic()
        if delay <= 0:
            return
        if stop is not None:
            stop.wait(delay)
        else:
            time.sleep(delay)


class FakeClock:
    """A clock that only moves when told to (a documented test fake).

    The simulator's runtime also uses it to run faster than real time: the control loop
    advances it by one tick per step.
    """

    def __init__(self, start: float = 1000.0, epoch: float = 1_790_000_000.0) -> None:
        self._t = start
        self._start = start
        self._epoch = epoch
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def wall(self) -> str:
        return _iso(self.epoch())

    def epoch(self) -> float:
        with self._lock:
            return self._epoch + (self._t - self._start)

    def advance(self, dt: float) -> float:
        if dt < 0:
            raise ValueError(f"FakeClock cannot go backwards (dt={dt})")
        with self._lock:
            self._t += dt
            return self._t

    def set(self, t: float) -> None:
        with self._lock:
            if t < self._t:
                raise ValueError(f"FakeClock cannot go backwards ({t} < {self._t})")
            self._t = t

    def sleep_until(self, t: float, stop: threading.Event | None = None) -> None:
        with self._lock:
            if t > self._t:
                self._t = t
