"""``solarian-agent bringup`` end to end on the MuJoCo simulator as the robot: the board and the
marks rendered by MuJoCo's own renderer, the session run non-interactively, every figure
measured against the simulator's truth; and the session's resume, re-run and refusal paths."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from solarian_agent.bringup import cli
from solarian_agent.bringup.profile import STEPS, RobotProfile
from solarian_agent.hw.camera.calibration import CameraCalibration


def _run(capsys: pytest.CaptureFixture[str], profile: Path, *extra: str
         ) -> tuple[int, dict[str, Any]]:
    rc = cli.main(["--sim", "mujoco", "--non-interactive", "--json", "--profile", str(profile),
                   *extra])
    out = capsys.readouterr().out
    return rc, json.loads(out)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, dict[str, Any],
                                                                          Path]]:
    import contextlib
    import io

    d = tmp_path_factory.mktemp("bringup")
    profile = d / "robot.yaml"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(["--sim", "mujoco", "--non-interactive", "--json", "--profile",
                       str(profile)])
    yield rc, json.loads(buf.getvalue()), profile


def _numbers_by_suffix(doc: Any, suffix: str, path: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{path}.{k}" if path else str(k)
            if str(k).endswith(suffix) and isinstance(v, (int, float)):
                out[p] = float(v)
            else:
                out.update(_numbers_by_suffix(v, suffix, p))
    return out


def test_bringup_on_mujoco_recovers_both_cameras_and_points_within_5_mm(first_run: Any) -> None:
    rc, doc, profile = first_run
    assert rc == 0 and doc["ready"] is True
    steps = doc["steps"]
    assert [s for s in STEPS if steps[s]["status"] != "done"] == []
    poses = steps["poses"]["cameras"]
    for cam in ("overhead", "wrist"):
        assert poses[cam]["position_error_mm"] < 3.0, poses[cam]
        assert poses[cam]["rotation_error_deg"] < 0.5, poses[cam]
    check = steps["check"]["cameras"]
    for cam in ("overhead", "wrist"):
        assert set(check[cam]["marks"]) == {"30", "31", "32", "33"}
        assert check[cam]["max_error_mm"] < 5.0
        # the camera's own estimate of each mark, against where it was laid
        assert all(m["estimate_error_mm"] < 3.0 for m in check[cam]["marks"].values())
    # every figure measured against the truth is a finite number >= 0
    errs = {**_numbers_by_suffix(doc, "_mm"), **_numbers_by_suffix(doc, "_deg")}
    assert len(errs) >= 4 + 2 * 2 * 4
    assert all(math.isfinite(v) and v >= 0 for v in errs.values())


def test_the_profile_and_calibration_files_say_what_bringup_measured(first_run: Any) -> None:
    _, doc, profile = first_run
    prof = RobotProfile.load(profile)
    assert prof.ready and prof.arm_port == "sim" and len(prof.servo_ids) == 6
    assert {c.name: c.mount for c in prof.cameras} == {"overhead": "fixed", "wrist": "gripper"}
    assert prof.check is not None
    assert max(prof.check.errors_mm["wrist"]) == pytest.approx(
        doc["steps"]["check"]["cameras"]["wrist"]["max_error_mm"], abs=0.01)
    over = CameraCalibration.load(prof.camera("overhead").calibration_file)  # type: ignore[union-attr]
    wrist = CameraCalibration.load(prof.camera("wrist").calibration_file)  # type: ignore[union-attr]
    assert over.extrinsics is not None and over.extrinsics.parent_frame == "base_link"
    assert wrist.extrinsics is not None and wrist.extrinsics.parent_frame == "gripper_link"
    # the overhead camera hangs about 0.8 m over the table, looking down
    assert over.extrinsics.translation_m[2] == pytest.approx(0.8, abs=0.01)
    assert "hand-eye" in wrist.extrinsics.measurement.method


def test_a_second_run_resumes_and_skips_every_step_done(first_run: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    d = _copy_of(first_run[2], tmp_path / "copy")
    rc, doc = _run(capsys, d / "robot.yaml")
    assert rc == 0 and doc["ready"] is True
    assert {s: doc["steps"][s]["status"] for s in STEPS} == {s: "skipped" for s in STEPS}


def test_a_camera_pose_off_by_2_cm_fails_the_pointing_check(first_run: Any, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    d = _copy_of(first_run[2], tmp_path / "off")
    cal_file = d / "cameras" / "overhead.yaml"
    raw = yaml.safe_load(cal_file.read_text())
    raw["camera_calibration"]["extrinsics"]["translation_m"][1] += 0.02
    cal_file.write_text(yaml.safe_dump(raw))
    rc, doc = _run(capsys, d / "robot.yaml", "--step", "check")
    assert rc == 1 and doc["ready"] is False
    step = doc["steps"]["check"]
    assert step["status"] == "failed"
    assert "overhead" in step["reason"] and "threshold 5 mm" in step["reason"]
    assert "wrist" not in step["reason"]  # the wrist camera's own pose was not touched
    assert not RobotProfile.load(d / "robot.yaml").ready
    # the other steps are not run again
    assert doc["steps"]["poses"]["status"] == "skipped"


def _copy_of(profile: Path, d: Path) -> Path:
    """The bring-up's folder copied to ``d``, its profile naming the copied files."""
    shutil.copytree(profile.parent, d)
    p = d / "robot.yaml"
    p.write_text(p.read_text().replace(str(profile.parent), str(d)))
    return d


