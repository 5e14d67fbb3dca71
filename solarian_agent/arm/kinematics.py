"""The SO-101 arm's kinematics, read from ``urdf/so101.urdf`` through Pinocchio.

Conventions (see the URDF header): world x forward, y left, z up, metres, the table top at
z = 0 under the arm's base.  ``q`` is the six joint positions in :data:`JOINT_NAMES` order, in
radians: the five arm joints and the moving jaw, each LeRobot's calibrated degrees times
pi/180; every method also accepts just the five arm joints.  The tool point is the published
gripper frame (:data:`TIP_FRAME`), whose z axis is the approach direction.

The tool pose is reduced to what a 5-DOF arm controls:

* ``pitch`` -- the angle of the approach axis below the horizontal, measured in the arm's
  vertical plane: 0 = pointing forward, +pi/2 = pointing straight down.  It is the sum of
  shoulder_lift, elbow_flex and wrist_flex (their axes are parallel and at all zeros the
  approach is level).
* ``yaw`` -- the heading, about the vertical, of the jaws' closing direction, taken from the
  jaw axis (the tool frame's y: ``atan2(-R[0,1], R[1,1])``).  When the jaws point straight
  down it is what wrist_roll turns (see :meth:`ArmModel.roll_for_yaw`).

:meth:`ArmModel.ik` solves position + pitch by damped least squares within the joint limits
(wrist_roll is kept from ``q0``) and raises :class:`UnreachableError` with the residual when it
cannot get within 5 mm / 0.05 rad.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin

from solarian_agent.core.errors import CoreError

ARM_JOINTS: tuple[str, ...] = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow_flex",
    "wrist_flex",
    "wrist_roll",
)
GRIPPER_JOINT = "gripper"
JOINT_NAMES: tuple[str, ...] = (*ARM_JOINTS, GRIPPER_JOINT)
# the folded rest pose: upper arm back at its limit, forearm folded over it, the wrist curled up
# so the jaws point up and back: every link stays within 9 cm of the base in x and 12 cm above
# the table, out of the overhead camera's view of where objects stand (>= 14 cm from the base);
# the tool point ~(0.08, 0, 0.30) m; jaws at 0 rad (15.8 mm apart)
# (the simulator starts here and verify_state reports whether the arm is back: one pose, kept
# with the arm so the skills never import the simulator)
HOME: tuple[float, ...] = (0.0, -1.74, 1.69, -1.6, 0.0, 0.0)
HOME_TOLERANCE = 0.05  # rad, per arm joint
TIP_FRAME = "gripper_frame_link"
# the jaw tips reach this far past the tool point along the approach axis (the tool point is
# 98.1 mm down gripper_link, the tips 104.1 mm): the lowest point of a gripper pointing down
JAW_TIPS_PAST_TOOL_POINT = 0.006
_PKG = "solarian_agent"
_URDF_NAME = "so101.urdf"

if TYPE_CHECKING:
    from .safety import Workspace, WorkspaceGuard


class KinematicsError(CoreError):
    """Base of the arm model's errors."""


class UrdfNotFoundError(KinematicsError, FileNotFoundError):
    """``urdf/so101.urdf`` is neither in the source tree nor installed."""


class UnreachableError(KinematicsError):
    """IK could not reach the target within tolerance.

    ``position_error`` (m) and ``pitch_error`` (rad) are the best residuals found; ``q`` is the
    joint vector that achieved them (clamped to the limits).
    """

    def __init__(
        self,
        target: Sequence[float],
        pitch: float,
        position_error: float,
        pitch_error: float,
        q: np.ndarray,
    ) -> None:
        self.target = tuple(float(v) for v in target)
        self.pitch = float(pitch)
        self.position_error = float(position_error)
        self.pitch_error = float(pitch_error)
        self.q = q
        super().__init__(
            "target ({:.3f}, {:.3f}, {:.3f}) m at pitch {:.2f} rad is unreachable: best residual "
            "{:.1f} mm, {:.3f} rad".format(
                *self.target, self.pitch, 1000.0 * self.position_error, self.pitch_error
            )
        )


