"""The calibrated camera model: distortion-aware projection and pixel -> table in base_link,
from a camera's calibration file (:mod:`.calibration`), and loading the models the skills and
the planner's markers use on the robot."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    calibration_path,
    missing_message,
)
from solarian_agent.hw.errors import CalibrationError


class CameraModelError(CalibrationError, ValueError):
    """A pixel that does not map onto the requested plane, or a point behind the camera."""


class MissingCalibrationError(ConfigError):
    """A camera the skills point through has no (complete) calibration file; the message names
    the camera, the file and the command that makes it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        Exception.__init__(self, message)


def plane_point(origin: np.ndarray, direction: np.ndarray, z: float) -> np.ndarray | None:
    """Where the ray from ``origin`` along ``direction`` meets the horizontal plane at height
    ``z`` (None: it runs parallel to the plane or away from it)."""
    if abs(direction[2]) < 1e-9:
        return None
    s = (z - origin[2]) / direction[2]
    if s <= 0:
        return None
    out: np.ndarray = origin + s * direction
    return out


class CalibratedCamera:
    """A real camera's model: distortion-aware projection and pixel -> plane in base_link.

    Offers what the skills and the planner's markers use from the simulator's pinhole model
    (``unproject``, ``project``, ``width`` / ``height``), from a calibration file."""

    def __init__(self, cal: CameraCalibration, width: int = 0, height: int = 0,
                 base_from_gripper: np.ndarray | None = None) -> None:
        if cal.extrinsics is None:
            raise CalibrationError(f"camera {cal.camera!r}: the calibration has no extrinsics "
                                   "(its pose relative to the arm)")
        # a wrist camera's pose is on the gripper: its place in the base frame is the arm's
        # pose now, which the caller must give (a stale or missing one would point wrong)
        if cal.extrinsics.on_gripper and base_from_gripper is None:
            raise CalibrationError(f"camera {cal.camera!r} is mounted on the gripper: its "
                                   "model needs the gripper's pose in the base frame")
        self.calibration = cal
        self.width = width or cal.width
        self.height = height or cal.height
        self.K = np.array(cal.scaled_k(self.width, self.height), float).reshape(3, 3)
        self.D = cal.D
        self.pose = cal.extrinsics.base_from_camera
        if base_from_gripper is not None and cal.extrinsics.on_gripper:
            self.pose = np.asarray(base_from_gripper, float) @ self.pose
        self.position = self.pose[:3, 3].copy()
        self._r_cw = self.pose[:3, :3].T
        self._t_cw = -self._r_cw @ self.position

    @property
    def name(self) -> str:
        return self.calibration.camera

    def for_size(self, width: int, height: int) -> CalibratedCamera:
        if (width, height) == (self.width, self.height):
            return self
        return CalibratedCamera(self.calibration, width, height)

    def normalized(self, uv: np.ndarray) -> np.ndarray:
        """Distorted pixels (N x 2) -> ideal normalized image coordinates (N x 2)."""
        import cv2

        pts = np.asarray(uv, np.float64).reshape(-1, 1, 2)
        crit = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 50, 1e-10)
        out: np.ndarray = cv2.undistortPoints(pts, self.K, self.D, criteria=crit)
        return out.reshape(-1, 2)

    def ray(self, u: float, v: float) -> np.ndarray:
        x, y = self.normalized(np.array([[u, v]]))[0]
        d = self.pose[:3, :3] @ np.array([x, y, 1.0])
        out: np.ndarray = d / np.linalg.norm(d)
        return out

    def unproject(self, u: float, v: float, z: float = 0.0) -> np.ndarray:
        """The base-frame point on the horizontal plane at height ``z`` seen at (u, v)."""
        if not (math.isfinite(u) and math.isfinite(v) and math.isfinite(z)):
            raise CameraModelError(f"unproject needs finite numbers, got ({u}, {v}, z={z})")
        p = plane_point(self.position, self.ray(u, v), z)
        if p is None:
            raise CameraModelError(f"pixel ({u:.1f}, {v:.1f}) of camera {self.name} does not "
                                   f"look down onto the plane z={z}")
        return p

    def project_many(self, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base-frame points (N x 3) -> distorted pixels (N x 2) and depths (N,)."""
        import cv2

        pts = np.atleast_2d(np.asarray(xyz, np.float64))
        depth = (pts @ self._r_cw.T + self._t_cw)[:, 2]
        rvec, _ = cv2.Rodrigues(self._r_cw)
        uv, _ = cv2.projectPoints(pts.reshape(-1, 1, 3), rvec, self._t_cw, self.K, self.D)
        return uv.reshape(-1, 2), depth

    def project(self, xyz: Sequence[float] | np.ndarray) -> tuple[float, float]:
        uv, depth = self.project_many(np.asarray(xyz, float).reshape(1, 3))
        if depth[0] <= 1e-9:
            raise CameraModelError(f"point {tuple(xyz)} is behind camera {self.name}")
        return float(uv[0, 0]), float(uv[0, 1])

    def in_image(self, u: float, v: float) -> bool:
        return -0.5 <= u < self.width - 0.5 and -0.5 <= v < self.height - 0.5


# ------------------------------------------------------------------------------ loading
def load_camera_models(cameras: Iterable[str], directory: str | Path | None = None,
                       required: Mapping[str, Sequence[str]] | None = None
                       ) -> dict[str, CalibratedCamera]:
    """The calibrated models of ``cameras`` found in ``directory``.  A camera in ``required``
    (camera -> the tools that point through it) without a file, or without extrinsics, raises
    :class:`MissingCalibrationError` naming the camera, the file and the command that makes
    it; an invalid file raises ``ConfigError`` naming the field.  The others are skipped."""
    req = dict(required or {})
    out: dict[str, CalibratedCamera] = {}
    for cam in dict.fromkeys([*cameras, *req]):
        path = calibration_path(cam, directory)
        if not path.is_file():
            if cam in req:
                raise MissingCalibrationError(str(path), missing_message(cam, path, req[cam]))
            continue
        cal = CameraCalibration.load(path)
        if cal.camera != cam:
            raise ConfigError(f"{path}:camera_calibration.camera",
                              f"the file is for camera {cal.camera!r}, not {cam!r}")
        if cal.extrinsics is None:
            if cam in req:
                raise MissingCalibrationError(str(path), missing_message(
                    cam, path, req[cam], what="intrinsics but no extrinsics (its pose "
                                              "relative to the arm's base)"))
            continue
        if cal.extrinsics.on_gripper:
            # a wrist camera moves with the arm: the tools that point through a camera
            # (pixel -> table) read the fixed ones
            if cam in req:
                raise MissingCalibrationError(str(path), f"camera {cam!r} is mounted on the "
                                              f"gripper ({path}); {', '.join(req[cam])} "
                                              "point through a fixed camera")
            continue
        out[cam] = CalibratedCamera(cal)
    return out


def check_calibrations(required: Mapping[str, Sequence[str]],
                       directory: str | Path | None = None) -> None:
    """Raise :class:`MissingCalibrationError` when a required camera lacks a usable file."""
    load_camera_models((), directory, required)


__all__ = ["CalibratedCamera", "CameraModelError", "MissingCalibrationError",
           "check_calibrations", "load_camera_models", "plane_point"]
