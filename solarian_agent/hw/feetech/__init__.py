"""Feetech STS3215 serial-bus servo driver (SO-100 / SO-101 arms).

- ``protocol``: packets, checksums, the STS3215 register table (no I/O);
- ``bus.FeetechBus``: transactions over pyserial with timeouts and bounded retries;
- ``arm.FeetechArm``: the arm in calibrated joint units; ``calibration``: YAML + guided run;
- ``servo_config``: what connect writes into each servo (and verifies);
- ``controller.ArmController``: the fixed-rate loop with clamp, e-stop latch and watchdog;
- ``health.HealthMonitor``: servo temperature / supply / load / current, and derating;
- ``simbus.SimulatedBus``: simulated servos on a pseudo-terminal, for tests and demos.
"""

from solarian_agent.hw.feetech.arm import ArmState, FeetechArm, FeetechArmConfig, ServoReading
from solarian_agent.hw.feetech.bus import FeetechBus, SerialPort, StatusReply, open_serial
from solarian_agent.hw.feetech.calibration import (
    SO101_IDS,
    SO101_JOINTS,
    ArmCalibration,
    CalibrationUI,
    JointCalibration,
    default_so101,
    run_guided_calibration,
)
from solarian_agent.hw.feetech.controller import (
    ArmController,
    ArmControllerConfig,
    ArmDiagnostics,
    ArmPort,
    ArmReading,
)
from solarian_agent.hw.feetech.health import HealthConfig, HealthMonitor
from solarian_agent.hw.feetech.servo_config import ServoConfigError, ServoSettings

__all__ = [
    "SO101_IDS", "SO101_JOINTS", "ArmCalibration", "ArmController", "ArmControllerConfig",
    "ArmDiagnostics", "ArmPort", "ArmReading", "ArmState", "CalibrationUI", "FeetechArm",
    "FeetechArmConfig", "FeetechBus", "HealthConfig", "HealthMonitor", "JointCalibration",
    "SerialPort", "ServoConfigError", "ServoReading", "ServoSettings", "StatusReply",
    "default_so101", "open_serial", "run_guided_calibration",
]
