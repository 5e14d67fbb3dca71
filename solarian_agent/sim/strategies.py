"""Experiment 6-13: three execution strategies for the tidy-up task over the agent's tools.

The tools (seed 004, experiment 6-12) act on a :class:`~solarian_agent.sim.world.World` the
way the real arm's skills would, and see it the way the agent does — rendered camera pixels and
the arm's own joint positions, never the simulator's ground truth:

* ``observe_scene()`` — render the overhead camera, find the objects and receptacles by colour
  (:func:`solarian_agent.perception.scene.detect`) and unproject their pixels onto the table;
  the wrist camera says what sits between the fingers.
* ``pick(obj)`` — approach above the object at z 0.09 m with the gripper open, descend to
  0.015 m, close, lift to 0.12 m (the :class:`~solarian_agent.skills.arm_skills.PickSkill`
  motion), every waypoint an IK solution stepped through the world.  Optionally given the
  aperture the caller expects the fingers to stop at, it watches the gripper and cuts the
  motion short when the fingers close past it (a missed grasp before the lift, a slip during
  it).
* ``place(obj, receptacle)`` — carry to z 0.13 m over the receptacle and open.
* ``verify_state()`` — a fresh render of both cameras, :func:`scene.report` (where each object
  is judged from the overhead pixels), what the wrist camera sees held, and whether the joint
  positions are at home.
* ``stop()`` — hold the arm where it is; the strategy gives up.
* ``home()`` — the safe folded pose (the harness's ``home`` tool; the task's acceptance needs
  the arm back home, so it is counted with the five).

The strategies use only what these tools return:

* :class:`OpenLoop` — observe once, produce the whole pick/place/home sequence from that one
  observation, execute it without looking again, and claim success.
* :class:`StepVerified` — after every pick and every place a ``verify_state``; a failed skill
  (nothing held after a pick, the object not in its receptacle after a place) is redone on its
  own from the fresh observation's positions — only that skill, not the plan.  Before claiming
  success: home and a final ``verify_state``.
* :class:`Predictive` — step verification plus a short-horizon model of action outcomes
  (:class:`OutcomeModel`).  Before each step the model ranks the candidate next skills (which
  object to pick next) by the expected time to finish the task; during a pick it predicts the
  aperture the fingers stop at (the object's width, estimated from its pixel footprint) and the
  pick is cut short as soon as proprioception departs from it; after a place it predicts
  whether the object lands inside the receptacle (the release point's depth inside the
  receptacle's pixel footprint).  With ``verify="on_doubt"`` it calls ``verify_state`` only
  when a prediction failed or was not confident, and always before claiming success.

A run's success counts only if the strategy claims it *and* a fresh ``verify_state`` taken by
the evaluator afterwards confirms it (:func:`run_episode`); the benchmark separately compares
that with the ground truth.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import cv2
import numpy as np

from solarian_agent.arm.kinematics import ArmModel, UnreachableError
from solarian_agent.perception import scene

from .faults import FaultConfig, FaultInjector
from .render import Renderer, VisualStyle
from .world import APPROACH_PITCHES, GOALS, HOME, HOME_TOLERANCE, OBJECT_NAMES, World

TOOL_NAMES: tuple[str, ...] = ("observe_scene", "pick", "place", "verify_state", "stop", "home")
STRATEGY_NAMES: tuple[str, ...] = ("open_loop", "step_verified", "predictive")


@dataclass(frozen=True)
class ToolsConfig:
    dt: float = 0.02  # s per world step
    hover_z: float = 0.09  # approach height above an object (m)
    grasp_z: float = 0.015  # tip height when closing
    lift_z: float = 0.12  # tip height after a pick
    carry_z: float = 0.13  # tip height over a receptacle when opening
    open_aperture: float = 0.055  # m
    held_min_aperture: float = 0.005  # fingers stopped at least this far apart: holding
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
        if not cfg.held_min_aperture <= q[5] < cfg.open_aperture - 0.005:
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
                          widths, held, float(q[5]), self._at_home(q), dets)
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

        def slipped() -> bool:
            return floor is not None and float(self._world.q[5]) < floor

        try:
            q = self.joints()
            above = self._ik(x, y, cfg.hover_z, q)
            down = self._ik(x, y, cfg.grasp_z, above)
            lift = self._ik(x, y, cfg.lift_z, down)
        except UnreachableError as e:
            return self._done("pick", obj, False, f"out of reach: {e}")
        phases: list[tuple[str, np.ndarray | dict[str, float], bool]] = [
            ("approaching", np.concatenate([above, [cfg.open_aperture]]), False),
            ("descending", np.concatenate([down, [cfg.open_aperture]]), False),
            ("grasping", {"gripper": 0.0}, False),
            ("lifting", lift, True),
        ]
        for phase, tgt, watched in phases:
            outcome = self._move(tgt, slipped if watched else None)
            if outcome == "timeout":
                return self._done("pick", obj, False, f"{phase} did not settle")
            if outcome == "aborted" or (phase == "grasping" and slipped()):
                aperture = self._aperture()
                # back off to the approach pose, fingers open, out of the camera's way
                self._move(np.concatenate([above, [cfg.open_aperture]]))
                return self._done("pick", obj, False, "the fingers closed past the expected "
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
        for phase, tgt in (("carrying", over), ("releasing", {"gripper": cfg.open_aperture})):
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
        return float(self._world.q[5])

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


# the strategies -----------------------------------------------------------------------------
@dataclass
class StrategyResult:
    claimed: bool  # the strategy says the table is tidy
    recoveries: int = 0  # skills redone after a detected failure
    stopped: bool = False
    notes: list[str] = field(default_factory=list)
    mispredictions: int = 0  # predictive only: outcomes that departed from the model


class Strategy(Protocol):
    name: str

    def run(self, tools: TidyTools) -> StrategyResult: ...


def _goal_order(obs: Observation) -> list[str]:
    return [o for o, r in GOALS.items() if obs.location(o) != r]


class OpenLoop:
    """Observe once, plan the whole sequence, execute it blind, claim success."""

    name = "open_loop"

    def run(self, tools: TidyTools) -> StrategyResult:
        obs = tools.observe_scene()
        plan: list[tuple[str, ...]] = []
        for obj in _goal_order(obs):
            if obj in obs.positions and GOALS[obj] in obs.positions:
                plan += [("pick", obj), ("place", obj, GOALS[obj])]
        plan.append(("home",))
        for step in plan:
            if step[0] == "pick":
                tools.pick(step[1], obs.positions[step[1]])
            elif step[0] == "place":
                tools.place(step[1], step[2], obs.positions[step[2]])
            else:
                tools.home()
        return StrategyResult(claimed=True)


@dataclass
class StepVerified:
    """Verify after every pick and place; redo only the skill that failed."""

    max_attempts: int = 10  # skill executions per object (covers 2+2 faults in a row)
    max_rounds: int = 2  # final checks that may send it back to work
    name: str = "step_verified"

    def run(self, tools: TidyTools) -> StrategyResult:
        res = StrategyResult(claimed=False)
        obs = tools.observe_scene()
        for _round in range(self.max_rounds):
            for obj in _goal_order(obs):
                obs, ok = self._tidy_one(tools, obj, obs, res)
                if not ok:
                    return _give_up(tools, res, f"could not get {obj} to {GOALS[obj]}")
            tools.home()
            obs = tools.verify_state()
            if obs.tidy():
                res.claimed = True
                return res
            res.notes.append(f"final check not tidy: {_summary(obs)}")
        return _give_up(tools, res, "the final check did not confirm the task")

    def _tidy_one(self, tools: TidyTools, obj: str, obs: Observation,
                  res: StrategyResult) -> tuple[Observation, bool]:
        goal = GOALS[obj]
        failed = False
        for _ in range(self.max_attempts):
            if obs.location(obj) == goal:
                return obs, True
            seen = _see(tools, obs, [obj])
            if seen is None:
                return tools.last or obs, False
            obs = seen
            if failed:
                res.recoveries += 1
            if obs.location(obj) != "held":
                tools.pick(obj, obs.positions[obj])
                obs = tools.verify_state()
                failed = obs.location(obj) != "held"
            else:
                tools.place(obj, goal, obs.positions[goal])
                obs = tools.verify_state()
                failed = obs.location(obj) != goal
        return obs, obs.location(obj) == goal


def _give_up(tools: TidyTools, res: StrategyResult, reason: str) -> StrategyResult:
    tools.stop(reason)
    res.stopped = True
    res.notes.append(reason)
    return res


def _see(tools: TidyTools, obs: Observation, objects: Sequence[str]) -> Observation | None:
    """Make sure each object (unless held) and its receptacle are in sight: if not, go home
    (the arm may hide them) and look again.  None: still not seen."""
    def visible(o: Observation) -> bool:
        return all((o.location(obj) == "held" or obj in o.positions)
                   and GOALS[obj] in o.positions for obj in objects)

    if visible(obs):
        return obs
    tools.home()
    obs = tools.verify_state()
    return obs if visible(obs) else None


# the predictive strategy's model -----------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    skill: str
    obj: str
    location: str  # where the model expects the object after the skill
    p_success: float
    duration_s: float  # predicted motion time
    path_m: float  # predicted tip path
    aperture: float | None = None  # pick: where the fingers should stop
    confident: bool = False


class OutcomeModel:
    """A short-horizon model of skill outcomes over the observed symbolic state.

    * Success rates: a Beta(prior) estimate per (skill, object), updated from every outcome
      the strategy learns (a verified one, or proprioception that departed from a prediction)
      within the episode.
    * Cost: each skill's waypoints (the tools' own motion: approach, descend, close, lift;
      carry, open) solved with the arm's IK from the predicted joint configuration; the motion
      time is the slowest joint's travel over its velocity limit, the path the straight-line
      tip distance between waypoints.
    * Pick outcome: the fingers stop at the object's width (estimated from the detection's
      pixel area); closing below half of it means a missed grasp or a slip.
    * Place outcome: the object lands at the release point; inside the receptacle with
      confidence when that point lies at least ``place_margin_px`` inside its pixel hull.

    :meth:`rank` compares the candidate next skills by the expected time to finish every
    pending object (``t / p`` per skill: geometric retries) over each order of the pending
    objects, and returns the best first.
    """

    def __init__(self, arm: ArmModel, tools_config: ToolsConfig = ToolsConfig(),
                 prior: Mapping[str, tuple[float, float]] | None = None,
                 place_margin_px: float = 12.0, default_width: float = 0.04) -> None:
        self.arm = arm
        self.default_width = default_width
        self.cfg = tools_config
        self.prior = dict(prior or {"pick": (4.0, 1.0), "place": (9.0, 1.0)})
        self.place_margin_px = place_margin_px
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.vmax = np.asarray(arm.velocity, dtype=float)
        self._ik_cache: dict[tuple[float, float, float], np.ndarray] = {}

    def reset(self) -> None:
        self.counts.clear()
        self._ik_cache.clear()

    def _ik(self, xyz: tuple[float, float, float], q: np.ndarray) -> np.ndarray:
        """IK of a waypoint, cached per millimetre (a cost estimate does not need the exact
        solution from every start)."""
        key = (round(xyz[0], 3), round(xyz[1], 3), round(xyz[2], 3))
        q5 = self._ik_cache.get(key)
        if q5 is None:
            q5 = np.asarray(self.arm.ik_search(xyz, APPROACH_PITCHES, q0=q[:5])[0][:5])
            self._ik_cache[key] = q5
        return q5

    def p_success(self, skill: str, obj: str) -> float:
        a, b = self.prior[skill]
        s, f = self.counts.get((skill, obj), [0, 0])
        return (a + s) / (a + b + s + f)

    def update(self, skill: str, obj: str, ok: bool) -> None:
        c = self.counts.setdefault((skill, obj), [0, 0])
        c[0 if ok else 1] += 1

    # kinematic cost ------------------------------------------------------------------------------
    def _motion(self, q: np.ndarray, waypoints: Sequence[tuple[float, float, float] | float]
                ) -> tuple[np.ndarray, float, float]:
        """Predicted end configuration, time and tip path for a list of tip positions (or a
        float: a gripper aperture)."""
        t = path = 0.0
        q = q.copy()
        tip = self.arm.fk(q)[0]
        for wp in waypoints:
            if isinstance(wp, float):
                t += abs(wp - q[5]) / self.vmax[5]
                q[5] = wp
                continue
            q5 = self._ik(wp, q)
            t += float(np.max(np.abs(q5[:5] - q[:5]) / self.vmax[:5]))
            q[:5] = q5[:5]
            new_tip = self.arm.fk(q)[0]
            path += float(np.linalg.norm(new_tip - tip))
            tip = new_tip
        return q, t, path

    def grip_width(self, obj: str, obs: Observation) -> float:
        """The aperture the fingers should stop at on ``obj``: its pixel footprint width."""
        return obs.widths.get(obj, self.default_width)

    def place_confident(self, receptacle: str, obs: Observation) -> bool:
        """Whether releasing over the receptacle's centroid surely lands inside it: the
        centroid lies at least ``place_margin_px`` inside the receptacle's pixel hull."""
        det = obs.detections.get(receptacle)
        if det is None or not det.hull.size:
            return False
        depth = cv2.pointPolygonTest(det.hull, det.centroid, True)
        return bool(depth >= self.place_margin_px)

    def predict_pick(self, obj: str, obs: Observation, q: np.ndarray
                     ) -> tuple[Prediction, np.ndarray]:
        c = self.cfg
        x, y = obs.positions[obj]
        q_end, t, path = self._motion(q, [c.open_aperture, (x, y, c.hover_z), (x, y, c.grasp_z),
                                          0.0, (x, y, c.lift_z)])
        width = self.grip_width(obj, obs)
        q_end[5] = width
        return Prediction("pick", obj, "held", self.p_success("pick", obj), t, path,
                          aperture=width, confident=True), q_end

    def predict_place(self, obj: str, receptacle: str, obs: Observation, q: np.ndarray
                      ) -> tuple[Prediction, np.ndarray]:
        c = self.cfg
        x, y = obs.positions[receptacle]
        q_end, t, path = self._motion(q, [(x, y, c.carry_z), c.open_aperture])
        return Prediction("place", obj, receptacle, self.p_success("place", obj), t, path,
                          confident=self.place_confident(receptacle, obs)), q_end

    def plan_cost(self, order: Sequence[str], obs: Observation, q: np.ndarray) -> float:
        """Expected seconds to pick and place ``order`` (objects) from configuration ``q``."""
        total = 0.0
        for obj in order:
            if obs.location(obj) != "held":
                pred, q = self.predict_pick(obj, obs, q)
                total += pred.duration_s / max(pred.p_success, 1e-3)
            pred, q = self.predict_place(obj, GOALS[obj], obs, q)
            total += pred.duration_s / max(pred.p_success, 1e-3)
        return total

    def rank(self, pending: Sequence[str], obs: Observation, q: np.ndarray
             ) -> list[tuple[float, str]]:
        """Candidate next objects, best first, each with the expected time to finish."""
        held = [o for o in pending if obs.location(o) == "held"]
        if held:  # a held object is placed first: anything else would drop it
            return [(0.0, held[0])]
        if len(pending) == 1:
            return [(0.0, pending[0])]
        best: dict[str, float] = {}
        orders = (itertools.permutations(pending) if len(pending) <= 4
                  else ((o, *[p for p in pending if p != o]) for o in pending))
        for order in orders:
            try:
                cost = self.plan_cost(order, obs, q)
            except UnreachableError:
                cost = math.inf
            best[order[0]] = min(best.get(order[0], math.inf), cost)
        return sorted((c, o) for o, c in best.items())


