"""What the arm controller is given: the arm it drives (``ArmPort``: ``FeetechArm`` or the
simulator's arm) and its settings (``ArmControllerConfig``, validated on construction: an invalid
value names its ``controller.*`` path and the allowed range)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from solarian_agent.arm.safety import ArmLimits
from solarian_agent.arm.stopping import DEFAULT_COMMAND_TIMEOUT_S, DEFAULT_STOP_DECEL
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech.arm import ArmState

ESTOP_ACTIONS = ("hold", "torque_off")


class ArmPort(Protocol):
    """What the controller needs from an arm (``FeetechArm``; the simulator's arm)."""

    @property
    def limits(self) -> ArmLimits: ...

    @property
    def joint_names(self) -> tuple[str, ...]: ...

    @property
    def torque_enabled(self) -> bool: ...

    def read_state(self) -> ArmState: ...

    def write_goal(self, positions: Mapping[str, float]) -> Mapping[str, int]: ...

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None: ...


@dataclass
class ArmControllerConfig:
    rate_hz: float = 50.0
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    stop_decel: float = DEFAULT_STOP_DECEL  # rad/s², the ramp to rest after the timeout
    estop_action: str = "hold"
    max_consecutive_faults: int = 3
    lead_time_s: float = 0.2
    trip_on_servo_flags: bool = True
    warn_temperature_c: float = 55.0
    max_temperature_c: float = 70.0
    warn_voltage_low_v: float = 6.0
    warn_voltage_high_v: float = 13.0
    warn_load: float = 0.8
    enable_torque_on_start: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and 0 < self.rate_hz <= 1000):
            raise ConfigError("controller.rate_hz", f"must be in (0, 1000], got {self.rate_hz}")
        if not (math.isfinite(self.command_timeout_s) and self.command_timeout_s > 0):
            raise ConfigError("controller.command_timeout_s",
                              f"must be > 0, got {self.command_timeout_s}")
        if not (math.isfinite(self.stop_decel) and self.stop_decel > 0):
            raise ConfigError("controller.stop_decel", f"must be > 0, got {self.stop_decel}")
        if self.estop_action not in ESTOP_ACTIONS:
            raise ConfigError("controller.estop_action",
                              f"must be one of {ESTOP_ACTIONS}, got {self.estop_action!r}")
        if self.max_consecutive_faults < 1:
            raise ConfigError("controller.max_consecutive_faults",
                              f"must be >= 1, got {self.max_consecutive_faults}")
        if not (math.isfinite(self.lead_time_s) and self.lead_time_s > 0):
            raise ConfigError("controller.lead_time_s", f"must be > 0, got {self.lead_time_s}")

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz


__all__ = ["ESTOP_ACTIONS", "ArmControllerConfig", "ArmPort"]
