"""Solving a camera calibration with OpenCV, and refusing a poor one with the reason.

- :func:`calibrate_intrinsics`: K and D from several board views (``cv2.calibrateCamera``),
  refused when there are too few views, the views cover too little of the image, none is
  tilted (the focal length is then not measurable) or the reprojection error is too large.
- :func:`extrinsics_from_board`: the camera's pose in the arm's base frame from one view of a
  board lying at a measured pose on the table.
- :func:`extrinsics_from_points`: the same from 4 or more table points whose base-frame
  position is known (touched with the tool point) and whose pixels were clicked; refused for
  too few, repeated, collinear or inconsistent points, naming the point that disagrees.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from solarian_agent.hw.camera.boards import BoardSpec, Detection
from solarian_agent.hw.camera.calibration import pose_matrix
from solarian_agent.hw.errors import CalibrationError


class CalibrationRefused(CalibrationError):
    """The measurements cannot give a trustworthy calibration; the message says why and what
    to do about it."""


@dataclass(frozen=True)
class IntrinsicsResult:
    k: tuple[float, ...]
    d: tuple[float, ...]
    rms_px: float
    per_view_rms_px: dict[str, float]
    coverage: float  # fraction of the image the detected corners cover
    max_tilt_deg: float
    image_size: tuple[int, int]


@dataclass(frozen=True)
class ExtrinsicsResult:
    base_from_camera: np.ndarray  # 4x4: the optical frame's pose in the base frame
    rms_px: float
    residuals_px: tuple[float, ...]  # per point

    @property
    def position(self) -> np.ndarray:
        out: np.ndarray = self.base_from_camera[:3, 3]
        return out


def calibrate_intrinsics(views: Mapping[str, Detection], *, max_rms_px: float = 1.0,
                         min_views: int = 6, min_coverage: float = 0.25,
                         min_tilt_deg: float = 15.0, fix_k3: bool = True) -> IntrinsicsResult:
    """K and D from ``views`` (name -> the board found in that image)."""
    import cv2

    if len(views) < min_views:
        raise CalibrationRefused(
            f"only {len(views)} view{'s' if len(views) != 1 else ''} with the board found; "
            f"need at least {min_views}: take more, with the board in different places and "
            "tilts")
    sizes = {d.image_size for d in views.values()}
    if len(sizes) != 1:
        detail = ", ".join(f"{n}: {d.image_size[0]}x{d.image_size[1]}" for n, d in views.items())
        raise CalibrationRefused(f"the views differ in size ({detail}); use one camera mode")
    (size,) = sizes
    names = list(views)
    obj = [views[n].object_points.astype(np.float32).reshape(-1, 1, 3) for n in names]
    img = [views[n].image_points.astype(np.float32).reshape(-1, 1, 2) for n in names]
    coverage = _coverage([views[n].image_points for n in names], size)
    if coverage < min_coverage:
        raise CalibrationRefused(
            f"the board covered only {coverage:.0%} of the image over all views (need "
            f"{min_coverage:.0%}): move it into the corners and edges too, where the lens "
            "distorts most")
    flags = cv2.CALIB_FIX_K3 if fix_k3 else 0
    try:
        rms, k, d, rvecs, tvecs, _, _, per_view = cv2.calibrateCameraExtended(
            obj, img, size, None, None, flags=flags)
    except cv2.error as e:
        raise CalibrationRefused(f"OpenCV could not calibrate from these views: {e}") from None
    tilts = [_tilt_deg(r) for r in rvecs]
    max_tilt = max(tilts)
    if max_tilt < min_tilt_deg:
        raise CalibrationRefused(
            f"every view faces the camera (the most tilted is {max_tilt:.0f} degrees); tilt "
            f"the board by at least {min_tilt_deg:.0f} degrees in several views, or the focal "
            "length cannot be measured")
    errs = {n: float(e) for n, e in zip(names, np.asarray(per_view).reshape(-1), strict=True)}
    if not math.isfinite(rms) or rms > max_rms_px:
        worst = sorted(errs.items(), key=lambda kv: -kv[1])[:3]
        raise CalibrationRefused(
            f"reprojection error {rms:.2f} px is above {max_rms_px:g} px; the worst views: "
            + ", ".join(f"{n} ({e:.2f} px)" for n, e in worst)
            + ". Retake blurred views (hold the board still), check the square size you gave, "
              "and that the board is flat")
    kk = tuple(float(v) for v in np.asarray(k).reshape(-1))
    dd = tuple(float(v) for v in np.asarray(d).reshape(-1))
    return IntrinsicsResult(kk, dd, float(rms), errs, coverage, max_tilt, size)


def _tilt_deg(rvec: np.ndarray) -> float:
    import cv2

    r, _ = cv2.Rodrigues(np.asarray(rvec, np.float64))
    return math.degrees(math.acos(min(1.0, abs(float(r[2, 2])))))


def _coverage(points: Sequence[np.ndarray], size: tuple[int, int], cells: int = 24) -> float:
    import cv2

    w, h = size
    grid = np.zeros((cells, cells), np.uint8)
    for pts in points:
        p = np.asarray(pts, np.float64).reshape(-1, 2)
        if len(p) < 3:
            continue
        hull = cv2.convexHull((p / [w, h] * cells).astype(np.float32))
        cv2.fillConvexPoly(grid, np.round(hull).astype(np.int32), 1)
    return float(grid.mean())


def extrinsics_from_board(view: Detection, k: Sequence[float], d: Sequence[float],
                          base_from_board: np.ndarray, *, board: BoardSpec | None = None,
                          max_rms_px: float = 2.0) -> ExtrinsicsResult:
    """The camera's pose from one view of a board whose pose in the base frame is known."""
    if board is not None and not board.unambiguous:
        raise CalibrationRefused(
            f"the {board.describe()} looks the same turned by 180 degrees, so its origin corner "
            "is ambiguous: use a chessboard with an odd number of inner corners on one side "
            "and an even number on the other (e.g. 9x6), or a ChArUco board")
    cam_from_board, res = _solve_pnp(view.object_points, view.image_points, k, d)
    base_from_camera = np.asarray(base_from_board, float) @ np.linalg.inv(cam_from_board)
    rms = _rms(res)
    if rms > max_rms_px:
        raise CalibrationRefused(
            f"the board's corners disagree with the intrinsics by {rms:.2f} px (above "
            f"{max_rms_px:g} px): calibrate the intrinsics at this camera mode again, and "
            "check that the board lies flat")
    return ExtrinsicsResult(base_from_camera, rms, tuple(float(v) for v in res))