def default_urdf_path() -> Path:
    """Where ``so101.urdf`` is: the source tree (also an editable install), else the installed
    ``share/solarian_agent/urdf`` under ``sys.prefix`` or an ament/colcon prefix.

    Never looks at the working directory.
    """
    from solarian_agent.paths import share_candidates

    candidates = share_candidates("urdf", _URDF_NAME)
    for path in candidates:
        if path.is_file():
            return path
    raise UrdfNotFoundError(
        f"{_URDF_NAME} not found; looked in: " + ", ".join(str(p) for p in candidates)
    )


@dataclass(frozen=True)
class JointLimit:
    name: str
    lower: float
    upper: float
    velocity: float  # rad/s (m/s for the gripper)

    def clamp(self, value: float) -> float:
        return min(self.upper, max(self.lower, value))


@dataclass(frozen=True)
class IKConfig:
    position_tol: float = 0.005  # m: worse than this raises UnreachableError
    pitch_tol: float = 0.05  # rad
    converge_position: float = 2e-4  # m: stop iterating below both of these
    converge_pitch: float = 2e-3  # rad
    damping: float = 0.01
    pitch_weight: float = 0.1  # metres per radian in the stacked error
    max_step: float = 0.35  # rad per iteration
    max_iters: int = 80
    stall_iters: int = 6  # give up a seed after this many iterations without 1 % progress


def _joint_axis(model: pin.Model, jid: int) -> np.ndarray:
    """A revolute joint's axis in its own frame (Pinocchio keeps x/y/z axes as joint types)."""
    short = model.joints[jid].shortname()
    for suffix, axis in (("RX", (1.0, 0.0, 0.0)), ("RY", (0.0, 1.0, 0.0)),
                         ("RZ", (0.0, 0.0, 1.0))):
        if short.endswith(suffix):
            return np.array(axis)
    raise KinematicsError(f"joint {model.names[jid]!r} is not revolute about x, y or z ({short})")


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


