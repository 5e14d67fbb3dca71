"""Bring-up's camera steps: each camera's intrinsics, the wrist camera's hand-eye pose, the
overhead camera's pose, on any :class:`~solarian_agent.bringup.robot.BringupRobot`.

- Intrinsics of a fixed camera from the board held up to it at several angles (a
  :class:`BoardHolder`: a person told what to do, or the simulator's hand), of the wrist
  camera from the arm's own views of the board lying on the table.
- The wrist camera's pose on the gripper by hand-eye calibration over the same views; it also
  gives the board's pose on the table, in the base frame.
- The overhead camera's pose from that board: the board it sees is where the arm's wrist
  camera found it, so no ruler is needed (``board_pose`` overrides it with a measured pose).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from solarian_agent.hw.camera.boards import BoardSpec, Detection, detect
from solarian_agent.hw.camera.calibration import (
    CameraCalibration,
    Extrinsics,
    Measurement,
    now_iso,
)
from solarian_agent.hw.camera.solve import calibrate_intrinsics

from .handeye import (
    CAMERA_FRAME,
    GRIPPER_FRAME,
    HandEyeRefused,
    HandEyeResult,
    HandEyeView,
    plan_views,
    solve_hand_eye,
)
from .robot import BringupRobot

MIN_CORNERS = 12  # a view with fewer board corners says too little about the camera


class BoardHolder(Protocol):
    def present(self, index: int, total: int) -> None:
        """Put the board in its ``index``-th pose before the camera (or ask a person to)."""

    def put_down(self) -> None:
        """Lay the board back where it lies for the poses."""


@dataclass(frozen=True)
class IntrinsicsFigures:
    calibration: CameraCalibration
    rms_px: float
    views: int


def _measure(name: str, views: dict[str, Detection], size: tuple[int, int], method: str
             ) -> IntrinsicsFigures:
    res = calibrate_intrinsics(views)
    cal = CameraCalibration(name, size[0], size[1], res.k, res.d,
                            Measurement(now_iso(), method, round(res.rms_px, 4), len(views)))
    return IntrinsicsFigures(cal, res.rms_px, len(views))


def fixed_camera_intrinsics(robot: BringupRobot, camera: str, board: BoardSpec,
                            holder: BoardHolder, n: int = 12,
                            log: Callable[[str], None] = print) -> IntrinsicsFigures:
    """A fixed camera's K and D from the board shown at ``n`` poses."""
    views: dict[str, Detection] = {}
    for i in range(n):
        holder.present(i, n)
        det = detect(board, robot.grab(camera))
        if det is not None and len(det.image_points) >= MIN_CORNERS:
            views[f"view{i:02d}"] = det
        log(f"  {camera}: view {i + 1}/{n}: "
            + (f"{len(det.image_points)} corners" if det is not None else "no board seen"))
    holder.put_down()
    size = _size(robot.grab(camera))
    return _measure(camera, views, size, f"{board.describe()}, {len(views)} views held up")


@dataclass(frozen=True)
class WristFigures:
    intrinsics: IntrinsicsFigures
    hand_eye: HandEyeResult
    calibration: CameraCalibration  # intrinsics and the pose on gripper_link


def wrist_camera(robot: BringupRobot, camera: str, board: BoardSpec,
                 board_corners_guess: np.ndarray, nominal_k: Sequence[float],
                 size: tuple[int, int], n: int = 14,
                 log: Callable[[str], None] = print) -> WristFigures:
    """The wrist camera's intrinsics and its pose on the gripper from the arm's own views of
    the board lying on the table.  ``board_corners_guess``: where the board lies, roughly
    (base frame; planning only), ``nominal_k``: the camera's K roughly (planning only)."""
    arm = robot.arm
    q = robot.joints()
    nominal = np.linalg.inv(arm.frame_pose(q, GRIPPER_FRAME)) @ arm.frame_pose(q, CAMERA_FRAME)
    # below the jaws, which fill the top of the wrist camera's image
    plan = plan_views(arm, board_corners_guess, nominal_k, size, nominal, n=n, samples=20000,
                      top_px=0.3 * size[1])
    dets: list[tuple[np.ndarray, Detection]] = []
    for i, q5 in enumerate(plan.joints):
        if not robot.move(q5):
            log(f"  {camera}: pose {i + 1}/{len(plan.joints)} not reached; skipped")
            continue
        det = detect(board, robot.grab(camera))
        seen = 0 if det is None else len(det.image_points)
        log(f"  {camera}: pose {i + 1}/{len(plan.joints)}: {seen} corners")
        if det is not None and seen >= MIN_CORNERS:
            dets.append((arm.frame_pose(robot.joints(), GRIPPER_FRAME), det))
    intr = _measure(camera, {f"pose{i:02d}": d for i, (_, d) in enumerate(dets)}, size,
                    f"{board.describe()}, {len(dets)} arm poses")
    cal = intr.calibration
    he = solve_hand_eye([HandEyeView(g, d) for g, d in dets], cal.K, cal.D)
    method = (f"hand-eye: {he.views} arm poses over a {board.describe()}, "
              f"spread {he.spread_mm:.2f} mm / {he.spread_deg:.2f} deg")
    ext = Extrinsics.from_matrix(he.gripper_from_camera,
                                 Measurement(now_iso(), method, round(he.rms_px, 4), he.views),
                                 child_frame=f"{camera}_camera_optical",
                                 parent_frame=GRIPPER_FRAME)
    return WristFigures(intr, he, cal.with_extrinsics(ext))


