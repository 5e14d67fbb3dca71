"""What reads the robot profile: the robot launch (cameras, port, calibrations from it; a profile
that is not ready stops it) and the robot description (each camera's frame where bring-up
measured it, under the URDF's tree); and the profile file itself."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.bringup.description import matrix_rpy, rpy_matrix, with_calibrated_cameras
from solarian_agent.bringup.profile import CameraEntry, PointingCheck, RobotProfile
from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Extrinsics,
    Measurement,
    rotation_angle_deg,
)
from solarian_agent.ros import launch_plan
from solarian_agent.ros.components import share_dir
from solarian_agent.ros.launch_profile import apply_profile

MEAS = Measurement("2026-12-06T10:00:00+00:00", "test", 0.1, 10)
K = (680.0, 0.0, 320.0, 0.0, 680.0, 240.0, 0.0, 0.0, 1.0)


def _pose(rotvec: tuple[float, float, float], t: tuple[float, float, float]) -> np.ndarray:
    p = np.eye(4)
    p[:3, :3], _ = cv2.Rodrigues(np.array(rotvec, float))
    p[:3, 3] = t
    return p


def _nominal(frame: str, parent: str = "") -> np.ndarray:
    arm = ArmModel.default()
    q = np.zeros(6)
    pose = arm.frame_pose(q, frame)
    return np.linalg.inv(arm.frame_pose(q, parent)) @ pose if parent else pose


def _calibrations(d: Path) -> dict[str, CameraCalibration]:
    """Both cameras a little off the drawing, as a real build is."""
    over = _nominal("overhead_camera_optical") @ _pose((0.02, -0.01, 0.03), (0.01, -0.02, 0.03))
    wrist = _nominal("wrist_camera_optical", "gripper_link") @ _pose((0.05, 0.02, -0.04),
                                                                     (0.003, 0.004, -0.002))
    out = {
        "overhead": CameraCalibration("overhead", 640, 480, K, (0.0,) * 5, MEAS).with_extrinsics(
            Extrinsics.from_matrix(over, MEAS)),
        "wrist": CameraCalibration("wrist", 480, 360, K, (0.0,) * 5, MEAS).with_extrinsics(
            Extrinsics.from_matrix(wrist, MEAS, parent_frame="gripper_link")),
    }
    for name, cal in out.items():
        cal.save(d / "cameras" / f"{name}.yaml")
    return out


def _profile(d: Path, passed: bool = True) -> Path:
    _calibrations(d)
    prof = RobotProfile(
        arm_port="/dev/ttyACM7", arm_calibration_file=str(d / "arm.yaml"),
        servo_ids={"shoulder_pan": 1},
        cameras=(CameraEntry("overhead", "/dev/video4", calibration_file=str(
            d / "cameras" / "overhead.yaml")),
                 CameraEntry("wrist", "6", 480, 360, "gripper", str(
                     d / "cameras" / "wrist.yaml"))),
        steps={"poses": "2026-12-06T10:00:00+00:00"},
        check=PointingCheck("2026-12-06T10:05:00+00:00", 5.0,
                            {"overhead": (1.0, 2.0), "wrist": (1.5, 7.5 if not passed else 2.5)}))
    return prof.save(d / "robot.yaml")


def test_the_description_puts_each_camera_frame_where_bringup_measured_it(tmp_path: Path
                                                                          ) -> None:
    cals = _calibrations(tmp_path)
    text = (share_dir() / "urdf" / "so101.urdf").read_text()
    urdf = tmp_path / "calibrated.urdf"
    urdf.write_text(with_calibrated_cameras(text, cals))
    arm = ArmModel.from_urdf(urdf)
    q = np.array([0.3, -0.5, 0.8, 0.2, -0.4, 0.1])  # the wrist camera moves with the arm
    over = arm.frame_pose(q, "overhead_camera_optical")
    want = cals["overhead"].extrinsics.base_from_camera  # type: ignore[union-attr]
    assert np.linalg.norm(over[:3, 3] - want[:3, 3]) < 1e-5
    assert rotation_angle_deg(over, want) < 1e-4
    wrist = np.linalg.inv(arm.frame_pose(q, "gripper_link")) @ arm.frame_pose(
        q, "wrist_camera_optical")
    want = cals["wrist"].extrinsics.base_from_camera  # type: ignore[union-attr]
    assert np.linalg.norm(wrist[:3, 3] - want[:3, 3]) < 1e-5
    assert rotation_angle_deg(wrist, want) < 1e-4
    # the drawing's camera frames are not where the calibration says (the test means it)
    drawn = ArmModel.default().frame_pose(q, "overhead_camera_optical")
    assert np.linalg.norm(drawn[:3, 3] - over[:3, 3]) > 0.02


@pytest.mark.parametrize("rpy", [(0.1, -0.4, 2.0), (0.0, math.pi / 2, 0.3),
                                 (-2.5, 0.2, -3.0), (0.3, -math.pi / 2, 1.0)])
def test_urdf_angles_round_trip_even_looking_straight_down(rpy: tuple[float, float, float]
                                                           ) -> None:
    m = rpy_matrix(rpy)
    assert np.allclose(rpy_matrix(matrix_rpy(m)), m, atol=1e-9)


def test_the_robot_launch_takes_cameras_port_and_calibrations_from_the_profile(
        tmp_path: Path) -> None:
    path = _profile(tmp_path)
    got = apply_profile({"profile": str(path), "cameras": "overhead=0,wrist=2", "port": "",
                         "arm_config": "", "calibration_dir": ""})
    assert got.args["cameras"] == "overhead=/dev/video4,wrist=6"
    assert got.args["port"] == "/dev/ttyACM7"
    assert got.args["arm_config"] == str(tmp_path / "arm.yaml")
    assert got.args["calibration_dir"] == str(tmp_path / "cameras")
    assert set(got.calibrations) == {"overhead", "wrist"}
    # what the command line says wins over the profile
    mine = apply_profile({"profile": str(path), "cameras": "overhead=9", "port": "/dev/ttyUSB0",
                          "arm_config": "", "calibration_dir": ""})
    assert mine.args["cameras"] == "overhead=9" and mine.args["port"] == "/dev/ttyUSB0"
    plan = launch_plan.robot_plan({"profile": str(path), "simulated_bus": "true",
                                   "robot_state_publisher": "false"}, share_dir())
    cams = {n.name: n.parameters for n in plan if n.executable == "camera_node"}
    assert cams["camera_overhead"]["source"] == "/dev/video4"
    assert cams["camera_overhead"]["calibration_file"] == str(tmp_path / "cameras"
                                                              / "overhead.yaml")


def test_a_profile_that_is_not_ready_stops_the_launch_with_the_reason(tmp_path: Path) -> None:
    path = _profile(tmp_path, passed=False)
    with pytest.raises(ValueError, match=r"not ready \(the pointing check failed: wrist: 7.5 "
                                         r"mm.*bringup --step check.*require_ready:=false"):
        apply_profile({"profile": str(path)})
    assert apply_profile({"profile": str(path), "require_ready": "false"}).profile is not None
    with pytest.raises(ValueError, match="no such file"):
        apply_profile({"profile": str(tmp_path / "nope.yaml")})
    assert apply_profile({"profile": "none"}).profile is None


def test_a_check_older_than_the_camera_poses_is_not_ready(tmp_path: Path) -> None:
    prof = RobotProfile.load(_profile(tmp_path))
    assert prof.ready
    later = prof.with_step("poses", "2026-12-06T11:00:00+00:00")
    assert not later.ready  # the cameras moved since the check measured them


@pytest.mark.parametrize("edit, says", [
    ("version: 1", "version: 3"),
    ("mount: fixed", "mount: ceiling"),
    ("shoulder_pan: 1", "shoulder_pan: 400"),
    ("servos:", "unpacking:"),
])
def test_a_bad_profile_names_the_field(tmp_path: Path, edit: str, says: str) -> None:
    from solarian_agent.core.errors import ConfigError

    p = tmp_path / "robot.yaml"
    text = (RobotProfile(servo_ids={"shoulder_pan": 1},
                         cameras=(CameraEntry("overhead", "0"),),
                         steps={"servos": "x"}).save(p).read_text())
    assert edit in text
    p.write_text(text.replace(edit, says))
    with pytest.raises(ConfigError, match="robot_profile"):
        RobotProfile.load(p)


def test_the_profile_round_trips(tmp_path: Path) -> None:
    path = _profile(tmp_path)
    prof = RobotProfile.load(path)
    again = RobotProfile.load(replace(prof, path="").save(tmp_path / "again.yaml"))
    assert again.cameras == prof.cameras and again.check == prof.check
    assert again.servo_ids == prof.servo_ids and again.steps == prof.steps


def test_the_panel_shows_the_robots_readiness_and_nothing_private(tmp_path: Path) -> None:

    from solarian_agent.core.clock import FakeClock
    from solarian_agent.core.transport import Bus
    from solarian_agent.ui.panel import serve_panel

    prof = RobotProfile.load(_profile(tmp_path, passed=False))
    with serve_panel(Bus(), FakeClock(), "127.0.0.1", 0, robot=prof.summary()) as panel:
        state = _get_json(panel.url, "/api/state")
    robot = state["robot"]
    assert robot["ready"] is False and robot["worst_mm"] == {"overhead": 2.0, "wrist": 7.5}
    assert robot["threshold_mm"] == 5.0
    text = str(robot)
    assert "/dev/" not in text and str(tmp_path) not in text  # no ports or paths on a web page
    with serve_panel(Bus(), FakeClock(), "127.0.0.1", 0) as panel:
        assert _get_json(panel.url, "/api/state")["robot"] == {"name": "simulator"}


def _get_json(url: str, path: str) -> dict[str, object]:
    import json
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as r:
        out: dict[str, object] = json.loads(r.read())
    return out
