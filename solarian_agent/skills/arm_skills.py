"""The arm skills of the tidy-up task: each tells the planner and the monitor all they know of
it through its tool spec (:mod:`solarian_agent.core.skill`).

Every motion is a sequence of joint-space waypoints; a waypoint ends by :class:`Arrival`
(within tolerance, or nothing moved for 0.3 s counted from 0.5 s after the send), so a skill
never waits a fixed time.  Skills only send targets; the arm driver enforces joint, speed and
step limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..arm.grasp import (
    GRASP_Z,
    HELD_MAX_CLEARANCE,
    HELD_MIN_OPENING,
    WIDEST_OBJECT,
    open_angle,
)
from ..arm.jaw import SO101_JAW
from ..arm.kinematics import ARM_JOINTS, GRIPPER_JOINT, HOME
from ..core.errors import ConfigError, SkillFailed
from ..core.skill import Arrival, Skill, ToolSpec, TrackerRequest
from ..perception import scene
from .ports import ArmPort, CameraPort

JOINT_TOL = math.radians(2.0)  # "2 units" for joints: 2 degrees
GRIPPER_TOL = math.radians(2.0)  # the jaw angle, like the other joints
CART_TOL_MM = 5.0
PITCH_TOL = 0.05
# the gripper joint is the moving jaw's angle (rad); openings are the gap between the jaws
# a pick closes the jaw gently, and a place opens it so (rad/s; its limit is 2): the jaw settles
# on the object instead of striking it and lets it go without flicking it, and a miss (or a
# release) stays in view long enough for the monitor's 0.5 s tick to see it before the skill
# ends by itself
GRASP_SPEED = 0.8
OBJECT_WIDTH = WIDEST_OBJECT  # the width a pick plans for when it is not told (m)
# a pick opens the jaws so the moving jaw's whole finger clears the widest object (45 mm); the
# opened jaws are a V, so the tips stand wider apart: about 99 mm
GRIPPER_OPEN = open_angle(OBJECT_WIDTH)
OPEN_MM = round(SO101_JAW.opening(GRIPPER_OPEN) * 1000)
GRIPPER_CLOSE = SO101_JAW.lower  # closing squeezes: a held object stops the jaw short of it
# a jaw stopped at or above this angle has something between the jaws; one that closed past it
# closed on nothing; and at or above the next one the jaws are open
HELD_MIN_ANGLE = SO101_JAW.angle_for(HELD_MIN_OPENING)
HELD_MAX_ANGLE = SO101_JAW.clear_angle(HELD_MAX_CLEARANCE)

# the monitor questions, answered by any vision backend.  Each choice is defined by what changes
# between the previous and the current close-up (closer, closing, reopened) or by what shows in
# the current one (jaws bent around the target), so it holds for any object, and ``failed``
# describes the nearest miss; a phase judged across frames is answered more reliably than a
# "is this failing?" predicate, which comes back yes during the approach.  The rules are
# measured on the labelled ticks of the product's own picks (``solarian-agent make-ticks``;
# test/data/product_ticks): a pick is judged every 0.5 s, its last tick at most 3 s in, the jaws
# reach the object no earlier than 1 s in, and a missed grasp shows on one tick only before the
# skill's own aperture check ends it, so the failure rule counts from 1 s with
# ``consecutive: 1`` (``consecutive: 2`` escalated 1 missed pick in 46).
# The finish rule needs no delay or repeat: one confident holding tick ends the pick (faster and
# cheaper than several in a row) and its ``then`` carries the object home with the grip kept.
PICK_MONITOR: tuple[dict[str, Any], ...] = (
    {
        "name": "progress", "type": "choice", "camera": "wrist",
        "instructions": "Which phase the pick is in. Compare the previous close-up with the "
                        "current one.",
        "choices": {
            "approaching": "The jaws are open, the target lies ahead of them, and it looks "
                           "larger (closer) in the current close-up than in the previous one.",
            "grasping": "The jaws are down at the target and closing on it: they are "
                        "closer together in the current close-up than in the previous one.",
            "holding": "The target is pinched between the jaws: it sits between them, "
                       "both jaws touch it, and the jaws are visibly bent by the "
                       "pressure on it.",
            "failed": "The jaws are closer together than the target is wide, with nothing "
                      "between them, or they reopened: wider in the current close-up than in "
                      "the previous one.",
        },
        "when": [
            {"do": "finish", "value": "holding", "threshold": 0.8, "consecutive": 1,
             "then": "home_holding"},
            {"do": "escalate", "value": "failed", "threshold": 0.8, "consecutive": 1,
             "after_s": 1.0},
        ],
    },
)
PLACE_MONITOR: tuple[dict[str, Any], ...] = (
    {
        "name": "released", "type": "predicate", "camera": "wrist",
        "instructions": "Has the gripper let go of the object: the jaws are open and "
                        "nothing sits between them?",
    },
)


def load_poses(path: Path | None = None) -> dict[str, dict[str, Any]]:
    from ..arm.kinematics import default_urdf_path

    if path is None:
        path = default_urdf_path().parent.parent / "config" / "skills" / "move.yaml"
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except FileNotFoundError as e:
        raise ConfigError(str(path), "poses file not found") from e
    poses = doc.get("poses")
    if not isinstance(poses, dict) or not poses:
        raise ConfigError(f"{path}:poses", "must be a mapping of named poses")
    for name, p in poses.items():
        j = p.get("joints") if isinstance(p, dict) else None
        if not isinstance(j, dict) or set(j) != set(ARM_JOINTS):
            raise ConfigError(f"{path}:poses.{name}.joints",
                              f"must give exactly the joints {', '.join(ARM_JOINTS)}")
        if not isinstance(p.get("description"), str):
            raise ConfigError(f"{path}:poses.{name}.description", "must be a string")
    return poses


@dataclass
class Waypoint:
    target: dict[str, float]
    phase: str
    tolerances: dict[str, float] = field(default_factory=dict)
    max_velocity: float = 0.0  # rad/s: caps every joint of this motion (0: their own limits)


class MotionSkill(Skill):
    """Runs a list of waypoints, each ended by :class:`Arrival`."""

    def arm(self) -> ArmPort:
        return self.ctx.port("arm")  # type: ignore[no-any-return]

    def plan_waypoints(self) -> list[Waypoint]:
        raise NotImplementedError

    def start(self) -> None:
        self.waypoints = self.plan_waypoints()
        self.index = -1
        self.arrival: Arrival | None = None
        self._next()

    def _next(self) -> None:
        self.index += 1
        if self.index >= len(self.waypoints):
            self.on_done()
            return
        wp = self.waypoints[self.index]
        self.arm().command(wp.target, wp.max_velocity)
        targets = {k: (v, wp.tolerances.get(k, GRIPPER_TOL if k == GRIPPER_JOINT
                                            else JOINT_TOL))
                   for k, v in wp.target.items()}
        self.arrival = Arrival(targets, self.ctx.clock.now())
        self.feedback(wp.phase, self.index / max(1, len(self.waypoints)))

    def tick(self) -> None:
        if self.done or self.arrival is None:
            return
        self.arm().keep_alive()  # the waypoint's target, again: the arm holds without it
        if self.arrival.check(self.arm().fields(), self.ctx.clock.now()):
            self.last_reason = self.arrival.reason
            self.after_waypoint(self.waypoints[self.index], self.arrival.reason)
            if not self.done:
                self._next()

    def after_waypoint(self, wp: Waypoint, reason: str) -> None:
        """Hook: check something after a waypoint (may call fail())."""

    def on_done(self) -> None:
        self.finish(reason=getattr(self, "last_reason", "arrived"))

    def on_stop(self, reason: str) -> None:
        self.arm().hold()


def _point_z(params: Mapping[str, Any]) -> float:
    """The height (m) of the surface a pointed pixel shows, bound per tool (``point_z``,
    default 0: the table).  An overhead camera sees the top of a tall object away from where
    it stands; the point is unprojected onto this plane."""
    return float(params.get("point_z", 0.0))


def _joints(q5: np.ndarray) -> dict[str, float]:
    return {n: float(v) for n, v in zip(ARM_JOINTS, q5, strict=True)}


class MoveSkill(MotionSkill):
    """move_to_pose: named poses from config, a delta nudge, or a gripper aperture, as the
    binding's ``offer`` says (pose | delta | gripper | fixed)."""

    parameters: Any = {}
    max_duration_s = 20.0

    @classmethod
    def tool_spec(cls, bound: Mapping[str, Any]) -> ToolSpec:
        offer = bound.get("offer", "pose")
        if offer == "pose":
            poses = load_poses(bound.get("poses_file"))
            desc = ("Move the arm to a named pose: " + "; ".join(
                f"{n}: {p['description']}" for n, p in poses.items())
                + ". Ends when the arm gets there.")
            params = {"type": "object", "properties": {"pose": {"enum": sorted(poses)}},
                      "required": ["pose"], "additionalProperties": False}
        elif offer == "delta":
            desc = ("Nudge the gripper tip by a few millimetres (dx forward, dy left, dz up), "
                    "keeping its pitch.")
            ax = {"type": "number", "minimum": -50, "maximum": 50}
            params = {"type": "object", "properties": {"dx_mm": ax, "dy_mm": ax, "dz_mm": ax},
                      "additionalProperties": False}
        elif offer == "gripper":
            desc = ("Open or close the gripper: the gap between the jaws in millimetres "
                    f"(0 closed, {OPEN_MM:.0f} open).")
            params = {"type": "object", "properties": {"opening_mm": {
                "type": "number", "minimum": 0,
                "maximum": math.floor(SO101_JAW.max_opening * 1000)}},
                "required": ["opening_mm"], "additionalProperties": False}
        elif offer == "fixed":
            desc = bound.get("description")
            params = {"type": "object", "properties": {}, "additionalProperties": False}
        else:
            raise ConfigError("tools.move.offer",
                              f"{offer!r} is not allowed; allowed values: pose, delta, "
                              "gripper, fixed")
        return ToolSpec(name="", description=desc, parameters=params,
                        max_duration_s=cls.max_duration_s, resources=("arm",))

    def plan_waypoints(self) -> list[Waypoint]:
        offer = self.params.get("offer", "pose")
        arm = self.arm()
        q = arm.q()
        if offer in ("pose", "fixed"):
            name = self.params.get("pose", "home")
            poses = load_poses(self.params.get("poses_file"))
            if name not in poses:
                self.fail(f"unknown pose {name!r}; poses: {', '.join(poses)}")
            p = poses[name]
            target = {k: float(v) for k, v in p["joints"].items()}
            if not self.params.get("keep_grip"):
                target[GRIPPER_JOINT] = float(p.get("gripper", 0.0))
            return [Waypoint(target, f"moving to {name}")]
        if offer == "gripper":
            mm = float(self.params["opening_mm"])
            angle = (GRIPPER_CLOSE if mm <= 0 else
                     SO101_JAW.angle_for(min(mm / 1000.0, SO101_JAW.max_opening)))
            return [Waypoint({GRIPPER_JOINT: angle}, "gripper")]
        f = arm.fields(q)
        xyz = np.array([f["x"] + self.params.get("dx_mm", 0.0),
                        f["y"] + self.params.get("dy_mm", 0.0),
                        f["z"] + self.params.get("dz_mm", 0.0)]) / 1000.0
        return [Waypoint(_joints(arm.ik(xyz, q)), "nudging")]


