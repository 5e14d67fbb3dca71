"""The embedded default: every component of the ROS graph in one process on one Bus, over the
built-in simulator.  ``solarian-agent demo``, the panel, the tests and the benchmarks build it
here, so they all run the same wiring the ROS launch files start as separate nodes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .arm.kinematics import ArmModel
from .core import monitor as core_monitor
from .core.approval import approve_timeout
from .core.clock import Clock, FakeClock, SystemClock
from .core.config import AgentConfig, load_agent_config, read_yaml
from .core.episode_log import Recorder, register_secret, session_name
from .core.errors import ConfigError
from .core.executor import SkillExecutor
from .core.model_api import ModelConfigError, ModelProvider
from .core.monitor import MonitorEngine
from .core.planner import InlineCaller, ModelCaller, Planner, ThreadCaller
from .core.runtime import Runtime
from .core.skill import Tool
from .core.transport import Bus
from .core.vision import VisionBackend
from .models.wiring import build_monitor_backend, build_router, planner_vision
from .perception.tracker import ColorTrackers
from .sim.backend import DEFAULT_BACKEND, SimWorld, build_backend, point_heights
from .sim.component import SimRates, SimWorldComponent
from .sim.faults import FaultConfig
from .skills.arm_skills import (
    HomeSkill,
    MoveSkill,
    PickSkill,
    PlaceSkill,
    StallTripwire,
    StopSkill,
    VerifyState,
)
from .skills.ports import ArmPort, CameraPort

log = logging.getLogger(__name__)

OFFLINE_PLANNERS = ("rules", "scripted")


PICKS = ("scripted", "policy")


def pick_tool(pick: str = "scripted", sim_backend: str = DEFAULT_BACKEND,
              inference: str = "thread") -> Tool:
    """``pick_object``: the scripted pick, or (``policy``) the learned pick policy of
    ``config/skills/pick_policy.yaml`` (loaded and checked now: a missing backend, file or
    mismatch raises ConfigError naming it).  ``inference``: ``thread`` (real time) or
    ``inline`` (simulated time)."""
    z = point_heights(sim_backend).get("pick_object", {})
    if pick == "scripted":
        return Tool(PickSkill, {"camera": "overhead", **z})
    if pick == "policy":
        from .skills.policy import PolicySkill, default_policy_config_path, load_policy

        return Tool(PolicySkill, {"camera": "overhead", **z, "inference": inference,
                                  "policy": load_policy(default_policy_config_path())})
    raise ConfigError("pick", f"{pick!r} is not allowed; allowed values: {', '.join(PICKS)}")


def tidy_tools(sim_backend: str = DEFAULT_BACKEND, pick: str = "scripted",
               inference: str = "thread") -> dict[str, Tool]:
    """The tools of the tidy-up controller: pick, place, verify_state and stop (looking is the
    planner's own ``observe``) plus moves and homes, skills with clear bounds and never raw
    joint angles; points are unprojected at the heights the backend's scene shows from above.
    ``pick``: which ``pick_object`` (:func:`pick_tool`)."""
    z = point_heights(sim_backend)
    return {
        "move_to_pose": Tool(MoveSkill, {"offer": "pose"}),
        "nudge_gripper": Tool(MoveSkill, {"offer": "delta"}),
        "set_gripper": Tool(MoveSkill, {"offer": "gripper"}),
        "pick_object": pick_tool(pick, sim_backend, inference),
        "place_at": Tool(PlaceSkill, {"camera": "overhead", **z.get("place_at", {})}),
        "verify_state": Tool(VerifyState, {"camera": "overhead"}),
        "home": Tool(HomeSkill),
        "home_holding": Tool(HomeSkill, {"keep_grip": True}),
        "stop": Tool(StopSkill),
    }


def default_config_path() -> Path:
    from .arm.kinematics import default_urdf_path

    return default_urdf_path().parent.parent / "config" / "controller.yaml"


def load_config(path: str | Path | None = None) -> AgentConfig:
    """The configuration a user's file makes: its ``agent:`` block laid over the shipped
    ``config/controller.yaml`` (so an empty file, or one that only picks the planner, runs
    with every shipped default, cameras included); None: the shipped file itself."""
    shipped = default_config_path()
    if path is None or Path(path).expanduser().resolve() == shipped.resolve():
        return load_agent_config(shipped)
    doc = read_yaml(shipped) or {}
    defaults = doc.get("agent") if isinstance(doc, dict) else None
    return load_agent_config(path, defaults=dict(defaults or {}))


def with_models(cfg: AgentConfig, *, monitor: str | None = None) -> AgentConfig:
    """``cfg`` with the monitor provider a command line picked (``none``: no monitor)."""
    if monitor is None:
        return cfg
    if monitor == "none":
        return replace(cfg, monitor=None)
    from .core.config import MONITOR_PROVIDERS, MonitorConfig

    if monitor not in MONITOR_PROVIDERS:
        raise ConfigError("monitor", f"{monitor!r} is not a monitor provider; allowed: none, "
                                     f"{', '.join(MONITOR_PROVIDERS)}")
    return replace(cfg, monitor=replace(cfg.monitor or MonitorConfig(), provider=monitor))


def check_cameras(cfg: AgentConfig, robot_cameras: Sequence[str], robot: str) -> None:
    """Every camera of ``agent.cameras`` is one the robot has (a typo is an error naming
    it)."""
    for i, cam in enumerate(cfg.cameras):
        if cam not in robot_cameras:
            raise ConfigError(f"agent.cameras[{i}]", f"{robot} has no camera {cam!r}; its "
                                                     f"cameras: {', '.join(robot_cameras)}")


def build_planner_provider(cfg: AgentConfig, name: str | None = None) -> ModelProvider:
    provider = name or cfg.planner.provider
    if provider == "rules":
        from .models.rules_planner import RulesPlanner

        return RulesPlanner(model=cfg.planner.model or "rules-v1")
    try:
        from .models.factory import build_provider
    except ImportError as e:  # pragma: no cover - the factory ships with the package
        raise ModelConfigError(f"planner provider {provider!r} needs the model SDKs: {e}") from e
    pcfg = replace(cfg.planner, provider=provider)
    return build_provider(pcfg, purpose="planner")


def build_monitor(*, bus: Bus, clock: Clock, config: AgentConfig,
                  backend: VisionBackend | None = None, **kw: Any) -> MonitorEngine | None:
    """:func:`solarian_agent.core.monitor.build_monitor` with the vision backend
    ``agent.monitor.provider`` names (``backend`` given: that one).  None when ``monitor`` is
    null; raises ConfigError / ModelConfigError / MonitorConfigError."""
    if backend is None and config.monitor is not None:
        backend = build_monitor_backend(config.monitor)
    return core_monitor.build_monitor(bus=bus, clock=clock, config=config, backend=backend,
                                      **kw)


@dataclass
class SimSystem:
    clock: Clock
    bus: Bus
    runtime: Runtime
    world: SimWorld
    sim: SimWorldComponent
    arm: ArmPort
    cameras: CameraPort
    trackers: ColorTrackers
    executor: SkillExecutor
    planner: Planner
    config: AgentConfig
    recorder: Recorder | None
    monitor: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    def run_until(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        return self.runtime.run_until(pred, timeout_s)

    def shutdown(self) -> None:
        self.planner.shutdown()
        if self.monitor is not None:
            self.monitor.shutdown()
        if self.recorder is not None:
            self.recorder.close()
        backend = self.extras.get("backend")
        if backend is not None:
            backend.close()


def build_sim_system(
    *,
    config: AgentConfig | None = None,
    seed: int = 0,
    faults: FaultConfig | None = None,
    planner: ModelProvider | None = None,
    planner_name: str | None = None,
    log_root: Path | None = None,
    session: str | None = None,
    realtime: bool = False,
    style: Any = None,
    with_monitor: bool = True,
    caller: ModelCaller | None = None,
    sim_backend: str = DEFAULT_BACKEND,
    pick: str = "scripted",
    monitor_backend: VisionBackend | None = None,
) -> SimSystem:
    """Every component on one bus over the simulator backend ``sim_backend`` (``2d`` or
    ``mujoco``; ``style`` is its renderer's look).  ``pick``: ``scripted`` or ``policy`` (the
    learned pick policy; its inference runs inline in simulated time, on its own thread in
    real time).  ``monitor_backend``: the monitor's vision backend (default: the one
    ``agent.monitor.provider`` names)."""
    cfg = config or load_config()
    # the simulated clock starts at the real time, so bag stamps and ISO times are plausible
    clock: Clock = SystemClock() if realtime else FakeClock(epoch=time.time())
    bus = Bus()
    runtime = Runtime(clock, bus, period_s=cfg.control_period_s, realtime=realtime)
    model = ArmModel.default()
    backend = build_backend(sim_backend, model, seed=seed, faults=faults, style=style)
    world, renderer = backend.world, backend.renderer
    try:
        check_cameras(cfg, list(renderer.cameras), f"the {sim_backend} simulator")
    except ConfigError:
        backend.close()
        raise
    sim = SimWorldComponent(bus, clock, world, renderer, SimRates())
    arm = ArmPort(bus, clock, model)
    cams = CameraPort(bus, {c: renderer.camera(c) for c in renderer.cameras})
    recorder = None
    if log_root is not None:  # t: the wall clock; sim_t: the simulator's time since now
        recorder = Recorder(Path(log_root), clock, session or session_name("sim"),
                            simulated=True, sim_zero=clock.now())
    trackers = ColorTrackers(bus, cameras=tuple(renderer.cameras))
    try:
        tools = tidy_tools(sim_backend, pick, "thread" if realtime else "inline")
    except ConfigError:
        backend.close()
        raise
    executor = SkillExecutor(bus, clock, tools,
                             {"arm": arm, "cameras": cams, "trackers": trackers},
                             trackers=trackers, approve_timeout_s=approve_timeout(cfg))
    provider = planner or build_planner_provider(cfg, planner_name)
    offline = provider.name in OFFLINE_PLANNERS
    register_run_secrets(cfg, None if offline else provider.name)
    vision_backend, scene_observer = planner_vision(bus, clock, cfg)
    pl = Planner(bus, clock, cfg, provider, recorder=recorder,
                 caller=caller or (InlineCaller() if offline else ThreadCaller()),
                 readings=arm.readings, image_overlays=[trackers.overlay],
                 router=build_router(cfg.events), vision_backend=vision_backend,
                 scene_observer=scene_observer)

    def overlay(camera: str, fld: str, rec: dict[str, Any]) -> None:
        if pl.log is not None:
            pl.log.overlay(camera, fld, rec)

    trackers.overlay_sink = overlay
    if recorder is not None:
        recorder.context = lambda: {"monitor_questions": monitor_questions(pl.specs)}
    monitor = None
    if with_monitor and cfg.monitor is not None:
        monitor = _build_monitor(bus, clock, cfg, arm, trackers, pl, monitor_backend)
    sim.publish_now()
    runtime.add("sim", sim.step)
    runtime.add("trackers", lambda dt: trackers.update())
    runtime.add("executor", lambda dt: executor.tick())
    if monitor is not None:
        runtime.add("monitor", lambda dt: monitor.tick())
    runtime.add("planner", lambda dt: pl.tick())
    return SimSystem(clock, bus, runtime, world, sim, arm, cams, trackers, executor, pl, cfg,
                     recorder, monitor, extras={"backend": backend})


def _build_monitor(bus: Bus, clock: Clock, cfg: AgentConfig, arm: ArmPort,
                   trackers: ColorTrackers, planner: Planner,
                   backend: VisionBackend | None = None) -> Any:
    """The monitor engine with its vision backend and the stall tripwire."""
    return build_monitor(bus=bus, clock=clock, config=cfg, backend=backend,
                         tripwire=StallTripwire(arm),
                         trackers=trackers, log_provider=lambda: planner.log,
                         readings=arm.readings)


def register_run_secrets(cfg: AgentConfig, planner_provider: str | None = None,
                         env: Mapping[str, str] | None = None) -> list[str]:
    """Register the API key of every HTTP provider this run may call (planner, monitor,
    router, vision), read from ``api_key_env`` or the provider's default variable, as a secret
    the episode log scrubs.  ``planner_provider``: the planner actually built (None: an
    offline one).  Returns the variable names registered."""
    import os

    from .models.factory import DEFAULT_KEY_ENV

    environ = os.environ if env is None else env
    wanted: list[tuple[str, str | None]] = []
    if planner_provider is not None:
        wanted.append((planner_provider, cfg.planner.api_key_env))
    if cfg.monitor is not None:
        wanted.append((cfg.monitor.provider, cfg.monitor.api_key_env))
    if cfg.events.router is not None:
        wanted.append((cfg.events.router.provider, cfg.events.router.api_key_env))
    vision = cfg.runtime.vision
    wanted.append(({"openai-responses": "openai_responses"}.get(vision, vision), None))
    out: list[str] = []
    for prov, var in wanted:
        name = var or DEFAULT_KEY_ENV.get(prov)
        if name and name not in out:
            out.append(name)
            register_secret(environ.get(name))
    return out


def monitor_questions(specs: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each tool's monitor questions with their rules (logged in ``episode_started``, so the
    episode viewer can draw the rules' thresholds beside the answers)."""
    return {name: [dict(q) for q in spec.monitor] for name, spec in specs.items()
            if getattr(spec, "monitor", ())}
