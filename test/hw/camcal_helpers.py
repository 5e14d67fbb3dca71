"""Rendered calibration views with known poses: a board drawn into a distorted camera image.

The board texture is warped into an ideal (pinhole) image at 4x resolution, box-filtered down,
then pushed through the lens distortion with ``cv2.remap`` (for each distorted pixel the ideal
pixel it sees, from ``cv2.undistortPoints``), blurred and given pixel noise.  So the images
carry what real ones do (sampling, distortion, blur, noise) while the true K, D and poses are
known exactly.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from solarian_agent.hw.camera.boards import BoardImage, BoardSpec, draw
from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Extrinsics,
    Measurement,
    pose_matrix,
)

SIZE = (640, 480)
TRUE_K = (610.0, 0.0, 322.5, 0.0, 607.0, 236.0, 0.0, 0.0, 1.0)
TRUE_D = (-0.12, 0.09, 0.0012, -0.0008, 0.0)
_MAPS: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray]] = {}


def look_at(eye, target, up=(1.0, 0.0, 0.0)) -> np.ndarray:
    """base_from_camera of an optical frame (z forward, x right, y down) at ``eye`` looking at
    ``target``; ``up`` is the base direction that appears at the top of the image."""
    eye, target, up = (np.asarray(v, float) for v in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    y = -(up - np.dot(up, z) * z)
    y /= np.linalg.norm(y)
    x = np.cross(y, z)
    return pose_matrix(np.column_stack([x, y, z]), eye)


def rot(axis: str, deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def _distortion_maps(k, d, size, ss) -> tuple[np.ndarray, np.ndarray]:
    """For each pixel of the distorted image at ``ss`` x resolution, where it lies in the ideal
    (pinhole) image at the same resolution (solved at full resolution, then interpolated: the
    distortion field is smooth)."""
    key = (*k, *d, *size, ss)
    if key not in _MAPS:
        w, h = size
        kk = np.array(k, float).reshape(3, 3)
        u, v = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
        pts = np.stack([u.ravel(), v.ravel()], axis=1).reshape(-1, 1, 2)
        crit = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-10)
        n = cv2.undistortPoints(pts, kk, np.array(d, float), criteria=crit).reshape(-1, 2)
        mx = (kk[0, 0] * n[:, 0] + kk[0, 2]).reshape(h, w).astype(np.float32)
        my = (kk[1, 1] * n[:, 1] + kk[1, 2]).reshape(h, w).astype(np.float32)
        big = [cv2.resize(m, (w * ss, h * ss), interpolation=cv2.INTER_LINEAR) for m in (mx, my)]
        _MAPS[key] = (ss * (big[0] + 0.5) - 0.5, ss * (big[1] + 0.5) - 0.5)
    return _MAPS[key]


def render(texture: BoardImage, cam_from_board: np.ndarray, *, k=TRUE_K, d=TRUE_D, size=SIZE,
           noise: float = 0.0, blur: float = 0.0, background: int = 150, ss: int = 4,
           rng: np.random.Generator | None = None) -> np.ndarray:
    """A BGR image of the board at ``cam_from_board`` (board frame -> optical frame)."""
    w, h = size
    fx, _, cx, _, fy, cy, *_ = k
    ks = np.array([[ss * fx, 0, ss * (cx + 0.5) - 0.5], [0, ss * fy, ss * (cy + 0.5) - 0.5],
                   [0, 0, 1]])
    m = np.asarray(cam_from_board, float)
    h_board = ks @ np.column_stack([m[:3, 0], m[:3, 1], m[:3, 3]])
    ppm = texture.px_per_m
    ox, oy = texture.origin_px
    t = np.array([[1 / ppm, 0, -ox / ppm], [0, 1 / ppm, -oy / ppm], [0, 0, 1]])
    ideal = cv2.warpPerspective(texture.image, h_board @ t, (w * ss, h * ss),
                                flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                                borderValue=background)
    mx, my = _distortion_maps(k, d, size, ss)
    big = cv2.remap(ideal, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                    borderValue=background)
    img = cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA).astype(np.float32)
    if blur > 0:
        img = cv2.GaussianBlur(img, (0, 0), blur)
    if noise > 0:
        img += (rng or np.random.default_rng(0)).normal(0.0, noise, img.shape).astype(np.float32)
    return cv2.cvtColor(np.clip(img, 0, 255).astype(np.uint8), cv2.COLOR_GRAY2BGR)


def board_centre(board: BoardSpec) -> np.ndarray:
    pts = board.object_points()
    return (pts.min(axis=0) + pts.max(axis=0)) / 2


def random_views(board: BoardSpec, n: int, rng: np.random.Generator, *, k=TRUE_K, size=SIZE,
                 depth=(0.35, 0.7), max_tilt: float = 40.0) -> list[np.ndarray]:
    """``n`` cam_from_board poses with the whole board in view, spread over the image."""
    kk = np.array(k, float).reshape(3, 3)
    w, h = size
    pts = board.object_points()
    centre = board_centre(board)
    out: list[np.ndarray] = []
    tries = 0
    while len(out) < n:
        tries += 1
        assert tries < 10_000, "could not place the board in view"
        u, v = rng.uniform(0.2 * w, 0.8 * w), rng.uniform(0.2 * h, 0.8 * h)
        z = rng.uniform(*depth)
        p = z * np.linalg.inv(kk) @ np.array([u, v, 1.0])
        r = rot("z", rng.uniform(-30, 30)) @ rot("x", rng.uniform(-max_tilt, max_tilt)) \
            @ rot("y", rng.uniform(-max_tilt, max_tilt))
        tvec = p - r @ centre
        cam = pts @ r.T + tvec
        if (cam[:, 2] <= 0.05).any():
            continue
        uv = cam[:, :2] / cam[:, 2:3] * [kk[0, 0], kk[1, 1]] + [kk[0, 2], kk[1, 2]]
        margin = 25
        if (uv < margin).any() or (uv[:, 0] > w - margin).any() or (uv[:, 1] > h - margin).any():
            continue
        out.append(pose_matrix(r, tvec))
    return out


def true_calibration(base_from_camera: np.ndarray, camera: str = "overhead",
                     k=TRUE_K, d=TRUE_D, size=SIZE) -> CameraCalibration:
    m = Measurement("2026-11-02T10:00:00+00:00", "true model (rendered test views)", 0.0, 0)
    cal = CameraCalibration(camera, size[0], size[1], tuple(k), tuple(d), m)
    return cal.with_extrinsics(Extrinsics.from_matrix(base_from_camera, m))


def texture(board: BoardSpec) -> BoardImage:
    return draw(board, px_per_square=120, margin_squares=0.6)