@dataclass
class Predictive:
    """Step verification plus :class:`OutcomeModel`: rank the candidate next skills, watch a
    pick against the predicted aperture and cut it short on a mismatch, and (``verify=
    "on_doubt"``) skip the look after a skill whose outcome matched a confident prediction."""

    arm: ArmModel | None = None
    verify: str = "always"  # always | on_doubt
    max_attempts: int = 10  # skill executions per object (covers 2+2 faults in a row)
    max_rounds: int = 2
    name: str = "predictive"
    model: OutcomeModel | None = None

    def __post_init__(self) -> None:
        if self.verify not in ("always", "on_doubt"):
            raise ValueError(f"Predictive.verify must be always or on_doubt, not {self.verify!r}")

    def run(self, tools: TidyTools) -> StrategyResult:
        model = self.model or OutcomeModel(self.arm or tools.arm_model, tools.config)
        model.reset()
        res = StrategyResult(claimed=False)
        obs = tools.observe_scene()
        executed: dict[str, int] = {o: 0 for o in GOALS}
        failed = False
        for _round in range(self.max_rounds):
            while pending := _goal_order(obs):
                seen = _see(tools, obs, pending)
                if seen is None:
                    return _give_up(tools, res, "an object or receptacle is out of sight")
                obs = seen
                obj = model.rank(pending, obs, tools.joints())[0][1]
                if executed[obj] >= self.max_attempts:
                    return _give_up(tools, res, f"could not get {obj} to {GOALS[obj]}")
                executed[obj] += 1
                if failed:
                    res.recoveries += 1
                obs, ok = self._step(tools, model, obj, obs, res)
                failed = not ok
            if obs.tool != "verify_state" or not obs.arm_at_home:
                tools.home()
            obs = tools.verify_state()
            if obs.tidy():
                res.claimed = True
                return res
            res.notes.append(f"final check not tidy: {_summary(obs)}")
        return _give_up(tools, res, "the final check did not confirm the task")

    def _step(self, tools: TidyTools, model: OutcomeModel, obj: str, obs: Observation,
              res: StrategyResult) -> tuple[Observation, bool]:
        """One skill on ``obj``; returns the new belief and whether the skill succeeded."""
        if obs.location(obj) != "held":
            r = tools.pick(obj, obs.positions[obj], expect_aperture=model.grip_width(obj, obs))
            if r.ok and self.verify == "on_doubt":
                model.update("pick", obj, True)
                return obs.with_locations(**{obj: "held"}), True
            new = tools.verify_state()
            held = new.location(obj) == "held"
            model.update("pick", obj, held)
            if held != r.ok:
                res.mispredictions += 1
            return new, held
        goal = GOALS[obj]
        confident = model.place_confident(goal, obs)
        r = tools.place(obj, goal, obs.positions[goal])
        expected = r.ok and confident
        if expected and self.verify == "on_doubt":
            model.update("place", obj, True)
            return obs.with_locations(**{obj: goal}), True
        new = tools.verify_state()
        placed = new.location(obj) == goal
        model.update("place", obj, placed)
        if placed != expected:
            res.mispredictions += 1
        return new, placed


