"""Where the joints must be for the tool point to reach a point: the core of ``arm reach``.

The point is in the arm's base frame (REP 103, metres, the table top at z = 0).  ``pitch`` is the
approach's angle below the horizontal (pi/2 points straight down); without it the steepest
pitch that reaches is taken, so a point on the table is approached from above where it can be.
``roll`` turns the jaws about the approach (0: they close in the arm's vertical plane).  The
answer is in LeRobot's calibrated degrees, the unit a user of LeRobot reads off the same arm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from .kinematics import ARM_JOINTS, ArmModel, UnreachableError

# pitches tried without --pitch: straight down first, then tilting toward level in 5 degrees
SEARCH_PITCHES: tuple[float, ...] = tuple(math.radians(d) for d in range(90, -5, -5))
TABLE_CLEARANCE_M = 0.0  # the tool point never below the table top


@dataclass(frozen=True)
class Reach:
    """A solved reach: joints in LeRobot degrees, the tool point they give, the pitch used."""

    joints_deg: dict[str, float]
    tcp: tuple[float, float, float]
    pitch_deg: float
    position_error_m: float

    def as_json(self) -> dict[str, object]:
        return {"joints_deg": self.joints_deg, "tcp": list(self.tcp),
                "pitch_deg": self.pitch_deg}


class ReachError(ValueError):
    """The point cannot be reached; the message is one line saying why."""


def solve_reach(model: ArmModel, xyz: Sequence[float], pitch: float | None = None,
                roll: float = 0.0) -> Reach:
    """Joint values putting the tool point at ``xyz`` (m) with ``pitch`` and ``roll`` (rad).

    Raises :class:`ReachError` for a point below the table, a roll outside the joint's range,
    or a pose the arm cannot take within the IK's tolerance."""
    target = np.asarray([float(v) for v in xyz], dtype=float)
    if target.shape != (3,) or not np.all(np.isfinite(target)):
        raise ReachError(f"the point must be three finite numbers, got {list(xyz)}")
    if target[2] < TABLE_CLEARANCE_M:
        raise ReachError(f"z = {target[2]:.3f} m is below the table top (z = 0)")
    lo, hi = model.limits["wrist_roll"].lower, model.limits["wrist_roll"].upper
    if not lo <= roll <= hi:
        raise ReachError(f"roll {math.degrees(roll):.1f} deg is outside wrist_roll's range "
                         f"[{math.degrees(lo):.1f}, {math.degrees(hi):.1f}] deg")
    # the tool point within 1 mm of the point asked, the pitch within half a degree
    precise = ArmModel(model.model, model.urdf_path,
                       replace(model.ik_config, position_tol=0.001, pitch_tol=0.01))
    q0 = np.zeros(5)
    q0[4] = roll
    pitches = (pitch,) if pitch is not None else SEARCH_PITCHES
    try:
        q, used = precise.ik_search(target, pitches, q0)
    except UnreachableError as e:
        how = (f"at pitch {math.degrees(pitch):.0f} deg" if pitch is not None
               else "at any pitch from 90 to 0 deg")
        raise ReachError(
            f"({target[0]:.3f}, {target[1]:.3f}, {target[2]:.3f}) m is out of reach {how}: "
            f"the closest the arm gets is {1000 * e.position_error:.0f} mm away") from e
    tip, _, _ = model.fk(q)
    return Reach(
        joints_deg={n: round(math.degrees(float(v)), 2) for n, v in zip(ARM_JOINTS, q,
                                                                         strict=True)},
        tcp=(round(float(tip[0]), 4), round(float(tip[1]), 4), round(float(tip[2]), 4)),
        pitch_deg=round(math.degrees(used), 2),
        position_error_m=float(np.linalg.norm(tip - target)),
    )


__all__ = ["SEARCH_PITCHES", "Reach", "ReachError", "solve_reach"]
