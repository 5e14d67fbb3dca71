"""Arm safety: joint limits, the command clamp, the e-stop latch and the command watchdog.

Pure functions and small classes with no I/O, shared by the hardware driver
(``solarian_agent.hw.feetech``), the simulator and operator teleop, so that one definition of
"safe" guards every path to the servos (DESIGN.md §6):

- ``clamp_target`` turns any requested target into one that is inside the joint limits and at
  most ``min(max_velocity * dt, max_step)`` away from the current position; NaN, infinities,
  unknown joint names and bad ``dt`` raise a named ``UnsafeCommandError`` subclass instead.
- ``EStopLatch`` is tripped by anyone and released only by an explicit ``reset()``.
- ``CommandWatchdog`` says when the command stream went quiet; the controller then holds the
  current position and drops the old target (it never keeps moving toward it).

Units: revolute joints in radians (rad/s), the gripper in metres of aperture (m/s).
Time comes from a passed ``Clock`` (``solarian_agent.core.clock``), never from ``time``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solarian_agent.core.clock import Clock

# --------------------------------------------------------------------------- errors


class SafetyError(Exception):
    """Base of the safety layer's errors."""


class UnsafeCommandError(SafetyError, ValueError):
    """A command that must not reach the arm.  ``joint`` names the offending joint ("" when the
    problem is not about one joint) and ``value`` the offending value."""

    def __init__(self, message: str, joint: str = "", value: object = None) -> None:
        self.joint = joint
        self.value = value
        super().__init__(message)


class UnknownJointError(UnsafeCommandError):
    """A command names a joint the arm does not have."""


class NonFiniteCommandError(UnsafeCommandError):
    """A command value is NaN or infinite (or not a number at all)."""


class InvalidTimestepError(UnsafeCommandError):
    """``dt`` is negative, NaN or infinite."""


class EStopLatchedError(SafetyError):
    """A motion command arrived while the e-stop latch is tripped; ``reason`` is the trip's."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"e-stop is latched ({reason}); reset it before commanding motion")


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class JointLimit:
    """Position window ``[lower, upper]`` and speed limit of one joint (rad or m, per second)."""

    name: str
    lower: float
    upper: float
    max_velocity: float

    def __post_init__(self) -> None:
        for field_name in ("lower", "upper", "max_velocity"):
            v = getattr(self, field_name)
            if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"joint {self.name!r}: {field_name} must be a finite number, "
                                 f"got {v!r}")
        if not self.lower < self.upper:
            raise ValueError(f"joint {self.name!r}: lower ({self.lower}) must be below upper "
                             f"({self.upper})")
        if self.max_velocity <= 0:
            raise ValueError(f"joint {self.name!r}: max_velocity must be > 0, "
                             f"got {self.max_velocity}")

    def clip(self, value: float) -> float:
        return min(self.upper, max(self.lower, value))


@dataclass(frozen=True)
class ArmLimits:
    """All joint limits of an arm plus ``max_step``: the most any joint may move per command
    (in that joint's own units), on top of ``max_velocity * dt``."""

    joints: tuple[JointLimit, ...]
    max_step: float

    def __post_init__(self) -> None:
        names = [j.name for j in self.joints]
        if not names:
            raise ValueError("ArmLimits needs at least one joint")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"ArmLimits: duplicate joint names {dup}")
        if not (math.isfinite(self.max_step) and self.max_step > 0):
            raise ValueError(f"ArmLimits: max_step must be a finite number > 0, "
                             f"got {self.max_step!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    def joint(self, name: str) -> JointLimit:
        for j in self.joints:
            if j.name == name:
                return j
        raise UnknownJointError(
            f"unknown joint {name!r}; the arm has {list(self.names)}", joint=str(name)
        )

    def as_dict(self) -> dict[str, JointLimit]:
        return {j.name: j for j in self.joints}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "arm") -> ArmLimits:
        """Build from the ``arm:`` block of the calibration YAML (``config/arm_so101.yaml``):
        ``max_step`` and ``joints: {name: {lower, upper, max_velocity, ...}}``.  Other keys
        (servo ids, calibration ticks) are ignored here."""
        from solarian_agent.core.errors import ConfigError

        if not isinstance(data, Mapping):
            raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
        joints_raw = data.get("joints")
        if not isinstance(joints_raw, Mapping) or not joints_raw:
            raise ConfigError(f"{where}.joints", "expected a non-empty mapping of joints")
        joints: list[JointLimit] = []
        for name, spec in joints_raw.items():
            path = f"{where}.joints.{name}"
            if not isinstance(spec, Mapping):
                raise ConfigError(path, f"expected a mapping, got {type(spec).__name__}")
            missing = [k for k in ("lower", "upper", "max_velocity") if k not in spec]
            if missing:
                raise ConfigError(path, f"missing {missing}")
            try:
                joints.append(JointLimit(str(name), float(spec["lower"]), float(spec["upper"]),
                                         float(spec["max_velocity"])))
            except (TypeError, ValueError) as e:
                raise ConfigError(path, str(e)) from e
        try:
            return cls(tuple(joints), float(data.get("max_step", 0.1)))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{where}.max_step", str(e)) from e

    @classmethod
    def from_yaml(cls, path: str | Path) -> ArmLimits:
        import yaml

        # the codec's spelling, or the locale's default under a UTF-8 locale (CI's), read the
        # same: equivalent mutants here; utf-8 is named for machines with another locale
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        if not isinstance(doc, Mapping) or "arm" not in doc:
            from solarian_agent.core.errors import ConfigError

            raise ConfigError(str(path), "expected a top-level 'arm:' block")
        return cls.from_mapping(doc["arm"], where=f"{path}:arm")


