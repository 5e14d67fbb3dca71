"""Hand-eye calibration of a wrist camera: where the camera sits on the gripper.

The arm holds the camera over a board lying still on the table and looks at it from several
poses.  For each pose the arm's kinematics give the gripper's pose in the base frame
(``G_i``) and the board's detection gives the board in the camera (``C_i``); the unknown
camera-on-gripper ``X`` and board-on-base ``B`` satisfy ``G_i X C_i = B`` for every view.
:func:`solve_hand_eye` starts from OpenCV's closed form (``cv2.calibrateHandEye``, Park's
method) and refines ``X`` and ``B`` together on the corners' reprojection error, so that each
view counts by what it saw.  The residual is reported two ways: how far the board's pose
computed through each view strays from the common one (mm, degrees), and the corners'
reprojection error (pixels).

:func:`plan_views` picks the poses: joint values within limits where the whole board is in
view from 15 to 45 cm, the camera and gripper well above the table, chosen greedily so the
rotations between views turn about axes as different as possible (rotations about one axis
only leave ``X`` undetermined along it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.hw.camera.boards import Detection
from solarian_agent.hw.errors import CalibrationError

GRIPPER_FRAME = "gripper_link"
CAMERA_FRAME = "wrist_camera_optical"
MIN_VIEWS = 5


class HandEyeRefused(CalibrationError):
    """The views cannot give a trustworthy hand-eye calibration; the message says why."""


@dataclass(frozen=True)
class HandEyeView:
    base_from_gripper: np.ndarray  # 4x4, from the arm's kinematics at the measured joints
    detection: Detection


@dataclass(frozen=True)
class HandEyeResult:
    gripper_from_camera: np.ndarray  # 4x4: the optical frame on the gripper link
    base_from_board: np.ndarray  # 4x4: the board's frame in the base frame
    spread_mm: float  # RMS distance of each view's board origin from the common one
    spread_deg: float  # RMS angle of each view's board rotation from the common one
    rms_px: float  # corners' reprojection error with X and B (all views)
    views: int


# --------------------------------------------------------------------------- small algebra
def _rt(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return pose[:3, :3], pose[:3, 3]


def _pose(r: np.ndarray, t: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = r, np.asarray(t, float).ravel()
    return out


def _rodrigues(v: np.ndarray) -> np.ndarray:
    import cv2

    r, _ = cv2.Rodrigues(np.asarray(v, float).reshape(3, 1))
    out: np.ndarray = r
    return out


def _rotvec(r: np.ndarray) -> np.ndarray:
    import cv2

    v, _ = cv2.Rodrigues(np.asarray(r, float))
    out: np.ndarray = v.ravel()
    return out


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(float(np.linalg.norm(_rotvec(a[:3, :3].T @ b[:3, :3]))))


def _params(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.concatenate([_rotvec(x[:3, :3]), x[:3, 3], _rotvec(b[:3, :3]), b[:3, 3]])


def _unparams(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _pose(_rodrigues(p[0:3]), p[3:6]), _pose(_rodrigues(p[6:9]), p[9:12])


# --------------------------------------------------------------------------- the solver
def board_in_camera(det: Detection, k: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The board's pose in the camera (4x4) from one detection."""
    import cv2

    ok, rv, tv = cv2.solvePnP(det.object_points.astype(np.float64),
                              det.image_points.astype(np.float64), k, d,
                              flags=cv2.SOLVEPNP_ITERATIVE)
    if not ok:
        raise HandEyeRefused("the board's pose could not be solved in one view")
    return _pose(_rodrigues(rv), tv)


def _residuals(p: np.ndarray, views: Sequence[HandEyeView], k: np.ndarray, d: np.ndarray
               ) -> np.ndarray:
    import cv2

    x, b = _unparams(p)
    x_inv = np.linalg.inv(x)
    out = []
    for v in views:
        cam_from_board = x_inv @ np.linalg.inv(v.base_from_gripper) @ b
        r, t = _rt(cam_from_board)
        uv, _ = cv2.projectPoints(v.detection.object_points.reshape(-1, 1, 3).astype(float),
                                  _rotvec(r), t, k, d)
        out.append((uv.reshape(-1, 2) - v.detection.image_points.reshape(-1, 2)).ravel())
    return np.concatenate(out)


