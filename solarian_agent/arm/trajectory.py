"""Joint trajectories from other stacks (a MoveIt plan, a teleop node, a script): checked whole,
then played back on time.

A trajectory is checked point by point *before* any of it runs: every joint known, every value
finite and inside its joint limits, every point's tool position inside the workspace, times
finite and increasing.  One bad point refuses the whole trajectory
(:class:`TrajectoryRefusedError`, naming the point, the joint, the value and the limit): a
partial move is never made.  A checked trajectory is played back by :class:`TrajectoryPlayer`:
the target at time ``t`` is linear between the points around ``t`` (``time_from_start``
honoured), starting from where the arm was aimed when it began; the safety layer still clamps
each tick's step to the speed limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .safety import ArmLimits, WorkspaceError, WorkspaceGuard


class TrajectoryRefusedError(ValueError):
    """The whole trajectory is refused; ``point`` (-1: not about one point), ``joint``,
    ``value``, ``limit`` and ``code`` say why."""

    def __init__(self, message: str, *, code: str, point: int = -1, joint: str = "",
                 value: float | None = None, limit: str = "") -> None:
        self.code = code
        self.point = point
        self.joint = joint
        self.value = value
        self.limit = limit
        super().__init__(message)


@dataclass(frozen=True)
class TrajectoryPoint:
    time_from_start: float  # seconds
    positions: tuple[float, ...]


@dataclass(frozen=True)
class Trajectory:
    joint_names: tuple[str, ...]
    points: tuple[TrajectoryPoint, ...]

    @property
    def duration(self) -> float:
        return self.points[-1].time_from_start if self.points else 0.0

    def target(self, i: int) -> dict[str, float]:
        return dict(zip(self.joint_names, self.points[i].positions, strict=True))


def check_trajectory(traj: Trajectory, limits: ArmLimits, guard: WorkspaceGuard | None,
                     current: Mapping[str, float]) -> None:
    """Raise :class:`TrajectoryRefusedError` unless every point is safe (module docstring)."""
    names = traj.joint_names
    if not traj.points:
        raise TrajectoryRefusedError("trajectory has no points", code="malformed")
    if len(set(names)) != len(names):
        raise TrajectoryRefusedError(f"joint names repeat: {list(names)}", code="malformed")
    known = limits.as_dict()
    for n in names:
        if n not in known:
            raise TrajectoryRefusedError(
                f"unknown joint {n!r}; the arm has {list(limits.names)}", code="unknown_joint",
                joint=n)
    prev_t = -math.inf
    for i, p in enumerate(traj.points):
        if len(p.positions) != len(names):
            raise TrajectoryRefusedError(
                f"point {i} has {len(p.positions)} positions for {len(names)} joints",
                code="malformed", point=i)
        t = p.time_from_start
        if not math.isfinite(t) or t < 0 or t <= prev_t:
            raise TrajectoryRefusedError(
                f"point {i}: time_from_start {t} must be finite, >= 0 and after the previous "
                f"point's", code="malformed", point=i)
        prev_t = t
        for n, v in zip(names, p.positions, strict=True):
            lim = known[n]
            if not math.isfinite(v):
                raise TrajectoryRefusedError(f"point {i}: {n} = {v} is not finite",
                                             code="non_finite", point=i, joint=n)
            if not lim.lower <= v <= lim.upper:
                window = f"[{lim.lower:.4f}, {lim.upper:.4f}]"
                raise TrajectoryRefusedError(
                    f"point {i}: {n} = {v:.4f} outside its limits {window}", code="limit",
                    point=i, joint=n, value=float(v), limit=window)
        if guard is not None:
            q = {**current, **traj.target(i)}
            if all(j in q for j in guard.joints):
                try:
                    guard.check_target(traj.target(i), current)
                except WorkspaceError as e:
                    raise TrajectoryRefusedError(f"point {i}: {e}", code="workspace",
                                                 point=i) from None


class TrajectoryPlayer:
    """Plays one checked trajectory on the passed-in time: :meth:`target` at ``now``."""

    def __init__(self, traj: Trajectory, start: Mapping[str, float], now: float) -> None:
        self.traj = traj
        self.t0 = now
        # where each joint starts: its aimed position, or the first point's when unknown
        first = traj.points[0].positions
        self.start = tuple(float(start.get(n, first[k]))
                           for k, n in enumerate(traj.joint_names))

    def done(self, now: float) -> bool:
        return now - self.t0 >= self.traj.duration

    def target(self, now: float) -> dict[str, float]:
        t = now - self.t0
        prev_t, prev = 0.0, self.start
        for p in self.traj.points:
            if t < p.time_from_start:
                span = p.time_from_start - prev_t
                a = 1.0 if span <= 0 else max(0.0, (t - prev_t) / span)
                return {n: prev[k] + a * (p.positions[k] - prev[k])
                        for k, n in enumerate(self.traj.joint_names)}
            prev_t, prev = p.time_from_start, p.positions
        return self.traj.target(len(self.traj.points) - 1)


def trajectory_from_lists(names: Sequence[str], points: Sequence[tuple[float, Sequence[float]]]
                          ) -> Trajectory:
    return Trajectory(tuple(names), tuple(TrajectoryPoint(float(t), tuple(float(v) for v in q))
                                          for t, q in points))


__all__ = ["Trajectory", "TrajectoryPlayer", "TrajectoryPoint", "TrajectoryRefusedError",
           "check_trajectory", "trajectory_from_lists"]
