"""Pinhole camera models and the pixel <-> table mapping.

A :class:`PinholeCamera` is intrinsics (``K``, from :class:`CameraSpec` or a ``CameraInfo``)
plus the world pose of its optical frame (z forward, x right, y down; from the URDF or a
calibration).  Pixels are ``(u, v)``: u to the right, v down, the centre of the top-left pixel
at (0, 0).

The simulated overhead camera hangs 0.8 m above the table centre looking straight down: image
up is +x (away from the arm), image right is -y.  :func:`project` / :func:`unproject` use it by
default; the skills turn a planner's pixel into a table position with :func:`unproject`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.errors import CoreError
from solarian_agent.core.messages import CameraInfo


class ProjectionError(CoreError, ValueError):
    """A point behind the camera, or a pixel ray that never meets the requested plane."""


class RenderError(ValueError):
    """An unknown camera name or an invalid visual style."""


@dataclass(frozen=True)
class CameraSpec:
    name: str  # the camera's topic prefix: overhead -> overhead/image_raw
    frame: str  # the URDF optical frame (the images' frame_id)
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1 or self.fx <= 0 or self.fy <= 0:
            raise ValueError(f"camera {self.name}: size and focal lengths must be positive")

    @property
    def k(self) -> tuple[float, ...]:
        return (self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0)


OVERHEAD = CameraSpec("overhead", "overhead_camera_optical", 640, 480, 680.0, 680.0, 320.0, 240.0)
WRIST = CameraSpec("wrist", "wrist_camera_optical", 480, 360, 300.0, 300.0, 240.0, 180.0)
CAMERA_SPECS: dict[str, CameraSpec] = {OVERHEAD.name: OVERHEAD, WRIST.name: WRIST}


class PinholeCamera:
    """Intrinsics + extrinsics; projects world points and unprojects pixels onto planes."""

    def __init__(self, spec: CameraSpec, world_from_camera: np.ndarray) -> None:
        self.spec = spec
        self.set_pose(world_from_camera)
        self.K = np.array(spec.k, dtype=float).reshape(3, 3)
        self._f = np.array([spec.fx, spec.fy])
        self._c = np.array([spec.cx, spec.cy])

    @classmethod
    def from_camera_info(cls, info: CameraInfo, world_from_camera: np.ndarray,
                         name: str = "camera") -> PinholeCamera:
        k = info.k
        spec = CameraSpec(name, info.frame_id, info.width, info.height, k[0], k[4], k[2], k[5])
        return cls(spec, world_from_camera)

    def set_pose(self, world_from_camera: np.ndarray) -> None:
        pose = np.asarray(world_from_camera, dtype=float)
        if pose.shape != (4, 4):
            raise ValueError(f"a camera pose is a 4x4 matrix, got shape {pose.shape}")
        self.pose = pose
        self.R_cw = pose[:3, :3].T  # camera <- world rotation
        self.t_cw = -self.R_cw @ pose[:3, 3]
        self.position = pose[:3, 3].copy()

    @property
    def width(self) -> int:
        return self.spec.width

    @property
    def height(self) -> int:
        return self.spec.height

    def to_camera(self, pts: np.ndarray) -> np.ndarray:
        """World points (N x 3) in the optical frame (N x 3)."""
        out: np.ndarray = np.asarray(pts, dtype=float) @ self.R_cw.T + self.t_cw
        return out

    def project_camera_points(self, pc: np.ndarray) -> np.ndarray:
        """Optical-frame points with z > 0 (N x 3) to pixels (N x 2)."""
        out: np.ndarray = pc[:, :2] / pc[:, 2:3] * self._f + self._c
        return out

    def project_many(self, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (N x 3) -> pixels (N x 2) and depths (N,); depth <= 0 is behind."""
        pc = self.to_camera(np.atleast_2d(pts))
        depth = pc[:, 2].copy()
        safe = pc.copy()
        safe[:, 2] = np.where(depth > 1e-9, depth, 1e-9)
        return self.project_camera_points(safe), depth

    def project(self, xyz: Sequence[float] | np.ndarray) -> tuple[float, float]:
        """Pixel ``(u, v)`` of a world point; raises :class:`ProjectionError` behind the
        camera.  The pixel may lie outside the image."""
        uv, depth = self.project_many(np.asarray(xyz, dtype=float).reshape(1, 3))
        if depth[0] <= 1e-9:
            raise ProjectionError(f"point {tuple(xyz)} is behind camera {self.spec.name}")
        return float(uv[0, 0]), float(uv[0, 1])

    def ray(self, u: float, v: float) -> np.ndarray:
        """Unit direction (world) of the ray through pixel (u, v)."""
        s = self.spec
        d_cam = np.array([(u - s.cx) / s.fx, (v - s.cy) / s.fy, 1.0])
        d = self.pose[:3, :3] @ d_cam
        out: np.ndarray = d / np.linalg.norm(d)
        return out

    def unproject(self, u: float, v: float, z: float = 0.0) -> np.ndarray:
        """The world point on the horizontal plane at height ``z`` seen at pixel (u, v)."""
        if not (math.isfinite(u) and math.isfinite(v) and math.isfinite(z)):
            raise ProjectionError(f"unproject needs finite numbers, got ({u}, {v}, z={z})")
        d = self.ray(u, v)
        if abs(d[2]) < 1e-9:
            raise ProjectionError(f"pixel ({u}, {v}) looks parallel to the plane z={z}")
        s = (z - self.position[2]) / d[2]
        if s <= 0:
            raise ProjectionError(f"pixel ({u}, {v}) does not look down onto the plane z={z}")
        out: np.ndarray = self.position + s * d
        return out

    def in_image(self, u: float, v: float) -> bool:
        return -0.5 <= u < self.spec.width - 0.5 and -0.5 <= v < self.spec.height - 0.5

    def camera_info(self, stamp: float = 0.0) -> CameraInfo:
        s = self.spec
        return CameraInfo(width=s.width, height=s.height, k=s.k, d=(0.0, 0.0, 0.0, 0.0, 0.0),
                          frame_id=s.frame, stamp=stamp)

    def plane_homography(self, z: float = 0.0) -> np.ndarray:
        """3x3 H mapping homogeneous plane points (x, y, 1) at height ``z`` to pixels."""
        r = self.R_cw
        t = self.t_cw + r[:, 2] * z
        out: np.ndarray = self.K @ np.column_stack([r[:, 0], r[:, 1], t])
        return out


