"""Import a LeRobot SO-100 / SO-101 follower calibration into the package's arm configuration.

LeRobot keeps one JSON file per arm, ``<calibration dir>/robots/so101_follower/<id>.json``
(``so100_follower`` for the SO-100; the directory is ``$HF_LEROBOT_CALIBRATION``, else
``$HF_LEROBOT_HOME/calibration``, else ``~/.cache/huggingface/lerobot/calibration``)::

    {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1365,
                      "range_min": 746, "range_max": 3477}, ..., "gripper": {...}}

What the numbers mean there: LeRobot writes ``homing_offset`` into each servo's Homing_Offset
register (EEPROM), so the servo itself reports ``present = actual - homing_offset``, which puts
the pose the arm was in during its calibration at mid-turn (2047).  ``range_min`` /
``range_max`` are the travel recorded afterwards, in those reported ticks.  In its degrees mode
a joint's zero is the middle of that range; the gripper's 0..100 runs from ``range_min``
(closed) to ``range_max`` (open) in its 0..100 mode, while its degrees mode (this package's
convention for every joint) reads the jaw as an angle; ``drive_mode`` 1 inverts a joint in
the 0..100 / -100..100 modes only.

So the import keeps the servos as LeRobot left them and takes, per joint (the gripper
included, as the moving jaw's angle), the id, ``drive_mode``, ``homing_offset`` and raw range
as recorded; the calibration maps ticks to radians as LeRobot's degrees mode does (zero at the
middle of the range, no inversion whatever ``drive_mode`` says, as there); the limits are the
recorded travel in radians but never wider than the shipped SO-101 limits.  ``compare`` says which
joints differ from the shipped limits, and ``check_servo_offsets`` whether the servos still hold
the file's homing offsets (after a servo was reset or swapped they do not, and every position
would be off; ``write_servo_offsets`` puts them back).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import CalibrationError
from solarian_agent.hw.feetech.bus import FeetechBus
from solarian_agent.hw.feetech.calibration import (
    RAD_PER_TICK,
    SO101_JOINTS,
    ArmCalibration,
    JointCalibration,
)
from solarian_agent.hw.feetech.protocol import MAX_TICK, STS3215

ROBOT_TYPES = ("so101_follower", "so100_follower")
FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


def lerobot_calibration_dir() -> Path:
    env = os.environ.get("HF_LEROBOT_CALIBRATION", "").strip()
    if env:
        return Path(env).expanduser()
    home = os.environ.get("HF_LEROBOT_HOME", "").strip()
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface" / "lerobot"
    return base / "calibration"


def lerobot_file(robot_id: str, robot_type: str = "so101_follower") -> Path:
    if robot_type not in ROBOT_TYPES:
        raise ConfigError("robot_type", f"{robot_type!r} is not one of {', '.join(ROBOT_TYPES)}")
    return lerobot_calibration_dir() / "robots" / robot_type / f"{robot_id}.json"


@dataclass(frozen=True)
class LeRobotMotor:
    name: str
    servo_id: int
    drive_mode: int
    homing_offset: int
    range_min: int
    range_max: int


def read_lerobot(path: str | Path) -> dict[str, LeRobotMotor]:
    """The motors of a LeRobot follower calibration file, validated (errors name the motor
    and the field)."""
    p = Path(path).expanduser()
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ConfigError(str(p), "LeRobot calibration file not found (LeRobot keeps them "
                                  f"under {lerobot_calibration_dir()}/robots/"
                                  "so101_follower/<id>.json)") from e
    except json.JSONDecodeError as e:
        raise ConfigError(str(p), f"not valid JSON: {e}") from e
    if not isinstance(doc, Mapping):
        raise ConfigError(str(p), "expected a JSON object of motors")
    unknown = [k for k in doc if k not in SO101_JOINTS]
    missing = [k for k in SO101_JOINTS if k not in doc]
    if unknown or missing:
        raise ConfigError(str(p), f"expected the SO-100/SO-101 motors {list(SO101_JOINTS)}; "
                                  f"unknown: {unknown}, missing: {missing}")
    out: dict[str, LeRobotMotor] = {}
    for name in SO101_JOINTS:
        m = doc[name]
        where = f"{p}:{name}"
        if not isinstance(m, Mapping):
            raise ConfigError(where, f"expected an object with {list(FIELDS)}")
        vals: dict[str, int] = {}
        for f in FIELDS:
            v = m.get(f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{where}.{f}", f"expected a whole number, got {v!r}")
            vals[f] = v
        if vals["drive_mode"] not in (0, 1):
            raise ConfigError(f"{where}.drive_mode", f"expected 0 or 1, got {vals['drive_mode']}")
        if not 0 <= vals["range_min"] < vals["range_max"] <= MAX_TICK:
            raise ConfigError(where, f"range {vals['range_min']}..{vals['range_max']} must "
                                     f"satisfy 0 <= range_min < range_max <= {MAX_TICK}")
        out[name] = LeRobotMotor(name, vals["id"], vals["drive_mode"], vals["homing_offset"],
                                 vals["range_min"], vals["range_max"])
    return out


def to_arm_calibration(motors: Mapping[str, LeRobotMotor], shipped: ArmCalibration
                       ) -> ArmCalibration:
    """The package's calibration for the arm LeRobot calibrated (see the module docstring);
    ``shipped`` gives the hard limits and speeds."""
    joints = []
    for base in shipped.joints:
        m = motors.get(base.name)
        if m is None:
            raise CalibrationError(f"the LeRobot file has no motor {base.name!r}")
        # LeRobot's degrees mode ignores drive_mode (it inverts only its 0..100 / -100..100
        # modes): the joint reads as LeRobot's degrees only with the sign left at +1
        direction = 1
        mid = (m.range_min + m.range_max) / 2
        a, b = sorted(direction * (r - mid) * RAD_PER_TICK for r in (m.range_min, m.range_max))
        lower = math.ceil(max(base.lower, a) * 1e4) / 1e4  # rounded inward
        upper = math.floor(min(base.upper, b) * 1e4) / 1e4
        try:
            joints.append(JointCalibration(base.name, m.servo_id, m.homing_offset, direction,
                                           m.range_min, m.range_max, lower, upper,
                                           base.max_velocity))
        except CalibrationError as e:
            raise CalibrationError(f"LeRobot motor {base.name!r}: {e}") from e
    return ArmCalibration(tuple(joints), shipped.max_step)


@dataclass(frozen=True)
class JointDifference:
    joint: str
    shipped: tuple[float, float]
    imported: tuple[float, float]
    note: str  # "" when the same

    @property
    def differs(self) -> bool:
        return bool(self.note)


def compare(imported: ArmCalibration, shipped: ArmCalibration, tol_rad: float = 0.01
            ) -> list[JointDifference]:
    """Per joint: the shipped and imported limits, and a sentence where they differ."""
    out = []
    for s in shipped.joints:
        j = imported.joint(s.name)
        tol = tol_rad
        notes = []
        if j.lower > s.lower + tol:
            notes.append(f"lower limit {_u(j.lower)} instead of {_u(s.lower)}: "
                         "the recorded travel ends earlier")
        if j.upper < s.upper - tol:
            notes.append(f"upper limit {_u(j.upper)} instead of {_u(s.upper)}: "
                         "the recorded travel ends earlier")
        if j.servo_id != s.servo_id:
            notes.append(f"servo id {j.servo_id} instead of {s.servo_id}")
        if j.direction != s.direction:
            notes.append("turns the other way (drive_mode 1 in the shipped file)")
        out.append(JointDifference(s.name, (s.lower, s.upper), (j.lower, j.upper),
                                   "; ".join(notes)))
    return out


def _u(v: float) -> str:
    return f"{v:+.3f} rad"


def check_servo_offsets(bus: FeetechBus, motors: Mapping[str, LeRobotMotor]
                        ) -> dict[str, tuple[int, int]]:
    """The joints whose servo holds another homing offset than the file: name ->
    (held, file)."""
    out = {}
    for m in motors.values():
        held = bus.read_register(m.servo_id, STS3215.HOMING_OFFSET)
        if held != m.homing_offset:
            out[m.name] = (int(held), m.homing_offset)
    return out


def write_servo_offsets(bus: FeetechBus, motors: Mapping[str, LeRobotMotor]) -> None:
    """Write the file's homing offsets into the servos' EEPROM (torque off, unlocked, locked
    again), as LeRobot does when it reuses a calibration file."""
    for m in motors.values():
        bus.write_register(m.servo_id, STS3215.TORQUE_ENABLE, 0)
        bus.write_register(m.servo_id, STS3215.LOCK, 0)
        bus.write_register(m.servo_id, STS3215.HOMING_OFFSET, m.homing_offset)
        bus.write_register(m.servo_id, STS3215.LOCK, 1)


def summary(motors: Mapping[str, LeRobotMotor]) -> list[list[Any]]:
    return [[m.name, m.servo_id, m.drive_mode, m.homing_offset, m.range_min, m.range_max]
            for m in motors.values()]


__all__ = ["JointDifference", "LeRobotMotor", "ROBOT_TYPES", "check_servo_offsets", "compare",
           "lerobot_calibration_dir", "lerobot_file", "read_lerobot", "summary",
           "to_arm_calibration", "write_servo_offsets"]
