"""The ideal controller of experiment 6-11: the task's upper bound when perception and
decisions are perfect.

It reads the ground truth (never the cameras), plans scripted joint targets through IK and
tidies the table: red cup -> tray, yellow paper -> bin, then home.  After every pick it checks
the truth and retries, so with injected recoverable faults it still finishes (that is what
"ideal" means here: it never misjudges the state).  It reports success, world steps, path
length of the gripper tip, picks and retries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solarian_agent.arm.grasp import GRASP_Z, closing_dir, descent, grasp_joints, open_angle
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import UnreachableError

from .layout import APPROACH_PITCHES
from .tabletop import GOALS
from .world import World


@dataclass(frozen=True)
class IdealConfig:
    dt: float = 0.02  # s per world step
    hover_z: float = 0.09  # tip height for moving around (m)
    grasp_z: float = GRASP_Z  # tool point height when closing on an object
    release_z: float = 0.09  # tool point height above a receptacle when opening
    close_angle: float = SO101_JAW.lower  # the jaw command that squeezes (rad)
    move_timeout_s: float = 8.0  # a single motion that takes longer is a failure
    max_attempts: int = 6  # picks per object
    max_rounds: int = 3  # passes over the goals (someone may undo a placed object)

    def __post_init__(self) -> None:
        if not self.dt > 0 or not self.move_timeout_s > 0:
            raise ValueError("IdealConfig: dt and move_timeout_s must be > 0")
        if self.max_attempts < 1 or self.max_rounds < 1:
            raise ValueError("IdealConfig: max_attempts and max_rounds must be >= 1")


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    success: bool
    steps: int
    sim_time_s: float
    path_length_m: float
    picks: int
    retries: int
    failures: tuple[str, ...] = ()
    faults: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed, "success": self.success, "steps": self.steps,
            "sim_time_s": round(self.sim_time_s, 3),
            "path_length_m": round(self.path_length_m, 4), "picks": self.picks,
            "retries": self.retries, "failures": list(self.failures), "faults": self.faults,
        }


class MotionTimeout(RuntimeError):
    """A scripted motion did not settle within ``move_timeout_s``."""


class IdealController:
    """Scripted pick-and-place from ground truth.  ``step`` advances the simulation by ``dt``
    (default ``world.step``; pass ``SimWorldComponent.step`` to also render and publish)."""

    def __init__(
        self,
        world: World,
        config: IdealConfig = IdealConfig(),
        step: Callable[[float], None] | None = None,
    ) -> None:
        self.world = world
        self.config = config
        self._step = step if step is not None else world.step
        self.picks = 0
        self.retries = 0
        self.failures: list[str] = []

    # motions --------------------------------------------------------------------------------
    def _settle(self) -> None:
        w, cfg = self.world, self.config
        n = int(math.ceil(cfg.move_timeout_s / cfg.dt))
        for _ in range(n):
            if w.settled():
                return
            self._step(cfg.dt)
        if not w.settled():
            raise MotionTimeout(f"motion did not settle within {cfg.move_timeout_s}s")

    def move_joints(self, q: np.ndarray | tuple[float, ...]) -> None:
        self.world.command(np.asarray(q, dtype=float))
        self._settle()

    def move_tip(self, x: float, y: float, z: float, jaw: float) -> None:
        w = self.world
        q, _pitch = w.arm.ik_search((x, y, z), APPROACH_PITCHES, q0=w.q[:5])
        self.move_joints(np.concatenate([q, [jaw]]))

    def move_grasp(self, x: float, y: float, z: float, width: float, jaw: float) -> None:
        """Jaws around an object of ``width`` centred at (x, y), the tool point at ``z``."""
        w = self.world
        q, _pitch = grasp_joints(w.arm, (x, y, z), width, APPROACH_PITCHES, w.q[:5])
        self.move_joints(np.concatenate([q, [jaw]]))

    def gripper(self, angle: float) -> None:
        self.world.command({"gripper": angle})
        self._settle()

    # skills ---------------------------------------------------------------------------------
    def pick(self, name: str) -> bool:
        """Grasp ``name`` and lift it; True when it is held at hover height."""
        w, cfg = self.world, self.config
        obj = w.objects[name]
        self.picks += 1
        jaw_open = open_angle(obj.width)
        self.move_grasp(obj.x, obj.y, cfg.hover_z, obj.width, jaw_open)
        obj = w.objects[name]  # it may have been moved meanwhile; the ideal one re-reads
        # straight down onto it at the grasp's pitch: a single joint-space move would swing
        # the fixed jaw through the object's near side on the way
        for q in descent(w.arm, (obj.x, obj.y, cfg.grasp_z), obj.width, cfg.hover_z,
                         APPROACH_PITCHES, w.q[:5]):
            self.move_joints(np.concatenate([q, [jaw_open]]))
        self.gripper(cfg.close_angle)
        self.move_tip(float(w.tip_xyz[0]), float(w.tip_xyz[1]), cfg.hover_z, cfg.close_angle)
        return w.held is obj

    def place(self, name: str, receptacle: str) -> bool:
        w, cfg = self.world, self.config
        rec = w.receptacles[receptacle]
        obj = w.objects[name]
        # the held object sits half its width along the closing direction from the tool point
        q, _pitch = w.arm.ik_search((rec.x, rec.y, cfg.release_z), APPROACH_PITCHES,
                                    q0=w.q[:5])
        d = closing_dir(w.arm, q)
        x, y = rec.x - obj.radius * d[0], rec.y - obj.radius * d[1]
        self.move_tip(x, y, cfg.release_z, cfg.close_angle)
        jaw_open = open_angle(obj.width)
        self.gripper(jaw_open)
        self.move_tip(x, y, cfg.release_z + 0.02, jaw_open)
        return w.objects[name].location == receptacle

    def home(self) -> None:
        self.move_joints(self.world.config.home)

    # the episode ------------------------------------------------------------------------------
    def run(self) -> EpisodeResult:
        w, cfg = self.world, self.config
        try:
            for _round in range(cfg.max_rounds):
                for name, goal in GOALS.items():
                    self._tidy(name, goal)
                self.home()
                if w.success():
                    break
        except (UnreachableError, MotionTimeout) as e:
            self.failures.append(f"{type(e).__name__}: {e}")
        return EpisodeResult(
            seed=w.seed,
            success=w.success(),
            steps=w.steps,
            sim_time_s=w.t,
            path_length_m=w.path_length,
            picks=self.picks,
            retries=self.retries,
            failures=tuple(self.failures),
            faults={k: v for k, v in w.faults.counts.items() if v},
        )

    def _tidy(self, name: str, goal: str) -> None:
        w, cfg = self.world, self.config
        for attempt in range(cfg.max_attempts):
            obj = w.objects[name]
            if obj.location == goal:
                return
            if obj.location == "floor":
                self.failures.append(f"{name} fell off the table")
                return
            if attempt:
                self.retries += 1
            if not self.pick(name):
                self.gripper(open_angle(obj.width))
                continue
            self.place(name, goal)
        if w.objects[name].location != goal:
            self.failures.append(f"{name} not in {goal} after {cfg.max_attempts} attempts")


def run_ideal_episode(world: World, seed: int, config: IdealConfig = IdealConfig(),
                      step: Callable[[float], None] | None = None) -> EpisodeResult:
    """Reset ``world`` to ``seed`` and run one ideal tidy-up episode."""
    world.reset(seed)
    return IdealController(world, config, step).run()