def make_strategy(name: str, arm: ArmModel | None = None) -> Strategy:
    if name == "open_loop":
        return OpenLoop()
    if name == "step_verified":
        return StepVerified()
    if name == "predictive":
        return Predictive(arm)
    if name == "predictive_on_doubt":
        return Predictive(arm, verify="on_doubt", name="predictive_on_doubt")
    raise ValueError(f"unknown strategy {name!r}; strategies: {', '.join(STRATEGY_NAMES)}, "
                     "predictive_on_doubt")


# episodes -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeRecord:
    strategy: str
    seed: int
    claimed: bool  # the strategy said the table is tidy
    verified: bool  # a fresh verify_state taken afterwards by the evaluator says so
    truth: bool  # the simulator's ground truth says so (read by the evaluator only)
    tool_calls: int
    calls: dict[str, int]
    recoveries: int
    path_length_m: float
    sim_time_s: float
    steps: int
    stopped: bool
    mispredictions: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    first_observation: Observation | None = field(default=None, repr=False, compare=False)
    # the layout before the run (table x, y of every thing), for scoring perception
    layout: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False,
                                                   compare=False)

    @property
    def success(self) -> bool:
        """Counted success: claimed and confirmed by the fresh verify_state."""
        return self.claimed and self.verified

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy, "seed": self.seed, "success": self.success,
            "claimed": self.claimed, "verified": self.verified, "truth": self.truth,
            "tool_calls": self.tool_calls, "calls": dict(self.calls),
            "recoveries": self.recoveries, "path_length_m": round(self.path_length_m, 4),
            "sim_time_s": round(self.sim_time_s, 3), "steps": self.steps,
            "stopped": self.stopped, "mispredictions": self.mispredictions,
            "faults": dict(self.faults), "notes": list(self.notes),
        }