class BoardLayer(Protocol):
    def lay(self, index: int, total: int) -> None:
        """Lay the board at its ``index``-th place on the table (or ask a person to)."""


def locate_board(robot: BringupRobot, camera: str, board: BoardSpec, wrist: CameraCalibration,
                 guess: np.ndarray, views: int = 4) -> np.ndarray:
    """Where the board lies (its frame in the base frame), seen by the calibrated wrist
    camera from ``views`` poses planned around ``guess`` (its corners, roughly)."""
    from .handeye import _mean_pose, board_in_camera

    assert wrist.extrinsics is not None
    # the jaws fill the top of the wrist camera's image: the board is looked for below them
    plan = plan_views(robot.arm, guess, wrist.k, (wrist.width, wrist.height),
                      wrist.extrinsics.base_from_camera, n=views, samples=20000,
                      top_px=0.3 * wrist.height)
    found = []
    for q5 in plan.joints:
        robot.move(q5)
        det = detect(board, robot.grab(camera))
        if det is None or len(det.image_points) < MIN_CORNERS:
            continue
        g = robot.arm.frame_pose(robot.joints(), GRIPPER_FRAME)
        found.append(g @ wrist.extrinsics.base_from_camera @ board_in_camera(det, wrist.K,
                                                                            wrist.D))
    if not found:
        raise HandEyeRefused(f"the {camera} camera does not find the board where it lies")
    return _mean_pose(found)


def fixed_camera_pose(robot: BringupRobot, camera: str, board: BoardSpec,
                      intrinsics: CameraCalibration, boards: Sequence[np.ndarray],
                      park: np.ndarray, layer: BoardLayer | None = None,
                      locate: Callable[[int], np.ndarray] | None = None,
                      frames: int = 3) -> tuple[CameraCalibration, float]:
    """A fixed camera's pose from the board laid at several places whose poses are known
    (``boards``, base frame; or found by ``locate(i)`` after ``layer`` laid it): every corner
    it sees at every place, in one solve.  One board seen straight down from far away leaves
    a small tilt and a sideways shift hard to tell apart (0.25 deg is 3.5 mm at 0.8 m); corners
    spread over the table pin both.  Returns the calibration and the reprojection error (px)."""
    from solarian_agent.hw.camera.boards import average
    from solarian_agent.hw.camera.solve import extrinsics_from_points

    uv: list[np.ndarray] = []
    xyz: list[np.ndarray] = []
    places = len(boards)
    for i in range(places):
        if layer is not None:
            layer.lay(i, places)
        pose = boards[i] if locate is None else locate(i)
        robot.move(park)
        dets = [d for d in (detect(board, robot.grab(camera)) for _ in range(frames))
                if d is not None]
        if not dets:
            raise HandEyeRefused(f"the {camera} camera does not see the board at place "
                                 f"{i + 1}: lay it where both cameras see it")
        det = average(dets)
        uv.append(det.image_points.reshape(-1, 2))
        obj = det.object_points.reshape(-1, 3)
        xyz.append(obj @ pose[:3, :3].T + pose[:3, 3])
    res = extrinsics_from_points(np.concatenate(uv).tolist(), np.concatenate(xyz).tolist(),
                                 intrinsics.k, intrinsics.d, max_rms_px=2.0)
    n = sum(len(p) for p in uv)
    m = Measurement(now_iso(), f"board: {board.describe()} at {places} places found by the "
                    f"wrist camera, {n} corners", round(res.rms_px, 4), n)
    return intrinsics.with_extrinsics(Extrinsics.from_matrix(res.base_from_camera, m)), \
        res.rms_px


def pose_error(measured: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(position error mm, rotation error deg) between two 4x4 poses."""
    import cv2

    d_mm = 1000.0 * float(np.linalg.norm(measured[:3, 3] - truth[:3, 3]))
    r, _ = cv2.Rodrigues(measured[:3, :3].T @ truth[:3, :3])
    return d_mm, math.degrees(float(np.linalg.norm(r)))


def _size(img: np.ndarray) -> tuple[int, int]:
    return int(img.shape[1]), int(img.shape[0])


__all__ = ["BoardHolder", "BoardLayer", "IntrinsicsFigures", "WristFigures",
           "fixed_camera_intrinsics", "fixed_camera_pose", "locate_board", "pose_error",
           "wrist_camera"]