def camera_from_urdf(arm: ArmModel, spec: CameraSpec,
                     q: Sequence[float] | np.ndarray | None = None) -> PinholeCamera:
    """The camera ``spec`` at its URDF optical frame for joint positions ``q`` (zeros)."""
    qq = np.zeros(6) if q is None else q
    return PinholeCamera(spec, arm.frame_pose(qq, spec.frame))


class CameraRig:
    """Named cameras at their URDF optical frames: the geometry every renderer publishes and
    the skills use (pixel <-> table), whatever draws the pixels.  Cameras whose pose does not
    depend on the joints are ``fixed``; the others (the wrist) follow the last frame drawn."""

    def __init__(self, arm: ArmModel, cameras: Sequence[CameraSpec]) -> None:
        self.arm = arm
        self.specs: dict[str, CameraSpec] = {c.name: c for c in cameras}
        for c in cameras:
            if not arm.has_frame(c.frame):
                raise RenderError(f"camera {c.name}: frame {c.frame!r} is not in the URDF")
        self._cams: dict[str, PinholeCamera] = {
            name: camera_from_urdf(arm, spec) for name, spec in self.specs.items()
        }
        q_test = np.array([0.7, 0.4, -0.5, 0.3, 1.1, 0.03])
        self._fixed = {
            name for name, cam in self._cams.items()
            if np.allclose(arm.frame_pose(q_test, self.specs[name].frame), cam.pose)
        }

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.specs)

    def camera(self, name: str) -> PinholeCamera:
        """The camera model (for the wrist camera: at its pose in the last rendered frame)."""
        if name not in self._cams:
            raise RenderError(f"unknown camera {name!r}; cameras are {self.cameras}")
        return self._cams[name]

    def camera_at(self, name: str, q: Sequence[float] | np.ndarray) -> PinholeCamera:
        """A new camera model of ``name`` at joint positions ``q`` (for the wrist camera, the
        pose it had when a frame was taken at those joints)."""
        if name not in self.specs:
            raise RenderError(f"unknown camera {name!r}; cameras are {self.cameras}")
        return camera_from_urdf(self.arm, self.specs[name], q)

    def camera_info(self, name: str, stamp: float = 0.0) -> CameraInfo:
        return self.camera(name).camera_info(stamp)

    def project(self, xyz: Sequence[float] | np.ndarray,
                camera: str = "overhead") -> tuple[float, float]:
        """Pixel (u, v) of a world point in ``camera`` (default: overhead)."""
        return self.camera(camera).project(xyz)

    def unproject(self, u: float, v: float, z: float = 0.0,
                  camera: str = "overhead") -> np.ndarray:
        """World point at height ``z`` seen at pixel (u, v) of ``camera`` (default: overhead)."""
        return self.camera(camera).unproject(u, v, z)


@functools.lru_cache(maxsize=1)
def _default_overhead() -> PinholeCamera:
    return camera_from_urdf(ArmModel.default(), OVERHEAD)


def overhead_camera() -> PinholeCamera:
    """The simulated overhead camera (default URDF pose and :data:`OVERHEAD` intrinsics).
    Shared: do not call ``set_pose`` on it."""
    return _default_overhead()


def project(xyz: Sequence[float] | np.ndarray,
            camera: PinholeCamera | None = None) -> tuple[float, float]:
    """Pixel (u, v) of a world point in ``camera`` (default: the overhead camera)."""
    return (camera or overhead_camera()).project(xyz)


def unproject(u: float, v: float, z: float = 0.0,
              camera: PinholeCamera | None = None) -> np.ndarray:
    """World point at height ``z`` seen at pixel (u, v) (default: the overhead camera)."""
    return (camera or overhead_camera()).unproject(u, v, z)
