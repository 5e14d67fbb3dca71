"""Camera calibration files (the calibrated model that uses them: :mod:`.model`).

One YAML file per camera, ``<calibration_dir>/<camera>.yaml`` (default directory
``~/.config/solarian_agent/cameras``, or ``$SOLARIAN_CALIBRATION_DIR``), written by
``solarian-agent calibrate-camera`` and read by ``camera_node`` (its ``camera_info``), by the
skills (pixel to table position) and by the planner's rviz markers on the robot::

    camera_calibration:
      version: 1
      camera: overhead                  # the camera's name (its topic prefix)
      image_size: [640, 480]            # width, height (pixels) the calibration was made at
      distortion_model: plumb_bob
      K: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]   # intrinsics (pixels)
      D: [k1, k2, p1, p2, k3]           # OpenCV / ROS plumb_bob distortion
      intrinsics:
        measured_at: "2026-11-02T10:15:00+00:00"
        method: "chessboard 9x6, 25 mm squares, 18 views"
        rms_px: 0.31                    # reprojection error of the views (RMS, pixels)
        views: 18
      extrinsics:                       # null until measured
        parent_frame: base_link         # the arm's base (the URDF's world: table top z = 0)
        child_frame: overhead_camera_optical   # z forward, x right, y down (REP 103 optical)
        translation_m: [x, y, z]        # the camera's optical centre in base_link
        rotation_xyzw: [qx, qy, qz, qw] # the optical frame's orientation in base_link
        measured_at: "..."
        method: "touch: 6 table points touched with the tool point"  # or "board: ..."
        rms_px: 0.8                     # reprojection error of the points used (pixels)
        points: 6

``translation_m`` / ``rotation_xyzw`` are the base-to-camera transform as tf2 writes it (parent
``base_link``, child the optical frame): a point ``p`` in the optical frame is ``R p + t`` in the
base frame.  The simulator never reads these files; it keeps its own camera models.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import CameraInfo
from solarian_agent.hw.errors import CalibrationError

VERSION = 1
BASE_FRAME = "base_link"
GRIPPER_FRAME = "gripper_link"  # a wrist camera's pose is measured on the gripper (hand-eye)
PARENT_FRAMES = (BASE_FRAME, GRIPPER_FRAME)
DISTORTION_MODEL = "plumb_bob"
ENV_DIR = "SOLARIAN_CALIBRATION_DIR"
COMMAND = "solarian-agent calibrate-camera"


def default_calibration_dir() -> Path:
    """``$SOLARIAN_CALIBRATION_DIR``, else ``$XDG_CONFIG_HOME/solarian_agent/cameras``, else
    ``~/.config/solarian_agent/cameras``."""
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "solarian_agent" / "cameras"


def calibration_path(camera: str, directory: str | Path | None = None) -> Path:
    d = Path(directory).expanduser() if directory else default_calibration_dir()
    return d / f"{camera}.yaml"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


# ------------------------------------------------------------------------------ rotations
def quat_to_matrix(q: Sequence[float]) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not n > 1e-9:
        raise ValueError("a rotation quaternion must not be zero")
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quat(r: np.ndarray) -> tuple[float, float, float, float]:
    m = np.asarray(r, float)
    tr = float(np.trace(m))
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        w, x = 0.25 * s, (m[2, 1] - m[1, 2]) / s
        y, z = (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        w, x = (m[2, 1] - m[1, 2]) / s, 0.25 * s
        y, z = (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        w, x = (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s
        y, z = 0.25 * s, (m[1, 2] + m[2, 1]) / s
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        w, x = (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s
        y, z = (m[1, 2] + m[2, 1]) / s, 0.25 * s
    q = (float(x), float(y), float(z), float(w))
    return q if q[3] >= 0 else (-q[0], -q[1], -q[2], -q[3])


def pose_matrix(rotation: np.ndarray, translation: Sequence[float]) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rotation
    t[:3, 3] = np.asarray(translation, float)
    return t


def rotation_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    """The angle (degrees) of the rotation between two rotation matrices."""
    r = np.asarray(a, float)[:3, :3].T @ np.asarray(b, float)[:3, :3]
    c = (float(np.trace(r)) - 1.0) / 2.0
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


# ------------------------------------------------------------------------------ the file
@dataclass(frozen=True)
class Measurement:
    """When and how a part of the calibration was measured, and how well it fits."""

    measured_at: str
    method: str
    rms_px: float
    count: int  # views (intrinsics) or points (extrinsics)


@dataclass(frozen=True)
class Extrinsics:
    """The camera's optical frame in the arm's base frame (tf2: parent -> child)."""

    translation_m: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]
    measurement: Measurement
    parent_frame: str = BASE_FRAME
    child_frame: str = ""

    @property
    def base_from_camera(self) -> np.ndarray:
        return pose_matrix(quat_to_matrix(self.rotation_xyzw), self.translation_m)

    @property
    def on_gripper(self) -> bool:
        """A wrist camera: its pose is on the gripper link, its base pose moves with the arm."""
        return self.parent_frame == GRIPPER_FRAME

    @classmethod
    def from_matrix(cls, base_from_camera: np.ndarray, measurement: Measurement,
                    child_frame: str = "", parent_frame: str = BASE_FRAME) -> Extrinsics:
        """``base_from_camera``: the optical frame in ``parent_frame`` (4x4)."""
        if parent_frame not in PARENT_FRAMES:
            raise ValueError(f"parent frame {parent_frame!r} is not one of "
                             f"{', '.join(PARENT_FRAMES)}")
        m = np.asarray(base_from_camera, float)
        t = tuple(float(v) for v in m[:3, 3])
        return cls((t[0], t[1], t[2]), matrix_to_quat(m[:3, :3]), measurement,
                   parent_frame=parent_frame, child_frame=child_frame)


@dataclass(frozen=True)
class CameraCalibration:
    camera: str
    width: int
    height: int
    k: tuple[float, ...]  # 9, row-major
    d: tuple[float, ...]  # plumb_bob: 5 (or 4, 8 ... as OpenCV returns them)
    intrinsics: Measurement
    extrinsics: Extrinsics | None = None
    distortion_model: str = DISTORTION_MODEL
    path: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise CalibrationError(f"camera {self.camera!r}: image size {self.width}x"
                                   f"{self.height} must be positive")
        if len(self.k) != 9 or not all(math.isfinite(v) for v in self.k):
            raise CalibrationError(f"camera {self.camera!r}: K must be 9 finite numbers")
        if not (self.k[0] > 0 and self.k[4] > 0):
            raise CalibrationError(f"camera {self.camera!r}: focal lengths must be positive")

    @property
    def K(self) -> np.ndarray:  # noqa: N802 (the usual name of the camera matrix)
        return np.array(self.k, float).reshape(3, 3)

    @property
    def D(self) -> np.ndarray:  # noqa: N802
        return np.array(self.d, float)

    @property
    def frame_id(self) -> str:
        if self.extrinsics is not None and self.extrinsics.child_frame:
            return self.extrinsics.child_frame
        return f"{self.camera}_camera_optical"

    def with_extrinsics(self, ext: Extrinsics) -> CameraCalibration:
        if not ext.child_frame:
            ext = replace(ext, child_frame=f"{self.camera}_camera_optical")
        return replace(self, extrinsics=ext)

    def scaled_k(self, width: int, height: int) -> tuple[float, ...]:
        """K for frames of another size with the same aspect ratio (a camera mode that scales
        the sensor image); raises when the aspect ratio differs (a crop: recalibrate)."""
        if (width, height) == (self.width, self.height):
            return self.k
        sx, sy = width / self.width, height / self.height
        if abs(sx - sy) > 0.01 * max(sx, sy):
            raise CalibrationError(
                f"camera {self.camera!r} delivers {width}x{height} frames but was calibrated "
                f"at {self.width}x{self.height} (another aspect ratio); calibrate it again at "
                f"this size ({COMMAND} intrinsics --camera {self.camera})")
        fx, _, cx, _, fy, cy, *_ = self.k
        # pixel centres: u' + 0.5 = s (u + 0.5)
        return (fx * sx, 0.0, (cx + 0.5) * sx - 0.5, 0.0, fy * sy, (cy + 0.5) * sy - 0.5,
                0.0, 0.0, 1.0)

    def camera_info(self, stamp: float = 0.0, width: int = 0, height: int = 0,
                    frame_id: str = "") -> CameraInfo:
        w, h = width or self.width, height or self.height
        return CameraInfo(width=w, height=h, k=self.scaled_k(w, h), d=tuple(self.d),
                          frame_id=frame_id or self.frame_id, stamp=stamp,
                          distortion_model=self.distortion_model)

    # YAML -------------------------------------------------------------------------------
    def to_mapping(self) -> dict[str, Any]:
        k = self.k
        doc: dict[str, Any] = {
            "version": VERSION, "camera": self.camera, "image_size": [self.width, self.height],
            "distortion_model": self.distortion_model,
            "K": [[_r(k[0]), _r(k[1]), _r(k[2])], [_r(k[3]), _r(k[4]), _r(k[5])],
                  [_r(k[6]), _r(k[7]), _r(k[8])]],
            "D": [_r(v, 9) for v in self.d],
            "intrinsics": _measurement_map(self.intrinsics, "views"),
            "extrinsics": None,
        }
        e = self.extrinsics
        if e is not None:
            doc["extrinsics"] = {
                "parent_frame": e.parent_frame, "child_frame": e.child_frame or self.frame_id,
                "translation_m": [_r(v, 6) for v in e.translation_m],
                "rotation_xyzw": [_r(v, 8) for v in e.rotation_xyzw],
                **_measurement_map(e.measurement, "points"),
            }
        return {"camera_calibration": doc}

    def save(self, path: str | Path) -> Path:
        from solarian_agent.core.config import write_yaml

        return write_yaml(path, self.to_mapping(),
                          "# Camera calibration for solarian_agent (the format: "
                          "docs/hardware.md, solarian_agent/hw/camera/calibration.py).\n"
                          f"# Made by `{COMMAND}`; K in pixels, translation in metres, the "
                          "extrinsics are the camera's optical frame in its parent frame.\n")

    @classmethod
    def load(cls, path: str | Path) -> CameraCalibration:
        from solarian_agent.core.config import yaml_block

        p = Path(path).expanduser()
        block = yaml_block(p, "camera_calibration", "calibration file not found")
        return replace(cls.from_mapping(block, where=f"{p}:camera_calibration"), path=str(p))

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any], where: str = "camera_calibration"
                     ) -> CameraCalibration:
        version = m.get("version", VERSION)
        if version != VERSION:
            raise ConfigError(f"{where}.version", f"{version!r} is not a supported version "
                                                  f"(this package reads {VERSION})")
        camera = m.get("camera")
        if not isinstance(camera, str) or not camera:
            raise ConfigError(f"{where}.camera", "expected the camera's name")
        size = _numbers(m.get("image_size"), f"{where}.image_size", 2)
        if not all(v == int(v) and v > 0 for v in size):
            raise ConfigError(f"{where}.image_size", f"expected [width, height] > 0, got {size}")
        rows = m.get("K")
        if not (isinstance(rows, list) and len(rows) == 3):
            raise ConfigError(f"{where}.K", "expected a 3x3 matrix (three rows of three)")
        k = [v for i, row in enumerate(rows) for v in _numbers(row, f"{where}.K[{i}]", 3)]
        d = _numbers(m.get("D"), f"{where}.D", None)
        if len(d) not in (4, 5, 8, 12, 14):
            raise ConfigError(f"{where}.D", f"expected 4, 5, 8, 12 or 14 coefficients, got "
                                            f"{len(d)}")
        model = m.get("distortion_model", DISTORTION_MODEL)
        if model not in (DISTORTION_MODEL, "rational_polynomial"):
            raise ConfigError(f"{where}.distortion_model", f"{model!r} is not one of "
                                                           "plumb_bob, rational_polynomial")
        intr = _measurement(m.get("intrinsics"), f"{where}.intrinsics", "views")
        ext = None
        e = m.get("extrinsics")
        if e is not None:
            ew = f"{where}.extrinsics"
            if not isinstance(e, Mapping):
                raise ConfigError(ew, "expected a mapping or null")
            parent = e.get("parent_frame", BASE_FRAME)
            if parent not in PARENT_FRAMES:
                raise ConfigError(f"{ew}.parent_frame", f"{parent!r} is not one of "
                                  f"{', '.join(PARENT_FRAMES)} (the arm's base, or the "
                                  "gripper a wrist camera is mounted on)")
            t = _numbers(e.get("translation_m"), f"{ew}.translation_m", 3)
            q = _numbers(e.get("rotation_xyzw"), f"{ew}.rotation_xyzw", 4)
            if abs(math.sqrt(sum(v * v for v in q)) - 1.0) > 1e-3:
                raise ConfigError(f"{ew}.rotation_xyzw", f"{q} is not a unit quaternion")
            ext = Extrinsics((t[0], t[1], t[2]), (q[0], q[1], q[2], q[3]),
                             _measurement(e, ew, "points"), parent_frame=str(parent),
                             child_frame=str(e.get("child_frame") or f"{camera}_camera_optical"))
        try:
            return cls(camera, int(size[0]), int(size[1]), tuple(k), tuple(d), intr, ext,
                       distortion_model=str(model))
        except CalibrationError as err:
            raise ConfigError(where, str(err)) from err


def _r(v: float, digits: int = 4) -> float:
    return round(float(v), digits)


def _numbers(v: Any, where: str, n: int | None) -> list[float]:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        what = f"a list of {n} numbers" if n else "a list of numbers"
        raise ConfigError(where, f"expected {what}, got {v!r}")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise ConfigError(where, f"expected finite numbers, got {x!r}")
        out.append(float(x))
    return out


def _measurement_map(m: Measurement, count_key: str) -> dict[str, Any]:
    return {"measured_at": m.measured_at, "method": m.method, "rms_px": _r(m.rms_px, 4),
            count_key: m.count}


def _measurement(v: Any, where: str, count_key: str) -> Measurement:
    if not isinstance(v, Mapping):
        raise ConfigError(where, "expected a mapping with measured_at, method, rms_px, "
                                 f"{count_key}")
    missing = [k for k in ("measured_at", "method", "rms_px", count_key) if k not in v]
    if missing:
        raise ConfigError(where, f"missing {missing}")
    rms = v["rms_px"]
    if isinstance(rms, bool) or not isinstance(rms, int | float) or not rms >= 0:
        raise ConfigError(f"{where}.rms_px", f"expected a number >= 0, got {rms!r}")
    count = v[count_key]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigError(f"{where}.{count_key}", f"expected a whole number, got {count!r}")
    return Measurement(str(v["measured_at"]), str(v["method"]), float(rms), int(count))


# ------------------------------------------------------------------------------ messages
def missing_message(camera: str, path: Path, needed_by: Iterable[str] = (),
                    what: str = "no calibration") -> str:
    users = sorted(set(needed_by))
    why = f" The skills point through it ({', '.join(users)})." if users else ""
    return (f"camera {camera!r} has {what}: {path}.{why} Make it with "
            f"`{COMMAND} intrinsics --camera {camera} ...` and then `{COMMAND} touch --camera "
            f"{camera} ...` (or `board-pose`); see docs/hardware.md, 'Place and calibrate the "
            "cameras'.")


__all__ = ["BASE_FRAME", "COMMAND", "CameraCalibration", "Extrinsics", "Measurement",
           "calibration_path", "default_calibration_dir", "matrix_to_quat", "missing_message",
           "now_iso", "pose_matrix", "quat_to_matrix", "rotation_angle_deg"]