class ArmModel:
    """Pinocchio model of the arm with the queries the simulator, skills and renderer need.

    Thread-safe: one lock guards the Pinocchio data.
    """

    def __init__(self, model: pin.Model, urdf_path: Path | None = None,
                 ik_config: IKConfig = IKConfig()) -> None:
        self.model = model
        self.urdf_path = urdf_path
        self.ik_config = ik_config
        self._data = model.createData()
        self._lock = threading.Lock()
        missing = [n for n in JOINT_NAMES if not model.existJointName(n)]
        if missing or not model.existFrame(TIP_FRAME):
            raise KinematicsError(
                f"URDF {urdf_path} lacks joints {missing} or frame {TIP_FRAME!r}"
            )
        self.joint_names: tuple[str, ...] = JOINT_NAMES
        self.arm_joints: tuple[str, ...] = ARM_JOINTS
        idx = []
        limits: dict[str, JointLimit] = {}
        for name in JOINT_NAMES:
            jid = model.getJointId(name)
            iq = model.joints[jid].idx_q
            idx.append(iq)
            limits[name] = JointLimit(
                name,
                float(model.lowerPositionLimit[iq]),
                float(model.upperPositionLimit[iq]),
                float(model.velocityLimit[model.joints[jid].idx_v]),
            )
        self._idx_q = np.array(idx, dtype=int)
        self._idx_v = np.array(
            [model.joints[model.getJointId(n)].idx_v for n in ARM_JOINTS], dtype=int
        )
        self.limits = limits
        self.lower = np.array([limits[n].lower for n in JOINT_NAMES])
        self.upper = np.array([limits[n].upper for n in JOINT_NAMES])
        self.velocity = np.array([limits[n].velocity for n in JOINT_NAMES])
        self._tip_id = model.getFrameId(TIP_FRAME)
        self._lift_jid = model.getJointId("shoulder_lift")
        self._lift_axis_local = _joint_axis(model, self._lift_jid)
        self._q_full = pin.neutral(model)
        # where shoulder_pan's axis crosses the table plane's x (the arm turns about it)
        with self._lock:
            pin.forwardKinematics(model, self._data, self._q_full)
            pan = self._data.oMi[model.getJointId("shoulder_pan")]
            self.pan_axis_x = float(pan.translation[0])

    # construction ------------------------------------------------------------------------
    @classmethod
    def from_urdf(cls, path: str | os.PathLike[str] | None = None,
                  ik_config: IKConfig = IKConfig()) -> ArmModel:
        p = Path(path) if path is not None else default_urdf_path()
        if not p.is_file():
            raise UrdfNotFoundError(f"URDF file {p} does not exist")
        return cls(pin.buildModelFromUrdf(str(p)), p, ik_config)

    @classmethod
    def default(cls) -> ArmModel:
        return cls.from_urdf(None)

    # helpers -----------------------------------------------------------------------------
    def has_frame(self, frame: str) -> bool:
        return bool(self.model.existFrame(frame))

    def clamp(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        """``q`` (5 or 6 values) clamped into the joint limits."""
        a = np.asarray(q, dtype=float)
        n = a.shape[0]
        out: np.ndarray = np.clip(a, self.lower[:n], self.upper[:n])
        return out

    def within_limits(self, q: Sequence[float] | np.ndarray, tol: float = 1e-9) -> bool:
        a = np.asarray(q, dtype=float)
        n = a.shape[0]
        return bool(np.all(a >= self.lower[:n] - tol) and np.all(a <= self.upper[:n] + tol))

    def _full(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        a = np.asarray(q, dtype=float).ravel()
        if a.shape[0] not in (5, 6):
            raise ValueError(f"q must have 5 or 6 values ({JOINT_NAMES}), got {a.shape[0]}")
        full: np.ndarray = self._q_full.copy()
        full[self._idx_q[: a.shape[0]]] = a
        return full

    def _fk_locked(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        full = self._full(q)
        pin.forwardKinematics(self.model, self._data, full)
        return full

    def _frame_id(self, frame: str) -> int:
        if not self.model.existFrame(frame):
            raise KinematicsError(f"unknown frame {frame!r} in {self.urdf_path}")
        return int(self.model.getFrameId(frame))

    def _pitch_yaw(self, rot: np.ndarray) -> tuple[float, float]:
        axis = self._data.oMi[self._lift_jid].rotation @ self._lift_axis_local
        fwd = np.array([axis[1], -axis[0], 0.0])  # axis x z
        approach = rot[:, 2]
        pitch = math.atan2(-float(approach[2]), float(approach @ fwd))
        yaw = math.atan2(-float(rot[0, 1]), float(rot[1, 1]))
        return pitch, yaw

    # queries ------------------------------------------------------------------------------
    def fk(self, q: Sequence[float] | np.ndarray) -> tuple[np.ndarray, float, float]:
        """``(xyz, pitch, yaw)`` of the tool point in the world."""
        with self._lock:
            self._fk_locked(q)
            m = pin.updateFramePlacement(self.model, self._data, self._tip_id)
            pitch, yaw = self._pitch_yaw(m.rotation)
            return m.translation.copy(), pitch, yaw

    def guard_point(self, q: Sequence[float] | np.ndarray) -> np.ndarray:
        """The point the workspace guard keeps in its box: the tool point, with the height of
        the jaw tips where they are lower (they reach :data:`JAW_TIPS_PAST_TOOL_POINT` past it
        along the approach axis), so the box's floor keeps the jaws, not only the point
        between them, off the table."""
        with self._lock:
            self._fk_locked(q)
            m = pin.updateFramePlacement(self.model, self._data, self._tip_id)
            xyz = m.translation.copy()
            tips_z = float(xyz[2] + JAW_TIPS_PAST_TOOL_POINT * m.rotation[2, 2])
            xyz[2] = min(float(xyz[2]), tips_z)
            return xyz

    def frame_pose(self, q: Sequence[float] | np.ndarray, frame: str) -> np.ndarray:
        """4x4 world pose of any URDF link / frame."""
        fid = self._frame_id(frame)
        with self._lock:
            self._fk_locked(q)
            return np.array(pin.updateFramePlacement(self.model, self._data, fid).homogeneous)

    def frame_poses(self, q: Sequence[float] | np.ndarray,
                    frames: Iterable[str]) -> dict[str, np.ndarray]:
        """Several 4x4 world poses from one forward-kinematics pass."""
        ids = [(f, self._frame_id(f)) for f in frames]
        with self._lock:
            self._fk_locked(q)
            return {
                f: np.array(pin.updateFramePlacement(self.model, self._data, fid).homogeneous)
                for f, fid in ids
            }

    def jacobian(self, q: Sequence[float] | np.ndarray, frame: str = TIP_FRAME) -> np.ndarray:
        """6x5 Jacobian of ``frame`` w.r.t. the arm joints, world-aligned at the frame origin:
        rows 0-2 linear velocity, rows 3-5 angular velocity."""
        fid = self._frame_id(frame)
        with self._lock:
            full = self._fk_locked(q)
            j = pin.computeFrameJacobian(
                self.model, self._data, full, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
            )
            return np.array(j[:, self._idx_v])

    def _task(self, q5: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        """Tip position, pitch and the 4x5 task Jacobian (xyz + pitch) at ``q5``."""
        full = self._fk_locked(q5)
        j = pin.computeFrameJacobian(
            self.model, self._data, full, self._tip_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        )
        m = self._data.oMf[self._tip_id]
        pitch, _ = self._pitch_yaw(m.rotation)
        axis = self._data.oMi[self._lift_jid].rotation @ self._lift_axis_local
        jt = np.empty((4, 5))
        jt[:3] = j[:3, self._idx_v]
        jt[3] = axis @ j[3:, self._idx_v]
        return m.translation.copy(), pitch, jt

    def ik(
        self,
        target_xyz: Sequence[float] | np.ndarray,
        pitch: float,
        q0: Sequence[float] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Joint positions putting the tool point at ``target_xyz`` with ``pitch``.

        Damped least squares on position + pitch, clamped to the joint limits at every step;
        starts from ``q0`` (default: zeros) and then from a few elbow-up seeds.  Returns the
        same length as ``q0`` (5 when omitted; a 6th gripper value is passed through).
        Raises :class:`UnreachableError` when the best result is off by more than
        ``position_tol`` / ``pitch_tol``.
        """
        cfg = self.ik_config
        target = np.asarray(target_xyz, dtype=float).reshape(3)
        start = np.zeros(5) if q0 is None else np.asarray(q0, dtype=float).ravel()
        if start.shape[0] not in (5, 6):
            raise ValueError(f"q0 must have 5 or 6 values, got {start.shape[0]}")
        q_start = self.clamp(start[:5])
        lo, hi = self.lower[:5], self.upper[:5]
        # shoulder_pan turns clockwise seen from above: facing a heading h takes pan = -h
        facing = -math.atan2(target[1], target[0] - self.pan_axis_x)
        roll = q_start[4]
        seeds = [q_start]
        # elbow-up / elbow-down seeds facing the target, then leaning back over the base
        for back, lift, elbow in ((False, 0.4, 0.2), (False, 0.0, 1.0), (False, -0.6, 1.5),
                                  (False, 0.9, -0.6), (True, -0.8, -0.6), (True, -1.2, 0.4),
                                  (True, -0.3, -1.4)):
            pan = _wrap(facing + math.pi) if back else facing
            pan = float(np.clip(pan, lo[0], hi[0]))
            wrist = float(np.clip(_wrap(pitch - lift - elbow), lo[3], hi[3]))
            seeds.append(np.array([pan, lift, elbow, wrist, roll]))
        best: tuple[float, np.ndarray, float, float] | None = None
        with self._lock:
            for seed in seeds:
                q, perr, aerr = self._dls(seed, target, pitch, cfg)
                score = perr + cfg.pitch_weight * aerr
                if best is None or score < best[0]:
                    best = (score, q, perr, aerr)
                if perr <= cfg.position_tol and aerr <= cfg.pitch_tol:
                    break
        assert best is not None
        _, q, perr, aerr = best
        if perr > cfg.position_tol or aerr > cfg.pitch_tol:
            raise UnreachableError(target.tolist(), pitch, perr, aerr, q)
        if start.shape[0] == 6:
            return np.concatenate([q, start[5:]])
        return q

    def ik_search(
        self,
        target_xyz: Sequence[float] | np.ndarray,
        pitches: Sequence[float] = (math.pi / 2, 1.35, 1.15, 0.95, 0.75, 0.55),
        q0: Sequence[float] | np.ndarray | None = None,
    ) -> tuple[np.ndarray, float]:
        """:meth:`ik` for the first of ``pitches`` that is reachable (steepest first, so a
        top-down approach is preferred); returns ``(q, pitch)``.  Raises the
        :class:`UnreachableError` of the pitch that came closest when none is."""
        best: UnreachableError | None = None
        for pitch in pitches:
            try:
                return self.ik(target_xyz, pitch, q0), float(pitch)
            except UnreachableError as e:
                if best is None or e.position_error < best.position_error:
                    best = e
        if best is None:
            raise ValueError("ik_search needs at least one pitch")
        raise best

    def roll_for_yaw(self, q: Sequence[float] | np.ndarray, yaw: float) -> float:
        """The wrist_roll that turns the jaws' closing direction to heading ``yaw`` with the other
        joints of ``q`` kept (exact when the approach is vertical, the usual top-down pick).

        A grasp does not care which jaw is on which side, so of the rolls ``yaw`` and
        ``yaw + pi`` give, the one nearest the middle of the roll's range is returned (clamped
        into the limits)."""
        q5 = np.array(np.asarray(q, dtype=float).ravel()[:5])
        q5[4] = 0.0
        yaw0 = self.fk(q5)[2]
        q5[4] = 0.1
        sign = 1.0 if _wrap(self.fk(q5)[2] - yaw0) > 0 else -1.0
        lo, hi = float(self.lower[4]), float(self.upper[4])
        mid = 0.5 * (lo + hi)
        base = sign * _wrap(yaw - yaw0)
        options = [base + k * math.pi for k in (-2, -1, 0, 1, 2)]
        best = min(options, key=lambda r: (not lo <= r <= hi, abs(r - mid)))
        return float(min(hi, max(lo, best)))

    def _dls(self, q: np.ndarray, target: np.ndarray, pitch: float,
             cfg: IKConfig) -> tuple[np.ndarray, float, float]:
        lo, hi = self.lower[:5], self.upper[:5]
        q = q.copy()
        w = cfg.pitch_weight
        lam2 = cfg.damping**2
        best_score, best_it = math.inf, 0
        for it in range(cfg.max_iters + 1):
            p, a, jt = self._task(q)
            ep = target - p
            ea = _wrap(pitch - a)
            perr, aerr = float(np.linalg.norm(ep)), abs(ea)
            if perr < cfg.converge_position and aerr < cfg.converge_pitch:
                break
            if it == cfg.max_iters:
                break
            score = perr + w * aerr
            if score < 0.99 * best_score:
                best_score, best_it = score, it
            elif it - best_it >= cfg.stall_iters:
                break  # stuck against a limit or the workspace boundary
            e = np.array([ep[0], ep[1], ep[2], w * ea])
            jw = jt.copy()
            jw[3] *= w
            free = np.ones(5, dtype=bool)
            free[4] = False  # wrist_roll stays where q0 put it: it turns the jaws, not the tip
            for _pass in range(2):
                js = jw * free
                dq = js.T @ np.linalg.solve(js @ js.T + lam2 * np.eye(4), e)
                blocked = ((q <= lo + 1e-9) & (dq < 0)) | ((q >= hi - 1e-9) & (dq > 0))
                if not np.any(blocked & free):
                    break
                free &= ~blocked
            n = float(np.max(np.abs(dq)))
            if n > cfg.max_step:
                dq *= cfg.max_step / n
            q = np.clip(q + dq, lo, hi)
        return q, perr, aerr


def workspace_guard(model: ArmModel | None = None,
                    workspace: Workspace | None = None) -> WorkspaceGuard:
    """A :class:`~solarian_agent.arm.safety.WorkspaceGuard` over this arm's forward kinematics
    (default: the default URDF and the default workspace box), holding
    :meth:`ArmModel.guard_point` (the jaw tips' height) in the box."""
    from .safety import Workspace, WorkspaceGuard

    m = model if model is not None else ArmModel.default()
    return WorkspaceGuard(workspace or Workspace(), m.guard_point, ARM_JOINTS)