class PickSkill(MotionSkill):
    description = ("Grasp one object and lift it. Point at the middle of the object in the "
                   "newest overhead image.")
    parameters = {"type": "object", "properties": {"point": {
        "type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
        "description": "[x, y] pixels on the object"}},
        "required": ["point"], "additionalProperties": False}
    image_points = ("point",)
    camera = "overhead"
    max_duration_s = 25.0
    max_target_area = 0.05
    monitor = PICK_MONITOR
    examples = ({"params": {"point": [125, 96], "observation_id": "obs-3"},
                 "when": "the red cup is at (125, 96) in obs-3"},)

    @classmethod
    def services_for(cls, params: Mapping[str, Any]) -> list[TrackerRequest]:
        cam = params.get("camera", cls.camera)
        return [TrackerRequest(f"{cam}.target", cam, "point")]

    def target_xy(self) -> np.ndarray:
        cam = self.params.get("camera", self.camera)
        u, v = self.params["point"]
        trackers = self.ctx.ports.get("trackers")
        res = trackers.result(f"{cam}.target") if trackers is not None else None
        if res is not None and res.mask is not None:
            ys, xs = np.nonzero(res.mask)
            u, v = float(xs.mean()), float(ys.mean())
        cams: CameraPort = self.ctx.port("cameras")
        return cams.unproject(cam, u, v, _point_z(self.params))[:2]

    def plan_waypoints(self) -> list[Waypoint]:
        arm = self.arm()
        q = arm.q()
        x, y = self.target_xy()
        # tool point heights above the table (the jaw tips are 6 mm below it)
        grasp_z = float(self.params.get("grasp_z", GRASP_Z))
        width = float(self.params.get("object_width", OBJECT_WIDTH))
        above = arm.grasp_ik((x, y, 0.09), width, q)
        # straight down at the grasp's pitch: one joint-space move from above would swing the
        # fixed jaw, a few millimetres off the object's side, through it on the way
        path = arm.grasp_descent((x, y, grasp_z), width, 0.09, above)
        down = path[-1]
        tip = arm.fields(np.concatenate([down, [0.0]]))
        lift = arm.ik((tip["x"] / 1000, tip["y"] / 1000, 0.12), down)
        self.result["target_mm"] = [round(x * 1000, 1), round(y * 1000, 1)]
        return [
            Waypoint({GRIPPER_JOINT: GRIPPER_OPEN, **_joints(above)}, "approaching"),
            *(Waypoint(_joints(qd), "descending") for qd in path),
            Waypoint({GRIPPER_JOINT: GRIPPER_CLOSE}, "grasping", max_velocity=GRASP_SPEED),
            # the jaw stays commanded closed: with the object held it cannot get there, so
            # this waypoint ends by stillness; if the object slipped out, the jaw closes
            Waypoint({GRIPPER_JOINT: GRIPPER_CLOSE, **_joints(lift)}, "lifting"),
        ]

    def after_waypoint(self, wp: Waypoint, reason: str) -> None:
        if wp.phase in ("grasping", "lifting") and self.arm().q()[5] < HELD_MIN_ANGLE:
            self.fail("the gripper closed on nothing: the grasp missed or the object "
                      "slipped out")

    def on_done(self) -> None:
        self.finish(reason="holding the object",
                    opening_mm=round(SO101_JAW.opening(self.arm().q()[5]) * 1000, 1))


