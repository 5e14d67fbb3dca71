"""FeetechArm and calibration through pyserial and the pty sim bus."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pytest
from hw_helpers import TIMEOUT_S, settle

from solarian_agent.arm.safety import NonFiniteCommandError, UnknownJointError
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.errors import (
    CalibrationError,
    DeviceNotConnectedError,
    DeviceNotFoundError,
    VoltageError,
)
from solarian_agent.hw.feetech import (
    ArmCalibration,
    FeetechArm,
    FeetechArmConfig,
    default_so101,
    run_guided_calibration,
)
from solarian_agent.hw.feetech.calibration import CalibrationAborted
from solarian_agent.hw.feetech.simbus import SimulatedBus

ROOT = Path(__file__).resolve().parents[2]


def test_read_state_in_units(sim: SimulatedBus, arm: FeetechArm) -> None:
    sim.set_position(1, 2048 + 1024)  # a quarter turn of the 4095 ticks LeRobot counts
    sim.set_position(6, 2048 + 512)  # the jaw 45 degrees open
    st = arm.read_state()
    assert st.positions["shoulder_pan"] == pytest.approx(1024 * 2 * math.pi / 4095)
    assert st.positions["gripper"] == pytest.approx(512 * 2 * math.pi / 4095)
    # the moving jaw's inner edge at the tool point's depth swung 45 degrees about its pivot
    # (gripper_link x-z, mm): pivot (20.2, -23.4), edge (7.9, -98.1274), fixed face x = -7.9
    a = 512 * 2 * math.pi / 4095
    edge_x = 20.2 + (7.9 - 20.2) * math.cos(a) - (-98.1274 + 23.4) * math.sin(a)
    assert st.gripper_mm == pytest.approx(edge_x + 7.9)
    s = st.servos["elbow_flex"]
    assert (s.servo_id, s.voltage_v, s.temperature_c, s.moving) == (3, 7.4, 30.0, False)
    js = st.joint_state()
    assert js.name[0] == "shoulder_pan" and js.position[5] == pytest.approx(a)
    assert arm.read_raw_positions()["shoulder_pan"] == 3072


def test_write_goal_clips_to_limits_and_range(sim: SimulatedBus, arm: FeetechArm) -> None:
    written = arm.write_goal({"shoulder_pan": 99.0, "gripper": -5.0, "wrist_roll": 0.5})
    cal = arm.calibration
    assert written["shoulder_pan"] == cal.joint("shoulder_pan").raw_window()[1]
    # the gripper's lower limit, -10 degrees: 2048 - 10/360 * 4095 ticks, rounded inward
    assert written["gripper"] == math.ceil(2048 - 10 / 360 * 4095)
    assert written["wrist_roll"] == round(2048 + 0.5 / (2 * math.pi / 4095))
    settle(sim, arm.bus)
    assert sim.goal(1) == written["shoulder_pan"]
    n = len(sim.frames())
    with pytest.raises(NonFiniteCommandError, match="shoulder_lift"):
        arm.write_goal({"shoulder_pan": 0.0, "shoulder_lift": math.nan})
    with pytest.raises(UnknownJointError, match="elbow"):
        arm.write_goal({"elbow": 0.0})
    settle(sim, arm.bus)
    assert len(sim.frames()) == n + 1  # only the settle PING: nothing was written


def test_torque_and_voltage_fault(sim: SimulatedBus, arm: FeetechArm) -> None:
    arm.set_torque(True)
    settle(sim, arm.bus)
    assert all(sim.torque(i) for i in range(1, 7)) and arm.torque_enabled
    sim.set_error_flags(3, 0x01)
    st = arm.read_state()
    assert len(st.faults) == 1
    f = st.faults[0]
    assert isinstance(f, VoltageError) and f.joint == "elbow_flex" and f.servo_id == 3
    assert "servo 3 (elbow_flex) reports input voltage error" in str(f)
    assert st.servos["elbow_flex"].error_flags == ("input voltage error",)
    with pytest.raises(VoltageError):
        arm.ping("elbow_flex")


def test_connect_requires_every_servo(sim: SimulatedBus) -> None:
    sim.inject(5, "no_answer", count=None)
    arm = FeetechArm(FeetechArmConfig(port=sim.port_name, timeout_s=TIMEOUT_S, retries=0),
                     calibration=default_so101())
    with pytest.raises(DeviceNotFoundError, match=r"wrist_roll \(id 5\)"):
        arm.connect()
    assert not arm.is_connected
    with pytest.raises(DeviceNotConnectedError, match="not connected"):
        arm.read_state()


def test_ids_override(sim: SimulatedBus) -> None:
    with SimulatedBus(ids=(11, 12, 13, 14, 15, 16), speed_ticks_per_s=None) as other:
        ids = {n: 11 + k for k, n in enumerate(default_so101().names)}
        arm = FeetechArm(FeetechArmConfig(port=other.port_name, ids=ids, timeout_s=TIMEOUT_S),
                         calibration=default_so101())
        arm.connect()
        assert arm.read_raw_positions()["gripper"] == 2048
        arm.disconnect()


def test_calibration_yaml_round_trip(tmp_path: Path) -> None:
    shipped = ArmCalibration.load(ROOT / "config" / "arm_so101.yaml")
    assert shipped == default_so101()
    cfg = FeetechArmConfig.from_yaml(ROOT / "config" / "arm_so101.yaml")
    assert (cfg.baudrate, cfg.rate_hz) == (1_000_000, 50)
    out = tmp_path / "arm.yaml"
    shipped.save(out, settings={"port": "/dev/ttyUSB7"})
    assert ArmCalibration.load(out) == shipped
    assert FeetechArmConfig.from_yaml(out).port == "/dev/ttyUSB7"
    bad = tmp_path / "bad.yaml"
    bad.write_text(out.read_text().replace("range_max: 3302", "range_max: 3000"))
    with pytest.raises(ConfigError, match=r"shoulder_pan.*outside the calibrated raw range"):
        ArmCalibration.load(bad)
    with pytest.raises(CalibrationError, match="does not exist"):
        ArmCalibration.load(tmp_path / "missing.yaml")


class ScriptedUI:
    """A user who poses the arm at zero, then sweeps each joint (moving the sim servos)."""

    def __init__(self, sim: SimulatedBus, sweeps: Mapping[int, list[int]],
                 zero: Mapping[int, int], abort: bool = False) -> None:
        self.sim, self.sweeps, self.zero, self.abort = sim, sweeps, zero, abort
        self.steps: list[str] = []
        self.k = 0

    def instruct(self, step: str, message: str) -> None:
        self.steps.append(step)

    def confirm(self, step: str) -> bool:
        for i, v in self.zero.items():
            self.sim.set_position(i, v)
        return not self.abort

    def progress(self, ranges: Mapping[str, tuple[int, int, int]]) -> bool:
        if self.k >= max(len(v) for v in self.sweeps.values()):
            return False
        for i, seq in self.sweeps.items():
            self.sim.set_position(i, seq[min(self.k, len(seq) - 1)])
        self.k += 1
        return True


def test_guided_calibration(sim: SimulatedBus, arm: FeetechArm, tmp_path: Path) -> None:
    zero = {1: 2000, 2: 2100, 3: 2048, 4: 2048, 5: 2048, 6: 1500}
    sweeps = {1: [1200, 2800], 2: [1000, 3000], 3: [900, 3200], 4: [1000, 3100],
              5: [100, 4000], 6: [1500, 2400, 900]}
    ui = ScriptedUI(sim, sweeps, zero)
    cal = run_guided_calibration(arm.read_raw_positions, ui, base=arm.calibration,
                                 set_torque=arm.set_torque, margin_ticks=10)
    assert ui.steps == ["torque_off", "zero", "range", "done"]
    rad_per_tick = 2 * math.pi / 4095  # LeRobot's degrees: 360 / 4095 per tick
    pan = cal.joint("shoulder_pan")
    assert (pan.range_min, pan.range_max) == (1210, 2790)
    assert pan.to_units(2000) == 0.0  # zero is the middle of the recorded range
    assert pan.lower == pytest.approx(-790 * rad_per_tick, abs=1e-4)
    assert pan.upper == pytest.approx(790 * rad_per_tick, abs=1e-4)
    roll = cal.joint("wrist_roll")  # wider travel than the hard limits: limits kept (rounded in)
    assert (roll.lower, roll.upper) == (-2.7438, 2.8412)
    g = cal.joint("gripper")  # the jaw: an angle like every other joint
    assert (g.direction, g.range_min, g.range_max) == (1, 910, 2390)
    assert g.to_units(1650) == 0.0
    assert g.to_units(2390) == pytest.approx(740 * rad_per_tick)
    assert (g.lower, g.upper) == (-0.1745, math.floor(740 * rad_per_tick * 1e4) / 1e4)
    path = tmp_path / "cal.yaml"
    cal.save(path)
    assert ArmCalibration.load(path) == cal
    arm.set_calibration(cal)
    assert arm.write_goal({"gripper": 1.0})["gripper"] == round(1650 + 1.0 / rad_per_tick)


def test_guided_calibration_errors(sim: SimulatedBus, arm: FeetechArm) -> None:
    zero = {i: 2048 for i in range(1, 7)}
    with pytest.raises(CalibrationAborted):
        run_guided_calibration(arm.read_raw_positions, ScriptedUI(sim, {1: [2048]}, zero,
                                                                  abort=True))
    sweeps = {i: [1000, 3000] for i in range(1, 7)}
    sweeps[3] = [2040, 2060]  # elbow barely moved
    with pytest.raises(CalibrationError, match="'elbow_flex' moved only"):
        run_guided_calibration(arm.read_raw_positions, ScriptedUI(sim, sweeps, zero))
