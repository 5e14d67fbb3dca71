"""The board-free extrinsics: touch table marks with the tool point, then click them.

The tool point is the URDF's ``gripper_frame_link``: on the fixed jaw's inner face, 6 mm above
that jaw's tip, so a mark is touched by resting the fixed jaw's inner face on it, 6 mm up from
the tip (the jaw tip itself then sits 6 mm lower, beside the mark).

1. Put 8 or more small marks (pen dots, stickers) on the table where the camera sees them and
   the arm reaches them, spread over the whole area; a few on top of a box 5-15 cm high pin the
   camera's pose down much better than marks all on the table.
2. For each mark in turn, bring the tool point onto it (by hand with torque off, or with the
   teleop keys) and confirm: the arm's joint readings, through the URDF's forward kinematics,
   give the mark's position in the base frame.  A tool point within ``TABLE_SNAP_M`` of the
   table top is taken to be on it (z = 0): the marks there are on the table, and a jogged tool
   point stops at the workspace floor, 5 mm above it.
3. Move the arm out of the camera's view; one frame is taken.
4. Click each mark in that frame, in the order touched.
5. OpenCV solves the camera's pose (``solve.extrinsics_from_points``), refusing too few,
   repeated, collinear or inconsistent points with the reason.

The tool-point source, the frame grabber and the user interface are passed in, so the
procedure runs the same over the servo bus, over ROS topics and in a test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Extrinsics,
    Measurement,
    now_iso,
)
from solarian_agent.hw.camera.solve import (
    CalibrationRefused,
    ExtrinsicsResult,
    extrinsics_from_points,
)
from solarian_agent.hw.errors import CalibrationError

TABLE_SNAP_M = 0.012
TipSource = Callable[[], np.ndarray]
FrameSource = Callable[[], np.ndarray]


class CalibrationAborted(CalibrationError):
    """The user stopped the procedure."""


class TouchUI(Protocol):
    def say(self, text: str) -> None:
        """Show an instruction or a result."""
        ...

    def ask(self, prompt: str) -> str:
        """Wait for the user's answer to ``prompt``: "" (Enter), "d" (done) or "q" (quit)."""
        ...

    def click(self, image: np.ndarray | None, index: int, total: int) -> tuple[float, float]:
        """The pixel (u, v) where mark ``index`` (1-based) is in ``image``."""
        ...


@dataclass(frozen=True)
class TouchResult:
    calibration: CameraCalibration
    extrinsics: ExtrinsicsResult
    points: np.ndarray  # N x 3, base frame
    pixels: np.ndarray  # N x 2


def collect_touches(tip: TipSource, ui: TouchUI, min_points: int = 4,
                    max_points: int = 30) -> np.ndarray:
    """The tool point's position at each mark the user confirms (Enter), until "d" (done) with at
    least ``min_points`` or ``max_points``."""
    pts: list[np.ndarray] = []
    while len(pts) < max_points:
        n = len(pts) + 1
        more = "" if len(pts) < min_points else ", d when done"
        ans = ui.ask(f"Put the tool point on mark {n} and press Enter (q to quit{more}): ")
        ans = ans.strip().lower()
        if ans == "q":
            raise CalibrationAborted("calibration stopped by the user")
        if ans == "d":
            if len(pts) >= min_points:
                break
            ui.say(f"{len(pts)} marks so far: touch at least {min_points}.")
            continue
        p = np.asarray(tip(), float).reshape(3)
        if not np.isfinite(p).all():
            ui.say("The arm's position is unknown just now; try again.")
            continue
        close = [i + 1 for i, q in enumerate(pts) if np.linalg.norm(q - p) < 0.01]
        if close:
            ui.say(f"That is where mark {close[0]} was (within 1 cm): move to a new mark.")
            continue
        pts.append(p)
        ui.say(f"mark {n}: x {p[0] * 1000:.1f} mm, y {p[1] * 1000:.1f} mm, "
               f"z {p[2] * 1000:.1f} mm" + (" (on the table)" if abs(p[2]) < TABLE_SNAP_M
                                             else ""))
    return np.array(pts)


def on_table(points: np.ndarray, snap_m: float = TABLE_SNAP_M) -> np.ndarray:
    """The marks: a tool point within ``snap_m`` of the table top touched a mark on it (z = 0)."""
    out = np.array(points, float)
    out[np.abs(out[:, 2]) < snap_m, 2] = 0.0
    return out


def touch_calibration(intrinsics: CameraCalibration, tip: TipSource, grab: FrameSource,
                      ui: TouchUI, *, min_points: int = 4, max_rms_px: float = 3.0
                      ) -> TouchResult:
    """Run the procedure; the result carries ``intrinsics`` with the solved extrinsics."""
    if min_points < 4:
        raise ValueError("the pose needs at least 4 points")
    ui.say("Touch each table mark with the tool point: the fixed jaw's inner face, 6 mm above "
           "that jaw's tip (the point the arm's kinematics reports). Go in any order you like "
           "but remember it: you will click them in the same order.")
    points = on_table(collect_touches(tip, ui, min_points))
    ui.ask("Move the arm out of the camera's view, then press Enter: ")
    image = grab()
    if image is not None:
        h, w = image.shape[:2]
        if (w, h) != (intrinsics.width, intrinsics.height):
            raise CalibrationRefused(
                f"the camera delivers {w}x{h} frames, the intrinsics are for "
                f"{intrinsics.width}x{intrinsics.height}: use that camera mode")
    pixels = np.array([ui.click(image, i + 1, len(points)) for i in range(len(points))],
                      float)
    res = extrinsics_from_points(pixels, points, intrinsics.k, intrinsics.d,
                                 max_rms_px=max_rms_px)
    raised = int((points[:, 2] > 0.02).sum())
    method = (f"touch: {len(points)} marks touched with the tool point"
              + (f" ({raised} raised)" if raised else "") + ", clicked in one frame")
    m = Measurement(now_iso(), method, res.rms_px, len(points))
    cal = intrinsics.with_extrinsics(Extrinsics.from_matrix(res.base_from_camera, m))
    return TouchResult(cal, res, points, pixels)


def residual_rows(points: np.ndarray, pixels: np.ndarray, residuals: Sequence[float]
                  ) -> list[list[object]]:
    """Rows for a table of the points used: mark, position (mm), pixel, residual (px)."""
    return [[i + 1, f"{p[0] * 1000:.1f}", f"{p[1] * 1000:.1f}", f"{p[2] * 1000:.1f}",
             f"{uv[0]:.1f}", f"{uv[1]:.1f}", f"{r:.2f}"]
            for i, (p, uv, r) in enumerate(zip(points, pixels, residuals, strict=True))]


def arm_tip_source(read_positions: Callable[[], dict[str, float]]) -> TipSource:
    """The tool point's (``gripper_frame_link``'s) base-frame position from joint readings
    (URDF forward kinematics; the jaw angle does not move it: it is on the fixed jaw)."""
    from solarian_agent.arm.kinematics import ArmModel

    model = ArmModel.default()

    def tip() -> np.ndarray:
        pos = read_positions()
        missing = [n for n in model.joint_names if n not in pos]
        if missing:
            raise CalibrationError(f"no reading for joints {missing}")
        xyz, _, _ = model.fk([pos[n] for n in model.joint_names])
        return np.asarray(xyz, float)

    return tip


__all__ = ["CalibrationAborted", "TABLE_SNAP_M", "TouchResult", "TouchUI", "arm_tip_source",
           "collect_touches", "on_table", "residual_rows", "touch_calibration"]
