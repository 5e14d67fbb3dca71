"""The SO-101's gripper: one moving jaw on a revolute joint against a fixed jaw.

The published model puts the jaw's pivot in ``gripper_link`` at (20.2, 18.8, -23.4) mm with its
axis along -y; the fixed jaw's inner face is the plane x = -7.9 mm (the tool point lies on it)
and the moving jaw's inner face is the plane x = +7.9 mm at a jaw angle of 0.  Closing is along
gripper_link's x axis, so the opening between the inner faces, measured at the tool point's
depth (98.1 mm below gripper_link's origin, 6 mm above the jaw tips), is where the moving
jaw's inner edge there has swung to:

    opening(a) = Jx + (Kx - Jx) cos a + (Jz - Kz) sin a - Fx

with J the pivot, K the moving jaw's inner edge at the tool point's depth at a = 0, F the fixed
face.  It is not a straight line in servo ticks: 15.8 mm at 0 degrees, 104 mm at 100 degrees,
about 3 mm at the -10 degree limit (the jaws squeeze a thin object there).  Angles are the
``gripper`` joint's radians (LeRobot's gripper degrees times pi/180; more is more open).

Opened, the jaws form a V narrowing toward the pivot: the moving jaw's finger (its inner face,
from the tips up to 55.4 mm below gripper_link's origin, where it meets the hub round the
pivot) is nearer the fixed jaw at its upper end.  :meth:`JawGeometry.clearance` is the
narrowest gap along the finger: what an object as tall as the finger must pass to get between
the jaws (a 40 mm cup needs 41 degrees to pass, though the tips stand 40 mm apart at 18).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solarian_agent.core.errors import CoreError


class JawRangeError(CoreError, ValueError):
    """An opening the jaws cannot make (wider than fully open, or negative)."""


@dataclass(frozen=True)
class JawGeometry:
    """Where the jaws are in gripper_link's x-z plane (metres) and the joint's range (rad)."""

    pivot_x: float = 0.0202
    pivot_z: float = -0.0234
    edge_x: float = 0.0079  # the moving jaw's inner face at angle 0
    edge_z: float = -0.0981274  # the tool point's depth
    fixed_face_x: float = -0.0079
    finger_top_z: float = -0.0554  # the moving jaw's finger ends here, toward the pivot
    lower: float = math.radians(-10.0)
    upper: float = math.radians(100.0)

    def gap(self, angle: float, z: float) -> float:
        """The gap between the jaws' inner faces (m) at depth ``z`` in gripper_link (the
        moving jaw's inner face is the plane x = edge_x at angle 0); 0 where it would pass
        the fixed one."""
        dx, dz = self.edge_x - self.pivot_x, z - self.pivot_z
        edge = self.pivot_x + dx * math.cos(angle) - dz * math.sin(angle)
        return max(0.0, edge - self.fixed_face_x)

    def opening(self, angle: float) -> float:
        """The gap between the jaws' inner faces at the tool point's depth (m) at ``angle``
        (rad); 0 where the moving jaw would pass the fixed one."""
        return self.gap(angle, self.edge_z)

    def clearance(self, angle: float) -> float:
        """The narrowest gap along the moving jaw's finger (m) at ``angle``: at one of its
        ends (the gap is linear in depth), the upper one once the jaw opens past 0."""
        return min(self.gap(angle, self.edge_z), self.gap(angle, self.finger_top_z))

    def clear_angle(self, width: float) -> float:
        """The smallest jaw angle (rad) at which the whole finger stands ``width`` from the
        fixed jaw, at most the widest angle (a wider ``width`` gets the widest)."""
        lo, hi = self.lower, self._widest_angle()
        if self.clearance(hi) <= width:
            return hi
        if self.clearance(lo) >= width:
            return lo
        for _ in range(60):  # clearance() rises monotonically on [lower, widest]
            mid = 0.5 * (lo + hi)
            if self.clearance(mid) < width:
                lo = mid
            else:
                hi = mid
        return hi

    @property
    def max_opening(self) -> float:
        """The widest the jaws open within the joint's range (m)."""
        return self.opening(self._widest_angle())

    def _widest_angle(self) -> float:
        dx, dz = self.edge_x - self.pivot_x, self.edge_z - self.pivot_z
        # d/da (dx cos a - dz sin a) = 0 at a = atan2(-dz, dx) (+ pi): the edge's farthest swing
        peak = math.atan2(-dz, dx)
        if peak < self.lower:
            peak += math.pi
        return min(self.upper, max(self.lower, peak))

    def angle_for(self, opening: float) -> float:
        """The jaw angle (rad) at which the jaws stand ``opening`` metres apart, on the closing
        side of the widest angle; raises :class:`JawRangeError` outside what they can make."""
        if not math.isfinite(opening) or opening < 0:
            raise JawRangeError(f"jaw opening must be a finite width >= 0 m, got {opening!r}")
        top = self._widest_angle()
        if opening > self.opening(top) + 1e-12:
            raise JawRangeError(
                f"jaw opening {opening * 1000:.1f} mm is wider than the jaws open "
                f"({self.opening(top) * 1000:.1f} mm)"
            )
        lo, hi = self.lower, top
        if opening <= self.opening(lo):
            return lo
        for _ in range(60):  # bisection: opening() rises monotonically on [lower, top]
            mid = 0.5 * (lo + hi)
            if self.opening(mid) < opening:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)


SO101_JAW = JawGeometry()

__all__ = ["SO101_JAW", "JawGeometry", "JawRangeError"]