def _refine(p: np.ndarray, views: Sequence[HandEyeView], k: np.ndarray, d: np.ndarray,
            iterations: int = 30) -> np.ndarray:
    """Levenberg-Marquardt on the 12 parameters of X and B (numerical Jacobian)."""
    lam = 1e-3
    res = _residuals(p, views, k, d)
    cost = float(res @ res)
    for _ in range(iterations):
        jac = np.empty((res.size, p.size))
        for i in range(p.size):
            h = 1e-6 if i % 6 < 3 else 1e-7
            dp = np.zeros_like(p)
            dp[i] = h
            jac[:, i] = (_residuals(p + dp, views, k, d) - res) / h
        jtj, jtr = jac.T @ jac, jac.T @ res
        improved = False
        for _ in range(8):
            step = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-12), -jtr)
            cand = p + step
            r2 = _residuals(cand, views, k, d)
            c2 = float(r2 @ r2)
            if c2 < cost:
                p, res, lam, improved = cand, r2, max(lam / 3.0, 1e-9), True
                shrink = (cost - c2) / max(cost, 1e-12)
                cost = c2
                break
            lam *= 4.0
        if not improved or shrink < 1e-10:
            break
    return p


def solve_hand_eye(views: Sequence[HandEyeView], k: Sequence[float] | np.ndarray,
                   d: Sequence[float] | np.ndarray, min_views: int = MIN_VIEWS,
                   max_rms_px: float = 2.0) -> HandEyeResult:
    """``X`` (camera on gripper) and ``B`` (board on base) from ``views``; refused with the
    reason for too few views, too little rotation between them, or a poor fit."""
    import cv2

    if len(views) < min_views:
        raise HandEyeRefused(f"{len(views)} views of the board; hand-eye calibration needs at "
                             f"least {min_views} (move the arm so the wrist camera sees the "
                             "whole board from more poses)")
    kk = np.asarray(k, float).reshape(3, 3)
    dd = np.asarray(d, float).ravel()
    cams = [board_in_camera(v.detection, kk, dd) for v in views]
    spread = max(_angle_deg(views[0].base_from_gripper, v.base_from_gripper) for v in views)
    if spread < 10.0:
        raise HandEyeRefused(f"the gripper turned only {spread:.1f} deg between views; "
                             "hand-eye calibration needs views turned at least 10 deg apart")
    r_g = [v.base_from_gripper[:3, :3] for v in views]
    t_g = [v.base_from_gripper[:3, 3].reshape(3, 1) for v in views]
    r_c = [c[:3, :3] for c in cams]
    t_c = [c[:3, 3].reshape(3, 1) for c in cams]
    r_x, t_x = cv2.calibrateHandEye(r_g, t_g, r_c, t_c, method=cv2.CALIB_HAND_EYE_PARK)
    x0 = _pose(r_x, t_x)
    boards = [v.base_from_gripper @ x0 @ c for v, c in zip(views, cams, strict=True)]
    b0 = _mean_pose(boards)
    p = _refine(_params(x0, b0), views, kk, dd)
    x, b = _unparams(p)
    res = _residuals(p, views, kk, dd).reshape(-1, 2)
    rms = float(np.sqrt(np.mean(np.sum(res * res, axis=1))))
    through = [v.base_from_gripper @ x @ c for v, c in zip(views, cams, strict=True)]
    spread_mm = 1000.0 * float(np.sqrt(np.mean([np.sum((t[:3, 3] - b[:3, 3]) ** 2)
                                                for t in through])))
    spread_deg = float(np.sqrt(np.mean([_angle_deg(t, b) ** 2 for t in through])))
    if not rms <= max_rms_px:
        raise HandEyeRefused(f"the views disagree: reprojection error {rms:.2f} px (at most "
                             f"{max_rms_px:g} px); was the board moved, or the arm's "
                             "calibration off?")
    return HandEyeResult(x, b, spread_mm, spread_deg, rms, len(views))


def _mean_pose(poses: Sequence[np.ndarray]) -> np.ndarray:
    t = np.mean([p[:3, 3] for p in poses], axis=0)
    m = np.sum([p[:3, :3] for p in poses], axis=0)
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    if np.linalg.det(r) < 0:
        u[:, -1] *= -1
        r = u @ vt
    return _pose(r, t)


# --------------------------------------------------------------------------- planning views
@dataclass(frozen=True)
class ViewPlan:
    joints: tuple[np.ndarray, ...]  # 5 arm joints each (rad), in the order to visit them
    min_axis_spread: float  # the conditioning score (0: rotations about one axis only)