class PlaceSkill(MotionSkill):
    description = ("Carry the held object to a point and let go of it there. Point at the "
                   "middle of the tray or bin in the newest overhead image.")
    parameters = PickSkill.parameters
    image_points = ("point",)
    camera = "overhead"
    max_duration_s = 25.0
    monitor = PLACE_MONITOR

    def plan_waypoints(self) -> list[Waypoint]:
        arm = self.arm()
        q = arm.q()
        if not arm.holding(HELD_MIN_ANGLE):
            self.fail("nothing is held: pick the object first")
        cam = self.params.get("camera", self.camera)
        cams: CameraPort = self.ctx.port("cameras")
        x, y = cams.unproject(cam, *self.params["point"], _point_z(self.params))[:2]
        release_z = float(self.params.get("release_z", 0.13))
        # the held object sits against the fixed jaw, half its width along the closing
        # direction from the tool point: aim the object's centre, not the tool point
        half = SO101_JAW.opening(float(q[5])) / 2
        first = arm.ik((x, y, release_z), q)
        d = arm.model.frame_pose(first, "gripper_link")[:3, 0]
        over = arm.ik((x - half * d[0], y - half * d[1], release_z), first)
        self.result["target_mm"] = [round(x * 1000, 1), round(y * 1000, 1)]
        return [
            Waypoint(_joints(over), "carrying"),
            Waypoint({GRIPPER_JOINT: GRIPPER_OPEN}, "releasing", max_velocity=GRASP_SPEED),
        ]

    def on_done(self) -> None:
        self.finish(reason="released the object")


