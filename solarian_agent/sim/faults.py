"""Seeded fault injection for the tabletop simulator, so the execution strategies can be
compared on how they recover from transient failures.

Faults are *recoverable*: the object stays on the table and reachable, so a controller that
verifies and retries can finish the task.

* ``grasp_fail`` — the gripper closes but the object is not taken.
* ``slip`` — the object is taken, then dropped when the gripper lifts it.
* ``move_object`` — someone moves an object to another free spot during the run.
* ``camera_freeze`` — a camera keeps republishing its last frame (old seq and stamp).

Random faults come from :class:`FaultConfig` probabilities and the injector's own seed, so a
run is reproducible and independent of how the layout was drawn.  ``max_consecutive`` caps
back-to-back failed picks of one object, whatever the kind (a missed grasp, then a slip, then a
missed grasp are three in a row), so retrying always succeeds eventually: the streak ends only
when a pick of that object lifts it without a slip.  Faults can also
be forced one at a time with :meth:`FaultInjector.inject` (the ``sim/inject_fault`` service).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from solarian_agent.core.errors import CoreError

FAULT_KINDS: tuple[str, ...] = ("grasp_fail", "slip", "move_object", "camera_freeze")
CAMERAS: tuple[str, ...] = ("overhead", "wrist")


class InvalidFaultError(CoreError, ValueError):
    """A fault request that names an unknown kind, object or camera, or a bad value."""


def _prob(name: str, p: float) -> None:
    if not (0.0 <= p <= 1.0) or math.isnan(p):
        raise InvalidFaultError(f"FaultConfig.{name} must be a probability in [0, 1], got {p}")


@dataclass(frozen=True)
class FaultConfig:
    grasp_fail_p: float = 0.0  # per grasp attempt
    slip_p: float = 0.0  # per lift of a grasped object
    max_consecutive: int = 2  # at most this many failures in a row for one object
    move_p: float = 0.0  # per episode: someone moves one object once
    move_window_s: tuple[float, float] = (3.0, 20.0)
    freeze_p: float = 0.0  # per episode: one camera freezes once
    freeze_window_s: tuple[float, float] = (2.0, 20.0)
    freeze_s: float = 2.0

    def __post_init__(self) -> None:
        for name in ("grasp_fail_p", "slip_p", "move_p", "freeze_p"):
            _prob(name, getattr(self, name))
        if self.max_consecutive < 0:
            raise InvalidFaultError("FaultConfig.max_consecutive must be >= 0")
        for name in ("move_window_s", "freeze_window_s"):
            lo, hi = getattr(self, name)
            if not (0.0 <= lo <= hi):
                raise InvalidFaultError(f"FaultConfig.{name} must be 0 <= lo <= hi")
        if self.freeze_s <= 0:
            raise InvalidFaultError("FaultConfig.freeze_s must be > 0")

    @property
    def active(self) -> bool:
        return any(
            (self.grasp_fail_p, self.slip_p, self.move_p, self.freeze_p)
        )


@dataclass(frozen=True)
class PendingMove:
    at: float
    obj: str | None  # None: the injector picks one that is not held
    xy: tuple[float, float] | None = None


class FaultInjector:
    """Decides every fault; the world and the sim component ask it at the right moments."""

    def __init__(self, config: FaultConfig = FaultConfig(), seed: int = 0) -> None:
        self.config = config
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.seed = int(seed)
        self.rng = np.random.default_rng([self.seed, 0x5EED])
        self._forced: dict[str, int] = {"grasp_fail": 0, "slip": 0}
        self._streak: dict[str, int] = {}
        self._moves: list[PendingMove] = []
        self._freezes: dict[str, tuple[float, float]] = {}  # camera -> (start, end)
        self.log: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {k: 0 for k in FAULT_KINDS}
        cfg = self.config
        # draw the scheduled faults up front, always consuming the same numbers
        u_move, t_move, u_freeze, t_freeze, u_cam = self.rng.random(5)
        if u_move < cfg.move_p:
            lo, hi = cfg.move_window_s
            self._moves.append(PendingMove(lo + (hi - lo) * float(t_move), None))
        if u_freeze < cfg.freeze_p:
            lo, hi = cfg.freeze_window_s
            start = lo + (hi - lo) * float(t_freeze)
            cam = CAMERAS[int(u_cam * len(CAMERAS)) % len(CAMERAS)]
            self._freezes[cam] = (start, start + cfg.freeze_s)

    def _record(self, t: float, kind: str, **detail: Any) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.log.append({"t": round(t, 4), "kind": kind, **detail})

    def _decide(self, kind: str, p: float, obj: str, t: float) -> bool:
        """One fault decision for ``obj``.  The streak is the object's failed picks in a row
        across both kinds; a grasp that holds does not end it (the lift may still slip), a
        lift that holds does."""
        if self._forced[kind] > 0:
            self._forced[kind] -= 1
            fault = True
        else:
            u = float(self.rng.random())
            fault = u < p and self._streak.get(obj, 0) < self.config.max_consecutive
        if fault:
            self._streak[obj] = self._streak.get(obj, 0) + 1
            self._record(t, kind, object=obj)
        elif kind == "slip":
            self._streak[obj] = 0
        return fault

    # asked by the world --------------------------------------------------------------------
    def grasp_fails(self, obj: str, t: float) -> bool:
        """Called once per grasp attempt (fingers closing on an object that is in reach)."""
        return self._decide("grasp_fail", self.config.grasp_fail_p, obj, t)

    def slips(self, obj: str, t: float) -> bool:
        """Called once per lift of a grasped object."""
        return self._decide("slip", self.config.slip_p, obj, t)

    def due_moves(self, t: float) -> list[PendingMove]:
        due = [m for m in self._moves if m.at <= t]
        if due:
            self._moves = [m for m in self._moves if m.at > t]
        return due

    def postpone(self, move: PendingMove) -> None:
        """The world could not apply a move now (the object is held): retry next step."""
        self._moves.append(move)

    def moved(self, t: float, obj: str, xy: tuple[float, float]) -> None:
        self._record(t, "move_object", object=obj, x=round(xy[0], 4), y=round(xy[1], 4))

    # asked by the camera publisher ---------------------------------------------------------
    def frozen(self, camera: str, t: float) -> bool:
        span = self._freezes.get(camera)
        if span is None:
            return False
        start, end = span
        if start <= t < end:
            if not self._freeze_logged(camera, start):
                self._record(t, "camera_freeze", camera=camera, start=start, end=end)
            return True
        return False

    def _freeze_logged(self, camera: str, start: float) -> bool:
        return any(
            e["kind"] == "camera_freeze" and e.get("camera") == camera and e.get("start") == start
            for e in self.log
        )

    # forced faults (sim/inject_fault) --------------------------------------------------------
    def inject(self, request: Mapping[str, Any], t: float,
               objects: tuple[str, ...] = ()) -> str:
        """Apply one fault request; returns a description.  Raises :class:`InvalidFaultError`
        naming the bad field.  Kinds: ``grasp_fail`` / ``slip`` (``count``, default 1, the
        next attempts fail), ``move_object`` (``object``, optional ``x``, ``y``, ``at``),
        ``camera_freeze`` (``camera``, ``duration_s``, optional ``at``)."""
        if not isinstance(request, Mapping):
            raise InvalidFaultError(
                f"fault request must be a mapping, got {type(request).__name__}"
            )
        kind = request.get("kind")
        if kind not in FAULT_KINDS:
            raise InvalidFaultError(f"fault kind {kind!r} is not one of {FAULT_KINDS}")
        at = _number(request, "at", t)
        if kind in ("grasp_fail", "slip"):
            count = request.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise InvalidFaultError(f"{kind}.count must be a positive integer, got {count!r}")
            self._forced[kind] += count
            return f"the next {count} {kind.replace('_', ' ')}(s) will happen"
        if kind == "move_object":
            obj = request.get("object")
            if obj is not None and obj not in objects:
                raise InvalidFaultError(f"move_object.object {obj!r} is not one of {objects}")
            xy: tuple[float, float] | None = None
            if "x" in request or "y" in request:
                xy = (_number(request, "x", math.nan), _number(request, "y", math.nan))
                if not all(math.isfinite(v) for v in xy):
                    raise InvalidFaultError("move_object needs both x and y (metres)")
            self._moves.append(PendingMove(at, obj, xy))
            return f"{obj or 'an object'} will be moved at t={at:.2f}s"
        camera = request.get("camera", "overhead")
        if camera not in CAMERAS:
            raise InvalidFaultError(f"camera_freeze.camera {camera!r} is not one of {CAMERAS}")
        duration = _number(request, "duration_s", self.config.freeze_s)
        if duration <= 0:
            raise InvalidFaultError(f"camera_freeze.duration_s must be > 0, got {duration}")
        self._freezes[camera] = (at, at + duration)
        return f"camera {camera} freezes from t={at:.2f}s for {duration:.2f}s"

    def summary(self) -> dict[str, Any]:
        return {"seed": self.seed, "counts": dict(self.counts), "log": list(self.log)}


def _number(request: Mapping[str, Any], key: str, default: float) -> float:
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidFaultError(f"{request.get('kind')}.{key} must be a number, got {value!r}")
    return float(value)
