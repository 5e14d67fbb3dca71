"""Top-down grasps for the SO-101's jaws.

The jaws close along ``gripper_link``'s x axis; the fixed jaw's inner face passes through the
tool point and the moving jaw swings to +x.  So a grasp of an object of width ``w`` centred at
``c`` puts the tool point at ``c - (w / 2 + clearance) * closing_dir``, opens the jaws wider than
``w`` and closes: the object ends against the fixed jaw.  The wrist roll is chosen so the
closing direction lies along the bearing from the pan axis (either sense: the offset follows
the real closing direction)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .jaw import SO101_JAW
from .kinematics import ArmModel

CLOSING_FRAME = "gripper_link"
GRASP_CLEARANCE = 0.004  # m between the fixed jaw's face and the object before closing
OPEN_MARGIN = 0.02  # the jaws open this much wider than the object (m)


def closing_dir(arm: ArmModel, q: Sequence[float] | np.ndarray) -> np.ndarray:
    """The jaws' closing direction (unit, world) at ``q``."""
    d: np.ndarray = arm.frame_pose(q, CLOSING_FRAME)[:3, 0]
    return d / float(np.linalg.norm(d))


def open_angle(width: float) -> float:
    """The jaw angle (rad) that opens the jaws ``OPEN_MARGIN`` wider than ``width``."""
    return SO101_JAW.angle_for(min(width + OPEN_MARGIN, SO101_JAW.max_opening))


def grasp_joints(arm: ArmModel, centre: Sequence[float], width: float,
                 pitches: Sequence[float], q0: Sequence[float] | np.ndarray,
                 clearance: float = GRASP_CLEARANCE) -> tuple[np.ndarray, float]:
    """Arm joints ``(q5, pitch)`` that put the fixed jaw's face ``clearance`` from the near
    side of an object of ``width`` centred at ``centre`` (x, y, z), the closing direction
    along the bearing from the pan axis (either sense).  Raises :class:`UnreachableError`
    where no pitch reaches."""
    c = np.asarray(centre, dtype=float)
    heading = math.atan2(float(c[1]), float(c[0]) - arm.pan_axis_x)
    q = np.asarray(q0, dtype=float).ravel()[:5].copy()
    target = c.copy()
    pitch = float(pitches[0])
    for _ in range(3):
        q, pitch = arm.ik_search(target, pitches, q0=q)
        q = q.copy()
        q[4] = arm.roll_for_yaw(q, heading)
        d = closing_dir(arm, q)  # roll_for_yaw may turn it to heading + pi: use the real one
        flat = np.array([d[0], d[1], 0.0])
        n = float(np.linalg.norm(flat))
        if n > 1e-6:
            flat /= n
        target = c - (width / 2 + clearance) * flat
    q, pitch = arm.ik_search(target, pitches, q0=q)
    return q, pitch