def run_episode(
    strategy: Strategy,
    seed: int,
    *,
    arm: ArmModel | None = None,
    faults: FaultConfig = FaultConfig(),
    style: VisualStyle | None = None,
    renderer: Renderer | None = None,
    forced: Sequence[Mapping[str, Any]] = (),
    world: World | None = None,
) -> EpisodeRecord:
    """One tidy-up episode of ``strategy`` on the layout and faults of ``seed``.

    ``forced`` fault requests (:meth:`FaultInjector.inject`, e.g. ``{"kind": "slip"}``) apply
    from the start.  Pass ``world`` (reset here) and ``renderer`` to reuse them over many
    episodes.  Afterwards the evaluator takes its own fresh ``verify_state`` (not counted as
    the strategy's) and reads the ground truth; the strategy never does."""
    if world is None:
        world = World(arm if arm is not None else ArmModel.default(),
                      faults=FaultInjector(faults, seed), seed=seed)
    else:
        world.faults = FaultInjector(faults, seed)
        world.reset(seed)
    for req in forced:
        world.faults.inject(req, world.t, OBJECT_NAMES)
    if renderer is None:
        renderer = Renderer(world.arm, style or VisualStyle())
    layout = {n: (float(o.x), float(o.y)) for n, o in world.objects.items()}
    layout.update({n: (float(r.x), float(r.y)) for n, r in world.receptacles.items()})
    tools = TidyTools(world, renderer)
    result = strategy.run(tools)
    check = TidyTools(world, renderer).verify_state()
    return EpisodeRecord(
        strategy=strategy.name, seed=seed, claimed=result.claimed, verified=check.tidy(),
        truth=world.success(), tool_calls=tools.tool_calls, calls=dict(tools.calls),
        recoveries=result.recoveries, path_length_m=world.path_length, sim_time_s=world.t,
        steps=world.steps, stopped=result.stopped, mispredictions=result.mispredictions,
        faults={k: v for k, v in world.faults.counts.items() if v}, notes=tuple(result.notes),
        first_observation=tools.first, layout=layout,
    )