@pytest.mark.parametrize("argv, says", [
    ([], "give --port"),
    (["--port", "/dev/ttyACM0", "--non-interactive", "--camera", "overhead=0",
      "--camera", "wrist=2"], "--non-interactive needs --sim"),
    (["--sim", "mujoco", "--board", "charuco:7x5"], "board"),
    (["--sim", "mujoco", "--board-at", "1,2"], "--board-at '1,2': expected X,Y,YAW_DEG"),
    (["--sim", "mujoco", "--threshold-mm", "-3"], "--threshold-mm"),
    (["--sim", "mujoco", "--step", "everything"], "--step"),
    (["--sim", "mujoco", "--camera", "overhead"], "expected NAME=SOURCE"),
])
def test_a_bad_command_line_is_a_one_line_usage_error(argv: list[str], says: str,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and "Traceback" not in "\n".join(err)


def test_an_invalid_profile_is_one_error_naming_its_field(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    p = tmp_path / "robot.yaml"
    p.write_text("robot_profile:\n  cameras:\n  - {name: overhead, source: '0', mount: "
                 "ceiling}\n")
    assert cli.main(["--sim", "mujoco", "--non-interactive", "--profile", str(p)]) == 1
    err = capsys.readouterr().err
    assert "robot_profile.cameras[0]" in err and "'ceiling' is not one of fixed, gripper" in err


def test_marks_are_found_at_their_centre_in_a_slanted_view() -> None:
    import cv2

    from solarian_agent.bringup.marks import draw_mark, find_marks

    m = draw_mark(31)
    canvas = np.full((400, 500), 200, np.uint8)
    h, w = m.image.shape
    src = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    dst = np.float32([[120, 80], [330, 110], [360, 300], [100, 320]])
    hmat = cv2.getPerspectiveTransform(src, dst)
    warped = cv2.warpPerspective(m.image, hmat, (500, 400), borderValue=200)
    mask = cv2.warpPerspective(np.full_like(m.image, 255), hmat, (500, 400))
    canvas[mask > 0] = warped[mask > 0]
    found = find_marks(canvas, (30, 31))
    assert set(found) == {31}
    cx, cy = m.origin_px
    true = cv2.perspectiveTransform(np.float32([[[cx + 0.5, cy + 0.5]]]), hmat)[0, 0] - 0.5
    assert math.dist(found[31], true) < 0.5