# --------------------------------------------------------------------------- the clamp


def _finite(joint: str, value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NonFiniteCommandError(
            f"joint {joint!r}: {what} must be a number, got {type(value).__name__} {value!r}",
            joint=joint, value=value,
        )
    v = float(value)
    if not math.isfinite(v):
        raise NonFiniteCommandError(f"joint {joint!r}: {what} is {v!r}, not a finite number",
                                    joint=joint, value=v)
    return v


def validate_target(limits: ArmLimits, target: Mapping[str, object]) -> dict[str, float]:
    """Check names and values of a target without moving anything; return it as floats.

    Raises ``UnknownJointError`` / ``NonFiniteCommandError`` naming the joint."""
    known = limits.as_dict()
    out: dict[str, float] = {}
    for name, value in target.items():
        if name not in known:
            raise UnknownJointError(
                f"unknown joint {name!r} in command; the arm has {list(limits.names)}",
                joint=str(name), value=value,
            )
        out[name] = _finite(name, value, "target")
    return out


def clamp_position(limits: ArmLimits, target: Mapping[str, object]) -> dict[str, float]:
    """Validate a target and clip every joint into its ``[lower, upper]`` window."""
    known = limits.as_dict()
    return {n: known[n].clip(v) for n, v in validate_target(limits, target).items()}


def clamp_target(
    limits: ArmLimits,
    current: Mapping[str, float],
    target: Mapping[str, float],
    dt: float,
    max_velocity: float | None = None,
) -> dict[str, float]:
    """The safe next position for each joint in ``target``.

    For every targeted joint: clip the target into the joint's limits, then move from
    ``current`` toward it by at most ``min(max_velocity * dt, limits.max_step)`` (the optional
    ``max_velocity`` argument can only lower a joint's configured limit), and clip the result
    into the limits again (a joint found outside its window is brought back inside).
    Returns only the targeted joints.  ``dt == 0`` yields no motion.

    Raises ``UnknownJointError`` for a name the arm lacks, ``NonFiniteCommandError`` for NaN,
    infinite or non-numeric targets or current positions, ``InvalidTimestepError`` for a bad
    ``dt``; nothing is returned partially.
    """
    if isinstance(dt, bool) or not isinstance(dt, int | float) or not math.isfinite(dt) \
            or dt < 0:
        raise InvalidTimestepError(f"dt must be a finite number >= 0, got {dt!r}", value=dt)
    if max_velocity is not None and (not math.isfinite(max_velocity) or max_velocity < 0):
        raise UnsafeCommandError(f"max_velocity must be a finite number >= 0, got "
                                 f"{max_velocity!r}", value=max_velocity)
    goals = validate_target(limits, target)
    known = limits.as_dict()
    out: dict[str, float] = {}
    for name, goal in goals.items():
        lim = known[name]
        if name not in current:
            raise UnsafeCommandError(
                f"joint {name!r}: no current position known, cannot limit its speed",
                joint=name,
            )
        cur = _finite(name, current[name], "current position")
        v = lim.max_velocity if max_velocity is None or max_velocity <= 0 \
            else min(lim.max_velocity, max_velocity)
        step = min(v * dt, limits.max_step)
        delta = lim.clip(goal) - cur
        delta = max(-step, min(step, delta))
        out[name] = lim.clip(cur + delta)
    return out


def within_limits(limits: ArmLimits, positions: Mapping[str, float], tol: float = 0.0) -> bool:
    """True when every named joint is finite and inside its window (± ``tol``)."""
    known = limits.as_dict()
    for name, v in positions.items():
        lim = known.get(name)
        if lim is None or not math.isfinite(v):
            return False
        if v < lim.lower - tol or v > lim.upper + tol:
            return False
    return True


# --------------------------------------------------------------------------- workspace


class WorkspaceError(UnsafeCommandError):
    """A target or step that would put the gripper tip outside the workspace box."""


@dataclass(frozen=True)
class Workspace:
    """The box the gripper tip must stay in, in the arm's base frame (metres): the table top
    is z = 0, so ``z[0]`` keeps the jaws off the table; x and y keep the arm over it."""

    x: tuple[float, float] = (-0.15, 0.45)
    y: tuple[float, float] = (-0.40, 0.40)
    z: tuple[float, float] = (0.005, 0.45)

    def __post_init__(self) -> None:
        for axis in ("x", "y", "z"):
            lo, hi = getattr(self, axis)
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"workspace.{axis} must be [lo, hi] with lo < hi, "
                                 f"got {(lo, hi)}")

    def excess(self, xyz: Sequence[float]) -> float:
        """How far (m) the point lies outside the box; 0 inside."""
        out = 0.0
        for v, (lo, hi) in zip(xyz, (self.x, self.y, self.z), strict=True):
            out = max(out, lo - v, v - hi)
        return out

    def violation(self, xyz: Sequence[float]) -> str:
        parts = []
        for axis, v, (lo, hi) in zip("xyz", xyz, (self.x, self.y, self.z), strict=True):
            if v < lo or v > hi:
                parts.append(f"tip {axis}={v:.3f} m outside [{lo:g}, {hi:g}]")
        return "; ".join(parts)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "workspace") -> Workspace:
        from solarian_agent.core.errors import ConfigError

        if not isinstance(data, Mapping):
            raise ConfigError(where, f"expected a mapping with x, y, z, got {data!r}")
        unknown = sorted(set(data) - {"x", "y", "z"})
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}", "unknown key; allowed keys: x, y, z")
        kw: dict[str, tuple[float, float]] = {}
        for axis in ("x", "y", "z"):
            if axis in data:
                v = data[axis]
                if not (isinstance(v, Sequence) and len(v) == 2):
                    raise ConfigError(f"{where}.{axis}", f"must be [lo, hi], got {v!r}")
                kw[axis] = (float(v[0]), float(v[1]))
        try:
            return cls(**kw)
        except ValueError as e:
            raise ConfigError(where, str(e)) from e


