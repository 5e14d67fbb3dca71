"""Planner timers: one-shot and repeating, on the injected clock, so the planner can wake itself
later as any other event would wake it.

No threads: the planner calls :meth:`Timers.pop_due` from its tick and turns every timer that
fired into a ``timer`` event (urgency ``queue``).  A repeating timer that fell behind (a long
pause, a slow tick) fires once and is rescheduled from now, never in a burst.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .clock import Clock
from .text import planner_wrote

MIN_SECONDS = 0.05
MAX_SECONDS = 86_400.0
MIN_REPEAT_S = 1.0  # a repeating timer may not wake the planner more often than this


@dataclass
class Timer:
    timer_id: str
    note: str
    seconds: float
    repeat: bool
    set_at: float
    due: float
    fired: int = 0

    def describe(self, now: float) -> str:
        every = f", repeats every {self.seconds:g} s" if self.repeat else ""
        return (f"{self.timer_id} fires in {max(0.0, self.due - now):.1f} s{every}"
                + (f", note {planner_wrote(self.note)}" if self.note else ""))


class TimerError(ValueError):
    """A timer the planner asked for cannot be set; the message says why."""


class Timers:
    def __init__(self, clock: Clock, max_timers: int = 16) -> None:
        if max_timers < 1:
            raise ValueError(f"max_timers must be >= 1, got {max_timers}")
        self.clock = clock
        self.max_timers = max_timers
        self._timers: dict[str, Timer] = {}
        self._ids = itertools.count(1)

    def set(self, seconds: float, note: str = "", repeat: bool = False) -> Timer:
        if not MIN_SECONDS <= seconds <= MAX_SECONDS:
            raise TimerError(f"seconds must be between {MIN_SECONDS:g} and {MAX_SECONDS:g}, "
                             f"got {seconds:g}")
        if repeat and seconds < MIN_REPEAT_S:
            raise TimerError(f"a repeating timer needs seconds >= {MIN_REPEAT_S:g}, "
                             f"got {seconds:g}")
        if len(self._timers) >= self.max_timers:
            raise TimerError(f"{len(self._timers)} timers are set already (at most "
                             f"{self.max_timers}); cancel one first: "
                             f"{', '.join(self._timers)}")
        now = self.clock.now()
        t = Timer(f"t{next(self._ids)}", note, float(seconds), bool(repeat), now, now + seconds)
        self._timers[t.timer_id] = t
        return t

    def cancel(self, timer_id: str) -> Timer | None:
        return self._timers.pop(timer_id, None)

    def get(self, timer_id: str) -> Timer | None:
        return self._timers.get(timer_id)

    def pop_due(self) -> list[Timer]:
        """Timers that fired since the last call, oldest due first.  One-shot timers are
        removed; repeating ones rescheduled (from their due time, or from now if behind)."""
        now = self.clock.now()
        fired: list[Timer] = []
        for t in sorted(self._timers.values(), key=lambda t: t.due):
            if t.due > now + 1e-9:
                continue
            t.fired += 1
            fired.append(Timer(t.timer_id, t.note, t.seconds, t.repeat, t.set_at, t.due,
                               t.fired))
            if t.repeat:
                t.due += t.seconds
                if t.due <= now:
                    t.due = now + t.seconds
            else:
                del self._timers[t.timer_id]
        return fired

    @property
    def active(self) -> list[Timer]:
        return sorted(self._timers.values(), key=lambda t: t.due)

    def clear(self) -> list[Timer]:
        gone = self.active
        self._timers.clear()
        return gone

    def __len__(self) -> int:
        return len(self._timers)