class HomeSkill(MoveSkill):
    """home / home_holding: bound with ``keep_grip``."""

    description = "Go to the safe home pose over the base (opens nothing; closes the gripper)."

    @classmethod
    def tool_spec(cls, bound: Mapping[str, Any]) -> ToolSpec:
        desc = bound.get("description") or (
            "Carry the held object to the home pose, keeping the grip." if bound.get("keep_grip")
            else "Go to the safe home pose over the base.")
        return ToolSpec(name="", description=desc, parameters={
            "type": "object", "properties": {}, "additionalProperties": False},
            max_duration_s=cls.max_duration_s, resources=("arm",))

    def plan_waypoints(self) -> list[Waypoint]:
        self.params = {**self.params, "offer": "fixed", "pose": self.params.get("pose", "home")}
        return super().plan_waypoints()


class StopSkill(Skill):
    description = "Stop the arm where it is and hold still."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}

    def start(self) -> None:
        self.ctx.port("arm").hold()
        self.finish(reason="holding still")


class VerifyState(Skill):
    description = ("Take a fresh overhead image and report where each object is (table, tray, "
                   "bin, held, not seen), what the gripper holds and whether the arm is home. "
                   "Use it to check a pick, a place or the whole task.")
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    resources = ()
    camera = "overhead"
    max_duration_s = 5.0

    def start(self) -> None:
        self.t0 = self.ctx.clock.now()

    def tick(self) -> None:
        cams: CameraPort = self.ctx.port("cameras")
        cam = self.params.get("camera", self.camera)
        frame = cams.frame(cam)
        if frame is None or frame.stamp <= self.t0:
            return  # a fresh observation: captured after the check began
        rep = scene.report(scene.detect(frame.data))
        arm: ArmPort = self.ctx.port("arm")
        q = arm.q()
        at_home = bool(np.all(np.abs(q[:5] - np.array(HOME[:5])) < 0.05))
        held = self.held(arm, cams, q)
        if held in rep:
            rep[held] = {**rep[held], "location": "held"}
        self.finish(reason="checked", report=rep, arm_at_home=at_home, frame_seq=frame.seq,
                    observed_at=frame.stamp, held=held,
                    opening_mm=round(SO101_JAW.opening(float(q[5])) * 1000, 1))

    def held(self, arm: ArmPort, cams: CameraPort, q: np.ndarray) -> str | None:
        """What the gripper holds: the arm's own state first (the jaw was told to close and
        stopped on something, short of open), then the wrist camera names it.  Open jaws, or
        jaws closed on nothing, hold nothing whatever the wrist camera sees beyond them; jaws
        stopped on something the wrist camera cannot name hold ``"something"``."""
        if not arm.holding(HELD_MIN_ANGLE) or q[5] >= HELD_MAX_ANGLE:
            return None
        try:
            wrist = cams.frame(self.params.get("wrist_camera", "wrist"))
        except SkillFailed:  # no wrist camera on this robot: the arm's state alone says it
            wrist = None
        seen = scene.held_in_wrist(wrist.data)[0] if wrist is not None else None
        return seen or "something"


