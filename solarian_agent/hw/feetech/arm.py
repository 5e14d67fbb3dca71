"""``FeetechArm``: an SO-101 class arm on a Feetech STS3215 bus, in calibrated joint units.

One SYNC_READ of registers 56..66 per ``read_state()`` (position, speed, load, voltage,
temperature, status, moving for every servo) and one SYNC_WRITE of goal positions per
``write_goal()``.  ``write_goal`` is the last guard before the wire: every value is checked to
be finite and clipped into the joint's limits *and* its calibrated raw range, whatever the
caller passed.  Speed limiting, the e-stop and the watchdog live in ``ArmController``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import solarian_agent.hw.feetech.protocol as P
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.safety import ArmLimits, validate_target
from solarian_agent.core.clock import Clock, SystemClock
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import JointState
from solarian_agent.hw.errors import (
    DeviceAlreadyConnectedError,
    DeviceNotConnectedError,
    DeviceNotFoundError,
    HardwareError,
    ServoStatusError,
    ServoTimeoutError,
    status_error,
)
from solarian_agent.hw.feetech.bus import FeetechBus, PortFactory
from solarian_agent.hw.feetech.calibration import (
    GRIPPER,
    ArmCalibration,
)
from solarian_agent.hw.feetech.health import HealthConfig
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.servo_config import ServoSettings, configure

CURRENT_A_PER_UNIT = 0.0065  # Present_Current: 6.5 mA a unit
DEFAULT_CALIBRATION = "config/arm_so101.yaml"  # relative to the package's share directory


def default_arm_config() -> Path:
    """The shipped ``config/arm_so101.yaml`` wherever the tools run from (the source tree or
    the installed share directory); the source-tree path when neither exists."""
    from solarian_agent.paths import find_share_file, share_candidates

    return find_share_file(DEFAULT_CALIBRATION) or share_candidates(DEFAULT_CALIBRATION)[0]


@dataclass
class FeetechArmConfig:
    """How to reach the arm.  ``ids`` (joint → servo id) overrides the calibration file's
    ids when given; ``rate_hz`` is the control loop's rate."""

    port: str = "/dev/ttyACM0"
    baudrate: int = 1_000_000
    ids: dict[str, int] | None = None
    calibration_file: str = field(default_factory=lambda: str(default_arm_config()))
    rate_hz: float = 50.0
    timeout_s: float = 0.025
    retries: int = 2
    servo_settings: ServoSettings = field(default_factory=ServoSettings)
    configure_on_connect: bool = True
    health: HealthConfig = field(default_factory=HealthConfig)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and 0 < self.rate_hz <= 1000):
            raise ConfigError("arm.rate_hz", f"must be in (0, 1000], got {self.rate_hz}")
        if self.baudrate <= 0:
            raise ConfigError("arm.baudrate", f"must be > 0, got {self.baudrate}")
        if not self.timeout_s > 0:
            raise ConfigError("arm.timeout_s", f"must be > 0, got {self.timeout_s}")
        if self.retries < 0:
            raise ConfigError("arm.retries", f"must be >= 0, got {self.retries}")
        if not isinstance(self.configure_on_connect, bool):
            raise ConfigError("arm.configure_on_connect",
                              f"must be true or false, got {self.configure_on_connect!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], calibration_file: str = "",
                     where: str = "arm") -> FeetechArmConfig:
        known = {"port", "baudrate", "ids", "rate_hz", "timeout_s", "retries",
                 "configure_on_connect"}
        kw: dict[str, Any] = {k: data[k] for k in known if k in data}
        kw["servo_settings"] = ServoSettings.from_mapping(data.get("servo_settings"),
                                                          where=f"{where}.servo_settings")
        kw["health"] = HealthConfig.from_mapping(data.get("health"), where=f"{where}.health")
        try:
            return cls(calibration_file=str(data.get("calibration_file", calibration_file)
                                            or default_arm_config()), **kw)
        except TypeError as e:
            raise ConfigError(where, str(e)) from e

    @classmethod
    def from_yaml(cls, path: str | Path | None = None) -> FeetechArmConfig:
        """Port/baudrate/rate from the ``arm:`` block of the calibration file itself (default:
        the shipped one)."""
        from solarian_agent.core.config import yaml_block

        path = Path(path) if path else default_arm_config()
        arm = yaml_block(path, "arm", "arm configuration file not found")
        return cls.from_mapping(arm, calibration_file=str(path), where=f"{path}:arm")


