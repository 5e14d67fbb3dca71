"""The tidy-up tools (observe_scene, pick, place, verify_state and stop: the only actions an
agent is given, never raw joint angles) straight over a simulated ``World``: the reference path
beside the ideal controller, not the product.

:class:`TidyTools` acts on the world the way the arm's skills would and sees it the way the
agent does (rendered camera pixels and the arm's own joint positions), but without the bus, the
skills, the executor, the planner or the monitor.  The tidy benchmark uses it only beside the
ideal controller (which reads the truth): the labelled 6-11 upper bound.  The execution
strategies of experiment 6-13 run through the product instead: they are the ``rules``
planner's strategies (:mod:`solarian_agent.models.rules_planner`), measured by
:mod:`solarian_agent.benchmarks.tidy`.

* ``observe_scene()`` — render the overhead camera, find the objects and receptacles by colour
  (:func:`solarian_agent.perception.scene.detect`) and unproject their pixels onto the table;
  the wrist camera says what sits between the jaws.
* ``pick(obj)`` — approach above the object at z 0.09 m with the jaws open, straight down to
  the grasp height (:data:`~solarian_agent.arm.grasp.GRASP_Z`), close, lift to 0.12 m (the
  :class:`~solarian_agent.skills.arm_skills.PickSkill` motion), every waypoint an IK solution
  stepped through the world.  Optionally given the
  opening (m between the jaws) the caller expects the jaws to stop at, it watches them and cuts the
  motion short when they close past it.
* ``place(obj, receptacle)`` — carry to z 0.13 m over the receptacle and open.
* ``verify_state()`` — a fresh render of both cameras, :func:`scene.report`, what the wrist
  camera sees held, and whether the joint positions are at home.
* ``stop()`` — hold the arm where it is; ``home()`` — the safe folded pose.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solarian_agent.arm.grasp import (
    GRASP_Z,
    HELD_MIN_OPENING,
    WIDEST_OBJECT,
    descent,
    grasp_joints,
    held_max_opening,
    pick_opening,
)
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import HOME, HOME_TOLERANCE, ArmModel, UnreachableError
from solarian_agent.perception import scene

from .layout import APPROACH_PITCHES
from .render import Renderer
from .tabletop import GOALS, OBJECT_NAMES
from .world import World

OBJECT_WIDTH = WIDEST_OBJECT  # m: the width a pick plans for when not told

TOOL_NAMES: tuple[str, ...] = ("observe_scene", "pick", "place", "verify_state", "stop", "home")
STRATEGY_NAMES: tuple[str, ...] = ("open_loop", "step_verified", "predictive")


@dataclass(frozen=True)
class ToolsConfig:
    dt: float = 0.02  # s per world step
    hover_z: float = 0.09  # approach height above an object (m)
    grasp_z: float = GRASP_Z  # tool point height when closing
    lift_z: float = 0.12  # tip height after a pick
    carry_z: float = 0.13  # tip height over a receptacle when opening
    # m between the jaws (at the tool point) when open: the moving jaw's whole finger clears
    # the widest object (the opened jaws are a V: the tips stand wider, about 99 mm)
    open_aperture: float = round(pick_opening(), 4)
    held_min_aperture: float = HELD_MIN_OPENING  # jaws stopped this far apart: holding
    move_timeout_s: float = 8.0  # a motion that has not settled by then is a failure
    camera: str = "overhead"
    wrist: str = "wrist"

    def __post_init__(self) -> None:
        if not self.dt > 0 or not self.move_timeout_s > 0:
            raise ValueError("ToolsConfig: dt and move_timeout_s must be > 0")


@dataclass(frozen=True)
class Observation:
    """What one look at the scene showed (pixels and joint positions only).

    ``report`` is :func:`scene.report` of the overhead image; ``positions`` the table x, y (m)
    of every detected thing, unprojected from its pixel centroid; ``widths`` an object's
    footprint width estimated from its pixel area; ``held`` what the wrist camera sees between
    the fingers; ``aperture`` and ``arm_at_home`` come from the joint positions.
    """

    tool: str
    frame: int
    t: float
    report: dict[str, dict[str, Any]]
    positions: dict[str, tuple[float, float]]
    widths: dict[str, float]
    held: str | None
    aperture: float
    arm_at_home: bool
    detections: dict[str, scene.Detection] = field(default_factory=dict, repr=False)

    def location(self, name: str) -> str:
        """table | tray | bin | held | not_seen."""
        if self.held == name:
            return "held"
        return str(self.report.get(name, {}).get("location", "not_seen"))

    def task_done(self) -> bool:
        """Every object in its goal receptacle (judged from the image)."""
        return all(self.location(o) == r for o, r in GOALS.items())

    def tidy(self) -> bool:
        """The acceptance of experiment 6-10, as seen: objects in place, nothing held, home."""
        return self.task_done() and self.held is None and self.arm_at_home

    def with_locations(self, **locations: str) -> Observation:
        """This observation with some objects' locations replaced by predicted ones (the
        predictive strategy's belief when it skips a look)."""
        report = {k: dict(v) for k, v in self.report.items()}
        held = self.held
        for name, loc in locations.items():
            if loc == "held":
                held = name
                report[name] = {"location": "not_seen"}
            else:
                if held == name:
                    held = None
                report[name] = {**report.get(name, {}), "location": loc}
        return Observation(f"{self.tool}+predicted", self.frame, self.t, report,
                           dict(self.positions), dict(self.widths), held, self.aperture,
                           self.arm_at_home, self.detections)


