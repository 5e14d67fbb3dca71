"""What each ROS node runs, without ROS: the core component(s) on the node's private Bus.

A node shell reads its parameters, calls one ``build_*`` here, bridges the returned
:class:`NodeCore`'s Bus to rclpy along its :class:`~solarian_agent.rosmsg.graph.NodeSpec` and runs
its loops.  The wiring mirrors :mod:`solarian_agent.system` (the embedded run), split by node, so
the in-process run and the ROS graph use the same components with the same names; the graph
contract test builds every core here and compares its Bus endpoints with the node's spec.

The arm's and the planner's cores live in :mod:`.arm_core` and :mod:`.planner_core`, the
cameras' in :mod:`.cameras`, the configuration the nodes read in :mod:`.node_config`; their
builders are re-exported here, so a node shell finds every one in this module.

Nothing here imports rclpy: it is tested on a machine without ROS.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core import names
from ..core.approval import approve_timeout
from ..core.clock import Clock
from ..core.config import AgentConfig
from ..core.errors import ConfigError
from ..core.transport import LATCHED, Bus, QoS
from ..rosmsg import graph
from . import liveness
from .arm_core import SIMULATED_BUS_TIMEOUT_S, ArmCore, arm_diagnostics, build_arm_core
from .cameras import (
    CAMERA_MODELS,
    build_camera_core,
    guess_intrinsics,
    pointing_cameras,
    skill_camera_models,
)
from .node_config import default_config_path, load_config, share_dir
from .node_core import Loop, NodeCore
from .planner_core import NO_VISION, build_planner_core, plan_markers

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------
# simulator
# ------------------------------------------------------------------------------------------
def build_sim_core(clock: Clock, cfg: AgentConfig, *, seed: int = 0, grasp_fail_p: float = 0.0,
                   slip_p: float = 0.0, bus: Bus | None = None, sim: str = "2d") -> NodeCore:
    """The simulator backend ``sim`` (2d | mujoco) as the sim world node's core."""
    from ..arm.kinematics import ArmModel
    from ..sim.backend import build_backend, check_backend
    from ..sim.component import SimRates, SimWorldComponent
    from ..sim.faults import FaultConfig

    bus = bus or Bus()
    model = ArmModel.default()
    faults = FaultConfig(grasp_fail_p=float(grasp_fail_p), slip_p=float(slip_p))
    backend = build_backend(check_backend(sim), model, seed=seed, faults=faults)
    world, renderer = backend.world, backend.renderer
    part = SimWorldComponent(bus, clock, world, renderer, SimRates())
    period = cfg.control_period_s

    def shutdown() -> None:
        part.close()
        backend.close()

    return NodeCore(bus, graph.sim_node(tuple(renderer.cameras)),
                    [Loop("world", period, lambda: part.step(period))],
                    start=part.publish_now, shutdown=shutdown,
                    parts={"sim": part, "world": world, "renderer": renderer})


# ------------------------------------------------------------------------------------------
# skills
# ------------------------------------------------------------------------------------------
def tool_set(name: str, sim: str = "2d", pick: str = "scripted") -> dict[str, Any]:
    """The tools a skills node serves: ``tidy`` (the tidy-up controller's, pointing at the
    heights of the ``sim`` backend's scene, ``pick_object`` the ``pick`` one: scripted |
    policy) or ``toy`` (the documented test tools)."""
    if name == "toy":
        from ..testing.harness import DEFAULT_TOOLS

        return dict(DEFAULT_TOOLS)
    if name == "tidy":
        from ..system import tidy_tools

        return tidy_tools(sim, pick)
    raise ConfigError("tool_set", f"{name!r} is not one of tidy, toy")


def tool_names(name: str) -> list[str]:
    return list(tool_set(name))


def build_skills_core(clock: Clock, cfg: AgentConfig, *, tools: str = "tidy",
                      bus: Bus | None = None,
                      planner_timeout_s: float = liveness.DEFAULT_PLANNER_TIMEOUT_S,
                      camera_models: str = "sim", calibration_dir: str = "",
                      sim: str = "2d", pick: str = "scripted") -> NodeCore:
    """``camera_models``: ``sim`` (the simulator's cameras) or ``calibrated`` (the robot's
    calibration files in ``calibration_dir``; a camera the tools point through must have one
    or this raises, naming it).  ``sim``: the simulated scene the tidy tools point at."""
    from ..arm.kinematics import ArmModel
    from ..core.executor import SkillExecutor
    from ..perception.tracker import ColorTrackers
    from ..skills.ports import ArmPort

    bus = bus or Bus()
    cameras = list(cfg.cameras)
    arm = ArmPort(bus, clock, ArmModel.default())
    toolset = tool_set(tools, sim, pick)
    cams = _skill_camera_port(bus, cameras, camera_models, calibration_dir, toolset)
    # subscribed to the cameras now (as the embedded system does), so the first pick after
    # start-up finds the newest frame instead of "no frame from camera ... yet"
    trackers = ColorTrackers(bus, cameras=tuple(cameras), overlay_sink=None)
    executor = SkillExecutor(bus, clock, toolset,
                             {"arm": arm, "cameras": cams, "trackers": trackers, "robot": None},
                             trackers=trackers, approve_timeout_s=approve_timeout(cfg))
    bus.create_service(names.TRACKER_SEED, graph.T_SEED_TRACKER,
                       functools.partial(seed_tracker, trackers), node="skills")
    try:
        watchdog = liveness.PlannerWatchdog(bus, clock, executor, planner_timeout_s)
    except ValueError as e:
        raise ConfigError("planner_timeout_s", str(e)) from e
    loop = SkillsLoop(watchdog, trackers, executor)
    return NodeCore(bus, graph.skills_node(list(executor.tools), cameras),
                    [Loop("control", cfg.control_period_s, loop.control)],
                    shutdown=loop.shutdown,
                    parts={"executor": executor, "trackers": trackers, "arm": arm,
                           "watchdog": watchdog})


