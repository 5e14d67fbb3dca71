"""``solarian-agent calibrate-camera`` end to end: rendered view files for the intrinsics, a
rendered board at a measured pose, and the touch procedure over the pseudo-terminal servo bus
(the arm's joint readings through forward kinematics) with clicked pixels."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from camcal_helpers import (
    TRUE_D,
    TRUE_K,
    look_at,
    random_views,
    render,
    texture,
    true_calibration,
)

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.hw.camera.boards import BoardSpec
from solarian_agent.hw.camera.calibrate_cli import main
from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Measurement,
    rotation_angle_deg,
)
from solarian_agent.hw.camera.model import CalibratedCamera
from solarian_agent.hw.camera.solve import base_from_table_board
from solarian_agent.hw.feetech.arm import default_arm_config
from solarian_agent.hw.feetech.calibration import ArmCalibration
from solarian_agent.hw.feetech.simbus import SimulatedBus

OVERHEAD = look_at((0.30, 0.02, 0.78), (0.24, 0.0, 0.0))
FRONT = look_at((0.62, 0.30, 0.42), (0.24, 0.0, 0.0), up=(-1.0, 0.0, 0.0))


@pytest.fixture(scope="module")
def view_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("views")
    board = BoardSpec.parse("chessboard:9x6:25")
    tex = texture(board)
    rng = np.random.default_rng(3)
    for i, pose in enumerate(random_views(board, 20, rng, max_tilt=45.0, depth=(0.3, 0.65))):
        cv2.imwrite(str(d / f"view{i:02d}.png"), render(tex, pose, noise=3.0, blur=0.7, rng=rng))
    cv2.imwrite(str(d / "empty.png"), np.full((480, 640, 3), 140, np.uint8))
    return d


def test_intrinsics_then_board_pose_then_show(view_files, tmp_path, capsys):
    assert main(["intrinsics", "--camera", "overhead", "--dir", str(tmp_path), "--board",
                 "chessboard:9x6:25", "--images", str(view_files / "*.png")]) == 0
    out = capsys.readouterr().out
    assert "empty.png: no board found (skipped)" in out
    assert "reprojection error" in out and f"saved {tmp_path / 'overhead.yaml'}" in out
    cal = CameraCalibration.load(tmp_path / "overhead.yaml")
    assert cal.extrinsics is None and cal.intrinsics.count == 20
    assert abs(cal.k[0] / TRUE_K[0] - 1) < 0.004

    board = BoardSpec.parse("chessboard:9x6:30")
    base_from_board = base_from_table_board(0.37, 0.13, 0.0, yaw_deg=-90.0)
    img = render(texture(board), np.linalg.inv(OVERHEAD) @ base_from_board, noise=3.0,
                 blur=0.7, rng=np.random.default_rng(8))
    cv2.imwrite(str(tmp_path / "board.png"), img)
    assert main(["board-pose", "--camera", "overhead", "--dir", str(tmp_path), "--board",
                 "chessboard:9x6:30", "--board-pose", "0.37,0.13,-90",
                 "--images", str(tmp_path / "board.png")]) == 0
    out = capsys.readouterr().out
    assert "camera position (m)" in out and "x 0.30" in out
    cal = CameraCalibration.load(tmp_path / "overhead.yaml")
    pos_mm = np.linalg.norm(np.array(cal.extrinsics.translation_m) - OVERHEAD[:3, 3]) * 1000
    assert pos_mm < 2.0 and rotation_angle_deg(cal.extrinsics.base_from_camera, OVERHEAD) < 0.5
    assert cal.extrinsics.measurement.method.startswith("board: chessboard 9x6, 30 mm squares")

    truth = CalibratedCamera(true_calibration(OVERHEAD))
    u, v = truth.project((0.25, -0.10, 0.0))
    assert main(["show", "--camera", "overhead", "--dir", str(tmp_path), "--pixel",
                 f"{u},{v}"]) == 0
    out = capsys.readouterr().out
    row = out.strip().splitlines()[-1].split()
    assert abs(float(row[-2]) - 250.0) < 3 and abs(float(row[-1]) + 100.0) < 3  # mm


def test_too_few_views_are_refused_with_the_reason(view_files, tmp_path, capsys):
    files = [str(view_files / f"view0{i}.png") for i in range(3)]
    assert main(["intrinsics", "--camera", "wrist", "--dir", str(tmp_path), "--board",
                 "chessboard:9x6:25", "--images", *files]) == 1
    err = capsys.readouterr().err
    assert "only 3 views with the board found; need at least 6" in err
    assert not (tmp_path / "wrist.yaml").exists()


def test_images_without_the_board_are_refused(view_files, tmp_path, capsys):
    assert main(["intrinsics", "--camera", "wrist", "--dir", str(tmp_path), "--board",
                 "charuco:9x6:28:21", "--images", str(view_files / "view0*.png")]) == 1
    cap = capsys.readouterr()
    assert "view00.png: no board found (skipped)" in cap.out  # a chessboard, not a ChArUco
    assert "only 0 views" in cap.err


def test_extrinsics_need_intrinsics_first(tmp_path, capsys):
    assert main(["board-pose", "--camera", "side", "--dir", str(tmp_path), "--board",
                 "chessboard:9x6:30", "--board-pose", "0.3,0,0", "--images", "x.png"]) == 1
    err = capsys.readouterr().err
    assert "side.yaml does not exist: calibrate the intrinsics first " \
           "(solarian-agent calibrate-camera intrinsics --camera side" in err


@pytest.mark.parametrize("argv,match", [
    (["board-pose", "--camera", "o", "--board", "chessboard:9x6:30", "--board-pose", "1,2",
      "--images", "a.png"], "expected X,Y,YAW_DEG"),
    (["intrinsics", "--camera", "o", "--board", "chessboard:9x6", "--images", "a.png"],
     "expected chessboard:COLSxROWS"),
    (["touch", "--camera", "o", "--sim", "--image", "a.png", "--clicks", "1,2;3"],
     "expected u,v"),
])
def test_bad_values_are_usage_errors(argv, match, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_print_board(tmp_path, capsys):
    assert main(["print-board", "--board", "charuco:11x8:30:22", "--out",
                 str(tmp_path / "b.png")]) == 0
    img = cv2.imread(str(tmp_path / "b.png"), cv2.IMREAD_GRAYSCALE)
    assert img.shape == (8 * 200 + 200, 11 * 200 + 200)
    assert "print it at 169 dpi for 30 mm squares" in capsys.readouterr().out


def test_touch_over_the_servo_bus(tmp_path, monkeypatch, capsys):
    """A camera on a stand in front of the arm.  The test moves the simulated servos to put
    the tip on 12 marks (every other one on a 10 cm block; the servos between encoder ticks,
    as a real joint is), the tool reads them over the pty bus and through the URDF; the
    clicks are the marks' true pixels off by 0.3 px RMS."""
    m = Measurement("2026-11-02T10:00:00+00:00", "test intrinsics", 0.1, 20)
    CameraCalibration("front", 640, 480, TRUE_K, TRUE_D, m).save(tmp_path / "front.yaml")
    cv2.imwrite(str(tmp_path / "frame.png"), np.full((480, 640, 3), 120, np.uint8))
    model = ArmModel.default()
    cal = ArmCalibration.load(default_arm_config())
    rng = np.random.default_rng(21)
    marks = [(x, y, 0.10 if (i + j) % 2 else 0.0)
             for i, x in enumerate(np.linspace(0.16, 0.30, 4))
             for j, y in enumerate((-0.13, 0.0, 0.13))]
    poses, tips = [], []
    q = np.zeros(5)
    for xyz in marks:
        q, _ = model.ik_search(xyz, q0=q)
        raw = {j.name: j.raw_unclipped(float(v)) + rng.uniform(-0.5, 0.5)
               for j, v in zip(cal.joints, [*q, 0.0], strict=True)}
        poses.append(raw)  # where the servos really are (between ticks)
        qt = [cal.joint(n).to_units(raw[n]) for n in model.joint_names]
        tips.append(model.fk(qt)[0])
    truth = CalibratedCamera(true_calibration(FRONT, camera="front"))
    clicks = truth.project_many(np.array(tips))[0] + rng.normal(0, 0.3, (len(tips), 2))
    with SimulatedBus() as sim:
        k = iter(range(len(poses) + 1))

        def answer(prompt: str) -> str:
            if prompt.startswith("Put the tool point"):
                n = next(k)
                if n == len(poses):
                    return "d"
                for j in cal.joints:
                    sim.set_position(j.servo_id, poses[n][j.name])
            return ""

        monkeypatch.setattr("builtins.input", answer)
        code = main(["touch", "--camera", "front", "--dir", str(tmp_path), "--port",
                     sim.port_name, "--image", str(tmp_path / "frame.png"), "--clicks",
                     ";".join(f"{u:.2f},{v:.2f}" for u, v in clicks)])
        assert not any(sim.torque(i) for i in range(1, 7))  # hand-guided: torque off
    out = capsys.readouterr().out
    assert code == 0, out
    line = next(ln for ln in out.splitlines() if ln.startswith("mark 12: "))
    read = [float(w) for w in line.replace(",", "").split() if w.replace(".", "").replace(
        "-", "").isdigit()]
    # read back over the bus: the true tip, within the encoders' resolution
    assert np.allclose(read, np.array(tips[11]) * 1000, atol=1.5), line
    assert "off (px)" in out and f"saved {tmp_path / 'front.yaml'}" in out
    got = CameraCalibration.load(tmp_path / "front.yaml")
    assert got.extrinsics.measurement.method == ("touch: 12 marks touched with the tool point "
                                                 "(6 raised), clicked in one frame")
    ext = got.extrinsics.base_from_camera
    pos_mm = np.linalg.norm(ext[:3, 3] - FRONT[:3, 3]) * 1000
    ang = rotation_angle_deg(ext, FRONT)
    est = CalibratedCamera(got)
    work = [(x, y, 0.0) for x in np.linspace(0.08, 0.42, 10) for y in np.linspace(-0.22, 0.22, 10)]
    table_mm = max(np.linalg.norm(est.unproject(*truth.project(p)) - p) * 1000 for p in work)
    print(f"touch over the servo bus: pose error {pos_mm:.2f} mm, {ang:.3f} deg; pixel->table "
          f"over the reach max {table_mm:.2f} mm")
    assert pos_mm < 2.0 and ang < 0.5 and table_mm < 3.0
    assert math.isfinite(got.extrinsics.measurement.rms_px)


