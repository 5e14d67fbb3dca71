"""What lies on the tidy-up table, as data: the objects' and receptacles' names and goals, the
world's configuration, a receptacle's footprint, a graspable object and the events the world
records.  Both backends (the 2D :mod:`.world` and MuJoCo) share them.

Coordinates: x forward (away from the arm), y left, z up, metres; the arm base stands at the
origin on the table top (z = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solarian_agent.arm.grasp import GRASP_Z
from solarian_agent.arm.kinematics import HOME, JOINT_NAMES
from solarian_agent.core.errors import ConfigError, CoreError

OBJECT_NAMES: tuple[str, ...] = ("red_cup", "yellow_paper")
RECEPTACLE_NAMES: tuple[str, ...] = ("tray", "bin")
GOALS: dict[str, str] = {"red_cup": "tray", "yellow_paper": "bin"}

Location = str  # "table" | "tray" | "bin" | "held" | "floor"


class WorldError(CoreError):
    """A request the world cannot honour (unknown joint or object, impossible layout)."""


@dataclass(frozen=True)
class WorldConfig:
    table_x: tuple[float, float] = (-0.05, 0.45)
    table_y: tuple[float, float] = (-0.30, 0.30)
    object_r: tuple[float, float] = (0.14, 0.24)  # distance of object centres from the base
    receptacle_r: tuple[float, float] = (0.15, 0.25)
    max_bearing: float = 1.25  # rad either side of +x
    margin: float = 0.015  # free space between footprints
    cup_radius: float = 0.0225
    cup_height: float = 0.07
    paper_radius: float = 0.02
    paper_height: float = 0.035
    tray_size: tuple[float, float] = (0.11, 0.085)
    tray_height: float = 0.015
    bin_radius: float = 0.045
    bin_height: float = 0.08
    grasp_height: float = 0.035  # the tip must be at or below this to grasp (m)
    lift_height: float = 0.06  # a grasped object slips (fault) when lifted past this
    jaw_half_width: float = 0.01  # the jaws' half extent across the closing axis (m)
    grasp_z: float = GRASP_Z  # where a controller should put the tool point to grasp
    speed_scale: float = 1.0
    home: tuple[float, ...] = HOME
    placement_attempts: int = 4000

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"sim.world.{name}", why)

        for name in ("table_x", "table_y", "object_r", "receptacle_r"):
            lo, hi = getattr(self, name)
            if not lo < hi:
                raise bad(name, f"needs lo < hi, got {(lo, hi)}")
        for name in ("cup_radius", "paper_radius", "bin_radius", "grasp_height",
                     "speed_scale", "jaw_half_width"):
            if not getattr(self, name) > 0:
                raise bad(name, "must be > 0")
        if self.margin < 0:
            raise bad("margin", "must be >= 0")
        if min(self.tray_size) <= 0:
            raise bad("tray_size", "must be positive")
        if len(self.home) != len(JOINT_NAMES):
            raise bad("home", f"needs {len(JOINT_NAMES)} joint values {JOINT_NAMES}")
        if not 0 < self.max_bearing <= math.pi:
            raise bad("max_bearing", "must be in (0, pi]")
        if self.placement_attempts < 1:
            raise bad("placement_attempts", "must be >= 1")


@dataclass(frozen=True)
class Receptacle:
    name: str
    shape: str  # "rect" | "circle"
    x: float
    y: float
    yaw: float = 0.0
    half_size: tuple[float, float] = (0.0, 0.0)  # rect: half length (local x), half width
    radius: float = 0.0  # circle
    height: float = 0.0

    @property
    def bounding_radius(self) -> float:
        return math.hypot(*self.half_size) if self.shape == "rect" else self.radius

    def contains(self, x: float, y: float) -> bool:
        dx, dy = x - self.x, y - self.y
        if self.shape == "circle":
            return dx * dx + dy * dy <= self.radius * self.radius
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        lx, ly = c * dx + s * dy, -s * dx + c * dy
        return abs(lx) <= self.half_size[0] and abs(ly) <= self.half_size[1]

    def outline(self, n: int = 32) -> np.ndarray:
        """The footprint polygon (N x 2 world x, y)."""
        if self.shape == "circle":
            a = np.linspace(0.0, 2 * math.pi, n, endpoint=False)
            return np.stack([self.x + self.radius * np.cos(a),
                             self.y + self.radius * np.sin(a)], axis=1)
        hx, hy = self.half_size
        local = np.array([[hx, hy], [-hx, hy], [-hx, -hy], [hx, -hy]])
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        rot = np.array([[c, -s], [s, c]])
        out: np.ndarray = local @ rot.T + np.array([self.x, self.y])
        return out

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"shape": self.shape, "x": self.x, "y": self.y, "yaw": self.yaw,
                             "height": self.height}
        if self.shape == "rect":
            d["size"] = [2 * self.half_size[0], 2 * self.half_size[1]]
        else:
            d["radius"] = self.radius
        return d


@dataclass
class WorldObject:
    """A graspable object.  ``shape`` is its footprint outline in its own frame (N x 2)."""

    name: str
    kind: str  # "cup" | "paper"
    x: float
    y: float
    radius: float
    height: float
    shape: np.ndarray
    z: float = 0.0
    yaw: float = 0.0
    location: Location = "table"

    @property
    def width(self) -> float:
        return 2.0 * self.radius

    def outline(self) -> np.ndarray:
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        rot = np.array([[c, -s], [s, c]])
        out: np.ndarray = self.shape @ rot.T + np.array([self.x, self.y])
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "x": self.x, "y": self.y, "z": self.z, "yaw": self.yaw,
            "radius": self.radius, "width": self.width, "height": self.height,
            "location": self.location, "held": self.location == "held",
            "in_tray": self.location == "tray", "in_bin": self.location == "bin",
            "on_table": self.location in ("table", "tray", "bin"),
        }



@dataclass
class WorldEvent:
    t: float
    kind: str  # grasped | grasp_failed | released | slipped | moved | dropped_off_table
    detail: dict[str, Any] = field(default_factory=dict)

