"""The 2D tabletop world of the tidy-up task: the red cup goes on the tray, the yellow paper in
the bin, and the arm ends at home.

Coordinates: x forward (away from the arm), y left, z up, metres.  The arm base stands at the
origin on the table top (z = 0); the table spans ``WorldConfig.table_x`` x ``table_y``
(0.5 m x 0.6 m in front of the base).

Things on the table, by name:

* ``red_cup`` — a disc, graspable (width = its diameter);
* ``yellow_paper`` — a crumpled paper ball (irregular blob), graspable;
* ``tray`` — a grey-blue rectangle, the cup's goal;
* ``bin`` — a dark circle, the paper's goal.

Placement is drawn from a seed: no two footprints overlap (plus a margin), everything lies on
the table and is reachable by the arm (IK checked).

The arm: ``step(dt)`` moves each joint toward its commanded target at no more than its
velocity limit (the URDF's, times ``speed_scale``; a command may lower it).  The gripper
joint is the moving jaw's angle (rad).  Closing it grasps an object when the jaws' opening
(``SO101_JAW.opening``) reaches the object's width, the tool point is below ``grasp_height``
(inside the bin: below the bin's rim, so a dropped object can be picked again), and the object
lay between the fixed jaw's face (through the tool point) and the moving jaw when the jaw
began to close, along the closing direction (``gripper_link``'s x axis): the moving jaw sweeps
it against the fixed one, as a one-jaw gripper does.  A held object stops the jaw at
``angle_for(width)`` and moves with the jaws, against the fixed jaw.  Opening releases it: over
the tray or bin footprint it is in it, elsewhere it lands on the table (or the floor, off the
table) where it was held.

:meth:`World.truth` is the ground truth.  Only tests, the ideal controller and benchmarks may
read it; the agent sees the world through the cameras and ``joint_states`` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solarian_agent.arm.grasp import CLOSING_FRAME, GRASP_Z
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import (
    HOME,
    HOME_TOLERANCE,
    JOINT_NAMES,
    TIP_FRAME,
    ArmModel,
    UnreachableError,
)
from solarian_agent.core.errors import ConfigError, CoreError

from .faults import FaultInjector, PendingMove

OBJECT_NAMES: tuple[str, ...] = ("red_cup", "yellow_paper")
RECEPTACLE_NAMES: tuple[str, ...] = ("tray", "bin")
GOALS: dict[str, str] = {"red_cup": "tray", "yellow_paper": "bin"}
# the tool pitches tried when checking reachability, steepest first
APPROACH_PITCHES: tuple[float, ...] = (math.pi / 2, 1.35, 1.15, 0.95, 0.75)

_REACH_STEP = 0.0025
_REACH_CACHE: dict[tuple[str, float, float, float], np.ndarray] = {}

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


def _disc(radius: float, n: int = 20) -> np.ndarray:
    a = np.linspace(0.0, 2 * math.pi, n, endpoint=False)
    return np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)


def _blob(radius: float, rng: np.random.Generator, n: int = 14) -> np.ndarray:
    a = np.linspace(0.0, 2 * math.pi, n, endpoint=False)
    r = radius * (0.8 + 0.25 * rng.random(n))
    r = np.minimum(r, radius)
    return np.stack([r * np.cos(a), r * np.sin(a)], axis=1)


@dataclass
class WorldEvent:
    t: float
    kind: str  # grasped | grasp_failed | released | slipped | moved | dropped_off_table
    detail: dict[str, Any] = field(default_factory=dict)


def merge_command(world: Any, positions: Mapping[str, float] | Sequence[float] | np.ndarray,
                  max_velocity: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``world``'s new joint targets and per-joint speed caps for a command (a name -> value
    mapping, or 5 / 6 values in joint order), clamped to the joint limits.  Raises
    :class:`WorldError` for an unknown joint or a non-finite value (the joint keeps its
    position).  ``world`` has ``joint_names``, ``target``, ``q``, ``arm`` and ``_vmax``."""
    names: tuple[str, ...] = world.joint_names
    target = np.array(world.target, dtype=float)
    if isinstance(positions, Mapping):
        for name, value in positions.items():
            if name not in names:
                raise WorldError(f"unknown joint {name!r}; joints are {names}")
            target[names.index(name)] = float(value)
    else:
        arr = np.asarray(positions, dtype=float).ravel()
        if arr.shape[0] not in (5, 6):
            raise WorldError(f"a command needs 5 or 6 joint values, got {arr.shape[0]}")
        target[: arr.shape[0]] = arr
    if not np.all(np.isfinite(target)):
        bad = [n for n, v in zip(names, target, strict=True) if not math.isfinite(v)]
        world.target = np.where(np.isfinite(target), target, world.q)
        raise WorldError(f"non-finite target for {bad}; kept the current position")
    vcap = np.array(world._vmax, dtype=float)
    if max_velocity > 0:
        vcap[:5] = np.minimum(vcap[:5], max_velocity)
    return np.clip(target, world.arm.lower, world.arm.upper), vcap