def test_typed_pixels_when_opencv_has_no_window(tmp_path, monkeypatch, capsys):
    from solarian_agent.hw.camera.calibrate_cli import TerminalTouchUI

    answers = iter(["abc", "312 240", "400,100"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    ui = TerminalTouchUI(None, save_dir=tmp_path)
    frame = np.full((480, 640, 3), 90, np.uint8)
    assert ui.click(frame, 1, 2) == (312.0, 240.0)
    assert ui.click(frame, 2, 2) == (400.0, 100.0)
    out = capsys.readouterr().out
    assert f"the frame is saved as {tmp_path / 'touch_frame.png'}" in out
    assert "type two numbers" in out and (tmp_path / "touch_frame.png").is_file()


def test_quitting_the_touch_procedure(tmp_path, monkeypatch, capsys):
    m = Measurement("2026-11-02T10:00:00+00:00", "test intrinsics", 0.1, 20)
    CameraCalibration("front", 640, 480, TRUE_K, TRUE_D, m).save(tmp_path / "front.yaml")
    monkeypatch.setattr("builtins.input", lambda prompt="": "q")
    assert main(["touch", "--camera", "front", "--dir", str(tmp_path), "--sim", "--image",
                 str(tmp_path / "none.png")]) == 1
    assert "is not an image OpenCV can read" in capsys.readouterr().err
    cv2.imwrite(str(tmp_path / "f.png"), np.zeros((480, 640, 3), np.uint8))
    assert main(["touch", "--camera", "front", "--dir", str(tmp_path), "--sim", "--image",
                 str(tmp_path / "f.png")]) == 1
    assert "calibration stopped by the user" in capsys.readouterr().err
    assert CameraCalibration.load(tmp_path / "front.yaml").extrinsics is None