class StallTripwire:
    """check_agent_action: a pick or place whose arm and gripper stayed within a few
    millimetres for 5 s fails and starts home_holding: a stall is plain in the readings, whatever
    the object, where thresholds on aperture or height would break with every new object."""

    def __init__(self, arm: ArmPort, tools: tuple[str, ...] = ("pick_object", "place_at"),
                 still_mm: float = 3.0, still_s: float = 5.0) -> None:
        self.arm = arm
        self.tools = tools
        self.still_mm = still_mm
        self.still_s = still_s
        # action_id -> (readings, since when): only the newest few actions are kept, since
        # the monitor never says when an action ended and a run makes many picks and places
        self._ref: dict[str, tuple[np.ndarray, float]] = {}
        self.max_actions = 16

    def __call__(self, action_id: str, tool: str, elapsed_s: float
                 ) -> tuple[str, str, str] | None:
        if tool not in self.tools:
            return None
        try:
            f = self.arm.fields()
        except SkillFailed:
            return None
        p = np.array([f["x"], f["y"], f["z"], f["opening_mm"]])
        ref = self._ref.get(action_id)
        if ref is None or np.abs(p - ref[0]).max() > self.still_mm:
            self._ref.pop(action_id, None)  # re-inserted as the newest
            self._ref[action_id] = (p, elapsed_s)
            while len(self._ref) > self.max_actions:
                del self._ref[next(iter(self._ref))]
            return None
        if elapsed_s - ref[1] >= self.still_s:
            self._ref.pop(action_id, None)
            return ("fail", f"the arm and gripper have not moved for {self.still_s:g} s",
                    "home_holding")
        return None