@dataclass(frozen=True)
class ServoReading:
    joint: str
    servo_id: int
    raw_position: int
    voltage_v: float
    temperature_c: float
    load: float  # -1..1 of the servo's rated torque (sign: direction of effort)
    moving: bool
    error_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArmState:
    """One read of the whole arm.  Positions in radians (LeRobot degrees * pi/180; the gripper
    the moving jaw's angle)."""

    stamp: float
    positions: dict[str, float]
    velocities: dict[str, float]
    servos: dict[str, ServoReading]
    faults: tuple[ServoStatusError, ...] = field(default=())

    @property
    def gripper_mm(self) -> float | None:
        """The jaws' opening at the tool point (mm), from the jaw angle."""
        g = self.positions.get(GRIPPER)
        return None if g is None else SO101_JAW.opening(g) * 1000.0

    def joint_state(self) -> JointState:
        names = tuple(self.positions)
        return JointState(
            stamp=self.stamp,
            name=names,
            position=tuple(self.positions[n] for n in names),
            velocity=tuple(self.velocities.get(n, 0.0) for n in names),
            effort=tuple(self.servos[n].load if n in self.servos else 0.0 for n in names),
        )


class FeetechArm:
    """The arm behind its bus; raises ``DeviceNotConnectedError`` when used disconnected."""

    def __init__(
        self,
        config: FeetechArmConfig | None = None,
        calibration: ArmCalibration | None = None,
        port_factory: PortFactory | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config or FeetechArmConfig()
        self._cal: ArmCalibration | None = calibration
        if calibration is not None and self.config.ids:
            self._cal = calibration.with_ids(self.config.ids)
        self.clock = clock or SystemClock()
        self.bus = FeetechBus(self.config.port, self.config.baudrate, self.config.timeout_s,
                              self.config.retries, port_factory=port_factory)
        self._torque: dict[str, bool] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_connected(self) -> bool:
        return self.bus.is_connected

    def connect(self, check_ids: bool = True, configure_servos: bool | None = None) -> None:
        """Open the port, load the calibration, PING every servo (all must answer), then
        (``configure_servos``; default ``config.configure_on_connect``, only with
        ``check_ids``) write and verify the servo settings and limits: a servo that does not
        take them is a ``ServoConfigError`` naming it, and the port is closed again."""
        if self.bus.is_connected:
            raise DeviceAlreadyConnectedError(f"arm on {self.config.port} is already connected")
        if self._cal is None:
            cal = ArmCalibration.load(self.config.calibration_file)
            self._cal = cal.with_ids(self.config.ids) if self.config.ids else cal
        self.bus.connect()
        if not check_ids:
            return
        missing = []
        for j in self._cal.joints:
            try:
                self.bus.ping(j.servo_id)
            except ServoTimeoutError:
                missing.append(f"{j.name} (id {j.servo_id})")
        if missing:
            self.bus.disconnect()
            raise DeviceNotFoundError(
                f"servos not answering on {self.config.port} at {self.config.baudrate} baud: "
                f"{', '.join(missing)}; check power, cabling and ids"
            )
        if self.config.configure_on_connect if configure_servos is None else configure_servos:
            try:
                written = configure(self.bus, self._cal, self.config.servo_settings)
            except HardwareError:
                self.bus.disconnect()
                raise
            for w in written:  # a servo written to had its torque switched off
                self._torque[w.joint] = False

    def disconnect(self, torque_off: bool = False) -> None:
        """Close the port.  ``torque_off`` first releases the servos (the arm will sag)."""
        if not self.bus.is_connected:
            return
        if torque_off:
            try:
                self.set_torque(False)
            except Exception:
                pass
        self.bus.disconnect()

    def __enter__(self) -> FeetechArm:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def _require(self) -> ArmCalibration:
        if not self.bus.is_connected or self._cal is None:
            raise DeviceNotConnectedError(
                f"arm on {self.config.port} is not connected; call connect() first")
        return self._cal

    # ------------------------------------------------------------------ properties

    @property
    def calibration(self) -> ArmCalibration:
        if self._cal is None:
            self._cal = ArmCalibration.load(self.config.calibration_file)
            if self.config.ids:
                self._cal = self._cal.with_ids(self.config.ids)
        return self._cal

    def set_calibration(self, cal: ArmCalibration) -> None:
        self._cal = cal

    @property
    def limits(self) -> ArmLimits:
        return self.calibration.limits()

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.calibration.names

    @property
    def torque_enabled(self) -> bool:
        """True only when torque is known to be on for every joint."""
        return bool(self._torque) and all(self._torque.get(n, False) for n in self.joint_names)

    # ------------------------------------------------------------------ I/O

    def read_raw_positions(self) -> dict[str, int]:
        cal = self._require()
        reg = STS3215.PRESENT_POSITION
        got = self.bus.sync_read(reg.address, reg.size, [j.servo_id for j in cal.joints])
        return {j.name: P.decode_value(got[j.servo_id].data, reg.sign_bit) for j in cal.joints}

    def read_state(self) -> ArmState:
        """One SYNC_READ of the state block.  Status flags are returned as ``faults`` (the
        reading is still good); a silent or garbled bus raises from ``FeetechBus``."""
        cal = self._require()
        start, size = STS3215.STATE_BLOCK_START, STS3215.STATE_BLOCK_SIZE
        got = self.bus.sync_read(start, size, [j.servo_id for j in cal.joints])
        stamp = self.clock.now()
        positions: dict[str, float] = {}
        velocities: dict[str, float] = {}
        servos: dict[str, ServoReading] = {}
        faults: list[ServoStatusError] = []

        def field_(data: bytes, reg: P.Register) -> int:
            off = reg.address - start
            return P.decode_value(data[off:off + reg.size], reg.sign_bit)

        for j in cal.joints:
            reply = got[j.servo_id]
            d = reply.data
            raw = field_(d, STS3215.PRESENT_POSITION)
            positions[j.name] = j.to_units(raw)
            velocities[j.name] = j.velocity_to_units(field_(d, STS3215.PRESENT_SPEED))
            flags: tuple[str, ...] = ()
            if reply.error:
                err = status_error(j.servo_id, reply.error, "SYNC_READ", d, joint=j.name)
                faults.append(err)
                flags = err.flags
            servos[j.name] = ServoReading(
                joint=j.name, servo_id=j.servo_id, raw_position=raw,
                voltage_v=field_(d, STS3215.PRESENT_VOLTAGE) / 10.0,
                temperature_c=float(field_(d, STS3215.PRESENT_TEMPERATURE)),
                load=j.direction * field_(d, STS3215.PRESENT_LOAD) / 1000.0,
                moving=bool(field_(d, STS3215.MOVING)),
                error_flags=flags,
            )
        return ArmState(stamp, positions, velocities, servos, tuple(faults))

    def goal_to_raw(self, positions: Mapping[str, float]) -> dict[int, int]:
        """Servo id → raw goal, validated (named errors for NaN / unknown joints) and clipped
        into limits and calibrated range."""
        cal = self.calibration
        checked = validate_target(self.limits, positions)
        return {cal.joint(n).servo_id: cal.joint(n).to_raw(v) for n, v in checked.items()}

    def write_goal(self, positions: Mapping[str, float]) -> dict[str, int]:
        """One SYNC_WRITE of goal positions (joint units); returns the raw ticks written."""
        cal = self._require()
        raw = self.goal_to_raw(positions)
        reg = STS3215.GOAL_POSITION
        self.bus.sync_write_register(reg, raw)
        return {cal.by_id(i).name: v for i, v in raw.items()}

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
        """Torque on/off for some or all joints (a SYNC_WRITE to register 40)."""
        cal = self._require()
        names = list(joints) if joints is not None else list(cal.names)
        ids = {cal.joint(n).servo_id: 1 if enabled else 0 for n in names}
        self.bus.sync_write_register(STS3215.TORQUE_ENABLE, ids)
        for n in names:
            self._torque[n] = enabled

    def read_current_a(self, joint: str) -> float:
        """One servo's Present_Current in amperes (6.5 mA a unit; outside the state block,
        so read on its own, one servo at a time, by the health monitor)."""
        cal = self._require()
        raw = self.bus.read_register(cal.joint(joint).servo_id, STS3215.PRESENT_CURRENT)
        return abs(raw) * CURRENT_A_PER_UNIT

    def ping(self, joint: str) -> None:
        cal = self._require()
        j = cal.joint(joint)
        err = self.bus.ping(j.servo_id)
        if err:
            raise status_error(j.servo_id, err, "PING", joint=j.name)
