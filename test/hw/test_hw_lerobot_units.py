"""Joint units on the real arm are LeRobot's calibrated degrees in radians, every joint (the
jaw too): a LeRobot calibration file and raw ticks read the same here as in LeRobot, and the
shipped file's limits are the published model's."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from solarian_agent.arm.safety import ArmLimits
from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech import default_so101
from solarian_agent.hw.feetech.calibration import ArmCalibration
from solarian_agent.hw.feetech.lerobot import read_lerobot, to_arm_calibration
from solarian_agent.testing.lerobot_files import so101_follower

ROOT = Path(__file__).resolve().parents[2]

# a follower file as LeRobot's calibrate writes it; one joint with drive_mode 1
FOLLOWER = so101_follower(wrist_flex=1)


def lerobot_degrees(raw: float, motor: dict[str, int]) -> float:
    """LeRobot's MotorNormMode.DEGREES for an STS3215 (resolution 4096), written out: the
    middle of the recorded range is 0, 360 degrees per 4095 ticks, no drive-mode inversion."""
    mid = (motor["range_min"] + motor["range_max"]) / 2
    return (raw - mid) * 360 / 4095


@pytest.fixture()
def imported(tmp_path: Path) -> ArmCalibration:
    path = tmp_path / "my_follower.json"
    path.write_text(json.dumps(FOLLOWER))
    return to_arm_calibration(read_lerobot(path), default_so101())


@pytest.mark.parametrize("joint", list(FOLLOWER))
def test_raw_ticks_read_as_lerobot_degrees_in_radians(imported: ArmCalibration,
                                                      joint: str) -> None:
    m = FOLLOWER[joint]
    j = imported.joint(joint)
    for raw in (m["range_min"], m["range_max"], 2047, 2300, (m["range_min"] + 3 * m["range_max"])
                // 4):
        want = math.radians(lerobot_degrees(raw, m))
        assert j.to_units(raw) == pytest.approx(want, abs=1e-12), (joint, raw)
        assert j.raw_unclipped(want) == pytest.approx(raw, abs=1e-9)  # and back
    assert (j.servo_id, j.homing_offset) == (m["id"], m["homing_offset"])


def test_the_jaw_reads_as_an_angle_and_positive_opens(imported: ArmCalibration) -> None:
    g = imported.joint("gripper")
    # 2738 is the middle of 2024..3452: LeRobot's 0 degrees; 3452 (its 0..100 mode's 100,
    # open) is +62.77 degrees
    assert g.to_units(2738) == 0.0
    assert math.degrees(g.to_units(3452)) == pytest.approx(714 * 360 / 4095)
    assert g.lower == pytest.approx(-0.1745, abs=1e-4)  # the jaw's -10 degrees, rounded in
    assert g.upper == math.floor(math.radians(714 * 360 / 4095) * 1e4) / 1e4


def test_drive_mode_1_does_not_invert_as_in_lerobot_degrees(imported: ArmCalibration) -> None:
    wf = imported.joint("wrist_flex")
    assert wf.direction == 1
    assert wf.to_units(3216) > 0 and wf.to_units(1400) < 0


def test_a_calibration_of_the_former_format_is_refused_naming_the_joint(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("arm:\n  joints:\n    gripper: {id: 6, homing_offset: 2048, direction: 1, "
                   "range_min: 2048, range_max: 3448, lower: 0.0, upper: 0.06, "
                   "max_velocity: 0.05, units_per_tick: 4.2857e-05}\n")
    with pytest.raises(ConfigError, match=r"joints\.gripper.*\['direction', 'units_per_tick'\]"
                                          r".*former format"):
        ArmCalibration.load(old)


def test_the_shipped_limits_are_the_urdfs() -> None:
    urdf = ET.parse(ROOT / "urdf" / "so101.urdf").getroot()
    want = {}
    for j in urdf.iter("joint"):
        lim = j.find("limit")
        if j.get("type") == "revolute" and lim is not None:
            want[j.get("name")] = (float(lim.get("lower")), float(lim.get("upper")))
    limits = ArmLimits.from_yaml(ROOT / "config" / "arm_so101.yaml")
    assert set(want) == set(limits.names)
    for name, (lo, hi) in want.items():
        assert (limits.joint(name).lower, limits.joint(name).upper) == (lo, hi), name
    cal = ArmCalibration.load(ROOT / "config" / "arm_so101.yaml")
    for j in cal.joints:  # nominal: zero at 2048, the limits inside the raw range
        assert j.to_units(2048) == 0.0
        assert j.range_min <= j.raw_unclipped(j.lower) and j.raw_unclipped(j.upper) <= j.range_max
