"""Hand-eye calibration on synthetic views: a known camera-on-gripper and board-on-table, board
corners projected from arm poses (with pixel noise), solved back; and the refusals."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.bringup.handeye import (
    HandEyeRefused,
    HandEyeView,
    plan_views,
    solve_hand_eye,
)
from solarian_agent.hw.camera.boards import BoardSpec, Detection
from solarian_agent.sim.mujoco.prints import face_up_pose

K = np.array([[300.0, 0, 240], [0, 300.0, 180], [0, 0, 1]])
D = np.zeros(5)
BOARD = BoardSpec.parse("charuco:7x5:30:22")


@pytest.fixture(scope="module")
def arm() -> ArmModel:
    return ArmModel.default()


def _nominal(arm: ArmModel) -> np.ndarray:
    q = np.zeros(6)
    return np.linalg.inv(arm.frame_pose(q, "gripper_link")) @ arm.frame_pose(
        q, "wrist_camera_optical")


def _views(arm: ArmModel, x_true: np.ndarray, b_true: np.ndarray, qs: list[np.ndarray],
           noise_px: float, rng: np.random.Generator) -> list[HandEyeView]:
    obj = BOARD.object_points()
    out = []
    for q in qs:
        g = arm.frame_pose(np.append(q, 0.0), "gripper_link")
        cam_from_board = np.linalg.inv(g @ x_true) @ b_true
        rv, _ = cv2.Rodrigues(cam_from_board[:3, :3])
        uv, _ = cv2.projectPoints(obj.reshape(-1, 1, 3), rv, cam_from_board[:3, 3], K, D)
        uv = uv.reshape(-1, 2) + rng.normal(0.0, noise_px, (len(obj), 2))
        out.append(HandEyeView(g, Detection(uv, obj, (480, 360))))
    return out


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    r, _ = cv2.Rodrigues(a[:3, :3].T @ b[:3, :3])
    return math.degrees(float(np.linalg.norm(r)))


def test_the_camera_on_the_gripper_is_recovered_from_planned_views(arm: ArmModel) -> None:
    rng = np.random.default_rng(4)
    nominal = _nominal(arm)
    # the camera as really mounted: 4 mm and 2 degrees off the drawing
    tweak = np.eye(4)
    tweak[:3, :3], _ = cv2.Rodrigues(np.array([0.02, -0.025, 0.01]))
    tweak[:3, 3] = (0.004, -0.002, 0.003)
    x_true = nominal @ tweak
    b_true = face_up_pose(0.22, 0.08, 0.2)
    corners = BOARD.object_points() @ b_true[:3, :3].T + b_true[:3, 3]
    plan = plan_views(arm, corners, K, (480, 360), nominal, n=10)
    res = solve_hand_eye(_views(arm, x_true, b_true, list(plan.joints), 0.2, rng), K, D)
    assert 1000 * np.linalg.norm(res.gripper_from_camera[:3, 3] - x_true[:3, 3]) < 1.0
    assert _angle_deg(res.gripper_from_camera, x_true) < 0.2
    assert 1000 * np.linalg.norm(res.base_from_board[:3, 3] - b_true[:3, 3]) < 1.0
    assert res.views == 10 and res.rms_px < 0.5 and res.spread_mm < 1.0


def test_planned_views_turn_about_more_than_one_axis(arm: ArmModel) -> None:
    b = face_up_pose(0.22, 0.08, 0.2)
    corners = BOARD.object_points() @ b[:3, :3].T + b[:3, 3]
    plan = plan_views(arm, corners, K, (480, 360), _nominal(arm), n=8)
    assert len(plan.joints) == 8
    assert plan.min_axis_spread > 0.5  # rad^2: a single-axis set scores 0


def test_too_few_views_are_refused_with_what_to_do(arm: ArmModel) -> None:
    rng = np.random.default_rng(0)
    b = face_up_pose(0.22, 0.08, 0.2)
    corners = BOARD.object_points() @ b[:3, :3].T + b[:3, 3]
    plan = plan_views(arm, corners, K, (480, 360), _nominal(arm), n=8)
    views = _views(arm, _nominal(arm), b, list(plan.joints)[:3], 0.1, rng)
    with pytest.raises(HandEyeRefused, match="3 views of the board; .* at least 5"):
        solve_hand_eye(views, K, D)


def test_views_that_barely_turn_are_refused(arm: ArmModel) -> None:
    rng = np.random.default_rng(0)
    b = face_up_pose(0.22, 0.08, 0.2)
    corners = BOARD.object_points() @ b[:3, :3].T + b[:3, 3]
    q0 = plan_views(arm, corners, K, (480, 360), _nominal(arm), n=1).joints[0]
    qs = [q0 + np.array([0, 0, 0, 0, 0.02 * i]) for i in range(6)]
    with pytest.raises(HandEyeRefused, match="turned only"):
        solve_hand_eye(_views(arm, _nominal(arm), b, qs, 0.1, rng), K, D)


def test_a_board_that_moved_between_views_is_refused(arm: ArmModel) -> None:
    rng = np.random.default_rng(1)
    b = face_up_pose(0.22, 0.08, 0.2)
    corners = BOARD.object_points() @ b[:3, :3].T + b[:3, 3]
    qs = list(plan_views(arm, corners, K, (480, 360), _nominal(arm), n=8).joints)
    views = _views(arm, _nominal(arm), b, qs[:4], 0.1, rng)
    moved = b.copy()
    moved[:3, 3] += (0.03, 0.0, 0.0)  # someone nudged it 3 cm
    views += _views(arm, _nominal(arm), moved, qs[4:], 0.1, rng)
    with pytest.raises(HandEyeRefused, match="the views disagree"):
        solve_hand_eye(views, K, D)


def test_a_board_out_of_reach_has_no_views(arm: ArmModel) -> None:
    b = face_up_pose(1.5, 0.0, 0.0)
    corners = BOARD.object_points() @ b[:3, :3].T + b[:3, 3]
    with pytest.raises(HandEyeRefused, match="nearer the arm"):
        plan_views(arm, corners, K, (480, 360), _nominal(arm), n=8, samples=2000)
