"""Servo health: each servo's temperature, supply, load and current against its limits, and
the derating that slows the arm before a servo's own protection cuts it out.

An STS3215 pushing against a table heats up within a minute and, at its Max_Temperature_Limit
(70 °C from the factory), drops its torque by itself: the arm goes limp.  Slowing the arm as a
servo nears that limit lowers the effort it asks for and gives the planner and the operator
time to react; so from ``derate_temperature_c`` the controller's speed is scaled down
linearly, to ``min_speed_factor`` at ``full_derate_temperature_c``.  When a servo trips anyway
(its status byte says overheat or overload) the controller latches the e-stop naming it.

Temperature, supply voltage and load come with the state block the controller reads every
tick (no extra bus traffic).  Present_Current lies outside that block, so it is read with
one small READ of one servo every ``current_every_ticks`` ticks, round-robin: six servos at
50 Hz are each read every 120 ms, and a tick pays at most one extra transaction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import HardwareError


class ServoTelemetry(Protocol):
    """What health reads of one servo (``ServoReading`` of the arm's state block).  A protocol,
    not the arm's types: the arm's config holds a ``HealthConfig``, so importing the arm here
    would make the two modules import each other."""

    @property
    def servo_id(self) -> int: ...
    @property
    def temperature_c(self) -> float: ...
    @property
    def voltage_v(self) -> float: ...
    @property
    def load(self) -> float: ...
    @property
    def error_flags(self) -> tuple[str, ...]: ...


class ArmTelemetry(Protocol):
    """One read of the arm, as health needs it (``ArmState``)."""

    @property
    def servos(self) -> Mapping[str, ServoTelemetry]: ...

CurrentReader = Callable[[str], float]  # joint -> amperes


@dataclass(frozen=True)
class HealthConfig:
    """The ``arm.health:`` block of the arm YAML."""

    derate_temperature_c: float = 60.0
    full_derate_temperature_c: float = 70.0
    min_speed_factor: float = 0.3
    warn_current_a: float = 1.5
    current_every_ticks: int = 1  # 0: never read Present_Current
    where: str = "arm.health"

    def __post_init__(self) -> None:
        def bad(name: str, rule: str) -> ConfigError:
            return ConfigError(f"{self.where}.{name}", f"{rule}, got {getattr(self, name)!r}")

        for name in ("derate_temperature_c", "full_derate_temperature_c", "min_speed_factor",
                     "warn_current_a"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise bad(name, "must be a finite number")
        if not 0 < self.min_speed_factor <= 1:
            raise bad("min_speed_factor", "must be in (0, 1]")
        if not self.full_derate_temperature_c > self.derate_temperature_c:
            raise bad("full_derate_temperature_c",
                      f"must be above derate_temperature_c ({self.derate_temperature_c})")
        if self.warn_current_a <= 0:
            raise bad("warn_current_a", "must be > 0")
        n = self.current_every_ticks
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise bad("current_every_ticks", "must be an integer >= 0")

    @classmethod
    def from_mapping(cls, data: Any, where: str = "arm.health") -> HealthConfig:
        from solarian_agent.core.config import settings_from_mapping

        return settings_from_mapping(cls, data, where)

    @classmethod
    def from_yaml(cls, path: str | None = None) -> HealthConfig:
        """The ``arm.health:`` block of the arm YAML (default: the shipped one)."""
        from solarian_agent.core.config import yaml_block
        from solarian_agent.paths import find_share_file, share_candidates

        name = "config/arm_so101.yaml"  # the shipped arm YAML, as the arm's default
        p = path or str(find_share_file(name) or share_candidates(name)[0])
        arm = yaml_block(p, "arm", "arm configuration file not found")
        return cls.from_mapping(arm.get("health"), where=f"{p}:arm.health")


@dataclass(frozen=True)
class ServoHealth:
    """One servo's health: level (ok / warn / error), a message with each value beside its
    limit, the values themselves, and the speed factor its temperature asks for."""

    joint: str
    servo_id: int
    level: str
    message: str
    values: dict[str, float | str] = field(default_factory=dict)
    speed_factor: float = 1.0


@dataclass(frozen=True)
class HealthReport:
    servos: tuple[ServoHealth, ...]
    speed_factor: float  # the slowest servo's: the whole arm moves at this share of its speed
    reason: str  # why it is below 1 ("" when it is not)


class HealthMonitor:
    """Turns each ``ArmState`` into a ``HealthReport``; reads one servo's current per
    ``current_every_ticks`` ticks through ``read_current`` (None: current not read)."""

    def __init__(self, config: HealthConfig | None = None,
                 read_current: CurrentReader | None = None) -> None:
        self.config = config or HealthConfig()
        self.read_current = read_current
        self.current_a: dict[str, float] = {}
        self.current_reads = 0
        self.current_faults = 0
        self._ticks = 0
        self._next = 0
        self._announced = 1.0

    def announce(self, report: HealthReport) -> dict[str, Any] | None:
        """The event to tell the planner and operator, when the speed factor changed by a
        tenth or more since the last one said (or derating started or ended); else None: a
        temperature flickering by a degree must not flood the event log."""
        f = report.speed_factor
        started = f < 1.0 <= self._announced
        ended = f >= 1.0 > self._announced
        if not (started or ended or abs(f - self._announced) >= 0.1):
            return None
        self._announced = f
        if ended:
            return {"speed_factor": 1.0, "reason": "servo temperatures back below "
                    f"{self.config.derate_temperature_c:.0f} °C: full speed"}
        return {"speed_factor": round(f, 3), "reason": report.reason}

    def speed_factor(self, temperature_c: float) -> float:
        c = self.config
        if temperature_c <= c.derate_temperature_c:
            return 1.0
        span = c.full_derate_temperature_c - c.derate_temperature_c
        frac = min(1.0, (temperature_c - c.derate_temperature_c) / span)
        return 1.0 - frac * (1.0 - c.min_speed_factor)

    def _poll_current(self, joints: list[str]) -> None:
        every = self.config.current_every_ticks
        if self.read_current is None or not every or not joints:
            return
        self._ticks += 1
        if self._ticks % every:
            return
        joint = joints[self._next % len(joints)]
        self._next += 1
        try:
            self.current_a[joint] = float(self.read_current(joint))
            self.current_reads += 1
        except HardwareError:
            # a lost reading, not a lost bus: the state read each tick judges the bus
            self.current_faults += 1

    def update(self, state: ArmTelemetry) -> HealthReport:
        c = self.config
        self._poll_current(list(state.servos))
        out: list[ServoHealth] = []
        for name, s in state.servos.items():
            factor = self.speed_factor(s.temperature_c)
            level = "ok"
            msgs = [f"{s.temperature_c:.0f} °C (derating from {c.derate_temperature_c:.0f}, "
                    f"limit {c.full_derate_temperature_c:.0f})",
                    f"{s.voltage_v:.1f} V", f"load {abs(s.load) * 100:.0f}%"]
            values: dict[str, float | str] = {
                "temperature_c": s.temperature_c,
                "derate_temperature_c": c.derate_temperature_c,
                "temperature_limit_c": c.full_derate_temperature_c,
                "voltage_v": s.voltage_v, "load": s.load, "speed_factor": round(factor, 3)}
            if factor < 1.0:
                level = "warn"
                msgs.insert(0, f"derating: speed {factor * 100:.0f}%")
            if s.temperature_c >= c.full_derate_temperature_c or s.error_flags:
                level = "error"
            amps = self.current_a.get(name)
            if amps is not None:
                values["current_a"] = round(amps, 3)
                values["current_warn_a"] = c.warn_current_a
                msgs.append(f"{amps:.2f} A (warn {c.warn_current_a:.2f})")
                if amps >= c.warn_current_a and level == "ok":
                    level = "warn"
            if s.error_flags:
                msgs.insert(0, "tripped: " + ", ".join(s.error_flags))
            out.append(ServoHealth(name, s.servo_id, level, "; ".join(msgs), values, factor))
        slowest = min(out, key=lambda h: h.speed_factor, default=None)
        if slowest is None or slowest.speed_factor >= 1.0:
            return HealthReport(tuple(out), 1.0, "")
        t = slowest.values["temperature_c"]
        reason = (f"{slowest.joint} (servo {slowest.servo_id}) at {t:.0f} °C: derating from "
                  f"{c.derate_temperature_c:.0f} °C, limit {c.full_derate_temperature_c:.0f} "
                  f"°C; arm speed {slowest.speed_factor * 100:.0f}%")
        return HealthReport(tuple(out), slowest.speed_factor, reason)


__all__ = ["CurrentReader", "HealthConfig", "HealthMonitor", "HealthReport", "ServoHealth"]