def _skill_camera_port(bus: Bus, cameras: list[str], camera_models: str,
                       calibration_dir: str, toolset: Mapping[str, Any]) -> Any:
    """The skills' cameras: their geometry (pixel <-> table) from the simulator's URDF
    cameras or the calibrations, and the frames of every camera, a model or not."""
    from ..skills.ports import CameraPort

    cams = CameraPort(bus, skill_camera_models(camera_models, cameras, calibration_dir,
                                         required=pointing_cameras(toolset)
                                               if camera_models == "calibrated" else None))
    for c in cameras:  # a camera without a model still delivers frames
        if c not in cams.models:
            cams._subs[c] = bus.subscribe(names.image_topic(c), names.T_IMAGE,
                                          qos=QoS(depth=1), node="skills")
    return cams


def seed_tracker(trackers: Any, req: Mapping[str, Any]) -> dict[str, Any]:
    """The ``skills/seed_tracker`` service: start a colour tracker on a point, or stop one."""
    from ..core.skill import TrackerRequest

    fld = str(req.get("field", ""))
    if req.get("stop"):
        trackers.stop(fld)
        return {"ok": True, "reason": f"stopped {fld}"}
    try:
        pt = req.get("point") or (0.0, 0.0)
        res = trackers.start(TrackerRequest(fld, str(req.get("camera", "")), "point",
                                            dict(req.get("params", {}))),
                             (float(pt[0]), float(pt[1])))
    except Exception as e:
        return {"ok": False, "reason": str(e), "area_fraction": None, "box": None}
    return {"ok": True, "reason": "", "area_fraction": res.area_fraction, "box": res.box}


class SkillsLoop:
    """The skills node's control tick and shutdown."""

    def __init__(self, watchdog: liveness.PlannerWatchdog, trackers: Any, executor: Any) -> None:
        self.watchdog = watchdog
        self.trackers = trackers
        self.executor = executor

    def control(self) -> None:
        self.watchdog.tick()  # before the executor's tick: a lost planner's skills stop in it
        self.trackers.update()
        self.executor.tick()

    def shutdown(self) -> None:
        # every goal ends with a result: running ones stop, queued ones are refused
        self.executor.advance_generation("node shutting down")
        self.executor.tick()


# ------------------------------------------------------------------------------------------
# monitor
# ------------------------------------------------------------------------------------------
def build_monitor_core(clock: Clock, cfg: AgentConfig, *, bus: Bus | None = None,
                       log_root: str = "",
                       catalogue: Sequence[Mapping[str, Any]] | None = None) -> NodeCore:
    """The monitor engine.  It reads the tool catalogue (the monitor questions) when it is
    built, so without ``catalogue`` it is built at ``start`` (after the bridge is up, retried
    by the node until ``skills/catalogue`` answers)."""
    from ..arm.kinematics import ArmModel
    from ..skills.arm_skills import StallTripwire
    from ..skills.ports import ArmPort
    from ..system import build_monitor

    bus = bus or Bus()
    arm = ArmPort(bus, clock, ArmModel.default(), node="monitor")
    recorder = None
    if log_root:
        from ..core.episode_log import Recorder

        recorder = Recorder(Path(log_root), clock, "monitor")
    parts: dict[str, Any] = {"monitor": None, "arm": arm}

    def build() -> None:
        if parts["monitor"] is not None:
            return
        parts["monitor"] = build_monitor(
            bus=bus, clock=clock, config=cfg, tripwire=StallTripwire(arm), trackers=None,
            log_provider=lambda: None if recorder is None else recorder.current,
            readings=arm.readings, catalogue=catalogue)
        if parts["monitor"] is None:
            log.info("monitor: agent.monitor is null; publishing no verdicts")

    def tick() -> None:
        engine = parts["monitor"]
        if engine is not None:
            engine.tick()

    def shutdown() -> None:
        engine = parts["monitor"]
        if engine is not None:
            engine.shutdown()
        if recorder is not None:
            recorder.close()

    if catalogue is not None:
        build()
    return NodeCore(bus, graph.monitor_node(list(cfg.cameras)),
                    [Loop("monitor", cfg.control_period_s, tick)], start=build,
                    shutdown=shutdown, parts=parts)


__all__ = ["ArmCore", "CAMERA_MODELS", "LATCHED", "NO_VISION", "SIMULATED_BUS_TIMEOUT_S", "Loop",
           "NodeCore", "arm_diagnostics", "default_config_path", "share_dir",
           "build_arm_core", "build_camera_core", "build_monitor_core", "build_planner_core",
           "build_sim_core", "build_skills_core", "guess_intrinsics",
           "load_config", "plan_markers", "pointing_cameras", "skill_camera_models",
           "tool_names", "tool_set"]