class WorkspaceGuard:
    """Checks joint positions against a :class:`Workspace` through forward kinematics.

    ``fk`` maps joint positions (in ``joints`` order) to the tip's (x, y, z).  A *target* must
    lie inside the box.  A *step* (the next interpolated setpoint) must lie inside, or at least
    not further outside than where the arm already is, so an arm that starts outside can only
    move back in; a joint-space path between two safe targets that would dip outside (into the
    table) is stopped at the boundary instead of followed.
    """

    def __init__(self, workspace: Workspace, fk: Callable[[Sequence[float]], Sequence[float]],
                 joints: Sequence[str]) -> None:
        self.workspace = workspace
        self.fk = fk
        self.joints = tuple(joints)
        self.rejected = 0

    def _xyz(self, q: Mapping[str, float]) -> Sequence[float]:
        return self.fk([float(q[j]) for j in self.joints])

    def check_target(self, target: Mapping[str, float], current: Mapping[str, float]) -> None:
        q = {**current, **target}
        xyz = self._xyz(q)
        why = self.workspace.violation(xyz)
        if why:
            self.rejected += 1
            raise WorkspaceError(f"target refused: {why}")

    def safe_step(self, current: Mapping[str, float], nxt: Mapping[str, float]
                  ) -> dict[str, float]:
        """``nxt`` if it keeps the tip in (or no further out of) the box, else ``current``
        for the same joints (hold)."""
        q_next = {**current, **nxt}
        after = self.workspace.excess(self._xyz(q_next))
        # `<` would go on to the check below, which also follows nxt (excess is never below
        # 0, so after <= before): an equivalent mutant; this test spares the second FK
        if after <= 0.0:
            return dict(nxt)
        before = self.workspace.excess(self._xyz(current))
        if after <= before:
            return dict(nxt)
        self.rejected += 1
        return {k: float(current[k]) for k in nxt}


