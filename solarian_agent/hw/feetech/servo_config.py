"""What is written into each STS3215 when the arm connects, and the check that it took.

Every connect (``FeetechArm.connect``), ``setup-motors`` and ``calibrate`` write, per servo:

- Return_Delay_Time = 0: the servo answers 2 µs after a request instead of the factory's
  500 µs; with six servos answering a SYNC_READ that is 3 ms of every 20 ms tick back.
- Acceleration = 254: the servo's own ramp is as steep as it goes; the controller already
  limits speed and step, and a soft ramp on top would make the arm lag its goals.
- Operating_Mode = 0: position control (the other modes are speed / PWM / step).
- P/I/D = 16/0/32: the factory P of 32 makes an SO-101 joint buzz and shake around its goal
  under the arm's own weight; 16 holds it still.  No I term: it winds up against the table.
- the gripper only: Max_Torque_Limit 500 (half the stall torque; also written to the RAM
  Torque_Limit so it holds before the next power cycle), Protection_Current 250 and
  Overload_Torque 25 %: a jaw closed on an object stalls by design, and at full torque it
  crushes the object and cooks its servo within a minute.
- Min/Max_Position_Limit = the calibrated raw range: the servo itself then clips any goal
  outside the range, whatever the software above the bus sends.

Each value is read first and a servo already set up is left alone.  EEPROM registers
(addresses below 40) take a write only while Lock is 0, so a servo that needs writes is
unlocked, written and locked again; its torque is switched off first (a servo must not hold
while its limits and gains change under it: the controller brings torque back holding where
the arm is).  Every value is read back; a servo that kept another value is a
``ServoConfigError`` naming the joint, the servo and the register.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import BusError, HardwareError
from solarian_agent.hw.feetech.bus import FeetechBus
from solarian_agent.hw.feetech.calibration import GRIPPER, ArmCalibration, JointCalibration
from solarian_agent.hw.feetech.protocol import STS3215, Register


class ServoConfigError(HardwareError):
    """A servo did not take a setting: the message names the joint, servo and register."""

    def __init__(self, joint: str, servo_id: int, register: Register, message: str) -> None:
        self.joint = joint
        self.servo_id = servo_id
        self.register = register
        super().__init__(f"{joint} (servo {servo_id}) register {register.name} "
                         f"({register.address}): {message}")


# name -> (register, lowest, highest): the values the STS3215 accepts
_RANGES: dict[str, tuple[Register, int, int]] = {
    "return_delay": (STS3215.RETURN_DELAY, 0, 254),
    "acceleration": (STS3215.ACCELERATION, 0, 254),
    "operating_mode": (STS3215.OPERATING_MODE, 0, 3),
    "p_coefficient": (STS3215.P_COEFFICIENT, 0, 254),
    "i_coefficient": (STS3215.I_COEFFICIENT, 0, 254),
    "d_coefficient": (STS3215.D_COEFFICIENT, 0, 254),
    "gripper_max_torque": (STS3215.MAX_TORQUE_LIMIT, 1, 1000),
    "gripper_protection_current": (STS3215.PROTECTION_CURRENT, 1, 511),
    "gripper_overload_torque": (STS3215.OVERLOAD_TORQUE, 1, 100),
}


@dataclass(frozen=True)
class ServoSettings:
    """The ``arm.servo_settings:`` block of the arm YAML (defaults: the SO-101's)."""

    return_delay: int = 0
    acceleration: int = 254
    operating_mode: int = 0
    p_coefficient: int = 16
    i_coefficient: int = 0
    d_coefficient: int = 32
    gripper_max_torque: int = 500
    gripper_protection_current: int = 250
    gripper_overload_torque: int = 25
    position_limits: bool = True  # write the calibrated range into Min/Max_Position_Limit
    where: str = "arm.servo_settings"

    def __post_init__(self) -> None:
        for name, (_, lo, hi) in _RANGES.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(f"{self.where}.{name}",
                                  f"must be an integer in {lo}..{hi}, got {v!r}")
        if not isinstance(self.position_limits, bool):
            raise ConfigError(f"{self.where}.position_limits",
                              f"must be true or false, got {self.position_limits!r}")

    @classmethod
    def from_mapping(cls, data: Any, where: str = "arm.servo_settings") -> ServoSettings:
        from solarian_agent.core.config import settings_from_mapping

        return settings_from_mapping(cls, data, where)


@dataclass(frozen=True)
class RegisterWrite:
    """One value for one servo's register, and why it is written."""

    joint: str
    servo_id: int
    register: Register
    value: int
    why: str


def joint_writes(j: JointCalibration, s: ServoSettings) -> list[RegisterWrite]:
    """What one joint's servo gets, in the order it is written."""
    def w(reg: Register, value: int, why: str) -> RegisterWrite:
        return RegisterWrite(j.name, j.servo_id, reg, value, why)

    out = [
        w(STS3215.RETURN_DELAY, s.return_delay, "answer at once (2 µs units)"),
        w(STS3215.OPERATING_MODE, s.operating_mode, "0: position control"),
        w(STS3215.P_COEFFICIENT, s.p_coefficient, "position loop P: holds without shaking"),
        w(STS3215.I_COEFFICIENT, s.i_coefficient, "position loop I: no wind-up"),
        w(STS3215.D_COEFFICIENT, s.d_coefficient, "position loop D"),
    ]
    if s.position_limits:
        out += [w(STS3215.MIN_POSITION_LIMIT, j.range_min, "calibrated range: the servo "
                  "clips goals below it"),
                w(STS3215.MAX_POSITION_LIMIT, j.range_max, "calibrated range: the servo "
                  "clips goals above it")]
    if j.name == GRIPPER:
        out += [w(STS3215.MAX_TORQUE_LIMIT, s.gripper_max_torque,
                  "gripper: at most this share of stall torque (0.1 %), kept across power-up"),
                w(STS3215.PROTECTION_CURRENT, s.gripper_protection_current,
                  "gripper: current protection (6.5 mA units)"),
                w(STS3215.OVERLOAD_TORQUE, s.gripper_overload_torque,
                  "gripper: overload protection above this % of the torque limit")]
    out.append(w(STS3215.ACCELERATION, s.acceleration, "steepest ramp: the controller "
                 "limits speed"))
    if j.name == GRIPPER:
        out.append(w(STS3215.TORQUE_LIMIT, s.gripper_max_torque,
                     "gripper: the same torque limit, in force now"))
    return out


def plan(cal: ArmCalibration, settings: ServoSettings,
         joints: Iterable[str] | None = None) -> list[RegisterWrite]:
    """Every write ``configure`` would make, joint by joint (``joints``: only these)."""
    names = list(joints) if joints is not None else list(cal.names)
    return [w for n in names for w in joint_writes(cal.joint(n), settings)]


def configure(bus: FeetechBus, cal: ArmCalibration, settings: ServoSettings,
              joints: Iterable[str] | None = None) -> list[RegisterWrite]:
    """Bring every servo to the plan and check it: returns the writes that were needed.

    Each value is read first; a servo that already holds all of its values is left alone
    (no torque off, no EEPROM write: its EEPROM takes a limited number of writes, and an arm
    holding a pose keeps holding it).  A servo that differs is switched off, unlocked,
    written, locked, and every value read back.  Raises ``ServoConfigError`` naming the
    first servo and register that failed or kept another value."""
    writes = plan(cal, settings, joints)
    by_joint: dict[str, list[RegisterWrite]] = {}
    for w in writes:
        by_joint.setdefault(w.joint, []).append(w)
    made: list[RegisterWrite] = []
    for name, ws in by_joint.items():
        sid = ws[0].servo_id
        needed = [w for w in ws if _read(bus, w) != w.value]
        if not needed:
            continue
        _write(bus, name, sid, STS3215.TORQUE_ENABLE, 0)
        _write(bus, name, sid, STS3215.LOCK, 0)
        for w in needed:
            _write(bus, name, sid, w.register, w.value)
        _write(bus, name, sid, STS3215.LOCK, 1)
        for w in ws:
            got = _read(bus, w)
            if got != w.value:
                raise ServoConfigError(name, sid, w.register,
                                       f"wrote {w.value}, the servo holds {got}")
        made += needed
    return made


def _read(bus: FeetechBus, w: RegisterWrite) -> int:
    try:
        return bus.read_register(w.servo_id, w.register)
    except BusError as e:
        raise ServoConfigError(w.joint, w.servo_id, w.register, f"reading it failed: {e}"
                               ) from e


def _write(bus: FeetechBus, joint: str, servo_id: int, reg: Register, value: int) -> None:
    try:
        bus.write_register(servo_id, reg, value)
    except BusError as e:
        raise ServoConfigError(joint, servo_id, reg, f"writing {value} failed: {e}") from e


def plan_rows(writes: Iterable[RegisterWrite]) -> list[list[Any]]:
    """Table rows (joint, id, register, address, value, why) for a dry run."""
    return [[w.joint, w.servo_id, w.register.name, w.register.address, w.value, w.why]
            for w in writes]


__all__ = ["RegisterWrite", "ServoConfigError", "ServoSettings", "configure", "joint_writes",
           "plan", "plan_rows"]
