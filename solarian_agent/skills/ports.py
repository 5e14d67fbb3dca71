"""The ports skills are written against: the arm (joint commands out, joint states in, the
kinematic model from the URDF) and the cameras (newest frames, pixel <-> table geometry).

The same ports serve the simulator and the real arm: both publish ``joint_states`` and take
``joint_commands`` on the bus, and both use ``urdf/so101.urdf`` for kinematics.  Commands go
out as targets; the driver (sim or hardware) clamps them to joint, speed and step limits, so
nothing a skill computes can move a servo outside them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..arm.jaw import SO101_JAW
from ..arm.kinematics import ARM_JOINTS, GRIPPER_JOINT, JOINT_NAMES, ArmModel
from ..arm.stopping import KEEP_ALIVE_S
from ..core import names
from ..core.clock import Clock
from ..core.errors import SkillFailed
from ..core.messages import Image, JointCommand, JointState
from ..core.transport import Bus, QoS

# a motion's command is sent again this often while the motion runs: every driver (both
# simulators, the real arm's controller) stops the arm once its commands are older than its
# command timeout (0.08 s, arm/stopping.py: a commander that died must not leave the arm
# driving), so a waypoint sent once would stop half way
COMMAND_REFRESH_S = KEEP_ALIVE_S


class ArmPort:
    def __init__(self, bus: Bus, clock: Clock, model: ArmModel, node: str = "skills") -> None:
        self.bus = bus
        self.clock = clock
        self.model = model
        self._pub = bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, QoS(depth=10),
                                  node=node)
        self._js = bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE, qos=QoS(depth=1),
                                 node=node)
        self.last_command: dict[str, float] = {}
        self._sent: JointCommand | None = None  # the newest command, sent again by keep_alive

    def state(self) -> JointState:
        js = self._js.latest()
        if js is None:
            raise SkillFailed("no joint_states received yet: is the arm driver running?")
        return js  # type: ignore[no-any-return]

    def q(self) -> np.ndarray:
        d = self.state().as_dict()
        try:
            return np.array([d[n] for n in JOINT_NAMES], dtype=float)
        except KeyError as e:
            raise SkillFailed(f"joint_states lacks joint {e.args[0]!r}") from None

    def fields(self, q: np.ndarray | None = None) -> dict[str, float]:
        """Flat readings: joints (rad; ``gripper`` is the jaw angle), tool point x/y/z (mm),
        pitch (rad), opening_mm (the gap between the jaws, :data:`SO101_JAW`)."""
        qq = self.q() if q is None else q
        xyz, pitch, _ = self.model.fk(qq[:5])
        out = {n: float(v) for n, v in zip(JOINT_NAMES, qq, strict=True)}
        out.update(x=float(xyz[0] * 1000), y=float(xyz[1] * 1000), z=float(xyz[2] * 1000),
                   pitch=float(pitch), opening_mm=float(SO101_JAW.opening(qq[5]) * 1000))
        return out

    def readings(self, js: JointState | None = None) -> dict[str, dict[str, float]]:
        if js is None:
            js = self._js.latest()
        if js is None:
            return {}
        d = js.as_dict()
        if any(n not in d for n in JOINT_NAMES):
            return {"joints": {k: round(v, 4) for k, v in d.items()}}
        f = self.fields(np.array([d[n] for n in JOINT_NAMES]))
        return {"arm": {k: round(f[k], 1) for k in ("x", "y", "z")} | {
                    "pitch": round(f["pitch"], 3)},
                "gripper": {"opening_mm": round(f["opening_mm"], 1),
                            "jaw": round(f[GRIPPER_JOINT], 3)},
                "joints": {n: round(f[n], 3) for n in ARM_JOINTS}}

    def command(self, target: Mapping[str, float] | Sequence[float],
                max_velocity: float = 0.0) -> dict[str, float]:
        if isinstance(target, Mapping):
            t = {str(k): float(v) for k, v in target.items()}
        else:
            t = {n: float(v) for n, v in zip(JOINT_NAMES, target, strict=False)}
        for k, v in t.items():
            if not math.isfinite(v):
                raise SkillFailed(f"refusing a non-finite target for {k}")
        self.last_command.update(t)
        self._sent = JointCommand(self.clock.now(), tuple(t), tuple(t.values()), max_velocity)
        self._pub.publish(self._sent)
        return t

    def keep_alive(self) -> None:
        """Send the newest command again once it is :data:`COMMAND_REFRESH_S` old: a running
        motion calls this every tick, so its target outlives the arm's command watchdog; a
        motion that stops calling it (ended, stopped, its node gone) lets the arm hold."""
        sent = self._sent
        now = self.clock.now()
        if sent is None or now - sent.stamp < COMMAND_REFRESH_S:
            return
        self._sent = JointCommand(now, sent.name, sent.position, sent.max_velocity)
        self._pub.publish(self._sent)

    def holding(self, min_angle: float) -> bool:
        """The controller's own view: the jaw was told to close past ``min_angle`` (rad) and
        stopped at or above it, so something is between the jaws."""
        cmd = self.last_command.get(GRIPPER_JOINT)
        return cmd is not None and cmd < min_angle and self.q()[5] >= min_angle

    def hold(self) -> None:
        try:
            q = self.q()
        except SkillFailed:
            return
        # hold the arm where it is; the gripper keeps its commanded target so a held object is
        # not dropped by a stop
        target = {n: float(v) for n, v in zip(JOINT_NAMES, q, strict=True)}
        if GRIPPER_JOINT in self.last_command:
            target[GRIPPER_JOINT] = self.last_command[GRIPPER_JOINT]
        self.command(target)

    def ik(self, xyz: Sequence[float], q0: np.ndarray | None = None) -> np.ndarray:
        """Joint targets putting the tip at ``xyz`` (m), steepest reachable pitch first."""
        from ..arm.kinematics import UnreachableError

        start = self.q() if q0 is None else q0
        try:
            q5, _ = self.model.ik_search(np.asarray(xyz, float), q0=start[:5])
        except UnreachableError as e:
            raise SkillFailed(f"target {np.round(np.asarray(xyz) * 1000).tolist()} mm is out of "
                              f"reach ({e})") from None
        return np.asarray(q5[:5], float)

    def grasp_ik(self, centre: Sequence[float], width: float,
                 q0: np.ndarray | None = None) -> np.ndarray:
        """Joint targets that put the jaws around an object of ``width`` (m) centred at
        ``centre`` (m): the wrist rolled so they straddle it, the fixed jaw's face at its near
        side (:func:`~solarian_agent.arm.grasp.grasp_joints`)."""
        from ..arm.grasp import grasp_joints
        from ..arm.kinematics import UnreachableError

        start = self.q() if q0 is None else q0
        try:
            q5, _ = grasp_joints(self.model, centre, width,
                                 (math.pi / 2, 1.35, 1.15, 0.95, 0.75, 0.55), start[:5])
        except UnreachableError as e:
            raise SkillFailed(f"grasp at {np.round(np.asarray(centre) * 1000).tolist()} mm is "
                              f"out of reach ({e})") from None
        return np.asarray(q5[:5], float)


    def grasp_descent(self, centre: Sequence[float], width: float, top_z: float,
                      q0: np.ndarray | None = None) -> list[np.ndarray]:
        """Joint targets, high to low, that lower the jaws straight down onto an object of
        ``width`` (m) centred at ``centre`` (m, z the grasp's tool point height) from up to
        ``top_z`` (:func:`~solarian_agent.arm.grasp.descent`); the last is the grasp."""
        from ..arm.grasp import descent
        from ..arm.kinematics import UnreachableError

        start = self.q() if q0 is None else q0
        try:
            path = descent(self.model, centre, width, top_z,
                           (math.pi / 2, 1.35, 1.15, 0.95, 0.75, 0.55), start[:5])
        except UnreachableError as e:
            raise SkillFailed(f"grasp at {np.round(np.asarray(centre) * 1000).tolist()} mm is "
                              f"out of reach ({e})") from None
        return [np.asarray(q[:5], float) for q in path]


class CameraPort:
    """Newest frames by camera name, and the geometry of the fixed cameras."""

    def _at_frame_size(self, camera: str, model: Any) -> Any:
        """A calibrated model for the size the camera delivers now (the pixels are capture
        pixels): the same model, or K scaled for another mode of the same aspect ratio."""
        resize = getattr(model, "for_size", None)
        sub = self._subs.get(camera)
        frame = sub.latest() if resize is not None and sub is not None else None
        if frame is None or (frame.width, frame.height) == (model.width, model.height):
            return model
        try:
            return resize(frame.width, frame.height)
        except Exception as e:  # another aspect ratio: the calibration does not apply
            raise SkillFailed(str(e)) from None

    def __init__(self, bus: Bus, cameras: Mapping[str, Any], node: str = "skills") -> None:
        self.models = dict(cameras)  # name -> PinholeCamera (or anything with unproject)
        self._subs = {c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1),
                                       node=node) for c in self.models}

    def frame(self, camera: str) -> Image | None:
        sub = self._subs.get(camera)
        if sub is None:
            raise SkillFailed(f"no camera named {camera!r} (cameras: {', '.join(self._subs)})")
        return sub.latest()  # type: ignore[no-any-return]

    def unproject(self, camera: str, u: float, v: float, z: float = 0.0) -> np.ndarray:
        model = self.models.get(camera)
        if model is None:
            raise SkillFailed(f"camera {camera!r} has no calibration")
        model = self._at_frame_size(camera, model)
        try:
            return np.asarray(model.unproject(u, v, z), float)
        except ValueError as e:
            raise SkillFailed(f"pixel ({u:.0f}, {v:.0f}) does not map onto the table: {e}"
                              ) from None