def _sees_board(cam: np.ndarray, corners: np.ndarray, k: np.ndarray, size: tuple[int, int],
                margin_px: float, depth: tuple[float, float], top_px: float = 0.0) -> bool:
    r, t = cam[:3, :3], cam[:3, 3]
    pc = (corners - t) @ r  # corners in the camera frame
    z = pc[:, 2]
    if not (np.all(z > depth[0]) and np.all(z < depth[1])):
        return False
    uv = (k[:2, :2] @ (pc[:, :2] / z[:, None]).T).T + k[:2, 2]
    w, h = size
    if not (np.all(uv[:, 0] > margin_px) and np.all(uv[:, 0] < w - margin_px)
            and np.all(uv[:, 1] > max(margin_px, top_px)) and np.all(uv[:, 1] < h - margin_px)):
        return False
    # facing the board, not grazing it: the board's normal within 55 deg of the view ray
    ray = np.mean(corners, axis=0) - t
    return bool(abs(ray[2]) / np.linalg.norm(ray) > math.cos(math.radians(55.0)))


def plan_views(arm: ArmModel, board_corners: np.ndarray, k: Sequence[float] | np.ndarray,
               size: tuple[int, int], gripper_from_camera: np.ndarray, n: int = 12,
               samples: int = 6000, seed: int = 0, clearance_m: float = 0.06,
               margin_px: float = 20.0, depth: tuple[float, float] = (0.15, 0.45),
               top_px: float = 0.0) -> ViewPlan:
    """``n`` arm poses from which a camera at ``gripper_from_camera`` (the nominal mount: the
    URDF's) sees every corner of a board lying at ``board_corners`` (N x 3 in the base
    frame) from ``depth`` metres away, below the top ``top_px`` rows of the image (where a
    wrist camera sees its own jaws), chosen for well-conditioned rotations.  Raises
    :class:`HandEyeRefused` when fewer than ``n`` (at most :data:`MIN_VIEWS`) poses see it
    (a board out of the arm's reach)."""
    kk = np.asarray(k, float).reshape(3, 3)
    rng = np.random.default_rng(seed)
    lo, hi = arm.lower[:5].copy(), arm.upper[:5].copy()
    frames = (GRIPPER_FRAME, "gripper_frame_link", "wrist_link")
    cands: list[tuple[np.ndarray, np.ndarray]] = []
    for _ in range(samples):
        q = lo + (hi - lo) * rng.random(5)
        q6 = np.append(q, 0.0)
        poses = arm.frame_poses(q6, frames)
        if min(float(p[2, 3]) for p in poses.values()) < clearance_m:
            continue
        g = poses[GRIPPER_FRAME]
        cam = g @ gripper_from_camera
        if cam[2, 3] < clearance_m or not _sees_board(cam, board_corners, kk, size, margin_px,
                                                      depth, top_px):
            continue
        cands.append((q, g[:3, :3]))
    if len(cands) < min(n, MIN_VIEWS):
        raise HandEyeRefused(f"only {len(cands)} arm poses see the whole board from the wrist "
                             "camera: lay the board nearer the arm, 15-30 cm in front of it")
    chosen = [0]
    score = 0.0
    while len(chosen) < min(n, len(cands)):
        best, best_s = -1, -1.0
        for i in range(len(cands)):
            if i in chosen:
                continue
            s = _axis_spread([cands[j][1] for j in (*chosen, i)])
            if s > best_s:
                best, best_s = i, s
        chosen.append(best)
        score = best_s
    order = _nearest_order([cands[i][0] for i in chosen])
    return ViewPlan(tuple(order), score)


def _axis_spread(rots: Sequence[np.ndarray]) -> float:
    """The smallest eigenvalue of the summed outer products of the rotation vectors between
    every pair: zero when all relative rotations share one axis."""
    m = np.zeros((3, 3))
    for i in range(len(rots)):
        for j in range(i + 1, len(rots)):
            a = _rotvec(rots[i].T @ rots[j])
            m += np.outer(a, a)
    return float(np.linalg.eigvalsh(m)[0])


def _nearest_order(qs: Sequence[np.ndarray]) -> list[np.ndarray]:
    left = list(qs)
    out = [left.pop(0)]
    while left:
        i = int(np.argmin([np.max(np.abs(q - out[-1])) for q in left]))
        out.append(left.pop(i))
    return out


__all__ = ["CAMERA_FRAME", "GRIPPER_FRAME", "MIN_VIEWS", "HandEyeRefused", "HandEyeResult",
           "HandEyeView", "ViewPlan", "board_in_camera", "plan_views", "solve_hand_eye"]