@dataclass(frozen=True)
class ToolResult:
    tool: str
    ok: bool  # the motion ran to its end (not: the task step succeeded)
    reason: str
    data: dict[str, Any] = field(default_factory=dict)


class TidyTools:
    """The agent's tools over a simulated world.  Counts every call (``calls``) and keeps a
    ``trace`` of (tool, args, outcome).  Reads the world only through the renderer (pixels)
    and the joint positions; it commands joints and steps the world like the arm driver."""

    def __init__(self, world: World, renderer: Renderer | None = None,
                 config: ToolsConfig = ToolsConfig(),
                 scene_config: scene.SceneConfig = scene.SceneConfig()) -> None:
        self._world = world
        self.arm_model: ArmModel = world.arm  # the kinematic model (not the world state)
        self.renderer = renderer if renderer is not None else Renderer(world.arm)
        self.config = config
        self.scene_config = scene_config
        self.calls: dict[str, int] = {name: 0 for name in TOOL_NAMES}
        self.trace: list[tuple[str, str, str]] = []
        self.last: Observation | None = None
        self.first: Observation | None = None
        self.stopped = False
        self._frame = 0

    # bookkeeping --------------------------------------------------------------------------------
    @property
    def tool_calls(self) -> int:
        return sum(self.calls.values())

    def _count(self, tool: str, args: str, outcome: str) -> None:
        self.calls[tool] += 1
        self.trace.append((tool, args, outcome))

    # proprioception ----------------------------------------------------------------------------
    def joints(self) -> np.ndarray:
        """The arm's joint positions (what joint_states publishes)."""
        return np.array(self._world.q, dtype=float)

    def sim_time(self) -> float:
        return float(self._world.t)

    def _at_home(self, q: np.ndarray) -> bool:
        return bool(np.all(np.abs(q[:5] - np.asarray(HOME[:5])) <= HOME_TOLERANCE))

    # looking -----------------------------------------------------------------------------------
    def _look(self, tool: str) -> Observation:
        cfg = self.config
        img = self.renderer.render(cfg.camera, self._world)
        dets = scene.detect(img, self.scene_config)
        wrist = self.renderer.render(cfg.wrist, self._world)
        held, _frac = scene.held_in_wrist(wrist, self.scene_config)
        q = self.joints()
        # the wrist camera also sees an object below open fingers: held only when the fingers
        # stopped on something (neither closed nor open)
        if not cfg.held_min_aperture <= SO101_JAW.opening(q[5]) < held_max_opening():
            held = None
        cam = self.renderer.camera(cfg.camera)
        positions: dict[str, tuple[float, float]] = {}
        widths: dict[str, float] = {}
        for name, d in dets.items():
            x, y = (float(v) for v in cam.unproject(*d.centroid, 0.0)[:2])
            positions[name] = (x, y)
            if name in OBJECT_NAMES:
                widths[name] = _footprint_width(cam, d, x, y)
        self._frame += 1
        obs = Observation(tool, self._frame, self.sim_time(), scene.report(dets), positions,
                          widths, held, SO101_JAW.opening(q[5]), self._at_home(q), dets)
        self.last = obs
        if self.first is None:
            self.first = obs
        return obs

    def observe_scene(self) -> Observation:
        """Render and detect: where everything is, for planning."""
        obs = self._look("observe_scene")
        self._count("observe_scene", "", _summary(obs))
        return obs

    def verify_state(self) -> Observation:
        """A fresh observation judged against the postconditions (``Observation.location``,
        ``tidy``)."""
        obs = self._look("verify_state")
        self._count("verify_state", "", _summary(obs))
        return obs

    # moving ------------------------------------------------------------------------------------
    def _ik(self, x: float, y: float, z: float, q: np.ndarray) -> np.ndarray:
        q5, _pitch = self.arm_model.ik_search((x, y, z), APPROACH_PITCHES, q0=q[:5])
        return np.asarray(q5[:5], dtype=float)

    def _move(self, target: np.ndarray | Mapping[str, float],
              watch: Callable[[], bool] | None = None) -> str:
        """Command and step until settled: arrived | aborted (``watch`` said so) | timeout."""
        w, cfg = self._world, self.config
        w.command(target)
        for _ in range(int(math.ceil(cfg.move_timeout_s / cfg.dt))):
            if w.settled():
                return "arrived"
            w.step(cfg.dt)
            if watch is not None and watch():
                w.command(w.q.copy())  # hold where it is
                return "aborted"
        return "arrived" if w.settled() else "timeout"

    def _xy(self, name: str, xy: Sequence[float] | None) -> tuple[float, float] | None:
        if xy is not None:
            return float(xy[0]), float(xy[1])
        if self.last is not None and name in self.last.positions:
            return self.last.positions[name]
        return None

    def pick(self, obj: str, xy: Sequence[float] | None = None,
             expect_aperture: float | None = None, tolerance: float = 0.5) -> ToolResult:
        """Grasp ``obj`` at ``xy`` (default: where the last observation saw it) and lift it.

        With ``expect_aperture`` the fingers are watched: closing below ``tolerance`` times
        the expected aperture ends the pick early (``data["aborted"]`` names the phase) and
        the arm backs off to the approach pose with the fingers open."""
        cfg = self.config
        target = self._xy(obj, xy)
        if target is None:
            return self._done("pick", obj, False, f"{obj} was not seen; observe first")
        x, y = target
        floor = None if expect_aperture is None else tolerance * expect_aperture
        open_jaw = SO101_JAW.angle_for(cfg.open_aperture)

        def slipped() -> bool:
            return floor is not None and self._aperture() < floor

        try:
            q = self.joints()
            width = OBJECT_WIDTH if expect_aperture is None else expect_aperture
            above, _ = grasp_joints(self._world.arm, (x, y, cfg.hover_z), width,
                                    APPROACH_PITCHES, q[:5])
            # straight down at the grasp's pitch (a joint-space move from above would swing the
            # fixed jaw through the object's near side)
            path = descent(self._world.arm, (x, y, cfg.grasp_z), width, cfg.hover_z,
                           APPROACH_PITCHES, above)
            down = path[-1]
            tip = self._world.arm.fk(down)[0]
            lift = self._ik(float(tip[0]), float(tip[1]), cfg.lift_z, down)
        except UnreachableError as e:
            return self._done("pick", obj, False, f"out of reach: {e}")
        phases: list[tuple[str, np.ndarray | dict[str, float], bool]] = [
            ("approaching", np.concatenate([above, [open_jaw]]), False),
            *(("descending", np.concatenate([qd, [open_jaw]]), False) for qd in path),
            ("grasping", {"gripper": SO101_JAW.lower}, False),
            ("lifting", lift, True),
        ]
        for phase, tgt, watched in phases:
            outcome = self._move(tgt, slipped if watched else None)
            if outcome == "timeout":
                return self._done("pick", obj, False, f"{phase} did not settle")
            if outcome == "aborted" or (phase == "grasping" and slipped()):
                aperture = self._aperture()
                # back off to the approach pose, fingers open, out of the camera's way
                self._move(np.concatenate([above, [open_jaw]]))
                return self._done("pick", obj, False, "the jaws closed past the expected "
                                  "width", aborted=phase, aperture=aperture)
        return self._done("pick", obj, True, "lifted", aperture=self._aperture())

    def place(self, obj: str, receptacle: str, xy: Sequence[float] | None = None) -> ToolResult:
        """Carry the held object over ``receptacle`` (default: where the last observation saw
        it) and open the gripper."""
        cfg = self.config
        target = self._xy(receptacle, xy)
        if target is None:
            return self._done("place", f"{obj}->{receptacle}", False,
                              f"{receptacle} was not seen; observe first")
        try:
            over = self._ik(target[0], target[1], cfg.carry_z, self.joints())
        except UnreachableError as e:
            return self._done("place", f"{obj}->{receptacle}", False, f"out of reach: {e}")
        # the held object sits against the fixed jaw: aim its centre, not the tool point
        d = self._world.arm.frame_pose(over, "gripper_link")[:3, 0]
        half = self._aperture() / 2
        try:
            over = self._ik(target[0] - half * d[0], target[1] - half * d[1], cfg.carry_z, over)
        except UnreachableError as e:
            return self._done("place", f"{obj}->{receptacle}", False, f"out of reach: {e}")
        release = {"gripper": SO101_JAW.angle_for(cfg.open_aperture)}
        for phase, tgt in (("carrying", over), ("releasing", release)):
            if self._move(tgt) == "timeout":
                return self._done("place", f"{obj}->{receptacle}", False,
                                  f"{phase} did not settle")
        return self._done("place", f"{obj}->{receptacle}", True, "released",
                          release_xy=target)

    def home(self) -> ToolResult:
        if self._move(np.asarray(HOME, dtype=float)) == "timeout":
            return self._done("home", "", False, "did not settle")
        return self._done("home", "", True, "home")

    def stop(self, reason: str = "") -> ToolResult:
        self._world.command(self._world.q.copy())
        self.stopped = True
        return self._done("stop", "", True, reason or "holding still")

    def _aperture(self) -> float:
        """The gap between the jaws (m)."""
        return SO101_JAW.opening(float(self._world.q[5]))

    def _done(self, tool: str, args: str, ok: bool, reason: str, **data: Any) -> ToolResult:
        self._count(tool, args, "ok" if ok else f"failed: {reason}")
        return ToolResult(tool, ok, reason, data)


def _footprint_width(cam: Any, d: scene.Detection, x: float, y: float) -> float:
    """An object's width (m) from its pixel area: the diameter of a disc of that area, at the
    table scale around (x, y)."""
    u, v = d.centroid
    p = cam.unproject(u + 10.0, v, 0.0)
    m_per_px = math.hypot(float(p[0]) - x, float(p[1]) - y) / 10.0
    return 2.0 * math.sqrt(d.area / math.pi) * m_per_px


def _summary(obs: Observation) -> str:
    locs = ", ".join(f"{o}={obs.location(o)}" for o in OBJECT_NAMES)
    return f"{locs}, home={obs.arm_at_home}"
