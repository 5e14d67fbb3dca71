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
the table and is reachable by the arm (IK checked; :mod:`.layout`).  The things on the table
and the world's configuration are data in :mod:`.tabletop`.

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

:meth:`World.truth` is the ground truth (:mod:`.truth`).  Only tests, the ideal controller and
benchmarks may read it; the agent sees the world through the cameras and ``joint_states`` only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from solarian_agent.arm.grasp import CLOSING_FRAME
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import HOME_TOLERANCE, JOINT_NAMES, TIP_FRAME, ArmModel

from .faults import FaultInjector, PendingMove
from .layout import TableLayout
from .tabletop import GOALS, WorldConfig, WorldError, WorldEvent, WorldObject
from .truth import truth_record


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
        self._layout = TableLayout(arm, config)
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
        self.receptacles, self.objects = self._layout.place(rng)
        self.layout_version += 1
        self._update_tip()

    def free_spot(self, rng: np.random.Generator, obj: WorldObject,
                  objects: Iterable[WorldObject], tries: int = 200
                  ) -> tuple[float, float] | None:
        """A reachable spot on the table where ``obj`` overlaps none of the other
        ``objects`` and no receptacle of this layout (None if ``tries`` draws found none)."""
        return self._layout.free_spot(rng, obj, objects, self.receptacles.values(), tries)

    def reachable(self, x: float, y: float, z: float) -> bool:
        """Whether the tip can get to (x, y, z) and to 8 cm above it with a downward pitch."""
        return self._layout.reachable(x, y, z)

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
            if self._layout.on_table(x, y):
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
        obj.location = "table" if self._layout.on_table(obj.x, obj.y) else "floor"
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

