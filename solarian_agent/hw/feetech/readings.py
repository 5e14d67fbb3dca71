"""What one step of the arm controller reports: the readings, the mode, what was written and
the diagnostics (each servo's level and message, the e-stop, the watchdog, the bus and health
figures)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from solarian_agent.core.messages import JointState
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.health import ServoHealth


@dataclass(frozen=True)
class ServoDiagnostic:
    joint: str
    servo_id: int
    level: str  # ok | warn | error
    message: str
    voltage_v: float
    temperature_c: float
    load: float
    moving: bool


@dataclass(frozen=True)
class ArmDiagnostics:
    level: str  # ok | warn | error
    message: str
    servos: tuple[ServoDiagnostic, ...] = ()
    estop: bool = False
    estop_reason: str = ""
    watchdog_expired: bool = True
    consecutive_faults: int = 0
    bus: dict[str, Any] = field(default_factory=dict)
    health: tuple[ServoHealth, ...] = ()  # each servo's values beside its limits
    speed_factor: float = 1.0  # < 1: derating, see health.py


@dataclass(frozen=True)
class ArmReading:
    """The outcome of one ``step()``."""

    stamp: float
    state: ArmState | None  # None when the arm could not be read this step
    mode: str  # tracking | holding | estop | fault | torque_off
    goal: dict[str, float]  # what was written this step ({}: nothing)
    target: dict[str, float] | None
    faults: tuple[str, ...]
    diagnostics: ArmDiagnostics

    @property
    def joint_state(self) -> JointState | None:
        return None if self.state is None else self.state.joint_state()

    @property
    def gripper_mm(self) -> float | None:
        return None if self.state is None else self.state.gripper_mm

    @property
    def estop(self) -> bool:
        return self.diagnostics.estop


LEVELS = {"ok": 0, "warn": 1, "error": 2}


def worst_level(levels: Sequence[str]) -> str:
    return max(levels, key=lambda x: LEVELS[x], default="ok")


__all__ = ["LEVELS", "ArmDiagnostics", "ArmReading", "ServoDiagnostic", "worst_level"]