def extrinsics_from_points(pixels: Sequence[Sequence[float]], points: Sequence[Sequence[float]],
                           k: Sequence[float], d: Sequence[float], *,
                           max_rms_px: float = 3.0, min_spread_m: float = 0.08,
                           min_pixel_gap: float = 5.0) -> ExtrinsicsResult:
    """The camera's pose from table points (base frame, metres) and their clicked pixels."""
    uv = np.asarray(pixels, np.float64).reshape(-1, 2) if len(pixels) else np.zeros((0, 2))
    xyz = np.asarray(points, np.float64).reshape(-1, 3) if len(points) else np.zeros((0, 3))
    if len(uv) != len(xyz):
        raise CalibrationRefused(f"{len(xyz)} touched points but {len(uv)} clicked pixels; "
                                 "click every touched point once, in order")
    n = len(xyz)
    if n < 4:
        raise CalibrationRefused(f"need at least 4 points to solve the camera's pose, got {n}")
    if not (np.isfinite(uv).all() and np.isfinite(xyz).all()):
        raise CalibrationRefused("a point or a pixel is not a finite number")
    _check_spread(uv, xyz, min_spread_m, min_pixel_gap)
    cam_from_base, res = _solve_pnp(xyz, uv, k, d)
    base_from_camera = np.linalg.inv(cam_from_base)
    depth = (xyz @ cam_from_base[:3, :3].T + cam_from_base[:3, 3])[:, 2]
    if (depth <= 0).any():
        raise CalibrationRefused("the solved pose puts points behind the camera: the clicks "
                                 "do not match the touched points (check their order)")
    rms = _rms(res)
    if rms > max_rms_px:
        raise CalibrationRefused(
            f"the points disagree with one camera pose by {rms:.1f} px RMS (above "
            f"{max_rms_px:g} px); {_culprit(uv, xyz, k, d, max_rms_px)}")
    return ExtrinsicsResult(base_from_camera, rms, tuple(float(v) for v in res))


def _culprit(uv: np.ndarray, xyz: np.ndarray, k: Sequence[float], d: Sequence[float],
             max_rms_px: float) -> str:
    """Which point disagrees: the one the others, solved without it, fit and it does not."""
    advice = "touch it again or click it again (in the order touched)"
    n = len(xyz)
    if n >= 5:
        found: list[tuple[float, int]] = []
        for i in range(n):
            keep = [j for j in range(n) if j != i]
            try:
                cam_from_base, res = _solve_pnp(xyz[keep], uv[keep], k, d)
            except CalibrationRefused:
                continue
            if _rms(res) <= max_rms_px:
                r, t = cam_from_base[:3, :3], cam_from_base[:3, 3]
                off = _residuals(xyz[i:i + 1].reshape(-1, 1, 3), uv[i:i + 1], *_rt(r, t),
                                 np.asarray(k, np.float64).reshape(3, 3),
                                 np.asarray(d, np.float64))[0]
                found.append((float(off), i))
        if found:
            off, i = max(found)
            return f"point {i + 1} is off by {off:.1f} px from where the others put it: {advice}"
    return ("no single point explains it: check that the clicks are in the order the points "
            f"were touched, and {advice.split(' (')[0]} for each")


