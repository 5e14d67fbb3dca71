"""Top-down grasps for the SO-101's jaws.

The jaws close along ``gripper_link``'s x axis; the fixed jaw's inner face passes through the
tool point and the moving jaw swings to +x.  So a grasp of an object of width ``w`` centred at
``c`` puts the tool point at ``c - (w / 2 + clearance) * closing_dir``, opens the jaws wider than
``w`` and closes: the object ends against the fixed jaw.  The wrist roll is chosen so the
closing direction lies along the bearing from the pan axis (either sense: the offset follows
the real closing direction).

The jaws open so that the moving jaw's whole finger clears the object (the opened jaws are a V,
narrowest toward the pivot: :meth:`~solarian_agent.arm.jaw.JawGeometry.clearance`), and the
tool point goes down to the object along a vertical line at the grasp's own pitch
(:func:`descent`): one joint-space move from high above would swing the fixed jaw, 4 mm from
the object's side, through it on the way."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .jaw import SO101_JAW
from .kinematics import ArmModel, UnreachableError

CLOSING_FRAME = "gripper_link"
GRASP_CLEARANCE = 0.004  # m between the fixed jaw's face and the object before closing
OPEN_MARGIN = 0.012  # the moving jaw's finger stands this much wider than the object (m)
DESCENT_STEP = 0.02  # m between the waypoints of a descent
# the tool point's height above the table when the jaws close on a standing object (m): the
# jaw tips 19 mm up and the moving jaw's finger up to 68 mm, so an object 2 to 6.5 cm tall is
# gripped on the finger's inner face.  Lower, a 6 cm cup's rim meets the moving jaw's body
# above the finger, which presses it down instead of gripping it, and it slips out on the lift
GRASP_Z = 0.025
WIDEST_OBJECT = 0.045  # m: a pick opens for this when it is not told the object's width
# the jaws' reading of a grasp, as the opening at the tool point (m): stopped under the
# narrowest graspable object (40 mm) they closed on nothing; with the moving jaw's finger 50 mm
# off the fixed jaw they are open (a tall object stops the finger's upper end at the object's
# width while the tips stand wider: 68 mm on a 40 mm cup); in between, something is held
HELD_MIN_OPENING = 0.035
HELD_MAX_CLEARANCE = 0.050


def closing_dir(arm: ArmModel, q: Sequence[float] | np.ndarray) -> np.ndarray:
    """The jaws' closing direction (unit, world) at ``q``."""
    d: np.ndarray = arm.frame_pose(q, CLOSING_FRAME)[:3, 0]
    return d / float(np.linalg.norm(d))


def open_angle(width: float) -> float:
    """The jaw angle (rad) at which the moving jaw's whole finger stands ``OPEN_MARGIN``
    wider than ``width`` from the fixed jaw (or the widest the jaws open)."""
    return SO101_JAW.clear_angle(width + OPEN_MARGIN)


def held_max_opening() -> float:
    """The opening (m, at the tool point) at and above which the jaws hold nothing."""
    return SO101_JAW.opening(SO101_JAW.clear_angle(HELD_MAX_CLEARANCE))


def pick_opening() -> float:
    """The opening (m, at the tool point) a pick opens to: the moving jaw's whole finger
    clears the widest object (:func:`open_angle`)."""
    return SO101_JAW.opening(open_angle(WIDEST_OBJECT))


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



def descent(arm: ArmModel, centre: Sequence[float], width: float, top_z: float,
            pitches: Sequence[float], q0: Sequence[float] | np.ndarray,
            step: float = DESCENT_STEP) -> list[np.ndarray]:
    """Arm joints (5 each) from high to low that lower the jaws onto the object of ``width``
    centred at ``centre`` (x, y, z: the grasp's tool point height) along a vertical line, at
    the grasp's pitch and wrist roll: the grasp (:func:`grasp_joints`) and above it, every
    ``step``, the poses at the same pitch up to ``top_z`` or as high as that pitch reaches.
    The last is the grasp."""
    c = np.asarray(centre, dtype=float)
    q, pitch = grasp_joints(arm, c, width, pitches, q0)
    path = [q]
    n = int(math.floor((top_z - c[2]) / step + 1e-9))
    for i in range(1, n + 1):
        try:
            q, _ = grasp_joints(arm, (c[0], c[1], c[2] + i * step), width, (pitch,), q)
        except UnreachableError:
            break
        path.append(q)
    return path[::-1]
