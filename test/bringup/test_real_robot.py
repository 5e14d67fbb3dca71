"""The real arm's bring-up adapter over the simulated Feetech bus (a pseudo-terminal speaking the
protocol byte for byte) and cameras on video files: it reads the joints, moves through the
arm's own controller (limits and speed applied), grabs frames; and the real session's servo
step against the same bus."""

from __future__ import annotations

import math
from contextlib import ExitStack
from pathlib import Path

import cv2
import numpy as np
import pytest

from solarian_agent.bringup.real_robot import RealBringupRobot
from solarian_agent.hw.feetech.calibration import default_so101
from solarian_agent.hw.feetech.simbus import SimulatedBus


def _video(path: Path, size: tuple[int, int]) -> str:
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
    for i in range(30):
        w.write(np.full((size[1], size[0], 3), 40 + 5 * i, np.uint8))
    w.release()
    return str(path)


@pytest.fixture()
def robot(tmp_path: Path):
    cal = tmp_path / "arm.yaml"
    default_so101().save(cal)
    with ExitStack() as stack:
        bus = stack.enter_context(SimulatedBus())
        cams = {"overhead": _video(tmp_path / "o.avi", (320, 240)),
                "wrist": _video(tmp_path / "w.avi", (240, 180))}
        yield RealBringupRobot(bus.port_name, str(cal), cams, stack), bus


def test_the_real_adapter_moves_the_arm_through_its_controller_and_grabs_frames(robot) -> None:
    r, _ = robot
    assert r.cameras == ("overhead", "wrist")
    q0 = r.joints()
    assert q0.shape == (6,) and np.all(np.isfinite(q0))
    target = q0[:5] + np.array([0.2, -0.1, 0.15, 0.1, -0.2])
    assert r.move(target, timeout_s=20.0)
    assert np.max(np.abs(r.joints()[:5] - target)) <= math.radians(1.0)
    img = r.grab("wrist")
    assert img.shape == (180, 240, 3)


def test_a_target_outside_the_joint_limits_is_not_reached(robot) -> None:
    r, _ = robot
    far = np.array([0.0, 0.0, 0.0, 0.0, 6.0])  # wrist_roll 6 rad: past its limit
    assert not r.move(far, timeout_s=3.0)
    assert r.joints()[4] < 3.0  # the controller's limits held it inside its range


def test_the_real_sessions_servo_and_camera_steps_on_the_simulated_bus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from solarian_agent.bringup import cli
    from solarian_agent.bringup.profile import RobotProfile

    cal = tmp_path / "arm.yaml"
    default_so101().save(cal)
    profile = tmp_path / "robot.yaml"
    with SimulatedBus() as bus:
        rc = cli.main(["--port", bus.port_name, "--arm-calibration", str(cal),
                       "--camera", f"overhead={_video(tmp_path / 'o.avi', (320, 240))}",
                       "--camera", f"wrist={_video(tmp_path / 'w.avi', (240, 180))}",
                       "--board-at", "0.22,0.08,10", "--board-at", "0.1,-0.14,-10",
                       "--step", "servos", "--step", "arm_calibration", "--step", "cameras",
                       "--json", "--profile", str(profile)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["ready"] is False  # cameras not located, no check yet
    steps = doc["steps"]
    assert steps["servos"]["status"] == "done" and steps["servos"]["port"] == bus.port_name
    assert steps["servos"]["ids"] == {"shoulder_pan": 1, "shoulder_lift": 2, "elbow_flex": 3,
                                      "wrist_flex": 4, "wrist_roll": 5, "gripper": 6}
    assert steps["cameras"]["cameras"]["wrist"]["width"] == 240
    assert steps["intrinsics"]["status"] == "skipped"
    prof = RobotProfile.load(profile)
    assert prof.arm_port == bus.port_name and prof.arm_calibration_file == str(cal)
    assert [c.name for c in prof.cameras] == ["overhead", "wrist"]
    assert prof.camera("wrist").mount == "gripper"  # type: ignore[union-attr]
    assert Path(prof.camera("overhead").calibration_file).parent == tmp_path / "cameras"  # type: ignore[union-attr]


def test_a_missing_servo_fails_the_servo_step_naming_it(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    import json

    from solarian_agent.bringup import cli

    cal = tmp_path / "arm.yaml"
    default_so101().save(cal)
    with SimulatedBus(ids=(1, 2, 3, 4, 6)) as bus:
        rc = cli.main(["--port", bus.port_name, "--arm-calibration", str(cal),
                       "--camera", "overhead=0", "--camera", "wrist=2",
                       "--board-at", "0.22,0.08,10", "--board-at", "0.1,-0.14,-10",
                       "--step", "servos", "--json", "--profile", str(tmp_path / "r.yaml")])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    step = doc["steps"]["servos"]
    assert step["status"] == "failed" and "wrist_roll" in step["reason"]