def _rt(r: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import cv2

    rv, _ = cv2.Rodrigues(np.asarray(r, np.float64))
    return rv, np.asarray(t, np.float64).reshape(3, 1)


def _check_spread(uv: np.ndarray, xyz: np.ndarray, min_spread_m: float,
                  min_pixel_gap: float) -> None:
    n = len(xyz)
    for i in range(n):
        for j in range(i + 1, n):
            if np.linalg.norm(xyz[i] - xyz[j]) < 0.01:
                raise CalibrationRefused(f"points {i + 1} and {j + 1} are the same place "
                                         f"(within 1 cm): touch {n} different points")
            if np.linalg.norm(uv[i] - uv[j]) < min_pixel_gap:
                raise CalibrationRefused(f"points {i + 1} and {j + 1} were clicked at the same "
                                         "pixel: click each point where it is")
    c = xyz - xyz.mean(axis=0)
    s = np.linalg.svd(c, compute_uv=False)
    if s[0] < min_spread_m * math.sqrt(n) / 2:
        raise CalibrationRefused(f"the points lie within {2 * s[0] / math.sqrt(n) * 100:.0f} "
                                 f"cm of each other: spread them over at least "
                                 f"{min_spread_m * 100:.0f} cm of the table in view")
    if s[1] < 0.1 * s[0]:
        raise CalibrationRefused("the points lie (nearly) on one line, which leaves the "
                                 "camera's pose undetermined: spread them over an area, e.g. "
                                 "the corners of a square")
    cu = uv - uv.mean(axis=0)
    su = np.linalg.svd(cu, compute_uv=False)
    if su[1] < 0.1 * su[0]:
        raise CalibrationRefused("the clicked pixels lie (nearly) on one line in the image: "
                                 "choose points that spread over the view")


def _solve_pnp(obj: np.ndarray, img: np.ndarray, k: Sequence[float], d: Sequence[float]
               ) -> tuple[np.ndarray, np.ndarray]:
    """camera_from_object (4x4) and per-point residuals (pixels)."""
    import cv2

    kk = np.asarray(k, np.float64).reshape(3, 3)
    dd = np.asarray(d, np.float64).reshape(-1)
    o = np.asarray(obj, np.float64).reshape(-1, 1, 3)
    p = np.asarray(img, np.float64).reshape(-1, 1, 2)
    planar = np.linalg.svd(o.reshape(-1, 3) - o.reshape(-1, 3).mean(axis=0),
                           compute_uv=False)[2] < 1e-6
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    methods = [cv2.SOLVEPNP_IPPE] if planar else []
    methods += [cv2.SOLVEPNP_SQPNP, cv2.SOLVEPNP_ITERATIVE]
    for method in methods:
        try:
            n, rvecs, tvecs, _ = cv2.solvePnPGeneric(o, p, kk, dd, flags=method)
        except cv2.error:
            continue
        for rv, tv in zip(rvecs[:n], tvecs[:n], strict=False):
            rv, tv = cv2.solvePnPRefineLM(o, p, kk, dd, rv.copy(), tv.copy())
            res = _residuals(o, p, rv, tv, kk, dd)
            if best is None or _rms(res) < best[0]:
                best = (_rms(res), rv, tv)
    if best is None:
        raise CalibrationRefused("OpenCV found no camera pose for these points")
    r, _ = cv2.Rodrigues(best[1])
    t = best[2].reshape(3)
    return pose_matrix(r, t), _residuals(o, p, best[1], best[2], kk, dd)


def _residuals(o: np.ndarray, p: np.ndarray, rv: np.ndarray, tv: np.ndarray, k: np.ndarray,
               d: np.ndarray) -> np.ndarray:
    import cv2

    proj, _ = cv2.projectPoints(o, rv, tv, k, d)
    out: np.ndarray = np.linalg.norm(proj.reshape(-1, 2) - p.reshape(-1, 2), axis=1)
    return out


def _rms(res: np.ndarray) -> float:
    r = np.asarray(res, float)
    return float(math.sqrt(float(np.mean(r * r)))) if r.size else 0.0


def base_from_table_board(x: float, y: float, z: float = 0.0, yaw_deg: float = 0.0
                          ) -> np.ndarray:
    """The pose of a board lying face up on the table: its origin at (x, y, z) in the base
    frame, its x axis ``yaw_deg`` counter-clockwise (seen from above) from the base's x; its z
    axis points down into the table (the board frame's z goes into the board)."""
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    flip = np.diag([1.0, -1.0, -1.0])  # face up: y and z turned over
    return pose_matrix(rz @ flip, (x, y, z))


__all__ = ["CalibrationRefused", "ExtrinsicsResult", "IntrinsicsResult",
           "base_from_table_board", "calibrate_intrinsics", "extrinsics_from_board",
           "extrinsics_from_points"]