# --------------------------------------------------------------------------- e-stop


class EStopLatch:
    """A latched emergency stop: ``trip(reason)`` from any thread; only ``reset()`` releases it.

    The first trip's reason is kept (later trips while latched are counted in ``trip_count``
    and listed in ``reasons``), so the operator sees what stopped the arm first.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason = ""
        self._reasons: list[str] = []
        self._tripped = False
        self.trip_count = 0

    def trip(self, reason: str) -> bool:
        """Latch the stop.  Returns True if this call latched it (False: already latched)."""
        with self._lock:
            self.trip_count += 1
            self._reasons.append(reason or "unspecified")
            del self._reasons[:-20]
            if self._tripped:
                return False
            self._tripped = True
            self._reason = reason or "unspecified"
            return True

    def reset(self) -> bool:
        """Release the latch.  Returns True if it was tripped."""
        with self._lock:
            was = self._tripped
            self._tripped = False
            self._reason = ""
            self._reasons.clear()
            return was

    @property
    def tripped(self) -> bool:
        with self._lock:
            return self._tripped

    @property
    def reason(self) -> str:
        with self._lock:
            return self._reason

    @property
    def reasons(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._reasons)

    def check(self) -> None:
        """Raise ``EStopLatchedError`` while tripped."""
        with self._lock:
            if self._tripped:
                raise EStopLatchedError(self._reason)


# --------------------------------------------------------------------------- watchdog


class CommandWatchdog:
    """Says whether the command stream is fresh: ``feed()`` on every accepted command;
    ``expired()`` once no command arrived for ``timeout_s`` (and before the first one).

    The controller, on expiry, holds the current position and forgets the old target, so a
    late-resumed stream starts from where the arm is, never from a stale goal.
    """

    def __init__(self, timeout_s: float, clock: Clock) -> None:
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"CommandWatchdog timeout_s must be > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self._clock = clock
        self._last: float | None = None
        self._lock = threading.Lock()

    def feed(self) -> None:
        with self._lock:
            self._last = self._clock.now()

    def clear(self) -> None:
        """Forget the last command (as if none ever came)."""
        with self._lock:
            self._last = None

    def age(self) -> float | None:
        """Seconds since the last command, or None if there was none."""
        with self._lock:
            return None if self._last is None else self._clock.now() - self._last

    def expired(self) -> bool:
        a = self.age()
        return a is None or a > self.timeout_s

    @property
    def last_feed(self) -> float | None:
        with self._lock:
            return self._last
