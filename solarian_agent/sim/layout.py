"""Where things stand on the table: a layout drawn from a seed, where no two footprints overlap
(plus a margin), everything lies on the table and the arm can reach it (IK checked, from a
table of reachable distances cached per arm and height).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from solarian_agent.arm.kinematics import ArmModel, UnreachableError

from .tabletop import Receptacle, WorldConfig, WorldError, WorldObject

# the tool pitches tried when checking reachability, steepest first
APPROACH_PITCHES: tuple[float, ...] = (math.pi / 2, 1.35, 1.15, 0.95, 0.75)

_REACH_STEP = 0.0025
_REACH_CACHE: dict[tuple[str, float, float, float], np.ndarray] = {}


def _disc(radius: float, n: int = 20) -> np.ndarray:
    a = np.linspace(0.0, 2 * math.pi, n, endpoint=False)
    return np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)


def _blob(radius: float, rng: np.random.Generator, n: int = 14) -> np.ndarray:
    a = np.linspace(0.0, 2 * math.pi, n, endpoint=False)
    r = radius * (0.8 + 0.25 * rng.random(n))
    r = np.minimum(r, radius)
    return np.stack([r * np.cos(a), r * np.sin(a)], axis=1)



class TableLayout:
    """Draws layouts and free spots for one arm and world configuration."""

    def __init__(self, arm: ArmModel, config: WorldConfig) -> None:
        self.arm = arm
        self.config = config

    def place(self, rng: np.random.Generator
              ) -> tuple[dict[str, Receptacle], dict[str, WorldObject]]:
        """The receptacles and objects of a new layout drawn from ``rng``."""
        cfg = self.config
        tray_r = math.hypot(cfg.tray_size[0], cfg.tray_size[1]) / 2
        specs: list[tuple[str, float, tuple[float, float], float]] = [
            ("tray", tray_r, cfg.receptacle_r, 0.08),
            ("bin", cfg.bin_radius, cfg.receptacle_r, 0.08),
            ("red_cup", cfg.cup_radius, cfg.object_r, cfg.grasp_z),
            ("yellow_paper", cfg.paper_radius, cfg.object_r, cfg.grasp_z),
        ]
        for _attempt in range(cfg.placement_attempts):
            placed: list[tuple[str, float, float, float]] = []
            ok = True
            for name, radius, (r_lo, r_hi), z in specs:
                xy = self._sample_free(rng, radius, r_lo, r_hi, placed, z)
                if xy is None:
                    ok = False
                    break
                placed.append((name, xy[0], xy[1], radius))
            if ok:
                break
        else:
            raise WorldError(
                f"could not place the objects without overlap in {cfg.placement_attempts} tries"
            )
        pos = {name: (x, y) for name, x, y, _ in placed}
        tray_yaw = float(rng.uniform(0.0, math.pi))
        receptacles = {
            "tray": Receptacle("tray", "rect", *pos["tray"], yaw=tray_yaw,
                               half_size=(cfg.tray_size[0] / 2, cfg.tray_size[1] / 2),
                               height=cfg.tray_height),
            "bin": Receptacle("bin", "circle", *pos["bin"], radius=cfg.bin_radius,
                              height=cfg.bin_height),
        }
        objects = {
            "red_cup": WorldObject("red_cup", "cup", *pos["red_cup"], radius=cfg.cup_radius,
                                   height=cfg.cup_height, shape=_disc(cfg.cup_radius)),
            "yellow_paper": WorldObject(
                "yellow_paper", "paper", *pos["yellow_paper"], radius=cfg.paper_radius,
                height=cfg.paper_height, shape=_blob(cfg.paper_radius, rng),
                yaw=float(rng.uniform(0.0, 2 * math.pi)),
            ),
        }
        return receptacles, objects

    def _sample_free(
        self,
        rng: np.random.Generator,
        radius: float,
        r_lo: float,
        r_hi: float,
        placed: Sequence[tuple[str, float, float, float]],
        z: float,
        tries: int = 60,
    ) -> tuple[float, float] | None:
        cfg = self.config
        for _ in range(tries):
            r = float(rng.uniform(r_lo, r_hi))
            b = float(rng.uniform(-cfg.max_bearing, cfg.max_bearing))
            x, y = r * math.cos(b), r * math.sin(b)
            if not self.on_table(x, y, radius):
                continue
            if any(math.hypot(x - px, y - py) < radius + pr + cfg.margin
                   for _, px, py, pr in placed):
                continue
            if not self._reachable_fast(x, y, z):
                continue
            return x, y
        return None


    def free_spot(self, rng: np.random.Generator, obj: WorldObject,
                  objects: Iterable[WorldObject], receptacles: Iterable[Receptacle],
                  tries: int = 200) -> tuple[float, float] | None:
        """A reachable spot on the table where ``obj`` overlaps none of the other
        ``objects`` and none of ``receptacles`` (None if ``tries`` draws found none)."""
        others = [(o.name, o.x, o.y, o.radius) for o in objects if o.name != obj.name]
        others += [(r.name, r.x, r.y, r.bounding_radius) for r in receptacles]
        cfg = self.config
        return self._sample_free(rng, obj.radius, *cfg.object_r, others, cfg.grasp_z, tries)

    def on_table(self, x: float, y: float, radius: float = 0.0) -> bool:
        (x0, x1), (y0, y1) = self.config.table_x, self.config.table_y
        return x0 + radius <= x <= x1 - radius and y0 + radius <= y <= y1 - radius

    def _reachable_fast(self, x: float, y: float, z: float) -> bool:
        """:meth:`reachable` from a table over the distance from the pan axis: the arm is
        symmetric about it, so within the pan limits only r (and z) matter."""
        lo, hi = self.arm.limits["shoulder_pan"].lower, self.arm.limits["shoulder_pan"].upper
        if not lo <= math.atan2(y, x) <= hi:
            return False
        cfg = self.config
        r0 = min(cfg.object_r[0], cfg.receptacle_r[0])
        r1 = max(cfg.object_r[1], cfg.receptacle_r[1])
        key = (str(self.arm.urdf_path), round(z, 4), round(r0, 4), round(r1, 4))
        table = _REACH_CACHE.get(key)
        if table is None:
            radii = r0 + _REACH_STEP * np.arange(int((r1 - r0) / _REACH_STEP) + 2)
            ok = np.array([self.reachable(self.arm.pan_axis_x + float(r), 0.0, z)
                           for r in radii])
            table = _REACH_CACHE.setdefault(key, ok)
        i = int((math.hypot(x - self.arm.pan_axis_x, y) - r0) / _REACH_STEP)
        return i >= 0 and i + 1 < len(table) and bool(table[i]) and bool(table[i + 1])

    def reachable(self, x: float, y: float, z: float) -> bool:
        """Whether the tip can get to (x, y, z) and to 8 cm above it with a downward pitch."""
        try:
            for zz in (z, z + 0.08):
                self.arm.ik_search((x, y, zz), APPROACH_PITCHES)
        except UnreachableError:
            return False
        return True