class World:
    """The tabletop state and its physics, advanced by :meth:`step`."""

    def __init__(
        self,
        arm: ArmModel,
        config: WorldConfig = WorldConfig(),
        faults: FaultInjector | None = None,
        seed: int = 0,
    ) -> None:
        self.arm = arm
        self.config = config
        self.faults = faults if faults is not None else FaultInjector()
        self.joint_names: tuple[str, ...] = JOINT_NAMES
        self._vmax = arm.velocity * config.speed_scale
        self.layout_version = 0
        self.seed = int(seed)
        self.reset(seed)

    # setup ----------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """New episode: a fresh layout drawn from ``seed`` (default: the next seed), the arm at
        home, faults re-drawn from the same seed."""
        self.seed = self.seed + 1 if seed is None else int(seed)
        self.t = 0.0
        self.q = np.array(self.config.home, dtype=float)
        self.qd = np.zeros_like(self.q)  # joint velocities of the last step
        self.target = self.q.copy()
        self._vcap = self._vmax.copy()
        self.held: WorldObject | None = None
        # the jaws' opening when they last began to close (m): the moving jaw sweeps the
        # closing axis from there, so anything it passed on the way is pushed into the grip
        self._stroke_opening = SO101_JAW.opening(float(self.q[5]))
        self._slip_checked = False
        self.events: list[WorldEvent] = []
        self.path_length = 0.0
        self.steps = 0
        self.faults.reset(self.seed)
        rng = np.random.default_rng([self.seed, 0x7AB1E])
        self.receptacles, self.objects = self._place(rng)
        self.layout_version += 1
        self._update_tip()

    def _place(self, rng: np.random.Generator
               ) -> tuple[dict[str, Receptacle], dict[str, WorldObject]]:
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
            if not self._on_table(x, y, radius):
                continue
            if any(math.hypot(x - px, y - py) < radius + pr + cfg.margin
                   for _, px, py, pr in placed):
                continue
            if not self._reachable_fast(x, y, z):
                continue
            return x, y
        return None

    def free_spot(self, rng: np.random.Generator, obj: WorldObject,
                  objects: Iterable[WorldObject], tries: int = 200
                  ) -> tuple[float, float] | None:
        """A reachable spot on the table where ``obj`` overlaps none of the other
        ``objects`` and no receptacle of this layout (None if ``tries`` draws found none)."""
        others = [(o.name, o.x, o.y, o.radius) for o in objects if o.name != obj.name]
        others += [(r.name, r.x, r.y, r.bounding_radius) for r in self.receptacles.values()]
        cfg = self.config
        return self._sample_free(rng, obj.radius, *cfg.object_r, others, cfg.grasp_z, tries)

    def _on_table(self, x: float, y: float, radius: float = 0.0) -> bool:
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

    # commands -------------------------------------------------------------------------------
    def command(
        self,
        positions: Mapping[str, float] | Sequence[float] | np.ndarray,
        max_velocity: float = 0.0,
    ) -> None:
        """Set joint targets (a name -> value mapping, or 5 / 6 values in
        :data:`JOINT_NAMES` order).  Targets are clamped to the joint limits.
        ``max_velocity`` (rad/s, > 0) lowers the arm joints' speed for this motion."""
        self.target, self._vcap = merge_command(self, positions, max_velocity)

    def control_base(self) -> dict[str, float]:
        """Where the safety layer's next rate-limited step starts: here the joints
        themselves (this world follows its command exactly)."""
        return self.joint_positions()

    def set_gripper(self, angle: float) -> None:
        """Command the jaw angle (rad)."""
        self.command({"gripper": angle})

    # physics ----------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        if not dt > 0:
            raise ValueError(f"World.step needs dt > 0, got {dt}")
        prev_jaw = float(self.q[5])
        lim = self._vcap * dt
        q_prev = self.q.copy()
        self.q += np.clip(self.target - self.q, -lim, lim)
        if self.held is not None:
            self.q[5] = max(self.q[5], self._held_angle(self.held))
        self.qd = (self.q - q_prev) / dt
        self.t += dt
        self.steps += 1
        prev_tip = self.tip_xyz
        self._update_tip()
        self.path_length += float(np.linalg.norm(self.tip_xyz - prev_tip))
        jaw = float(self.q[5])
        if jaw >= prev_jaw:
            self._stroke_opening = SO101_JAW.opening(jaw)
        if self.held is None:
            if jaw < prev_jaw:
                self._try_grasp(prev_jaw, jaw)
        else:
            hold = self._held_angle(self.held)
            if self.target[5] > hold + 0.02 and jaw > hold + 0.02:
                self._release("released")
        if self.held is not None:
            self._carry()
        for move in self.faults.due_moves(self.t):
            self._apply_move(move)

    def _update_tip(self) -> None:
        poses = self.arm.frame_poses(self.q, (TIP_FRAME, CLOSING_FRAME))
        self.tip_pose = poses[TIP_FRAME]
        self.tip_xyz = self.tip_pose[:3, 3].copy()
        self.closing_dir = poses[CLOSING_FRAME][:3, 0].copy()

    @staticmethod
    def _held_angle(obj: WorldObject) -> float:
        """The jaw angle at which the jaws stand on ``obj`` (rad)."""
        return SO101_JAW.angle_for(min(obj.width, SO101_JAW.max_opening))

    def between_jaws(self, obj: WorldObject, opening: float) -> bool:
        """Whether ``obj`` lies between the fixed jaw's face (through the tool point) and the
        moving jaw standing ``opening`` metres from it, along the closing direction."""
        d = np.array([obj.x - self.tip_xyz[0], obj.y - self.tip_xyz[1]])
        closing = self.closing_dir[:2]
        n = float(np.linalg.norm(closing))
        if n < 0.5:  # the closing axis is near vertical: the jaws cannot pinch a footprint
            return False
        closing = closing / n
        across = np.array([-closing[1], closing[0]])
        s = float(closing @ d)  # the centre's distance from the fixed jaw's face
        tol = 0.25 * obj.radius  # an object a little past a face is pushed in as they close
        return (abs(float(across @ d)) <= self.config.jaw_half_width + 0.5 * obj.radius
                and s >= obj.radius - tol and s <= opening - obj.radius + tol)

    def grasp_height_for(self, obj: WorldObject) -> float:
        """How low the tool point must be to grasp ``obj``: ``grasp_height`` above its base,
        or anywhere below the rim of the bin it lies in."""
        if obj.location == "bin":
            return self.config.bin_height
        return self.config.grasp_height

    def _try_grasp(self, prev_jaw: float, jaw: float) -> None:
        before, now = SO101_JAW.opening(prev_jaw), SO101_JAW.opening(jaw)
        for obj in self.objects.values():
            if obj.location not in ("table", "bin") or not (now < obj.width <= before):
                continue
            if self.tip_xyz[2] > self.grasp_height_for(obj):
                continue
            # between the jaws as they began to close: the moving jaw pushes an object it
            # meets on the way against the fixed one (the step's size plays no part)
            if not self.between_jaws(obj, max(before, self._stroke_opening)):
                continue
            if self.faults.grasp_fails(obj.name, self.t):
                self._event("grasp_failed", obj.name)
                return
            self.held = obj
            obj.location = "held"
            self._slip_checked = False
            self.q[5] = max(jaw, self._held_angle(obj))
            self._event("grasped", obj.name)
            return

    def _carry(self) -> None:
        obj = self.held
        assert obj is not None
        x, y = self._held_xy(obj)
        obj.x, obj.y = x, y
        obj.z = max(0.0, float(self.tip_xyz[2]))
        if not self._slip_checked and self.tip_xyz[2] > self.config.lift_height:
            self._slip_checked = True
            if self.faults.slips(obj.name, self.t):
                self._release("slipped")

    def _release(self, kind: str) -> None:
        obj = self.held
        assert obj is not None
        self.held = None
        x, y = self._held_xy(obj)
        obj.x, obj.y = x, y
        for rec in self.receptacles.values():
            if rec.contains(x, y):
                obj.location = rec.name
                obj.z = rec.height if rec.shape == "rect" else 0.0
                break
        else:
            if self._on_table(x, y):
                obj.location, obj.z = "table", 0.0
            else:
                obj.location, obj.z = "floor", 0.0
        self._event(kind, obj.name, location=obj.location, x=round(x, 4), y=round(y, 4))

    def _held_xy(self, obj: WorldObject) -> tuple[float, float]:
        """Where a held object's centre is: against the fixed jaw, half its width along the
        closing direction from the tool point."""
        d = self.closing_dir[:2]
        n = float(np.linalg.norm(d))
        off = d / n * obj.radius if n > 1e-6 else np.zeros(2)
        return float(self.tip_xyz[0] + off[0]), float(self.tip_xyz[1] + off[1])

    def _apply_move(self, move: PendingMove) -> None:
        candidates = [o for o in self.objects.values()
                      if o.location != "held" and (move.obj is None or o.name == move.obj)]
        if not candidates:
            self.faults.postpone(move)
            return
        rng = self.faults.rng
        obj = candidates[int(rng.integers(len(candidates)))]
        if move.xy is not None:
            xy: tuple[float, float] | None = move.xy
        else:
            xy = self.free_spot(rng, obj, self.objects.values())
        if xy is None:
            return
        obj.x, obj.y = float(xy[0]), float(xy[1])
        obj.z = 0.0
        obj.location = "table" if self._on_table(obj.x, obj.y) else "floor"
        for rec in self.receptacles.values():
            if rec.contains(obj.x, obj.y):
                obj.location = rec.name
        self.faults.moved(self.t, obj.name, (obj.x, obj.y))
        self._event("moved", obj.name, x=round(obj.x, 4), y=round(obj.y, 4))

    def _event(self, kind: str, obj: str, **detail: Any) -> None:
        self.events.append(WorldEvent(round(self.t, 4), kind, {"object": obj, **detail}))

    # queries -----------------------------------------------------------------------------------
    def joint_positions(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.joint_names, self.q, strict=True)}

    def at_home(self, tol: float = HOME_TOLERANCE) -> bool:
        return bool(np.all(np.abs(self.q[:5] - np.asarray(self.config.home[:5])) <= tol))

    def settled(self, tol: float = 1e-4) -> bool:
        """Every joint has reached its target (the gripper may be stopped by a held object)."""
        err = np.abs(self.target - self.q)
        if self.held is not None and self.target[5] < self.q[5]:
            err[5] = 0.0
        return bool(np.all(err <= tol))

    def task_complete(self) -> bool:
        return all(self.objects[o].location == r for o, r in GOALS.items())

    def success(self) -> bool:
        """Experiment 6-10's acceptance: cup on the tray, paper in the bin, nothing held, the
        arm back home."""
        return self.task_complete() and self.held is None and self.at_home()

    def truth(self) -> dict[str, Any]:
        """Ground truth as plain data (tests, the ideal controller and benchmarks only)."""
        return truth_record(self, {n: o.as_dict() for n, o in self.objects.items()})


def truth_record(world: Any, objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ground-truth record of either backend's world, with ``objects`` (name -> its
    record with a ``location``) as that world judges them."""
    _, pitch, yaw = world.arm.fk(world.q)
    return {
        "t": world.t,
        "seed": world.seed,
        "objects": objects,
        "receptacles": {n: r.as_dict() for n, r in world.receptacles.items()},
        "held": world.held.name if world.held is not None else None,
        "in_tray": [n for n, o in objects.items() if o["location"] == "tray"],
        "in_bin": [n for n, o in objects.items() if o["location"] == "bin"],
        "joints": world.joint_positions(),
        "targets": {n: float(v) for n, v in zip(world.joint_names, world.target, strict=True)},
        "tip": [float(v) for v in world.tip_xyz],
        "pitch": pitch,
        "yaw": yaw,
        "gripper": float(world.q[5]),
        "at_home": world.at_home(),
        "task_complete": world.task_complete(),
        "success": world.success(),
        "path_length": world.path_length,
        "steps": world.steps,
        "events": [{"t": e.t, "kind": e.kind, **e.detail} for e in world.events],
        "faults": world.faults.summary(),
    }
