"""Arm calibration: raw servo ticks ↔ joint radians, stored as YAML, and the guided procedure.

Every joint, the gripper included, follows LeRobot's calibrated degrees: a joint's zero is
the middle of its recorded raw range, and

    radians = sign * (raw - (range_min + range_max) / 2) * 2*pi / 4095

(4095 is LeRobot's resolution minus one for the STS3215) with ``sign`` -1 where this file's
``drive_mode`` is 1.  LeRobot's degrees mode applies no drive mode, so an imported LeRobot
calibration gets ``drive_mode`` 0 on every joint and radians = LeRobot degrees * pi/180: a
LeRobot calibration, dataset or policy maps one to one.  ``drive_mode`` 1 is for an arm
calibrated here whose servo was mounted the other way.  ``homing_offset`` is the value
LeRobot writes into each servo's Homing_Offset register (the servo reports ``actual -
homing_offset``); the raw ticks here are those reported ticks, so it takes no part in the
conversion.  The gripper is the moving jaw's
angle (radians; more is more open); ``solarian_agent.arm.jaw`` turns it into millimetres.

The calibration file (``config/arm_so101.yaml``) has an ``arm:`` block that
``solarian_agent.arm.safety.ArmLimits.from_yaml`` reads too, so the simulator and the driver
share one set of limits.

The guided procedure is driven by a ``CalibrationUI`` (instructions, a confirmation, and a
progress callback that says when to stop recording), so it runs the same in a terminal, in a
GUI and in a test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from solarian_agent.arm.safety import (
    ArmLimits,
    JointLimit,
    NonFiniteCommandError,
    UnknownJointError,
)
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import CalibrationError
from solarian_agent.hw.feetech.protocol import MAX_TICK, TICKS_PER_TURN

# LeRobot divides by the resolution minus one (4095), not by the ticks per turn (4096)
RAD_PER_TICK = 2.0 * math.pi / (TICKS_PER_TURN - 1)

SO101_JOINTS: tuple[str, ...] = (
    "shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper",
)
SO101_IDS: dict[str, int] = {n: i + 1 for i, n in enumerate(SO101_JOINTS)}
# Hard limits of the SO-101 (rad, the published model's joint limits) and speed limits (rad/s).
SO101_LIMITS: dict[str, tuple[float, float, float]] = {
    "shoulder_pan": (-1.91986, 1.91986, 1.5),
    "shoulder_lift": (-1.74533, 1.74533, 1.5),
    "elbow_flex": (-1.69, 1.69, 1.5),
    "wrist_flex": (-1.65806, 1.65806, 2.0),
    "wrist_roll": (-2.74385, 2.84121, 2.5),
    "gripper": (-0.174533, 1.74533, 2.0),
}
GRIPPER = "gripper"
# keys of the former format (zero at homing_offset, per-joint units_per_tick, gripper in metres)
OLD_KEYS = ("direction", "units_per_tick")


@dataclass(frozen=True)
class JointCalibration:
    name: str
    servo_id: int
    homing_offset: int
    direction: int
    range_min: int
    range_max: int
    lower: float
    upper: float
    max_velocity: float

    units_per_tick = RAD_PER_TICK  # the same for every joint (a class constant, not a field)

    def __post_init__(self) -> None:
        where = f"joint {self.name!r}"
        if not 0 <= self.servo_id <= 253:
            raise CalibrationError(f"{where}: servo id {self.servo_id} outside 0..253")
        if self.direction not in (1, -1):
            raise CalibrationError(f"{where}: direction must be 1 or -1, got {self.direction}")
        if not 0 <= self.range_min < self.range_max <= MAX_TICK:
            raise CalibrationError(f"{where}: raw range {self.range_min}..{self.range_max} "
                                   f"must satisfy 0 <= min < max <= {MAX_TICK}")
        if not -2047 <= self.homing_offset <= 2047:
            raise CalibrationError(f"{where}: homing offset {self.homing_offset} outside the "
                                   "servo register's -2047..2047")
        for k in ("lower", "upper", "max_velocity"):
            if not math.isfinite(getattr(self, k)):
                raise CalibrationError(f"{where}: {k} is not finite")
        if not self.lower < self.upper:
            raise CalibrationError(f"{where}: lower {self.lower} must be below upper "
                                   f"{self.upper}")
        if self.max_velocity <= 0:
            raise CalibrationError(f"{where}: max_velocity must be > 0")
        lo_raw, hi_raw = sorted((self.raw_unclipped(self.lower), self.raw_unclipped(self.upper)))
        if lo_raw < self.range_min - 1 or hi_raw > self.range_max + 1:
            raise CalibrationError(
                f"{where}: limits {self.lower:g}..{self.upper:g} map to ticks "
                f"{lo_raw:.0f}..{hi_raw:.0f}, outside the calibrated raw range "
                f"{self.range_min}..{self.range_max}; recalibrate or narrow the limits"
            )

    @property
    def mid(self) -> float:
        """The raw tick at joint zero: the middle of the recorded range (may be a half tick)."""
        return (self.range_min + self.range_max) / 2

    @property
    def drive_mode(self) -> int:
        return 1 if self.direction < 0 else 0

    def to_units(self, raw: float) -> float:
        return self.direction * (raw - self.mid) * RAD_PER_TICK

    def raw_unclipped(self, units: float) -> float:
        return self.mid + self.direction * units / RAD_PER_TICK

    def to_raw(self, units: float) -> int:
        """Raw goal for a position in joint units, clipped into the joint's limits and raw
        range: whatever comes in, what goes out is inside both."""
        if not math.isfinite(units):
            raise NonFiniteCommandError(f"joint {self.name!r}: goal {units!r} is not finite",
                                        joint=self.name, value=units)
        u = min(self.upper, max(self.lower, units))
        lo, hi = self.raw_window()
        return int(min(hi, max(lo, round(self.raw_unclipped(u)))))

    def raw_window(self) -> tuple[int, int]:
        """The raw ticks a goal may take: the limits, inside the recorded range."""
        a, b = self.raw_unclipped(self.lower), self.raw_unclipped(self.upper)
        lo, hi = math.ceil(min(a, b) - 1e-9), math.floor(max(a, b) + 1e-9)
        return max(lo, self.range_min), min(hi, self.range_max)

    def velocity_to_units(self, ticks_per_s: float) -> float:
        return self.direction * ticks_per_s * RAD_PER_TICK

    def limit(self) -> JointLimit:
        return JointLimit(self.name, self.lower, self.upper, self.max_velocity)


@dataclass(frozen=True)
class ArmCalibration:
    joints: tuple[JointCalibration, ...]
    max_step: float = 0.1

    def __post_init__(self) -> None:
        ids = [j.servo_id for j in self.joints]
        if len(set(ids)) != len(ids):
            raise CalibrationError(f"duplicate servo ids in calibration: {ids}")
        names = [j.name for j in self.joints]
        if len(set(names)) != len(names):
            raise CalibrationError(f"duplicate joint names in calibration: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def ids(self) -> dict[str, int]:
        return {j.name: j.servo_id for j in self.joints}

    def joint(self, name: str) -> JointCalibration:
        for j in self.joints:
            if j.name == name:
                return j
        raise UnknownJointError(f"unknown joint {name!r}; calibrated joints are "
                                f"{list(self.names)}", joint=name)

    def by_id(self, servo_id: int) -> JointCalibration:
        for j in self.joints:
            if j.servo_id == servo_id:
                return j
        raise KeyError(f"no joint with servo id {servo_id}")

    def limits(self) -> ArmLimits:
        return ArmLimits(tuple(j.limit() for j in self.joints), self.max_step)

    def with_ids(self, ids: Mapping[str, int]) -> ArmCalibration:
        unknown = set(ids) - set(self.names)
        if unknown:
            raise CalibrationError(f"ids given for joints the calibration lacks: "
                                   f"{sorted(unknown)}")
        return ArmCalibration(tuple(replace(j, servo_id=ids.get(j.name, j.servo_id))
                                    for j in self.joints), self.max_step)

    # ------------------------------------------------------------------ YAML

    def to_mapping(self) -> dict[str, Any]:
        joints: dict[str, Any] = {}
        for j in self.joints:
            joints[j.name] = {
                "id": j.servo_id, "drive_mode": j.drive_mode, "homing_offset": j.homing_offset,
                "range_min": j.range_min, "range_max": j.range_max,
                "lower": round(j.lower, 6), "upper": round(j.upper, 6),
                "max_velocity": j.max_velocity,
            }
        return {"max_step": self.max_step, "joints": joints}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "arm") -> ArmCalibration:
        if not isinstance(data, Mapping):
            raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
        raw_joints = data.get("joints")
        if not isinstance(raw_joints, Mapping) or not raw_joints:
            raise ConfigError(f"{where}.joints", "expected a non-empty mapping of joints")
        joints = []
        for name, spec in raw_joints.items():
            path = f"{where}.joints.{name}"
            if not isinstance(spec, Mapping):
                raise ConfigError(path, f"expected a mapping, got {type(spec).__name__}")
            old = [k for k in OLD_KEYS if k in spec]
            if old:
                raise ConfigError(path, f"has {old}: a calibration of the former format (zero "
                                        "at homing_offset, gripper in metres); joints are now "
                                        "LeRobot's degrees in radians with drive_mode, zero at "
                                        "mid-range: recalibrate, or import-lerobot")
            req = ("id", "drive_mode", "homing_offset", "range_min", "range_max", "lower",
                   "upper", "max_velocity")
            missing = [k for k in req if k not in spec]
            if missing:
                raise ConfigError(path, f"missing {missing}")
            try:
                dm = _int(spec["drive_mode"])
                if dm not in (0, 1):
                    raise ValueError(f"drive_mode must be 0 or 1, got {dm}")
                joints.append(JointCalibration(
                    name=str(name), servo_id=_int(spec["id"]),
                    homing_offset=_int(spec["homing_offset"]),
                    direction=-1 if dm else 1, range_min=_int(spec["range_min"]),
                    range_max=_int(spec["range_max"]), lower=float(spec["lower"]),
                    upper=float(spec["upper"]), max_velocity=float(spec["max_velocity"]),
                ))
            except (TypeError, ValueError, CalibrationError) as e:
                raise ConfigError(path, str(e)) from e
        try:
            return cls(tuple(joints), float(data.get("max_step", 0.1)))
        except (TypeError, ValueError, CalibrationError) as e:
            raise ConfigError(where, str(e)) from e

    @classmethod
    def load(cls, path: str | Path) -> ArmCalibration:
        from solarian_agent.core.config import yaml_block

        p = Path(path)
        if not p.exists():
            raise CalibrationError(f"calibration file {p} does not exist; run the guided "
                                   "calibration (python -m solarian_agent.hw.feetech calibrate)")
        return cls.from_mapping(yaml_block(p, "arm"), where=f"{p}:arm")

    def save(self, path: str | Path, settings: Mapping[str, Any] | None = None) -> None:
        """Write the calibration (and ``settings`` such as port / baudrate / rate_hz, kept
        from the existing file when not given) as ``arm:`` YAML."""
        import yaml

        p = Path(path)
        keep: dict[str, Any] = {}
        if settings is None and p.exists():
            try:
                old = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
                keep = {k: v for k, v in (old.get("arm") or {}).items()
                        if k not in ("joints", "max_step")}
            except (yaml.YAMLError, AttributeError):
                keep = {}
        elif settings is not None:
            keep = dict(settings)
        arm = {**keep, **self.to_mapping()}
        from solarian_agent.core.config import write_yaml

        write_yaml(p, {"arm": arm}, "# SO-101 arm calibration "
                   "(solarian_agent.hw.feetech.calibration).\n# Units: radians (LeRobot "
                   "degrees * pi/180), the gripper the jaw angle; ticks 0..4095.\n")


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or float(v) != int(v):
        raise ValueError(f"expected an integer, got {v!r}")
    return int(v)


def default_so101(max_step: float = 0.1) -> ArmCalibration:
    """Nominal SO-101 calibration: zero at 2048, raw ranges 2048 ± the larger of the joint's
    limits in ticks (so the middle stays at 2048), limits as SO101_LIMITS.  Good for the
    simulator; calibrate a real arm."""
    joints = []
    for name in SO101_JOINTS:
        lo, hi, v = SO101_LIMITS[name]
        half = math.ceil(max(-lo, hi) / RAD_PER_TICK) + 2
        joints.append(JointCalibration(name, SO101_IDS[name], 0, 1, max(0, 2048 - half),
                                       min(MAX_TICK, 2048 + half), lo, hi, v))
    return ArmCalibration(tuple(joints), max_step)


# --------------------------------------------------------------------------- guided procedure


class CalibrationUI(Protocol):
    """What the guided calibration needs from its user interface."""

    def instruct(self, step: str, message: str) -> None:
        """Tell the user what to do now (``step`` is a short id: "torque_off", "zero",
        "range", "done")."""
        ...

    def confirm(self, step: str) -> bool:
        """Wait until the user says the step is done; False aborts the calibration."""
        ...

    def progress(self, ranges: Mapping[str, tuple[int, int, int]]) -> bool:
        """Called after every sample with ``{joint: (min, now, max)}`` raw ticks; return
        False to stop recording (the user is done)."""
        ...


class CalibrationAborted(CalibrationError):
    """The user aborted the guided calibration."""


def with_held_offsets(cal: ArmCalibration, read_offset: Callable[[int], int]
                      ) -> ArmCalibration:
    """``cal`` with each joint's homing offset as its servo holds it (``read_offset(id)``).

    A calibration records ticks as the servos report them (actual - their homing offset), so
    a file is this arm's only with the offsets these servos hold: taking them from an older
    file (another arm's, or before the servos were reset) would name offsets the ranges were
    not measured under, and a check of the file against the servos would fail."""
    return replace(cal, joints=tuple(replace(j, homing_offset=int(read_offset(j.servo_id)))
                                     for j in cal.joints))


def run_guided_calibration(
    read_raw: Callable[[], Mapping[str, int]],
    ui: CalibrationUI,
    base: ArmCalibration | None = None,
    set_torque: Callable[[bool], None] | None = None,
    max_samples: int = 100_000,
    margin_ticks: int = 10,
    min_span_ticks: int = 100,
) -> ArmCalibration:
    """Record the joints' raw ranges while the user moves the arm by hand, as LeRobot does.

    1. torque off (``set_torque(False)``) so the joints move freely;
    2. the user poses the arm in the middle of every joint's travel and confirms (the pose is
       only checked: it must lie inside the travel recorded next);
    3. the user moves every joint, the gripper included, through its full travel while
       ``read_raw`` is sampled (at most ``max_samples`` times) until ``ui.progress`` returns
       False;
    4. ranges shrink by ``margin_ticks``; a joint's zero is the middle of its range (LeRobot's
       degrees); limits become the recorded travel in radians, never wider than ``base``'s
       limits (the arm's hard limits); ids, drive modes and homing offsets come from ``base``
       (:func:`with_held_offsets` gives it the offsets the servos hold).

    Raises ``CalibrationAborted`` when the user aborts and ``CalibrationError`` naming the
    joint when a joint barely moved or the middle pose lies outside its travel.
    """
    base = base or default_so101()
    names = base.names
    if set_torque is not None:
        ui.instruct("torque_off", "Torque is off: every joint can be moved by hand.")
        set_torque(False)
    ui.instruct("zero", "Put the arm in the middle of its travel: shoulder centred, upper arm "
                "and forearm at their middle position, wrist level, roll centred, gripper "
                "half open. Confirm when it is there.")
    if not ui.confirm("zero"):
        raise CalibrationAborted("calibration aborted at the zero pose")
    zero = _sample(read_raw, names)
    ui.instruct("range", "Move every joint slowly through its full travel, end to end "
                "(open and close the gripper fully). Confirm when done.")
    lo = dict(zero)
    hi = dict(zero)
    for _ in range(max_samples):
        now = _sample(read_raw, names)
        for n in names:
            lo[n] = min(lo[n], now[n])
            hi[n] = max(hi[n], now[n])
        if not ui.progress({n: (lo[n], now[n], hi[n]) for n in names}):
            break
    joints = []
    for b in base.joints:
        n = b.name
        span = hi[n] - lo[n]
        if span < min_span_ticks:
            raise CalibrationError(f"joint {n!r} moved only {span} ticks during calibration "
                                   f"(need at least {min_span_ticks}); move it end to end")
        rmin, rmax = lo[n] + margin_ticks, hi[n] - margin_ticks
        if not rmin <= zero[n] <= rmax:
            raise CalibrationError(f"joint {n!r}: middle pose tick {zero[n]} lies outside its "
                                   f"recorded travel {rmin}..{rmax}")
        mid = (rmin + rmax) / 2
        a, c = sorted(b.direction * (r - mid) * RAD_PER_TICK for r in (rmin, rmax))
        lower, upper = max(b.lower, a), min(b.upper, c)
        # round inward so the limits map inside the range
        lower = math.ceil(lower * 1e4) / 1e4
        upper = math.floor(upper * 1e4) / 1e4
        joints.append(JointCalibration(n, b.servo_id, b.homing_offset, b.direction, rmin, rmax,
                                       lower, upper, b.max_velocity))
    cal = ArmCalibration(tuple(joints), base.max_step)
    ui.instruct("done", "Calibration recorded.")
    return cal


def _sample(read_raw: Callable[[], Mapping[str, int]], names: tuple[str, ...]) -> dict[str, int]:
    raw = read_raw()
    missing = [n for n in names if n not in raw]
    if missing:
        raise CalibrationError(f"no reading for joints {missing} during calibration")
    return {n: int(raw[n]) for n in names}
