"""The embedded runtime: every component in one process on one :class:`Bus`, stepped in a fixed
order each control period.

Order within a step: world/drivers (sensors published), executor (skills started, ticked,
stopped), monitor, planner.  So an action that ends in a step has its plan's next step sent in
the same step and started at the next executor tick: action end to next step is one control
tick.  With a :class:`FakeClock` the runtime runs as fast as the CPU allows (the simulator's
default); with ``realtime=True`` it paces itself against the wall clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from .clock import Clock, FakeClock
from .transport import Bus


@dataclass
class _Component:
    name: str
    tick: Callable[[float], None]
    period_s: float
    next_due: float


class Runtime:
    def __init__(self, clock: Clock, bus: Bus | None = None, period_s: float = 0.02,
                 realtime: bool = False) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.clock = clock
        self.bus = bus or Bus()
        self.period_s = period_s
        self.realtime = realtime
        self.components: list[_Component] = []
        self.steps = 0
        self.stop_event = threading.Event()

    def add(self, name: str, tick: Callable[[float], None], period_s: float | None = None
            ) -> None:
        """``tick(dt)`` is called every ``period_s`` (default: every step), in add order."""
        self.components.append(_Component(name, tick, period_s or self.period_s,
                                          self.clock.now()))

    def step(self) -> None:
        if isinstance(self.clock, FakeClock) and not self.realtime:
            self.clock.advance(self.period_s)
        else:
            self.clock.sleep_until(self.clock.now() + self.period_s, self.stop_event)
        now = self.clock.now()
        self.steps += 1
        for c in self.components:
            if now + 1e-9 >= c.next_due:
                c.tick(c.period_s)
                c.next_due += c.period_s
                if c.next_due < now:  # fell behind: skip, never burst
                    c.next_due = now + c.period_s

    def run_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Step until ``predicate()`` holds or ``timeout_s`` of clock time passed."""
        end = self.clock.now() + timeout_s
        while not predicate():
            if self.clock.now() >= end or self.stop_event.is_set():
                return False
            self.step()
        return True

    def run_for(self, seconds: float) -> None:
        end = self.clock.now() + seconds
        while self.clock.now() < end and not self.stop_event.is_set():
            self.step()
