"""The pointing check: does the arm go where a camera says a thing is?

Each camera finds the table marks; for each mark the arm takes its tool point (between the
jaw tips) over where that camera put the mark, the jaw tips 5 mm above the table (down from
6 cm above it, and back up after: never dragged along the table), and the error is how far,
across the table, the tool point is from the mark's centre.  The height is the arm's own
(5 mm of air), so the figure is the horizontal distance: what decides whether the jaws close
around a cup or beside it.

Who measures that distance is a :class:`MarkReference`: on the simulator the truth (where the
mark was laid), on a real arm the operator, reading it off with a ruler while the arm holds
still over the mark.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from solarian_agent.arm.kinematics import JAW_TIPS_PAST_TOOL_POINT, TIP_FRAME
from solarian_agent.arm.reach import ReachError, solve_reach
from solarian_agent.hw.camera.calibration import CameraCalibration
from solarian_agent.hw.camera.model import CalibratedCamera

from .handeye import GRIPPER_FRAME, HandEyeRefused, plan_views
from .marks import MARK_IDS, MARK_SIZE_M, find_marks
from .robot import BringupRobot

HOVER_M = 0.005  # the jaw tips' height over the table
ABOVE_M = 0.06
# the wrist camera looks along the jaws: they fill the top of its image (the mount's
# geometry), so a mark is looked for in the rest
JAWS_HIDE_TOP = 0.55


class PointingError(Exception):
    """The check could not run (a mark not seen, out of reach); the message says which."""


class MarkReference(Protocol):
    def error_mm(self, camera: str, mark: int, tip: np.ndarray) -> float:
        """How far (mm, across the table) the tool point at ``tip`` is from mark ``mark``."""


@dataclass(frozen=True)
class TruthReference:
    """The simulator's truth: the marks where they were laid."""

    marks: Mapping[int, np.ndarray]

    def error_mm(self, camera: str, mark: int, tip: np.ndarray) -> float:
        return 1000.0 * float(np.linalg.norm(np.asarray(tip)[:2] - self.marks[mark][:2]))


@dataclass(frozen=True)
class OperatorReference:
    """The operator reads the distance off with a ruler."""

    ask: Callable[[str], str]

    def error_mm(self, camera: str, mark: int, tip: np.ndarray) -> float:
        while True:
            text = self.ask(f"  the tip is over mark {mark} where the {camera} camera sees it: "
                            "how far is it from the mark's centre, in mm (Enter: on it)? ")
            try:
                v = float(text.strip() or 0.0)
            except ValueError:
                continue
            if math.isfinite(v) and v >= 0:
                return v


@dataclass(frozen=True)
class MarkResult:
    camera: str
    mark: int
    estimate: tuple[float, float, float]  # where the camera put the mark (base frame, m)
    error_mm: float


def _estimates(model: CalibratedCamera, found: Mapping[int, tuple[float, float]]
               ) -> dict[int, np.ndarray]:
    return {m: model.unproject(u, v, 0.0) for m, (u, v) in found.items()}


def fixed_camera_marks(robot: BringupRobot, camera: str, cal: CameraCalibration,
                       park: np.ndarray, ids: Sequence[int] = MARK_IDS
                       ) -> dict[int, np.ndarray]:
    """Where a fixed camera sees the marks, with the arm parked out of its way."""
    robot.move(park)
    found = find_marks(robot.grab(camera), ids)
    return _estimates(CalibratedCamera(cal), found)


def wrist_camera_marks(robot: BringupRobot, camera: str, cal: CameraCalibration,
                       marks_guess: Mapping[int, np.ndarray], ids: Sequence[int] = MARK_IDS,
                       log: Callable[[str], None] = print) -> dict[int, np.ndarray]:
    """Where the wrist camera sees each mark, from a pose planned to see it
    (``marks_guess``: roughly where the marks are, from another camera: planning only)."""
    assert cal.extrinsics is not None
    arm = robot.arm
    h = MARK_SIZE_M
    out: dict[int, np.ndarray] = {}
    for m in ids:
        if m not in marks_guess:
            continue
        p = np.asarray(marks_guess[m], float)
        corners = np.array([p + (dx, dy, 0.0) for dx in (-h, h) for dy in (-h, h)])
        plan = None
        for attempt in range(4):  # a pose that sees a mark is rare among random ones
            try:
                plan = plan_views(arm, corners, cal.k, (cal.width, cal.height),
                                  cal.extrinsics.base_from_camera, n=1, margin_px=40.0,
                                  depth=(0.12, 0.3), samples=30000, seed=attempt,
                                  top_px=JAWS_HIDE_TOP * cal.height)
                break
            except HandEyeRefused:
                continue
        if plan is None:
            log(f"  {camera}: no arm pose sees mark {m}")
            continue
        robot.move(plan.joints[0])
        g = arm.frame_pose(robot.joints(), GRIPPER_FRAME)
        found = find_marks(robot.grab(camera), (m,))
        out.update(_estimates(CalibratedCamera(cal, base_from_gripper=g), found))
    return out


def point_at(robot: BringupRobot, camera: str, estimates: Mapping[int, np.ndarray],
             reference: MarkReference, ids: Sequence[int] = MARK_IDS,
             log: Callable[[str], None] = print) -> list[MarkResult]:
    """Take the tool point over each mark where ``camera`` put it; the error at each."""
    missing = [m for m in ids if m not in estimates]
    if missing:
        raise PointingError(f"the {camera} camera does not see mark(s) "
                            f"{', '.join(map(str, missing))}: are they on the table, in view?")
    out = []
    arm = robot.arm
    for m in ids:
        x, y, _ = (float(v) for v in estimates[m])
        try:
            above = solve_reach(arm, (x, y, ABOVE_M))
            over = solve_reach(arm, (x, y, HOVER_M + JAW_TIPS_PAST_TOOL_POINT))
        except ReachError as e:
            raise PointingError(f"mark {m} as the {camera} camera sees it: {e}") from None
        q_above = np.array([math.radians(v) for v in above.joints_deg.values()])
        q_over = np.array([math.radians(v) for v in over.joints_deg.values()])
        robot.move(q_above)
        robot.move(q_over)
        tip = arm.frame_pose(robot.joints(), TIP_FRAME)[:3, 3]
        err = reference.error_mm(camera, m, tip)
        robot.move(q_above)
        log(f"  {camera}: mark {m}: {err:.1f} mm")
        out.append(MarkResult(camera, m, (x, y, 0.0), err))
    return out


__all__ = ["ABOVE_M", "HOVER_M", "MarkReference", "MarkResult", "OperatorReference",
           "PointingError", "TruthReference", "fixed_camera_marks", "point_at",
           "wrist_camera_marks"]
