"""The tabletop in MuJoCo: the SO-101 (from the URDF) tidying the red cup and the paper ball.

:class:`MujocoWorld` has the 2D :class:`~solarian_agent.sim.world.World`'s interface (the
:class:`~solarian_agent.sim.backend.SimWorld` protocol), so the same sim component, skills,
ideal controller and benchmarks drive it:

* ``command`` sets joint targets (clamped to the URDF's limits); every physics step a setpoint
  moves toward them at no more than the joint's velocity limit, and position servos (gain,
  damping and torque limit: :class:`~solarian_agent.sim.mujoco.urdf_mjcf.ArmPhysics`) follow
  it.  The gripper's setpoint is its aperture; its servo squeezes what it closes on.
* ``control_base`` is that setpoint kept within ``lead_time_s`` of the measured joints, as the
  servo controller does on the real arm: a gripper closing on a cup keeps squeezing it.
* ``joint_states`` are the measured joints; the aperture is the fingers' distance apart.
* Grasps hold or slip by contact and friction.  An object is *held* while it touches both
  fingers.  Injected faults: ``grasp_fail`` when the fingers first pinch an object — they miss
  it (it leaves the arm's collisions until the arm is clear of it, so the fingers close past
  it and it stays where it stands, as in the 2D world); ``slip`` the first time a held object
  is lifted past ``lift_height`` — the grip turns slippery (the fingers' friction drops to
  ``slip_friction`` until the object is free of them) and it slides out and drops.
  ``move_object`` puts an object on another free spot; ``camera_freeze`` is the component's.
* :meth:`truth` reads the physics state: where every body is, what touches the fingers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import mujoco
import numpy as np

from solarian_agent.arm.description import mesh_dir
from solarian_agent.arm.kinematics import (
    GRIPPER_JOINT,
    HOME_TOLERANCE,
    JOINT_NAMES,
    TIP_FRAME,
    ArmModel,
)
from solarian_agent.core.errors import ConfigError

from ..camera import CAMERA_SPECS
from ..faults import FaultInjector, PendingMove
from ..tabletop import (
    GOALS,
    OBJECT_NAMES,
    Receptacle,
    WorldConfig,
    WorldError,
    WorldEvent,
    WorldObject,
)
from ..truth import truth_record
from ..world import World, merge_command
from .prints import TablePrint
from .scene import SCENE_CONAFFINITY, SCENE_CONTYPE, Layout, SceneConfig, build_scene, fovy_deg
from .urdf_mjcf import ARM_CONTYPE, ArmMjcf, arm_mjcf, read_urdf

# an object the fingers miss (grasp_fail) collides with the scene (bits 1) but not the arm (2)
GHOST_CONTYPE, GHOST_CONAFFINITY = 4, 5


@dataclass(frozen=True)
class MujocoWorldConfig:
    scene: SceneConfig = SceneConfig()
    lead_time_s: float = 0.2  # the setpoint leads the measured joints by at most vmax x this
    slip_friction: float = 0.002  # the fingers' friction while a fault makes the grip slip
    settle_s: float = 0.3  # physics run at reset so the objects come to rest
    settled_tol: float = 0.004  # rad: settled() when within this
    # rad: while the jaw squeezes a held object, the arm joints may rest this far off target
    # (the squeeze loads the arm: the closing jaw's arc drags the object down against the
    # table, and a servo holds a load with a position error)
    squeeze_tol: float = 0.03
    release_ticks: int = 5  # steps on one finger before a held object counts as let go

    def __post_init__(self) -> None:
        for name in ("lead_time_s", "slip_friction", "settled_tol", "squeeze_tol"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"sim.mujoco.{name}", f"must be > 0, got {v!r}")
        if self.release_ticks < 1:
            raise ConfigError("sim.mujoco.release_ticks", "must be >= 1")
        if not (math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise ConfigError("sim.mujoco.settle_s", f"must be >= 0, got {self.settle_s!r}")


# the 2D world's sizes and placement, but in 3D the gripper has a body: a cup that fits under
# its palm when the fingers close at grasp height (the URDF's fingers are 5 cm long) and
# leaves them room to open around it (4 cm in the 5.5 cm opening), a bin low enough for a held
# cup to clear its rim where a joint-space carry dips, a paper ball widest above the fingers'
# lower edge at grasp height (1.5 cm), and room for a finger between things
DEFAULT_CONFIG = WorldConfig(cup_radius=0.02, cup_height=0.06, paper_height=0.04, bin_height=0.06,
                             margin=0.035)


class MujocoWorld:
    """The tabletop world simulated by MuJoCo; see the module docstring."""

    backend = "mujoco"

    def __init__(
        self,
        arm: ArmModel,
        config: WorldConfig = DEFAULT_CONFIG,
        faults: FaultInjector | None = None,
        seed: int = 0,
        physics: MujocoWorldConfig = MujocoWorldConfig(),
        prints: Sequence[TablePrint] = (),
    ) -> None:
        if arm.urdf_path is None:
            raise WorldError("the MuJoCo world needs an arm model read from a URDF file")
        self.arm = arm
        self.config = config
        self.physics = physics
        self.faults = faults if faults is not None else FaultInjector()
        self.joint_names: tuple[str, ...] = JOINT_NAMES
        self._vmax = arm.velocity * config.speed_scale
        self._robot = read_urdf(arm.urdf_path)
        cams = {s.frame: (s.name, fovy_deg(s)) for s in CAMERA_SPECS.values()}
        self._arm_template: ArmMjcf = arm_mjcf(self._robot, physics.scene.arm, cams,
                                                mesh_dir=mesh_dir())
        if tuple(dict.fromkeys(self._arm_template.actuated)) != JOINT_NAMES:
            raise WorldError(f"the URDF's actuated joints {self._arm_template.actuated} are "
                             f"not {JOINT_NAMES}")
        # the 2D world draws the layout for a seed: both backends set the same table
        self._layout = World(arm, config, FaultInjector(), seed)
        self.layout_version = 0
        self.seed = int(seed)
        self._prints = tuple(prints)
        self.reset(seed)

    # setup ----------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """New episode: the layout drawn from ``seed`` (default: the next seed) built as a new
        model, the arm at home, the objects settled, faults re-drawn from the same seed."""
        self.seed = self.seed + 1 if seed is None else int(seed)
        self.faults.reset(self.seed)
        self._layout.reset(self.seed)
        layout = Layout(self.seed, dict(self._layout.receptacles),
                        {n: replace(o, shape=o.shape.copy())
                         for n, o in self._layout.objects.items()})
        xml, assets = build_scene(copy.deepcopy(self._arm_template), layout, self.config,
                                  self.physics.scene, self._prints)
        self.model = mujoco.MjModel.from_xml_string(xml, assets)
        self.data = mujoco.MjData(self.model)
        self._index()
        self.receptacles: dict[str, Receptacle] = layout.receptacles
        self.objects: dict[str, WorldObject] = layout.objects
        home = np.array(self.config.home, dtype=float)
        self._set_joints(home)
        self.target = home.copy()
        self.setpoint = home.copy()
        self._vcap = self._vmax.copy()
        self._write_ctrl()
        mujoco.mj_forward(self.model, self.data)
        for _ in range(int(round(self.physics.settle_s / self.model.opt.timestep))):
            mujoco.mj_step(self.model, self.data)
        self.t = 0.0
        self._acc = 0.0
        self.steps = 0
        self.path_length = 0.0
        self.events: list[WorldEvent] = []
        self.held: WorldObject | None = None
        self._slip_checked = False
        self._loose_ticks = 0
        self._slippery: str | None = None
        self._ghost: str | None = None
        self._set_grip(slippery=False)
        self.q = np.zeros(len(JOINT_NAMES))
        self.qd = np.zeros(len(JOINT_NAMES))
        self._read_state()
        self._update_locations()
        self.layout_version += 1

    def clear_table(self) -> None:
        """Everything off the table (onto the floor, out of the cameras' view), as a person
        clears it for calibration: the cup, the paper, the tray and the bin."""
        m, d = self.model, self.data
        for i, n in enumerate(OBJECT_NAMES):
            a = self._obj_q[n]
            d.qpos[a:a + 7] = (1.5 + 0.2 * i, 1.5, self.physics.scene.floor_z + 0.05,
                               1.0, 0.0, 0.0, 0.0)
            d.qvel[self._obj_v[n]:self._obj_v[n] + 6] = 0.0
        for i, n in enumerate(("tray", "bin")):
            m.body_pos[int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n))] = (
                -1.5 - 0.4 * i, 1.5, self.physics.scene.floor_z)
        mujoco.mj_forward(m, d)
        self._update_locations()

    def set_print_pose(self, name: str, pose: np.ndarray) -> None:
        """Move print ``name`` (its frame to ``pose``, 4x4 in the world): a board laid
        elsewhere or held up to a camera.  Kept across resets."""
        for i, p in enumerate(self._prints):
            if p.name == name:
                self._prints = (*self._prints[:i], replace(p, pose=np.array(pose, float)),
                                *self._prints[i + 1:])
                break
        else:
            raise WorldError(f"no print named {name!r} in the scene")
        bid = int(mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, f"print_{name}"))
        mid = int(self.model.body_mocapid[bid])
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, np.asarray(pose, float)[:3, :3].ravel())
        self.data.mocap_pos[mid] = np.asarray(pose, float)[:3, 3]
        self.data.mocap_quat[mid] = quat
        mujoco.mj_kinematics(self.model, self.data)

    def _index(self) -> None:
        m = self.model

        def jid(name: str) -> int:
            return int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name))

        arm_joints = JOINT_NAMES[:5]
        self._qadr = np.array([m.jnt_qposadr[jid(n)] for n in arm_joints])
        self._vadr = np.array([m.jnt_dofadr[jid(n)] for n in arm_joints])
        ap = self._arm_template.aperture
        self._fq = np.array([m.jnt_qposadr[jid(n)] for n, _ in ap])
        self._fv = np.array([m.jnt_dofadr[jid(n)] for n, _ in ap])
        self._fmul = np.array([mult for _, mult in ap])
        # actuator i follows setpoint[_act_joint[i]] (the gripper's once per finger)
        self._act_joint = np.array([JOINT_NAMES.index(n) for n in self._arm_template.actuated])
        finger_bodies = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b)
                         for b in self._arm_template.fingers]
        self._finger_side = {b: i for i, b in enumerate(finger_bodies)}
        self._finger_geoms = np.array([g for g in range(m.ngeom)
                                       if m.geom_bodyid[g] in self._finger_side
                                       and m.geom_contype[g] != 0])
        self._obj_body = {n: int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n))
                          for n in OBJECT_NAMES}
        self._body_obj = {b: n for n, b in self._obj_body.items()}
        self._obj_geoms = {n: np.array([g for g in range(m.ngeom)
                                        if m.geom_bodyid[g] == b and m.geom_contype[g] != 0])
                           for n, b in self._obj_body.items()}
        self._arm_geoms = np.array([g for g in range(m.ngeom)
                                    if m.geom_contype[g] == ARM_CONTYPE])
        self._obj_q = {n: int(m.jnt_qposadr[jid(n)]) for n in OBJECT_NAMES}
        self._obj_v = {n: int(m.jnt_dofadr[jid(n)]) for n in OBJECT_NAMES}
        self._tip = int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, TIP_FRAME))

    def _set_joints(self, q: np.ndarray) -> None:
        d = self.data
        d.qpos[self._qadr] = q[:5]
        d.qpos[self._fq] = q[5] * self._fmul
        d.qvel[:] = 0.0

    def _write_ctrl(self) -> None:
        self.data.ctrl[:] = self.setpoint[self._act_joint]

    def _set_grip(self, slippery: bool) -> None:
        mu = (self.physics.slip_friction if slippery
              else self.physics.scene.arm.finger_friction)
        self.model.geom_friction[self._finger_geoms, 0] = mu

    # commands -------------------------------------------------------------------------------
    def command(
        self,
        positions: Mapping[str, float] | Sequence[float] | np.ndarray,
        max_velocity: float = 0.0,
    ) -> None:
        """Joint targets (as :meth:`World.command`); the setpoint moves toward them."""
        self.target, self._vcap = merge_command(self, positions, max_velocity)

    def set_gripper(self, aperture: float) -> None:
        self.command({GRIPPER_JOINT: aperture})

    def control_base(self) -> dict[str, float]:
        """The servo setpoint, kept within ``lead_time_s`` x velocity of the measured joints
        (where the safety layer's next step starts, as on the real arm)."""
        lead = self._vmax * self.physics.lead_time_s
        base = np.clip(self.setpoint, self.q - lead, self.q + lead)
        return {n: float(v) for n, v in zip(self.joint_names, base, strict=True)}

    # physics ----------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        if not dt > 0:
            raise ValueError(f"MujocoWorld.step needs dt > 0, got {dt}")
        m, d = self.model, self.data
        h = float(m.opt.timestep)
        self._acc += dt
        n = int(self._acc / h + 1e-6)
        self._acc -= n * h
        lim = self._vcap * h
        for _ in range(n):
            self.setpoint += np.clip(self.target - self.setpoint, -lim, lim)
            self._write_ctrl()
            mujoco.mj_step(m, d)
        self.t += dt
        self.steps += 1
        prev_tip = self.tip_xyz
        self._read_state()
        self.path_length += float(np.linalg.norm(self.tip_xyz - prev_tip))
        self._grasp_state()
        for move in self.faults.due_moves(self.t):
            self._apply_move(move)
        self._update_locations()

    def _update_locations(self) -> None:
        for name, obj in self.objects.items():
            obj.location = self.location(name)

    def _read_state(self) -> None:
        d = self.data
        self.q[:5] = d.qpos[self._qadr]
        self.q[5] = float(np.mean(d.qpos[self._fq] / self._fmul))
        self.qd[:5] = d.qvel[self._vadr]
        self.qd[5] = float(np.mean(d.qvel[self._fv] / self._fmul))
        self.tip_xyz = d.site_xpos[self._tip].copy()
        pose = np.eye(4)
        pose[:3, :3] = d.site_xmat[self._tip].reshape(3, 3)
        pose[:3, 3] = self.tip_xyz
        self.tip_pose = pose
        for name, obj in self.objects.items():
            b = self._obj_body[name]
            x, y, z = (float(v) for v in d.xpos[b])
            w, qx, qy, qz = (float(v) for v in d.xquat[b])
            obj.x, obj.y = x, y
            obj.z = z - obj.height / 2
            obj.yaw = math.atan2(2 * (w * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))

    def finger_contacts(self) -> dict[str, set[int]]:
        """Which fingers (0, 1) each object touches now."""
        m, d = self.model, self.data
        out: dict[str, set[int]] = {n: set() for n in OBJECT_NAMES}
        for i in range(d.ncon):
            c = d.contact[i]
            b1, b2 = int(m.geom_bodyid[c.geom1]), int(m.geom_bodyid[c.geom2])
            for a, b in ((b1, b2), (b2, b1)):
                if a in self._body_obj and b in self._finger_side:
                    out[self._body_obj[a]].add(self._finger_side[b])
        return out

    def _grasp_state(self) -> None:
        touching = self.finger_contacts()
        pinched = [n for n in OBJECT_NAMES if len(touching[n]) >= 2]
        now = self.objects[pinched[0]] if pinched else None
        held = self.held
        if held is not None and now is None and touching[held.name]:
            # one finger still touches it: a held object that rattles for a tick is still
            # held; it is let go after ``release_ticks`` ticks on one finger
            self._loose_ticks += 1
            if self._loose_ticks < self.physics.release_ticks:
                now = held
        else:
            self._loose_ticks = 0
        if held is None and now is not None:
            self._slip_checked = False
            if self.faults.grasp_fails(now.name, self.t):
                # the fingers miss it: they close past it and it stays where it stands
                self._set_ghost(now.name, True)
                self._event("grasp_failed", now.name)
                now = None
            else:
                self._event("grasped", now.name)
            self.held = now
        elif held is not None and (now is None or now is not held):
            self.held = now
            opening = self.target[5] > self.q[5] + 1e-3
            kind = "released" if opening else "slipped"
            self._event(kind, held.name, location=self.location(held.name),
                        x=round(held.x, 4), y=round(held.y, 4))
        if self._slippery is not None and not touching[self._slippery]:
            self._slippery = None
            self._set_grip(slippery=False)
        if self._ghost is not None and self._clear_of_arm(self._ghost):
            self._set_ghost(self._ghost, False)
        if self.held is not None and not self._slip_checked \
                and self.tip_xyz[2] > self.config.lift_height:
            self._slip_checked = True
            if self._slippery is None and self.faults.slips(self.held.name, self.t):
                self._make_slippery(self.held.name)

    def _set_ghost(self, name: str, on: bool) -> None:
        """Take object ``name`` out of the arm's collisions (``on``) or put it back: its
        contype / conaffinity bits leave the arm's bit out, the table's and the other
        objects' in."""
        geoms = self._obj_geoms[name]
        self.model.geom_contype[geoms] = GHOST_CONTYPE if on else SCENE_CONTYPE
        self.model.geom_conaffinity[geoms] = GHOST_CONAFFINITY if on else SCENE_CONAFFINITY
        self._ghost = name if on else None

    def _clear_of_arm(self, name: str, margin: float = 0.003) -> bool:
        """No arm geom within ``margin`` of the object (it can collide with the arm again)."""
        m, d = self.model, self.data
        for g in self._obj_geoms[name]:
            for a in self._arm_geoms:
                if mujoco.mj_geomDistance(m, d, int(g), int(a), margin, None) < margin:
                    return False
        return True

    def _make_slippery(self, name: str) -> None:
        self._slippery = name
        self._set_grip(slippery=True)

    def _apply_move(self, move: PendingMove) -> None:
        held = self.held.name if self.held is not None else None
        candidates = [o for o in self.objects.values()
                      if o.name != held and (move.obj is None or o.name == move.obj)]
        if not candidates:
            self.faults.postpone(move)
            return
        rng = self.faults.rng
        obj = candidates[int(rng.integers(len(candidates)))]
        xy = move.xy if move.xy is not None else self._layout.free_spot(
            rng, obj, self.objects.values())
        if xy is None:
            return
        d = self.data
        a, v = self._obj_q[obj.name], self._obj_v[obj.name]
        yaw = obj.yaw
        d.qpos[a:a + 7] = (xy[0], xy[1], obj.height / 2 + 1e-4, math.cos(yaw / 2), 0.0, 0.0,
                           math.sin(yaw / 2))
        d.qvel[v:v + 6] = 0.0
        mujoco.mj_forward(self.model, d)
        self._read_state()
        self.faults.moved(self.t, obj.name, (obj.x, obj.y))
        self._event("moved", obj.name, x=round(obj.x, 4), y=round(obj.y, 4))

    def _event(self, kind: str, obj: str, **detail: Any) -> None:
        self.events.append(WorldEvent(round(self.t, 4), kind, {"object": obj, **detail}))

    # queries -----------------------------------------------------------------------------------
    def location(self, name: str) -> str:
        """table | tray | bin | held | floor, from the physics state."""
        obj = self.objects[name]
        if self.held is obj:
            return "held"
        top = obj.z + obj.height
        if obj.z < -0.02:
            return "floor"
        bin_ = self.receptacles["bin"]
        if bin_.contains(obj.x, obj.y) and obj.z < bin_.height:
            return "bin"
        tray = self.receptacles["tray"]
        if tray.contains(obj.x, obj.y) and top < tray.height + obj.height + 0.01:
            return "tray"
        (x0, x1), (y0, y1) = self.config.table_x, self.config.table_y
        return "table" if x0 <= obj.x <= x1 and y0 <= obj.y <= y1 else "floor"

    def upright(self, name: str) -> bool:
        zz = float(self.data.xmat[self._obj_body[name]][8])
        return zz > 0.9

    def joint_positions(self) -> dict[str, float]:
        return {n: float(v) for n, v in zip(self.joint_names, self.q, strict=True)}

    def at_home(self, tol: float = HOME_TOLERANCE) -> bool:
        return bool(np.all(np.abs(self.q[:5] - np.asarray(self.config.home[:5])) <= tol))

    def settled(self, tol: float | None = None) -> bool:
        """The setpoint reached the target and the joints are within ``tol`` of it and at
        rest (the gripper may be stopped by a held object, and the arm then held within
        ``squeeze_tol`` of its target by the servos against the squeeze's load)."""
        tol = self.physics.settled_tol if tol is None else tol
        err = np.abs(self.target - self.q)
        still = np.abs(self.qd) < 0.05
        if self.held is not None and self.target[5] < self.q[5]:
            err[5], still[5] = 0.0, True
            err[:5] = np.where(err[:5] <= self.physics.squeeze_tol, 0.0, err[:5])
        return bool(np.all(self.setpoint == self.target) and np.all(err <= tol)
                    and np.all(still))

    def task_complete(self) -> bool:
        return all(self.location(o) == r for o, r in GOALS.items())

    def success(self) -> bool:
        return self.task_complete() and self.held is None and self.at_home()

    def truth(self) -> dict[str, Any]:
        """Ground truth from the physics state (tests, the ideal controller, benchmarks)."""
        objects = {}
        for n, o in self.objects.items():
            loc = self.location(n)
            objects[n] = {**o.as_dict(), "location": loc, "held": loc == "held",
                          "in_tray": loc == "tray", "in_bin": loc == "bin",
                          "on_table": loc in ("table", "tray", "bin"),
                          "upright": self.upright(n)}
        return {"backend": self.backend, **truth_record(self, objects),
                "physics_time_s": float(self.data.time)}
