"""``solarian-agent doctor`` against the simulated STS3215 bus on a pseudo-terminal (the real
serial code path) and cameras on video files: a healthy robot passes, and each injected fault
(a missing servo, an unplugged camera, another arm's calibration, a camera at another
resolution, a weak supply, servo settings never written) is named with the command that
fixes it."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from solarian_agent import cli
from solarian_agent.bringup.doctor import Check, Report, diagnose, run_checks
from solarian_agent.bringup.findings import Finding, Status
from solarian_agent.bringup.profile import STEPS, CameraEntry, PointingCheck, RobotProfile
from solarian_agent.hw.camera.calibration import CameraCalibration, Extrinsics, Measurement
from solarian_agent.hw.feetech import lerobot, servo_config
from solarian_agent.hw.feetech.bus import FeetechBus
from solarian_agent.hw.feetech.calibration import ArmCalibration, default_so101
from solarian_agent.hw.feetech.simbus import SimulatedBus
from solarian_agent.testing.lerobot_files import so101_follower

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.timezone.utc)
W, H = 640, 480


@pytest.fixture(autouse=True)
def _no_ros_env(monkeypatch):
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    monkeypatch.delenv("RMW_IMPLEMENTATION", raising=False)


def _video(path: Path, w: int = W, h: int = H, frames: int = 4) -> str:
    out = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (w, h))
    assert out.isOpened()
    for i in range(frames):
        out.write(np.full((h, w, 3), 30 + 40 * i, np.uint8))
    out.release()
    return str(path)


def _camera_calibration(path: Path, name: str, parent: str, size=(W, H)) -> str:
    m = Measurement("2026-12-05T10:00:00+00:00", "test", 0.3, 12)
    cal = CameraCalibration(name, size[0], size[1], (600.0, 0, 320, 0, 600, 240, 0, 0, 1),
                            (0.0,) * 5, m)
    cal.with_extrinsics(Extrinsics((0.1, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0), m,
                                   parent_frame=parent)).save(path)
    return str(path)


def _arm_calibration(tmp_path: Path) -> tuple[ArmCalibration, dict, Path]:
    """This arm's calibration: a LeRobot follower file imported (homing offsets and ranges
    of a real SO-101)."""
    src = tmp_path / "follower.json"
    src.write_text(json.dumps(so101_follower()))
    motors = lerobot.read_lerobot(src)
    cal = lerobot.to_arm_calibration(motors, default_so101())
    path = tmp_path / "arm_so101.yaml"
    cal.save(path, settings={"baudrate": 1_000_000})
    return cal, motors, path


def _set_up_servos(sim: SimulatedBus, cal: ArmCalibration, motors: dict) -> None:
    """What LeRobot's calibration and this package's connect leave in the servos: the homing
    offsets, then the servo settings and calibrated limits."""
    present = [n for n in cal.names if cal.joint(n).servo_id in sim.servos]
    with FeetechBus(sim.port_name, timeout_s=0.3) as bus:
        lerobot.write_servo_offsets(bus, {n: motors[n] for n in present})
        servo_config.configure(bus, cal, servo_config.ServoSettings(), present)


def _profile(tmp_path: Path, port: str, arm_file: Path, cameras=None, check=None,
             steps=STEPS) -> Path:
    if cameras is None:
        cameras = (
            CameraEntry("overhead", _video(tmp_path / "overhead.avi"), W, H, "fixed",
                        _camera_calibration(tmp_path / "overhead.yaml", "overhead",
                                            "base_link")),
            CameraEntry("wrist", _video(tmp_path / "wrist.avi"), W, H, "gripper",
                        _camera_calibration(tmp_path / "wrist.yaml", "wrist", "gripper_link")))
    if check is None:
        check = PointingCheck("2026-12-05T11:00:00+00:00", 5.0,
                              {c.name: (1.2, 2.0, 1.5) for c in cameras})
    prof = RobotProfile(arm_port=port, arm_calibration_file=str(arm_file),
                        servo_ids=dict(default_so101().ids), cameras=tuple(cameras),
                        steps={s: "2026-12-05T10:30:00+00:00" for s in steps}, check=check)
    return prof.save(tmp_path / "robot.yaml")


@pytest.fixture
def sim() -> Iterator[SimulatedBus]:
    with SimulatedBus(speed_ticks_per_s=None) as s:
        yield s


@pytest.fixture
def robot(tmp_path, sim) -> Path:
    """A configured robot: servos set up and calibrated, two cameras on video files with
    their calibrations, the pointing check passed."""
    cal, motors, arm_file = _arm_calibration(tmp_path)
    _set_up_servos(sim, cal, motors)
    return _profile(tmp_path, sim.port_name, arm_file)


def _doctor(capsys, *args: str) -> tuple[int, dict[str, str]]:
    """Exit status and {check: its line} of ``solarian-agent doctor ARGS``."""
    code = cli.main(["doctor", *args])
    out = capsys.readouterr().out
    lines = {}
    for ln in out.splitlines()[:-1]:  # the last is the summary
        status, rest = ln.split(maxsplit=1)
        check = next(c for c in _CHECKS if rest.startswith(c + "  "))
        lines[check] = f"{status} {rest[len(check):].strip()}"
    return code, lines


_CHECKS = sorted(["profile", "bring-up steps", "pointing check", "arm calibration", "servo bus",
                  "servo ids", "servo settings", "supply voltage", "homing offsets",
                  "camera overhead", "camera overhead calibration", "camera wrist",
                  "camera wrist calibration", "ROS", "ROS_DOMAIN_ID", "RMW_IMPLEMENTATION"],
                 key=len, reverse=True)  # longest first: "camera wrist calibration" wins


# ------------------------------------------------------------------------------ healthy
def test_a_healthy_configured_robot_passes_every_check_with_exit_0(robot, capsys):
    code, lines = _doctor(capsys, "--profile", str(robot))
    assert code == 0
    assert set(lines) == {"profile", "bring-up steps", "pointing check", "arm calibration",
                          "servo bus", "servo ids", "servo settings", "supply voltage",
                          "homing offsets", "camera overhead", "camera overhead calibration",
                          "camera wrist", "camera wrist calibration", "ROS"}
    assert all(v.startswith("ok ") for v in lines.values()), lines
    assert "all 6 servos answer" in lines["servo ids"]
    assert "7.4 V" in lines["supply voltage"]
    assert "overhead 2.0 mm, wrist 2.0 mm (threshold 5 mm)" in lines["pointing check"]
    assert "delivers 640x480 frames" in lines["camera wrist"]
    assert "pose in gripper_link" in lines["camera wrist calibration"]


def test_the_whole_check_takes_seconds_not_minutes_on_the_simulated_bus(robot):
    import time

    t0 = time.monotonic()
    report = diagnose(robot, timeout_s=2.0)
    assert report.ok and time.monotonic() - t0 < 5.0


def test_json_gives_ok_and_each_finding_with_its_four_fields(robot, capsys):
    assert cli.main(["doctor", "--profile", str(robot), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True
    assert {tuple(sorted(f)) for f in doc["findings"]} == {("check", "detail", "fix", "status")}
    assert {f["status"] for f in doc["findings"]} == {"ok"}
    assert "servo ids" in [f["check"] for f in doc["findings"]]


# ------------------------------------------------------------------------------ servos
def test_a_missing_servo_is_named_with_its_id_and_the_setup_command(tmp_path, capsys):
    with SimulatedBus(ids=(1, 2, 3, 4, 6), speed_ticks_per_s=None) as sim:  # no wrist_roll
        cal, motors, arm_file = _arm_calibration(tmp_path)
        _set_up_servos(sim, cal, motors)
        code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, sim.port_name,
                                                                 arm_file)))
        port = sim.port_name
    assert code == 1
    line = lines["servo ids"]
    assert line.startswith("fail ") and "wrist_roll (id 5) does not answer" in line
    assert f"solarian-agent arm setup-motors --port {port} --joint wrist_roll" in line
    # the servos that answer are still checked, and only once is the silent one named
    assert lines["homing offsets"].startswith("ok ") and "wrist_roll" not in \
        lines["homing offsets"]


def test_json_carries_the_failing_finding_and_ok_false(tmp_path, capsys):
    with SimulatedBus(ids=(1, 2, 3, 4, 5), speed_ticks_per_s=None) as sim:  # no gripper
        cal, motors, arm_file = _arm_calibration(tmp_path)
        _set_up_servos(sim, cal, motors)
        code = cli.main(["doctor", "--json", "--profile",
                         str(_profile(tmp_path, sim.port_name, arm_file))])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    bad = [f for f in doc["findings"] if f["status"] == "fail"]
    assert [f["check"] for f in bad] == ["servo ids"]
    assert "gripper (id 6)" in bad[0]["detail"] and "setup-motors" in bad[0]["fix"]


def test_no_servo_answering_is_one_line_about_the_supply(tmp_path, capsys):
    with SimulatedBus(ids=(), speed_ticks_per_s=None) as sim:
        _, _, arm_file = _arm_calibration(tmp_path)
        code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, sim.port_name,
                                                                 arm_file)))
    assert code == 1
    assert "no servo answers on" in lines["servo ids"] and "supply" in lines["servo ids"]
    assert "supply voltage" not in lines and "homing offsets" not in lines


def test_a_port_that_does_not_exist_names_it_and_find_port(tmp_path, capsys):
    _, _, arm_file = _arm_calibration(tmp_path)
    port = str(tmp_path / "ttyACM9")
    code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, port, arm_file)))
    assert code == 1
    assert lines["servo bus"].startswith("fail ") and f"{port} does not exist" in \
        lines["servo bus"]
    assert "solarian-agent arm find-port" in lines["servo bus"]
    assert "servo ids" not in lines


def test_a_profile_written_on_the_simulator_reports_its_sim_port_not_a_failure(tmp_path,
                                                                               capsys):
    _, _, arm_file = _arm_calibration(tmp_path)
    cams = (CameraEntry("overhead", "sim", W, H, "fixed",
                        _camera_calibration(tmp_path / "overhead.yaml", "overhead",
                                            "base_link")),)
    code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, "sim", arm_file, cams)))
    assert code == 0
    assert lines["servo bus"].startswith("warn ") and "simulator" in lines["servo bus"]
    assert lines["camera overhead"].startswith("warn ") and "simulated" in \
        lines["camera overhead"]


def test_a_calibration_from_another_arm_names_the_joints_whose_offsets_differ(tmp_path, sim,
                                                                               capsys):
    # these servos were set up here (homing offsets 0); the file is a LeRobot arm's
    cal, _, arm_file = _arm_calibration(tmp_path)
    with FeetechBus(sim.port_name, timeout_s=0.3) as bus:
        servo_config.configure(bus, cal, servo_config.ServoSettings())
    code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, sim.port_name, arm_file)))
    assert code == 1
    line = lines["homing offsets"]
    assert line.startswith("fail ") and "is not this arm's calibration" in line
    assert "servo/file homing offsets shoulder_pan 0/-1365, shoulder_lift 0/-1200" in line
    assert "gripper 0/1437" in line
    assert (f"calibrate this arm: `solarian-agent arm calibrate --port {sim.port_name} "
            f"--calibration {arm_file}`") in line
    assert lines["servo ids"].startswith("ok ")


def test_servos_holding_lerobot_offsets_point_to_import_lerobot(tmp_path, sim, capsys):
    cal, motors, _ = _arm_calibration(tmp_path)
    _set_up_servos(sim, cal, motors)
    other = ArmCalibration(tuple(
        replace(j, homing_offset=j.homing_offset + 100) for j in cal.joints))
    other_file = tmp_path / "other_arm.yaml"
    other.save(other_file, settings={})
    code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, sim.port_name,
                                                             other_file)))
    assert code == 1
    assert "elbow_flex -986/-886" in lines["homing offsets"]
    assert "solarian-agent arm import-lerobot --id ID" in lines["homing offsets"]


def test_servo_settings_never_written_name_the_register_and_joint(tmp_path, sim, capsys):
    cal, motors, arm_file = _arm_calibration(tmp_path)
    with FeetechBus(sim.port_name, timeout_s=0.3) as bus:  # offsets only: factory settings
        lerobot.write_servo_offsets(bus, motors)
    code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, sim.port_name, arm_file)))
    assert code == 0  # configure_on_connect writes them when the arm connects
    line = lines["servo settings"]
    assert line.startswith("warn ") and "shoulder_pan return_delay holds 250, expects 0" in line
    assert "solarian-agent arm teleop" in line


def test_a_low_supply_names_the_joint_the_volts_and_the_range(robot, sim, capsys):
    sim.servos[3].voltage_dv = 52
    code, lines = _doctor(capsys, "--profile", str(robot))
    assert code == 1
    line = lines["supply voltage"]
    assert line.startswith("fail ") and "elbow_flex 5.2 V: outside 6.0..13.0 V" in line
    assert "power supply" in line


def test_a_narrow_calibrated_range_is_a_warning_naming_the_joint(tmp_path, sim, capsys):
    cal, motors, _ = _arm_calibration(tmp_path)
    j = cal.joint("elbow_flex")
    narrow = ArmCalibration(tuple(
        x if x.name != "elbow_flex" else replace(x, range_min=1900, range_max=2300,
                                                 lower=-0.3, upper=0.3)
        for x in cal.joints))
    assert j.range_max - j.range_min > 2000
    narrow_file = tmp_path / "narrow.yaml"
    narrow.save(narrow_file, settings={})
    _set_up_servos(sim, narrow, motors)
    code, lines = _doctor(capsys, "--profile", str(_profile(tmp_path, sim.port_name,
                                                             narrow_file)))
    assert code == 0
    line = lines["arm calibration"]
    assert line.startswith("warn ") and "elbow_flex 1900..2300 (400 ticks" in line
    assert "solarian-agent arm calibrate --port" in line


# ------------------------------------------------------------------------------ cameras
def test_an_unplugged_camera_is_named_with_its_source(robot, tmp_path, capsys):
    prof = RobotProfile.load(robot)
    gone = str(tmp_path / "by-id" / "usb-cam-index0")
    cams = (CameraEntry("overhead", gone, W, H, "fixed", prof.cameras[0].calibration_file),
            prof.cameras[1])
    _profile(tmp_path, prof.arm_port, Path(prof.arm_calibration_file), cams)
    code, lines = _doctor(capsys, "--profile", str(robot))
    assert code == 1
    line = lines["camera overhead"]
    assert line.startswith("fail ") and f"source {gone} does not exist" in line
    assert "solarian-agent bringup --step cameras" in line
    assert lines["camera wrist"].startswith("ok ")


def test_a_source_that_exists_but_is_no_video_does_not_open(robot, tmp_path, capsys):
    prof = RobotProfile.load(robot)
    junk = tmp_path / "not_a_video.avi"
    junk.write_bytes(b"not a video")
    cams = (prof.cameras[0], CameraEntry("wrist", str(junk), W, H, "gripper",
                                         prof.cameras[1].calibration_file))
    _profile(tmp_path, prof.arm_port, Path(prof.arm_calibration_file), cams)
    code, lines = _doctor(capsys, "--profile", str(robot), "--timeout-s", "2")
    assert code == 1
    assert lines["camera wrist"].startswith("fail ") and str(junk) in lines["camera wrist"]


def test_a_camera_at_another_resolution_says_both_sizes(robot, tmp_path, capsys):
    prof = RobotProfile.load(robot)
    small = _video(tmp_path / "small.avi", 320, 240)
    cams = (CameraEntry("overhead", small, W, H, "fixed", prof.cameras[0].calibration_file),
            prof.cameras[1])
    _profile(tmp_path, prof.arm_port, Path(prof.arm_calibration_file), cams)
    code, lines = _doctor(capsys, "--profile", str(robot))
    assert code == 1
    line = lines["camera overhead"]
    assert "delivers 320x240 frames, the profile says 640x480" in line
    assert "solarian-agent bringup --step cameras" in line


def test_camera_calibration_faults_name_the_file_and_the_bringup_step(robot, tmp_path, capsys):
    prof = RobotProfile.load(robot)
    # overhead: no calibration file; wrist: its pose measured on base_link, not the gripper
    cams = (CameraEntry("overhead", prof.cameras[0].source, W, H, "fixed",
                        str(tmp_path / "missing.yaml")),
            CameraEntry("wrist", prof.cameras[1].source, W, H, "gripper",
                        _camera_calibration(tmp_path / "wrist_b.yaml", "wrist", "base_link")))
    _profile(tmp_path, prof.arm_port, Path(prof.arm_calibration_file), cams)
    code, lines = _doctor(capsys, "--profile", str(robot))
    assert code == 1
    assert f"{tmp_path / 'missing.yaml'} does not exist" in lines["camera overhead calibration"]
    assert "solarian-agent bringup --step intrinsics" in lines["camera overhead calibration"]
    line = lines["camera wrist calibration"]
    assert "pose is in base_link, but a gripper camera's is in gripper_link" in line
    assert "solarian-agent bringup --step poses" in line


def test_intrinsics_at_another_size_of_the_same_aspect_are_a_warning(robot, tmp_path, capsys):
    prof = RobotProfile.load(robot)
    cams = (CameraEntry("overhead", prof.cameras[0].source, W, H, "fixed",
                        _camera_calibration(tmp_path / "o2.yaml", "overhead", "base_link",
                                            (1280, 960))),
            prof.cameras[1])
    _profile(tmp_path, prof.arm_port, Path(prof.arm_calibration_file), cams)
    code, lines = _doctor(capsys, "--profile", str(robot))
    assert code == 0
    assert lines["camera overhead calibration"].startswith("warn ")
    assert "intrinsics at 1280x960, scaled to the camera's 640x480" in \
        lines["camera overhead calibration"]


# ------------------------------------------------------------------------------ profile
def test_a_missing_profile_is_one_line_naming_the_file_and_bringup(tmp_path, capsys):
    path = tmp_path / "nope" / "robot.yaml"
    assert cli.main(["doctor", "--profile", str(path)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert out[0].startswith("fail") and str(path) in out[0]
    assert "`solarian-agent bringup`" in out[0]


def test_the_default_profile_path_comes_from_the_environment(tmp_path, monkeypatch, capsys):
    path = tmp_path / "elsewhere.yaml"
    monkeypatch.setenv("SOLARIAN_ROBOT_PROFILE", str(path))
    assert cli.main(["doctor"]) == 1
    assert str(path) in capsys.readouterr().out


def test_an_invalid_profile_is_one_line_naming_the_file_and_what_is_wrong(tmp_path, capsys):
    path = tmp_path / "robot.yaml"
    path.write_text("robot_profile:\n  version: 1\n  cameras: [{name: a, source: '0', "
                    "mount: ceiling}]\n")
    assert cli.main(["doctor", "--profile", str(path)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and str(path) in out[0] and "ceiling" in out[0]
    assert "`solarian-agent bringup`" in out[0]


@pytest.mark.parametrize("value", ["x", "-1", "0", "nan", "inf"])
def test_a_bad_timeout_is_a_one_line_usage_error_with_exit_2(value, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["doctor", "--timeout-s", value])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("solarian-agent doctor: error: ")
    assert "--timeout-s" in err[0] and "Traceback" not in err[0]


def test_a_failed_pointing_check_fails_with_its_figures(tmp_path):
    _, _, arm_file = _arm_calibration(tmp_path)
    check = PointingCheck("2026-12-05T11:00:00+00:00", 5.0, {"overhead": (1.0, 42.0)})
    path = _profile(tmp_path, "sim", arm_file, cameras=(), check=check)
    report = diagnose(path, now=NOW)
    f = _one(report, "pointing check")
    assert f.status is Status.FAIL and "overhead: 42.0 mm (threshold 5 mm)" in f.detail
    assert f.fix == "`solarian-agent bringup --step check`"
    assert not report.ok


def test_an_old_pointing_check_and_missing_steps_are_warnings(tmp_path):
    _, _, arm_file = _arm_calibration(tmp_path)
    check = PointingCheck("2026-10-01T11:00:00+00:00", 5.0, {"overhead": (1.0, 2.0)})
    cams = (CameraEntry("overhead", "sim", W, H, "fixed",
                        _camera_calibration(tmp_path / "o.yaml", "overhead", "base_link")),)
    path = _profile(tmp_path, "sim", arm_file, cams, check, steps=("servos", "check"))
    report = diagnose(path, now=NOW)
    age = _one(report, "pointing check")
    assert age.status is Status.WARN and "66 days ago" in age.detail and "30 days" in age.detail
    steps = _one(report, "bring-up steps")
    assert steps.status is Status.WARN
    assert "arm_calibration, cameras, intrinsics, poses" in steps.detail
    assert report.ok


def test_a_pointing_check_older_than_the_last_pose_measurement_is_not_ready(tmp_path):
    _, _, arm_file = _arm_calibration(tmp_path)
    cams = (CameraEntry("overhead", "sim", W, H, "fixed", ""),)
    prof = RobotProfile.load(_profile(tmp_path, "sim", arm_file, cams))
    prof = prof.with_step("poses", "2026-12-06T09:00:00+00:00")
    prof.save(tmp_path / "robot.yaml")
    f = _one(diagnose(tmp_path / "robot.yaml", now=NOW), "pointing check")
    assert f.status is Status.FAIL and "before the last pose measurement" in f.detail


# ------------------------------------------------------------------------------ ROS
def test_a_missing_ros_is_a_warning_not_a_failure(tmp_path):
    _, _, arm_file = _arm_calibration(tmp_path)
    path = _profile(tmp_path, "sim", arm_file, cameras=())

    def no_rclpy(name: str):
        raise ImportError(f"No module named {name!r}")

    report = diagnose(path, env={}, import_module=no_rclpy, now=NOW)
    f = _one(report, "ROS")
    assert f.status is Status.WARN and "rclpy does not import" in f.detail
    assert "simulator does not" in f.detail and "make ros" in f.fix


def test_ros_domain_id_and_rmw_are_judged_when_set(tmp_path):
    _, _, arm_file = _arm_calibration(tmp_path)
    path = _profile(tmp_path, "sim", arm_file, cameras=())
    report = diagnose(path, env={"ROS_DOMAIN_ID": "seven", "RMW_IMPLEMENTATION": "rmw_nope"},
                      now=NOW)
    dom = _one(report, "ROS_DOMAIN_ID")
    assert dom.status is Status.FAIL and "'seven' is not a domain id" in dom.detail
    rmw = _one(report, "RMW_IMPLEMENTATION")
    assert rmw.status is Status.WARN and "librmw_nope.so" in rmw.detail
    ok = diagnose(path, env={"ROS_DOMAIN_ID": "7"}, now=NOW)
    assert _one(ok, "ROS_DOMAIN_ID").status is Status.OK


# ------------------------------------------------------------------------------ the runner
def test_a_check_that_raises_becomes_a_failure_naming_the_exception():
    def broken() -> list[Finding]:
        raise ZeroDivisionError("division by zero")

    fine = Finding("fine", Status.OK, "all good")
    out = run_checks([Check("broken", broken), Check("fine", lambda: [fine])], deadline_s=5)
    assert out[0].check == "broken" and out[0].status is Status.FAIL
    assert "ZeroDivisionError: division by zero" in out[0].detail
    assert out[1] == fine


def test_a_check_that_hangs_is_a_failure_when_the_time_is_up_and_the_others_report():
    release = threading.Event()

    def hangs() -> list[Finding]:
        release.wait(10)  # a driver stuck in its open
        return []

    try:
        out = run_checks([Check("camera stuck", hangs),
                          Check("ROS", lambda: [Finding("ROS", Status.OK, "fine")])],
                         deadline_s=0.2)
    finally:
        release.set()
    assert out[0].check == "camera stuck" and out[0].status is Status.FAIL
    assert "did not finish within 0.2 s" in out[0].detail
    assert out[1].status is Status.OK


def _one(report: Report, check: str) -> Finding:
    got = [f for f in report.findings if f.check == check]
    assert len(got) == 1, report.findings
    return got[0]
