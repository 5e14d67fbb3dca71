"""Camera calibration on rendered views with known poses: intrinsics from chessboard and ChArUco
views (noise, blur, lens distortion), the camera's pose in the arm's base from a board lying at
a measured pose, the pixel -> table mapping, and the refusals of poor or bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from camcal_helpers import (
    SIZE,
    TRUE_K,
    look_at,
    random_views,
    render,
    rot,
    texture,
    true_calibration,
)

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.camera.boards import BoardError, BoardSpec, Detection, detect
from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Extrinsics,
    Measurement,
    pose_matrix,
    rotation_angle_deg,
)
from solarian_agent.hw.camera.model import (
    CalibratedCamera,
    CameraModelError,
    MissingCalibrationError,
    load_camera_models,
)
from solarian_agent.hw.camera.solve import (
    CalibrationRefused,
    base_from_table_board,
    calibrate_intrinsics,
    extrinsics_from_board,
    extrinsics_from_points,
)

# the overhead camera of the tests: 0.78 m above the table, looking down and a little back
OVERHEAD = look_at((0.30, 0.02, 0.78), (0.24, 0.0, 0.0))
NOISE, BLUR = 3.0, 0.7


def _views(spec: str, n: int, seed: int) -> dict[str, Detection]:
    board = BoardSpec.parse(spec)
    tex = texture(board)
    rng = np.random.default_rng(seed)
    out = {}
    for i, pose in enumerate(random_views(board, n, rng, max_tilt=45.0, depth=(0.3, 0.65))):
        det = detect(board, render(tex, pose, noise=NOISE, blur=BLUR, rng=rng))
        assert det is not None, f"view {i}: the rendered board was not found"
        out[f"view{i:02d}"] = det
    return out


@pytest.fixture(scope="module")
def chess_views() -> dict[str, Detection]:
    return _views("chessboard:9x6:25", 24, seed=3)


@pytest.fixture(scope="module")
def charuco_views() -> dict[str, Detection]:
    return _views("charuco:9x6:28:21", 24, seed=4)


def _intrinsics_close(res) -> None:
    k = np.array(res.k).reshape(3, 3)
    t = np.array(TRUE_K).reshape(3, 3)
    assert abs(k[0, 0] / t[0, 0] - 1) < 0.004 and abs(k[1, 1] / t[1, 1] - 1) < 0.004, k
    assert abs(k[0, 2] - t[0, 2]) < 3 and abs(k[1, 2] - t[1, 2]) < 3, k


def test_intrinsics_from_chessboard_views(chess_views):
    res = calibrate_intrinsics(chess_views)
    assert res.rms_px < 0.3 and res.image_size == SIZE
    _intrinsics_close(res)
    assert set(res.per_view_rms_px) == set(chess_views) and res.max_tilt_deg > 20


def test_intrinsics_from_charuco_views(charuco_views):
    res = calibrate_intrinsics(charuco_views)
    assert res.rms_px < 0.3
    _intrinsics_close(res)


def _calibration(res, base_from_camera: np.ndarray) -> CameraCalibration:
    m = Measurement("2026-11-02T10:00:00+00:00", "test", res.rms_px, 18)
    cal = CameraCalibration("overhead", *res.image_size, res.k, res.d, m)
    return cal.with_extrinsics(Extrinsics.from_matrix(base_from_camera, m))


def _table_errors_mm(est: CameraCalibration) -> np.ndarray:
    """Pixel -> table error over the whole 640x480 image (every pixel sees the table)."""
    a, b = CalibratedCamera(est), CalibratedCamera(true_calibration(OVERHEAD))
    errs = [np.linalg.norm(a.unproject(u, v) - b.unproject(u, v))
            for u in np.linspace(0, SIZE[0] - 1, 17) for v in np.linspace(0, SIZE[1] - 1, 13)]
    return np.array(errs) * 1000.0


def _board_at(board: BoardSpec, x: float, y: float, yaw_deg: float) -> np.ndarray:
    """The pose of ``board`` lying face up with its centre at (x, y)."""
    half = (board.object_points().max(axis=0) + board.object_points().min(axis=0))[:2] / 2
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    off = np.array([[c, s], [s, -c]]) @ half  # face up: the board's y axis is turned over
    return base_from_table_board(x - off[0], y - off[1], 0.0, yaw_deg=yaw_deg)


# the board-pose boards: as large as A3 paper takes (a bigger board pins the pose better)
@pytest.mark.parametrize("spec,fixture", [("chessboard:9x6:30", "chess_views"),
                                          ("charuco:11x8:30:22", "charuco_views")])
def test_extrinsics_from_a_board_at_a_measured_pose(spec, fixture, request):
    intr = calibrate_intrinsics(request.getfixturevalue(fixture))
    board = BoardSpec.parse(spec)
    base_from_board = _board_at(board, 0.25, 0.02, yaw_deg=-90.0)
    cam_from_board = np.linalg.inv(OVERHEAD) @ base_from_board
    img = render(texture(board), cam_from_board, noise=NOISE, blur=BLUR,
                 rng=np.random.default_rng(7))
    det = detect(board, img)
    assert det is not None
    ext = extrinsics_from_board(det, intr.k, intr.d, base_from_board, board=board)
    pos_mm = np.linalg.norm(ext.position - OVERHEAD[:3, 3]) * 1000
    ang = rotation_angle_deg(ext.base_from_camera, OVERHEAD)
    print(f"{board.kind}: camera pose error {pos_mm:.2f} mm, {ang:.3f} deg; board rms "
          f"{ext.rms_px:.2f} px")
    assert pos_mm < 2.0 and ang < 0.5
    errs = _table_errors_mm(_calibration(intr, ext.base_from_camera))
    print(f"{board.kind}: pixel->table error max {errs.max():.2f} mm, "
          f"rms {math.sqrt(np.mean(errs ** 2)):.2f} mm")
    assert errs.max() < 3.0


def test_the_chessboard_origin_is_the_same_corner_whichever_way_it_is_seen(chess_views):
    intr = calibrate_intrinsics(chess_views)
    board = BoardSpec.parse("chessboard:9x6:30")
    for yaw in (-90.0, 90.0, 0.0, 180.0, 30.0):  # the board turned on the table
        base_from_board = _board_at(board, 0.24, 0.0, yaw)
        img = render(texture(board), np.linalg.inv(OVERHEAD) @ base_from_board)
        det = detect(board, img)
        ext = extrinsics_from_board(det, intr.k, intr.d, base_from_board, board=board)
        assert np.linalg.norm(ext.position - OVERHEAD[:3, 3]) < 0.005, yaw


def test_a_symmetric_chessboard_is_refused_for_the_board_pose():
    board = BoardSpec.parse("chessboard:8x6:30")
    det = Detection(np.zeros((48, 2)), board.object_points(), SIZE)
    with pytest.raises(CalibrationRefused, match="turned by 180 degrees"):
        extrinsics_from_board(det, TRUE_K, (0, 0, 0, 0, 0), np.eye(4), board=board)


# ---------------------------------------------------------------------------- refusals
def test_too_few_views_are_refused(chess_views):
    few = dict(list(chess_views.items())[:3])
    with pytest.raises(CalibrationRefused, match="only 3 views .* need at least 6"):
        calibrate_intrinsics(few)


def test_views_that_all_face_the_camera_are_refused():
    board = BoardSpec.parse("chessboard:9x6:25")
    tex = texture(board)
    rng = np.random.default_rng(11)
    views = {}
    for i, pose in enumerate(random_views(board, 8, rng, max_tilt=2.0, depth=(0.3, 0.5))):
        views[f"v{i}"] = detect(board, render(tex, pose, rng=rng))
    with pytest.raises(CalibrationRefused, match="every view faces the camera"):
        calibrate_intrinsics(views)


def test_views_in_one_corner_of_the_image_are_refused(chess_views):
    # the same views, only those whose board stays in the left half
    left = {n: d for n, d in chess_views.items() if d.image_points[:, 0].max() < 330}
    small = {f"{n}{i}": Detection(d.image_points * 0.5, d.object_points, d.image_size)
             for i in range(2) for n, d in chess_views.items()}
    for views in (small,) + ((left,) if len(left) >= 6 else ()):
        with pytest.raises(CalibrationRefused, match="covered only"):
            calibrate_intrinsics(views)


def test_a_board_that_moved_during_the_views_is_refused_naming_the_worst(chess_views):
    rng = np.random.default_rng(5)
    shaken = dict(chess_views)
    d = shaken["view04"]
    shaken["view04"] = Detection(d.image_points + rng.normal(0, 6.0, d.image_points.shape),
                                 d.object_points, d.image_size)
    with pytest.raises(CalibrationRefused, match=r"reprojection error .* worst views: view04"):
        calibrate_intrinsics(shaken)


def test_no_board_in_an_image_is_none():
    img = np.full((480, 640, 3), 150, np.uint8)
    assert detect(BoardSpec.parse("chessboard:9x6:25"), img) is None
    assert detect(BoardSpec.parse("charuco:9x6:28:21"), img) is None


@pytest.mark.parametrize("text,match", [
    ("chessboard:9x6", "expected chessboard"), ("chessboard:9by6:25", "not COLSxROWS"),
    ("charuco:9x6:28:30", "must be smaller"), ("charuco:9x6:28:21:DICT_9", "not one of"),
    ("hexboard:9x6:25", "expected chessboard"), ("chessboard:9x6:abc", "could not convert")])
def test_bad_board_descriptions_are_named(text, match):
    with pytest.raises(BoardError, match=match):
        BoardSpec.parse(text)


# ---------------------------------------------------------------------------- points
def _table_points(n: int, rng) -> np.ndarray:
    pts = np.column_stack([rng.uniform(0.10, 0.38, n), rng.uniform(-0.17, 0.17, n),
                           np.zeros(n)])
    return pts


def test_extrinsics_from_clicked_table_points_seen_at_an_angle():
    """A camera on a stand in front of the arm looking down at about 35 degrees; 12 points,
    every other one on a 10 cm block, clicks off by 0.5 px RMS; over 20 such sessions."""
    side = look_at((0.62, 0.30, 0.42), (0.24, 0.0, 0.0), up=(-1.0, 0.0, 0.0))
    truth = CalibratedCamera(true_calibration(side))
    work = np.array([(x, y, 0.0) for x in np.linspace(0.08, 0.42, 10)
                     for y in np.linspace(-0.22, 0.22, 10)])
    work_uv = truth.project_many(work)[0]
    grid = np.array([(x, y) for x in np.linspace(0.12, 0.38, 4) for y in (-0.16, 0.0, 0.16)])
    pos, ang, table = [], [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        pts = np.column_stack([grid + rng.uniform(-0.015, 0.015, grid.shape), np.zeros(12)])
        pts[::2, 2] = 0.10
        uv = truth.project_many(pts)[0] + rng.normal(0, 0.5, (len(pts), 2))
        ext = extrinsics_from_points(uv, pts, TRUE_K, truth.D)
        assert ext.rms_px < 1.5
        pos.append(np.linalg.norm(ext.position - side[:3, 3]) * 1000)
        ang.append(rotation_angle_deg(ext.base_from_camera, side))
        est = CalibratedCamera(true_calibration(ext.base_from_camera))
        table.append(max(np.linalg.norm(est.unproject(u, v) - p) * 1000
                         for (u, v), p in zip(work_uv, work, strict=True)))
    print(f"clicked points, oblique camera, 20 sessions: pose error median "
          f"{np.median(pos):.2f} mm (max {max(pos):.2f}), {np.median(ang):.3f} deg (max "
          f"{max(ang):.3f}); pixel->table over the reach max {max(table):.2f} mm")
    assert np.median(pos) < 2.0 and np.median(ang) < 0.5
    assert max(table) < 3.0


def test_points_refusals_name_what_is_wrong():
    truth = CalibratedCamera(true_calibration(OVERHEAD))
    pts = np.array([[0.12, -0.16, 0], [0.12, 0.16, 0], [0.38, 0.16, 0], [0.38, -0.16, 0],
                    [0.25, 0.0, 0]])
    uv = truth.project_many(pts)[0]
    d = truth.D
    with pytest.raises(CalibrationRefused, match="at least 4 points .* got 3"):
        extrinsics_from_points(uv[:3], pts[:3], TRUE_K, d)
    with pytest.raises(CalibrationRefused, match="5 touched points but 4 clicked"):
        extrinsics_from_points(uv[:4], pts, TRUE_K, d)
    same = pts.copy()
    same[3] = same[1] + [0.003, 0, 0]
    with pytest.raises(CalibrationRefused, match="points 2 and 4 are the same place"):
        extrinsics_from_points(truth.project_many(same)[0], same, TRUE_K, d)
    line = np.array([[0.10 + 0.06 * i, 0.01 * i, 0.0] for i in range(5)])
    with pytest.raises(CalibrationRefused, match="on one line"):
        extrinsics_from_points(truth.project_many(line)[0], line, TRUE_K, d)
    bad = uv.copy()
    bad[2] += [45.0, -30.0]
    with pytest.raises(CalibrationRefused, match="point 3 is off by"):
        extrinsics_from_points(bad, pts, TRUE_K, d)
    with pytest.raises(CalibrationRefused, match="not a finite number"):
        extrinsics_from_points(np.vstack([uv[:4], [np.nan, 1.0]]), pts, TRUE_K, d)


# ---------------------------------------------------------------------------- model + file
def test_the_model_projects_and_unprojects_through_the_distortion():
    cam = CalibratedCamera(true_calibration(OVERHEAD))
    rng = np.random.default_rng(9)
    for p in _table_points(40, rng):
        u, v = cam.project(p)
        assert np.linalg.norm(cam.unproject(u, v, 0.0) - p) < 1e-6
    lifted = cam.unproject(320.0, 240.0, 0.05)
    assert lifted[2] == pytest.approx(0.05)
    with pytest.raises(CameraModelError, match="finite"):
        cam.unproject(float("nan"), 1.0)
    # half the resolution (the same aspect ratio): the same table point
    half = cam.for_size(320, 240)
    u, v = cam.project((0.25, 0.05, 0.0))
    assert np.linalg.norm(half.unproject((u + 0.5) / 2 - 0.5, (v + 0.5) / 2 - 0.5)
                          - (0.25, 0.05, 0.0)) < 1e-6
    with pytest.raises(Exception, match="another aspect ratio"):
        cam.for_size(640, 360)


def test_a_camera_looking_away_from_the_table():
    up = pose_matrix(rot("x", 180.0) @ OVERHEAD[:3, :3], OVERHEAD[:3, 3])
    cam = CalibratedCamera(true_calibration(up))
    with pytest.raises(CameraModelError, match="does not look down onto"):
        cam.unproject(320.0, 240.0)


def test_the_file_round_trips_and_documents_itself(tmp_path):
    cal = true_calibration(OVERHEAD)
    path = cal.save(tmp_path / "overhead.yaml")
    text = path.read_text()
    assert "camera_calibration:" in text and "translation_m" in text and "rms_px" in text
    back = CameraCalibration.load(path)
    assert back.k == cal.k and back.d == pytest.approx(cal.d)
    assert np.allclose(back.extrinsics.base_from_camera, OVERHEAD, atol=1e-6)
    info = back.camera_info(stamp=2.0)
    assert info.k == cal.k and info.frame_id == "overhead_camera_optical"


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.update(K=[[1, 0], [0, 1]]), r"camera_calibration.K: expected a 3x3 matrix"),
    (lambda d: d.update(K=[[1, 0], [0, 1], [0, 0, 1]]), r"camera_calibration.K\[0\]: expected"),
    (lambda d: d.update(D=[0.1, "x", 0, 0, 0]), r"camera_calibration.D: expected finite"),
    (lambda d: d.update(image_size=[640]), r"camera_calibration.image_size"),
    (lambda d: d["extrinsics"].update(rotation_xyzw=[0, 0, 0, 2]), "not a unit quaternion"),
    (lambda d: d["extrinsics"].update(parent_frame="world"),
     r"extrinsics.parent_frame: .world. is not one of base_link, gripper_link"),
    (lambda d: d["intrinsics"].pop("rms_px"), r"camera_calibration.intrinsics: missing"),
    (lambda d: d.update(version=7), "not a supported version"),
])
def test_bad_files_name_the_field(tmp_path, edit, match):
    import yaml

    path = true_calibration(OVERHEAD).save(tmp_path / "overhead.yaml")
    doc = yaml.safe_load(path.read_text())
    edit(doc["camera_calibration"])
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=match):
        CameraCalibration.load(path)


def test_loading_models_for_the_skills(tmp_path):
    true_calibration(OVERHEAD).save(tmp_path / "overhead.yaml")
    intr_only = true_calibration(OVERHEAD, camera="side")
    CameraCalibration(intr_only.camera, intr_only.width, intr_only.height, intr_only.k,
                      intr_only.d, intr_only.intrinsics).save(tmp_path / "side.yaml")
    models = load_camera_models(["overhead", "wrist", "side"], tmp_path)
    assert set(models) == {"overhead"}
    with pytest.raises(MissingCalibrationError) as e:
        load_camera_models(["overhead"], tmp_path, required={"wrist": ["pick_object"]})
    msg = str(e.value)
    assert "camera 'wrist' has no calibration" in msg and str(tmp_path / "wrist.yaml") in msg
    assert "solarian-agent calibrate-camera intrinsics --camera wrist" in msg
    assert "pick_object" in msg
    with pytest.raises(MissingCalibrationError, match="intrinsics but no extrinsics"):
        load_camera_models([], tmp_path, required={"side": ["place_at"]})
    (tmp_path / "wrist.yaml").write_text((tmp_path / "overhead.yaml").read_text())
    with pytest.raises(ConfigError, match="the file is for camera 'overhead', not 'wrist'"):
        load_camera_models(["wrist"], tmp_path)
