"""The planner node's core without ROS: the planner on the node's Bus, the rviz markers of its
plan, its heartbeat, and ``observe_scene`` answered "not offered" when no vision is configured."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core import names
from ..core.clock import Clock
from ..core.config import AgentConfig
from ..core.messages import AgentState
from ..core.transport import LATCHED, Bus
from ..rosmsg import graph
from . import liveness
from .cameras import skill_camera_models
from .node_core import Loop, NodeCore

log = logging.getLogger(__name__)

NO_VISION = ("observe_scene is not offered: no vision backend is configured "
             "(agent.runtime.vision: none)")


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


class PlanMarkers:
    """Publishes the plan's markers on every planner state: step targets unprojected with the
    camera ``models`` (a camera without one gets no target markers).  ``specs`` gives the
    tools' specs (their image points and cameras) as the planner has them now."""

    def __init__(self, specs: Callable[[], Mapping[str, Any]], models: Mapping[str, Any],
                 publisher: Any) -> None:
        self.specs = specs
        self.models = models
        self.publisher = publisher

    def unproject(self, cam: str, u: float, v: float) -> Any:
        return self.models[cam].unproject(u, v, 0.0)  # KeyError: no model, no marker

    def on_state(self, state: AgentState) -> None:
        try:
            specs = self.specs() or {}
            pts = {n: s.image_points for n, s in specs.items()}
            cams = {n: s.camera or "overhead" for n, s in specs.items()}
            self.publisher.publish(plan_markers(state, self.unproject, pts, cams))
        except Exception as e:  # markers are a view: never fail the planner
            log.debug("planner: markers failed: %s", e)


class PlannerLoop:
    """The planner node's loop and lifecycle: the planner ticks, then its heartbeat (from the
    planner's own loop: a hung loop stops the beats); at start the state is published for a
    late viewer; at shutdown the planner, then its recorder, close."""

    def __init__(self, planner: Any, beat: liveness.HeartbeatPublisher,
                 recorder: Any = None) -> None:
        self.planner = planner
        self.beat = beat
        self.recorder = recorder

    def tick(self) -> None:
        self.planner.tick()
        self.beat.tick()

    def start(self) -> None:
        publish = getattr(self.planner, "publish_state", None)
        if publish is not None:  # a late viewer (transient local) sees "idle" at once
            publish()

    def shutdown(self) -> None:
        self.planner.shutdown()
        if self.recorder is not None:
            self.recorder.close()


def _planner_recorder(log_root: str, clock: Clock) -> Any:
    """A session per planner process (an episode per run), or None without ``log_root``."""
    if not log_root:
        return None
    from ..core.episode_log import Recorder, session_name

    return Recorder(Path(log_root), clock, session_name("ros planner"))


def _answer_no_vision(req: Mapping[str, Any]) -> dict[str, Any]:
    return {"ok": False, "error": NO_VISION, "focus": str(req.get("focus", "")).strip()}


def build_planner_core(clock: Clock, cfg: AgentConfig, *, provider: Any = None,
                       bus: Bus | None = None, log_root: str = "",
                       planner_name: str | None = None, camera_models: str = "sim",
                       calibration_dir: str = "") -> NodeCore:
    """``camera_models`` / ``calibration_dir``: which camera models the rviz markers of the
    plan's targets unproject with (``sim`` or the robot's ``calibrated`` files; a camera
    without one gets no target markers)."""
    from ..arm.kinematics import ArmModel
    from ..core.planner import InlineCaller, Planner, ThreadCaller
    from ..models.wiring import build_router, planner_vision
    from ..skills.ports import ArmPort
    from ..system import OFFLINE_PLANNERS, build_planner_provider

    bus = bus or Bus()
    arm = ArmPort(bus, clock, ArmModel.default(), node="planner")
    prov = provider or build_planner_provider(cfg, planner_name)
    offline = getattr(prov, "name", "") in OFFLINE_PLANNERS
    recorder = _planner_recorder(log_root, clock)
    vision_backend, scene_observer = planner_vision(bus, clock, cfg)
    planner = Planner(bus, clock, cfg, prov, recorder=recorder,
                      caller=InlineCaller() if offline else ThreadCaller(),
                      readings=arm.readings, router=build_router(cfg.events),
                      vision_backend=vision_backend, scene_observer=scene_observer)
    if recorder is not None:
        from ..system import monitor_questions

        recorder.context = lambda: {"monitor_questions": monitor_questions(planner.specs)}
    if not bus.has_service(names.OBSERVE_SCENE):
        bus.create_service(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE, _answer_no_vision,
                           node="planner")
    markers = PlanMarkers(planner.catalogue.fetched,
                          skill_camera_models(camera_models, list(cfg.cameras),
                                              calibration_dir),
                          bus.publisher(names.AGENT_MARKERS, names.T_MARKERS, LATCHED,
                                        node="planner"))
    bus.subscribe(names.AGENT_STATE, names.T_AGENT_STATE, markers.on_state, LATCHED,
                  node="planner")
    beat = liveness.HeartbeatPublisher(bus, clock, "planner",
                                       lambda: (planner.status, planner.generation))
    loop = PlannerLoop(planner, beat, recorder)
    return NodeCore(bus, graph.planner_node(list(cfg.cameras), []),
                    [Loop("planner", cfg.control_period_s, loop.tick)], start=loop.start,
                    shutdown=loop.shutdown, parts={"planner": planner, "arm": arm,
                                                   "heartbeat": beat})


__all__ = ["NO_VISION", "PlanMarkers", "PlannerLoop", "build_planner_core", "plan_markers"]
