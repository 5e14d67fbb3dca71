"""Stopping an arm whose commands went quiet: smoothly, within the limits, never a jerk.

Every driver (the 2D simulator, the MuJoCo one, the real arm's controller) chases the newest
joint target it was given.  A commander that dies (``kill -9`` of the skills node, a hung
loop) leaves that target behind, and nothing would stop the arm short of it.  So each driver
watches the age of the newest command: once it is older than ``command_timeout_s`` the arm
joints decelerate to rest at ``decel`` (rad/s²) from the speed they had, and then hold.

Rules:

* the stop never reverses a joint and never speeds it up: each joint's speed falls by
  ``decel × dt`` per step until it is zero, so the motion ends with a ramp, not a step;
* the jaw is not stopped: it keeps its last commanded closing, so a held object stays
  squeezed (a jaw that let go of its target on a real arm would drop what it carries);
* a live commander never trips it: skills send their target again every
  :data:`KEEP_ALIVE_S` (``ArmPort.keep_alive``), well inside the timeout.

The default timeout and deceleration put a joint at its top speed (2.5 rad/s on the SO-101's
wrist roll) at rest ``0.08 + 2.5 / 50 = 0.13 s`` after its last command.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

from ..core.clock import Clock

DEFAULT_COMMAND_TIMEOUT_S = 0.08
DEFAULT_STOP_DECEL = 50.0  # rad/s² (m/s² for a linear joint)
KEEP_ALIVE_S = 0.03  # how often a running motion sends its target again


def stop_step(q: float, v: float, dt: float, decel: float) -> tuple[float, float]:
    """One step of a constant-deceleration stop: the joint at ``q`` moving at ``v`` a step
    ``dt`` later, and its speed then (exact for constant deceleration, rest included)."""
    if not (dt > 0 and decel > 0):
        raise ValueError(f"stop_step needs dt > 0 and decel > 0, got dt={dt}, decel={decel}")
    speed = abs(v)
    if speed <= decel * dt:  # at rest within this step
        return q + math.copysign(speed * speed / (2 * decel), v), 0.0
    return (q + math.copysign((speed - decel * dt / 2) * dt, v),
            math.copysign(speed - decel * dt, v))


def stopping_distance(v: float, decel: float) -> float:
    return v * v / (2 * decel)


class SmoothStop:
    """The setpoints that bring ``joints`` to rest: :meth:`begin` with where they are and how
    fast they move, then :meth:`step` every control step until :attr:`done`."""

    def __init__(self, decel: float = DEFAULT_STOP_DECEL) -> None:
        if not (math.isfinite(decel) and decel > 0):
            raise ValueError(f"stop deceleration must be > 0, got {decel!r}")
        self.decel = float(decel)
        self._q: dict[str, float] = {}
        self._v: dict[str, float] = {}
        self.active = False

    def begin(self, positions: Mapping[str, float], velocities: Mapping[str, float]) -> None:
        self._q = {n: float(p) for n, p in positions.items()}
        self._v = {n: float(velocities.get(n, 0.0)) for n in positions}
        self._v = {n: (v if math.isfinite(v) else 0.0) for n, v in self._v.items()}
        self.active = True

    def cancel(self) -> None:
        self.active = False
        self._q, self._v = {}, {}

    @property
    def done(self) -> bool:
        return self.active and all(v == 0.0 for v in self._v.values())

    def step(self, dt: float) -> dict[str, float]:
        """The next setpoints (the rest pose once :attr:`done`)."""
        for n in self._q:
            self._q[n], self._v[n] = stop_step(self._q[n], self._v[n], dt, self.decel)
        return dict(self._q)

    def setpoint(self) -> dict[str, float]:
        return dict(self._q)


def stop_start(goal: Mapping[str, float], jaw: str, jaw_command: float | None,
               velocities: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """Where a controller's stop starts: the arm joints from the goal the servos chase, at the
    speeds they move; the jaw at its last command, at rest (it keeps squeezing)."""
    start = dict(goal)
    if jaw_command is not None and jaw in start:
        start[jaw] = float(jaw_command)
    return start, {n: (0.0 if n == jaw else float(velocities.get(n, 0.0))) for n in start}


class QuietStop:
    """The command-timeout half and the stop half together, for a driver's loop: :meth:`fed`
    on every accepted command; :meth:`step` every control step returns ``None`` while the
    commands are fresh (or none ever came), else the stop's next setpoints for the joints it
    was given (they decelerate once, then hold until the next command)."""

    def __init__(self, clock: Clock, timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
                 decel: float = DEFAULT_STOP_DECEL) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"command timeout must be > 0, got {timeout_s!r}")
        self.clock = clock
        self.timeout_s = float(timeout_s)
        self.stop = SmoothStop(decel)
        self.trips = 0  # how many times the commands went quiet while the arm was driven
        self.last_trip_at: float | None = None
        self._last: float | None = None
        self._lock = threading.Lock()

    def fed(self) -> None:
        with self._lock:
            self._last = self.clock.now()
            self.stop.cancel()

    def clear(self) -> None:
        """Forget the commands (a reset, an e-stop): nothing to stop from."""
        with self._lock:
            self._last = None
            self.stop.cancel()

    def quiet(self) -> bool:
        with self._lock:
            return self._last is not None and self.clock.now() - self._last > self.timeout_s

    def step(self, positions: Mapping[str, float], velocities: Mapping[str, float],
             dt: float) -> dict[str, float] | None:
        if not self.quiet():
            return None
        with self._lock:
            if not self.stop.active:
                self.stop.begin(positions, velocities)
                self.trips += 1
                self.last_trip_at = self.clock.now()
            return self.stop.step(dt)


__all__ = ["DEFAULT_COMMAND_TIMEOUT_S", "DEFAULT_STOP_DECEL", "KEEP_ALIVE_S", "QuietStop",
           "SmoothStop",
           "stop_start", "stop_step", "stopping_distance"]
