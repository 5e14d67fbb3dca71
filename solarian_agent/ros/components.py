"""What each ROS node runs, without ROS: the core component(s) on the node's private Bus.

A node shell reads its parameters, calls one ``build_*`` here, bridges the returned
:class:`NodeCore`'s Bus to rclpy along its :class:`~solarian_agent.ros.graph.NodeSpec` and runs
its loops.  The wiring mirrors :mod:`solarian_agent.system` (the embedded run), split by node, so
the in-process run and the ROS graph use the same components with the same names; the graph
contract test builds every core here and compares its Bus endpoints with the node's spec.

Nothing here imports rclpy: it is tested on a machine without ROS.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core import names
from ..core.clock import Clock
from ..core.config import AgentConfig, load_agent_config
from ..core.errors import ConfigError
from ..core.messages import AgentState, JointCommand, OperatorEvent
from ..core.transport import LATCHED, Bus, QoS
from . import graph, liveness
from .cameras import (
    CAMERA_MODELS,
    build_camera_core,
    guess_intrinsics,
    pointing_cameras,
    skill_camera_models,
)
from .node_core import Loop, NodeCore

log = logging.getLogger(__name__)


def share_dir() -> Path:
    """The package's share directory: the source tree, or the installed
    ``share/solarian_agent`` (found the way the URDF is found)."""
    from ..arm.kinematics import default_urdf_path

    return default_urdf_path().parent.parent


def default_config_path() -> Path:
    return share_dir() / "config" / "controller.yaml"


def load_config(config_file: str = "", overrides: Mapping[str, Any] | None = None
                ) -> AgentConfig:
    """The agent: block of ``config_file`` laid over the shipped config/controller.yaml
    (default: that file alone), with ``overrides`` (already-typed ROS parameters: cameras,
    control_period_s) laid over both and validated exactly as the core validates the YAML.
    The ``cameras`` parameter selects among the configured cameras: ``cameras:=overhead``
    drops the settings for the wrist (the shipped file's or the user's own)."""
    from ..core.config import lay_over, read_yaml

    shipped = default_config_path()
    path = Path(config_file) if config_file else shipped
    own = path.expanduser().resolve() != shipped.resolve()
    doc = (read_yaml(path) or {}) if own else {}
    if not isinstance(doc, dict):
        raise ConfigError("agent", f"{path} must hold a mapping at the top level")
    base = read_yaml(shipped) or {}
    block = lay_over(dict(base.get("agent") or {}) if isinstance(base, dict) else {},
                     dict(doc.get("agent") or {}))
    # the parameters select among the file's settings: cameras:=overhead drops the wrist's
    block = lay_over(block, {k: v for k, v in (overrides or {}).items()
                             if v is not None and v != [] and v != ""})
    return load_agent_config({**doc, "agent": block}, where=str(path))


# ------------------------------------------------------------------------------------------
# arm hardware interface
# ------------------------------------------------------------------------------------------
SIMULATED_BUS_TIMEOUT_S = 0.2  # per answer, with simulated_bus:=true


class ArmCore:
    """The Feetech arm behind a lifecycle: ``configure`` opens the bus and reads the
    calibration, ``activate`` enables torque and lets commands through, ``deactivate`` holds,
    ``error`` latches the e-stop (the safe state), ``cleanup`` closes the bus.

    The control loop (:meth:`step`) runs from configure to cleanup, so an inactive arm still
    holds and still reports ``joint_states`` and diagnostics; commands are refused unless
    active.  The controller's command watchdog holds the arm when commands stop."""

    def __init__(self, bus: Bus, clock: Clock, *, arm_config: str = "",
                 port: str = "", simulated_bus: bool = False,
                 command_timeout_s: float = 0.5, estop_action: str = "hold",
                 diagnostics_period_s: float = 1.0, node: str = "arm") -> None:
        self.bus = bus
        self.clock = clock
        self.arm_config = arm_config or str(share_dir() / "config" / "arm_so101.yaml")
        self.port = port
        self.simulated_bus = simulated_bus
        self.command_timeout_s = command_timeout_s
        self.estop_action = estop_action
        self.diagnostics_period_s = diagnostics_period_s
        self.arm: Any = None
        self.controller: Any = None
        self._sim: Any = None
        self.active = False
        self.refused = 0
        self.last_refusal = ""
        self._next_diag = 0.0
        self._lock = threading.Lock()
        self._js = bus.publisher(names.JOINT_STATES, names.T_JOINT_STATE, graph.RELIABLE, node)
        self._diag = bus.publisher(names.DIAGNOSTICS, names.T_DIAGNOSTICS, graph.RELIABLE, node)
        bus.subscribe(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, self._on_command,
                      graph.RELIABLE, node)
        # a latched e-stop (pressed, or tripped by a servo fault) is announced as an operator
        # event, so the skill servers stop their skills and start none until the reset
        self._op = bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, graph.RELIABLE,
                                 node)
        self._was_estop = False
        # an e-stop latched when the bus is closed (cleanup, a lifecycle error) is latched
        # again on the next configure: only estop_reset releases it
        self._carried_estop: str | None = None
        bus.create_service(names.ESTOP, names.T_TRIGGER, self._srv_estop, node)
        bus.create_service(names.ESTOP_RESET, names.T_TRIGGER, self._srv_reset, node)
        bus.create_service(graph.SET_TORQUE, graph.T_SET_BOOL, self._srv_torque, node)

    @property
    def period_s(self) -> float:
        return float(self.controller.config.period_s) if self.controller else 0.02

    # lifecycle -----------------------------------------------------------------------------
    def configure(self) -> None:
        from ..hw.feetech.arm import FeetechArm, FeetechArmConfig
        from ..hw.feetech.calibration import ArmCalibration, default_so101
        from ..hw.feetech.controller import ArmController, ArmControllerConfig
        from ..hw.feetech.health import HealthMonitor

        cfg = FeetechArmConfig.from_yaml(self.arm_config)
        cal = None
        if self.simulated_bus:
            from ..hw.feetech.simbus import SimulatedBus

            self._sim = SimulatedBus()
            self._sim.__enter__()
            # simulated servos answer from a Python thread of this node, so their latency
            # follows the host's load, not the wire's: a real bus's 25 ms would read as lost
            cfg = replace(cfg, port=self._sim.port_name,
                          timeout_s=max(cfg.timeout_s, SIMULATED_BUS_TIMEOUT_S))
            cal = default_so101()
        elif self.port:
            cfg = replace(cfg, port=self.port)
        if cal is None:
            cal = ArmCalibration.load(cfg.calibration_file)
        arm = FeetechArm(cfg, calibration=cal)
        arm.connect()
        self.arm = arm
        self.controller = ArmController(
            arm, self.clock, ArmControllerConfig(rate_hz=cfg.rate_hz,
                                                 command_timeout_s=self.command_timeout_s,
                                                 estop_action=self.estop_action,
                                                 enable_torque_on_start=False),
            on_event=self._on_arm_event,
            health=HealthMonitor(cfg.health, read_current=arm.read_current_a))
        if self._carried_estop is not None:
            self.controller.estop(self._carried_estop)

    def _on_arm_event(self, kind: str, detail: dict[str, Any]) -> None:
        """Derating goes to the node's log and, while it lasts, into the arm's diagnostics
        message with its reason.  Not onto ``operator/events``: every event there advances
        the executor's generation and stops the running skill, and a slower arm is no reason
        to abandon a task (a servo that trips latches the e-stop, which is announced there)."""
        if kind == "derate":
            log.warning("arm derating: speed %.0f%%: %s", 100 * detail["speed_factor"],
                        detail["reason"])

    @property
    def bus_lost(self) -> bool:
        return self.controller is not None and bool(self.controller.bus_lost)

    def activate(self) -> None:
        if self.controller is None:
            raise RuntimeError("arm is not configured")
        self.controller.enable_torque()
        self.active = True

    def deactivate(self) -> None:
        self.active = False
        if self.controller is not None:
            self.controller.hold("deactivated")

    def cleanup(self) -> None:
        self.active = False
        if self.controller is not None and self.controller.latch.tripped:
            self._carried_estop = str(self.controller.latch.reason or "e-stop")
        arm, self.arm, self.controller = self.arm, None, None
        if arm is not None:
            try:
                arm.disconnect()
            except Exception as e:  # closing must not fail the transition
                log.warning("arm: disconnect failed: %s", e)
        if self._sim is not None:
            self._sim.__exit__(None, None, None)
            self._sim = None

    def error(self, reason: str) -> None:
        """The safe state: e-stop latched (hold or torque off, as configured)."""
        self.active = False
        if self.controller is not None:
            self.controller.estop(reason)
            self.controller.step()

    # loop ----------------------------------------------------------------------------------
    def step(self) -> None:
        ctl = self.controller
        if ctl is None:
            return
        reading = ctl.step()
        latched = bool(ctl.latch.tripped)
        if latched != self._was_estop:
            self._was_estop = latched
            self._op.publish(OperatorEvent("estop" if latched else "estop_reset",
                                           {"reason": ctl.latch.reason}, self.clock.now()))
        js = reading.joint_state
        if js is not None:
            self._js.publish(js)
        now = self.clock.now()
        if now >= self._next_diag:
            self._next_diag = now + self.diagnostics_period_s
            self._diag.publish(arm_diagnostics(reading, now))

    # inputs --------------------------------------------------------------------------------
    def _on_command(self, cmd: JointCommand) -> None:
        ctl = self.controller
        why = ""
        if ctl is None or not self.active:
            why = "the arm is not active"
        else:
            try:
                ctl.command(dict(zip(cmd.name, cmd.position, strict=True)), source=cmd.source,
                            max_velocity=cmd.max_velocity or None)
            except Exception as e:  # unsafe / e-stop latched: refused, never raised
                why = str(e)
        if why:
            self.refused += 1
            self.last_refusal = why
            log.warning("arm: refused a joint command from %s: %s", cmd.source, why)

    def _srv_estop(self, _req: Any) -> dict[str, Any]:
        if self.controller is None:
            return {"success": False, "message": "arm is not configured"}
        self.controller.estop("e-stop service")
        return {"success": True, "message": "e-stop latched"}

    def _srv_reset(self, _req: Any) -> dict[str, Any]:
        if self.controller is None:
            return {"success": False, "message": "arm is not configured"}
        was = self.controller.reset_estop()
        if was:
            self._carried_estop = None
        return {"success": bool(was), "message": "e-stop released" if was
                else "the e-stop was not latched"}

    def _srv_torque(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if self.controller is None:
            return {"success": False, "message": "arm is not configured"}
        if req.get("data"):
            self.controller.enable_torque()
            return {"success": True, "message": "torque enabled"}
        self.controller.disable_torque()
        return {"success": True, "message": "torque disabled"}


def arm_diagnostics(reading: Any, stamp: float) -> dict[str, Any]:
    """An ``ArmReading`` as the DiagnosticArray payload (see convert.diagnostics_to_ros)."""
    d = reading.diagnostics
    levels = {"ok": 0, "warn": 1, "error": 2}
    status = [{"name": "arm", "level": levels.get(d.level, 2), "message": d.message,
               "hardware_id": "so101",
               "values": {"mode": reading.mode, "estop": d.estop, "estop_reason": d.estop_reason,
                          "watchdog_expired": d.watchdog_expired,
                          "consecutive_faults": d.consecutive_faults,
                          **{f"bus.{k}": v for k, v in d.bus.items()}}}]
    health = {h.joint: h for h in getattr(d, "health", ())}
    for s in d.servos:
        h = health.get(s.joint)
        level = max(levels.get(s.level, 2), levels.get(h.level, 2) if h else 0)
        message = s.message if h is None else (
            h.message if s.message == "ok" else f"{s.message}; {h.message}")
        status.append({"name": f"arm/{s.joint}", "level": level,
                       "message": message, "hardware_id": f"servo {s.servo_id}",
                       "values": {"voltage_v": s.voltage_v, "temperature_c": s.temperature_c,
                                  "load": s.load, "moving": s.moving,
                                  **(h.values if h else {})}})
    if getattr(d, "speed_factor", 1.0) < 1.0:
        status[0]["values"]["speed_factor"] = d.speed_factor
    return {"stamp": stamp, "status": status}


def build_arm_core(clock: Clock, bus: Bus | None = None, **kw: Any) -> NodeCore:
    bus = bus or Bus()
    core = ArmCore(bus, clock, **kw)
    return NodeCore(bus, graph.arm_node(), [Loop("control", 0.02, core.step)],
                    shutdown=core.cleanup, parts={"arm": core})


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
    from ..core.skill import TrackerRequest
    from ..perception.tracker import ColorTrackers
    from ..skills.ports import ArmPort, CameraPort

    bus = bus or Bus()
    model = ArmModel.default()
    cameras = list(cfg.cameras)
    arm = ArmPort(bus, clock, model)
    toolset = tool_set(tools, sim, pick)
    # camera geometry (pixel <-> table): the simulator's URDF cameras or the calibrations
    cams = CameraPort(bus, skill_camera_models(camera_models, cameras, calibration_dir,
                                         required=pointing_cameras(toolset)
                                               if camera_models == "calibrated" else None))
    for c in cameras:  # a camera without a model still delivers frames
        if c not in cams.models:
            cams._subs[c] = bus.subscribe(names.image_topic(c), names.T_IMAGE,
                                          qos=QoS(depth=1), node="skills")
    # subscribed to the cameras now (as the embedded system does), so the first pick after
    # start-up finds the newest frame instead of "no frame from camera ... yet"
    trackers = ColorTrackers(bus, cameras=tuple(cameras), overlay_sink=None)
    executor = SkillExecutor(bus, clock, toolset,
                             {"arm": arm, "cameras": cams, "trackers": trackers, "robot": None},
                             trackers=trackers)

    def seed(req: Mapping[str, Any]) -> dict[str, Any]:
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

    bus.create_service(names.TRACKER_SEED, graph.T_SEED_TRACKER, seed, node="skills")
    try:
        watchdog = liveness.PlannerWatchdog(bus, clock, executor, planner_timeout_s)
    except ValueError as e:
        raise ConfigError("planner_timeout_s", str(e)) from e
    period = cfg.control_period_s

    def control() -> None:
        watchdog.tick()  # before the executor's tick: a lost planner's skills stop in this one
        trackers.update()
        executor.tick()

    def shutdown() -> None:
        # every goal ends with a result: running ones stop, queued ones are refused
        executor.advance_generation("node shutting down")
        executor.tick()

    return NodeCore(bus, graph.skills_node(list(executor.tools), cameras),
                    [Loop("control", period, control)], shutdown=shutdown,
                    parts={"executor": executor, "trackers": trackers, "arm": arm,
                           "watchdog": watchdog})


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


# ------------------------------------------------------------------------------------------
# planner
# ------------------------------------------------------------------------------------------
def plan_markers(state: AgentState, unproject: Callable[[str, float, float], Any] | None,
                 image_points: Mapping[str, Sequence[str]], cameras: Mapping[str, str],
                 frame_id: str = "world") -> list[dict[str, Any]]:
    """rviz markers for the plan: a sphere per step target (image points mapped onto the table
    plane), coloured by status, and a text listing the plan above the table."""
    colours = {"pending": (0.6, 0.6, 0.6, 0.9), "running": (1.0, 0.8, 0.0, 1.0),
               "done": (0.1, 0.8, 0.2, 0.9), "failed": (0.9, 0.1, 0.1, 1.0),
               "skipped": (0.4, 0.4, 0.4, 0.5)}
    out: list[dict[str, Any]] = [{"delete_all": True, "ns": "plan", "id": 0,
                                  "frame_id": frame_id, "stamp": state.stamp}]
    lines = [f"[{state.status}] {state.task}"[:120]]
    for i, step in enumerate(state.plan):
        status = str(step.get("status", "pending"))
        tool = step.get("tool") or ""
        lines.append(f"{step.get('step', i + 1)}. [{status}] {step.get('description', '')}"[:100])
        args = step.get("args") or {}
        if not tool or unproject is None:
            continue
        for p in image_points.get(tool, ()):
            pt = args.get(p)
            if not (isinstance(pt, (list, tuple)) and len(pt) == 2):
                continue
            try:
                xyz = unproject(cameras.get(tool, "overhead"), float(pt[0]), float(pt[1]))
            except Exception:
                continue
            out.append({"ns": "targets", "id": 100 + i, "type": "sphere", "frame_id": frame_id,
                        "stamp": state.stamp,
                        "position": (float(xyz[0]), float(xyz[1]), float(xyz[2]) + 0.01),
                        "scale": (0.03, 0.03, 0.03), "color": colours.get(status,
                                                                          colours["pending"])})
            out.append({"ns": "target_labels", "id": 200 + i, "type": "text",
                        "frame_id": frame_id, "stamp": state.stamp,
                        "position": (float(xyz[0]), float(xyz[1]), float(xyz[2]) + 0.06),
                        "scale": (0.0, 0.0, 0.025), "color": (1.0, 1.0, 1.0, 1.0),
                        "text": f"{i + 1}. {tool}"})
    out.append({"ns": "plan", "id": 1, "type": "text", "frame_id": frame_id,
                "stamp": state.stamp, "position": (0.25, -0.45, 0.35),
                "scale": (0.0, 0.0, 0.02), "color": (1.0, 1.0, 1.0, 1.0),
                "text": "\n".join(lines)})
    return out


NO_VISION = ("observe_scene is not offered: no vision backend is configured "
             "(agent.runtime.vision: none)")


def build_planner_core(clock: Clock, cfg: AgentConfig, *, provider: Any = None,
                       bus: Bus | None = None, log_root: str = "",
                       planner_name: str | None = None, camera_models: str = "sim",
                       calibration_dir: str = "") -> NodeCore:
    """``camera_models`` / ``calibration_dir``: which camera models the rviz markers of the
    plan's targets unproject with (``sim`` or the robot's ``calibrated`` files; a camera
    without one gets no target markers)."""
    from ..arm.kinematics import ArmModel
    from ..core.planner import InlineCaller, Planner, ThreadCaller
    from ..models.wiring import planner_vision
    from ..skills.ports import ArmPort
    from ..system import OFFLINE_PLANNERS, build_planner_provider, build_router

    bus = bus or Bus()
    model = ArmModel.default()
    arm = ArmPort(bus, clock, model, node="planner")
    prov = provider or build_planner_provider(cfg, planner_name)
    offline = getattr(prov, "name", "") in OFFLINE_PLANNERS
    recorder = None
    if log_root:
        from ..core.episode_log import Recorder, session_name

        # a session per planner process, an episode per run
        recorder = Recorder(Path(log_root), clock, session_name("ros planner"))
    vision_backend, scene_observer = planner_vision(bus, clock, cfg)
    planner = Planner(bus, clock, cfg, prov, recorder=recorder,
                      caller=InlineCaller() if offline else ThreadCaller(),
                      readings=arm.readings, router=build_router(cfg.events),
                      vision_backend=vision_backend, scene_observer=scene_observer)
    if recorder is not None:
        from ..system import monitor_questions

        recorder.context = lambda: {"monitor_questions": monitor_questions(planner.specs)}
    if not bus.has_service(names.OBSERVE_SCENE):
        bus.create_service(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE,
                           lambda req: {"ok": False, "error": NO_VISION,
                                        "focus": str(req.get("focus", "")).strip()},
                           node="planner")
    models = skill_camera_models(camera_models, list(cfg.cameras), calibration_dir)
    markers = bus.publisher(names.AGENT_MARKERS, names.T_MARKERS, LATCHED, node="planner")

    def on_state(state: AgentState) -> None:
        try:
            specs = planner._specs or {}
            pts = {n: s.image_points for n, s in specs.items()}
            cams = {n: s.camera or "overhead" for n, s in specs.items()}

            def unproject(cam: str, u: float, v: float) -> Any:
                return models[cam].unproject(u, v, 0.0)  # KeyError: no model, no marker

            markers.publish(plan_markers(state, unproject, pts, cams))
        except Exception as e:  # markers are a view: never fail the planner
            log.debug("planner: markers failed: %s", e)

    bus.subscribe(names.AGENT_STATE, names.T_AGENT_STATE, on_state, LATCHED, node="planner")

    def shutdown() -> None:
        planner.shutdown()
        if recorder is not None:
            recorder.close()

    def start() -> None:
        publish = getattr(planner, "publish_state", None)
        if publish is not None:  # a late viewer (transient local) sees "idle" at once
            publish()

    beat = liveness.HeartbeatPublisher(bus, clock, "planner",
                                       lambda: (planner.status, planner.generation))

    def tick() -> None:
        planner.tick()
        beat.tick()  # from the planner's own loop: a hung loop stops the beats

    return NodeCore(bus, graph.planner_node(list(cfg.cameras), []),
                    [Loop("planner", cfg.control_period_s, tick)], start=start,
                    shutdown=shutdown, parts={"planner": planner, "arm": arm,
                                              "heartbeat": beat})


__all__ = ["ArmCore", "CAMERA_MODELS", "Loop", "NodeCore", "arm_diagnostics",
           "build_arm_core", "build_camera_core", "build_monitor_core", "build_planner_core",
           "build_sim_core", "build_skills_core", "guess_intrinsics",
           "load_config", "plan_markers", "pointing_cameras", "skill_camera_models",
           "tool_names", "tool_set"]
