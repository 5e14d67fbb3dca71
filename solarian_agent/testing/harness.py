"""Documented test fakes for the harness: a toy robot with a camera and a few skills, wired on
an in-process bus with a fake clock, so tests drive whole runs without sleeping.

``ToyRobot`` publishes a camera frame (a grey image with a red square the pointing skills can
aim at) and joint states; ``Wait`` finishes after ``seconds``; ``PointAt`` takes an image point;
``Spin`` never ends by itself.  None of this is used outside tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core import names
from ..core.clock import Clock, FakeClock
from ..core.config import AgentConfig, load_agent_config
from ..core.episode_log import Recorder
from ..core.executor import SkillExecutor
from ..core.messages import Image, JointState
from ..core.planner import InlineCaller, ModelCaller, Planner
from ..core.runtime import Runtime
from ..core.skill import Skill, Tool
from ..core.transport import SENSOR_DATA, Bus, QoS
from ..models.scripted import ScriptedProvider, ScriptEntry
from ..models.wiring import build_router, planner_vision


class ToyRobot:
    """One camera (``cam``, 640x480) and one joint ``j`` that moves toward its command."""

    def __init__(self, bus: Bus, clock: FakeClock, width: int = 640, height: int = 480) -> None:
        self.bus = bus
        self.clock = clock
        self.width, self.height = width, height
        self.position = 0.0
        self.target = 0.0
        self.speed = 1.0  # units/s
        self.seq = 0
        self.target_px = (400, 300)
        self._img = bus.publisher(names.image_topic("cam"), names.T_IMAGE, SENSOR_DATA)
        self._js = bus.publisher(names.JOINT_STATES, names.T_JOINT_STATE, QoS(depth=1))
        self.frames_published: list[Image] = []

    def frame(self) -> Image:
        img = np.full((self.height, self.width, 3), 90, np.uint8)
        x, y = self.target_px
        img[y - 10:y + 10, x - 10:x + 10] = (40, 40, 200)
        img.setflags(write=False)
        self.seq += 1
        return Image(img, self.clock.now(), "cam", self.seq)

    def tick(self, dt: float) -> None:
        step = max(-self.speed * dt, min(self.speed * dt, self.target - self.position))
        self.position += step
        self._js.publish(JointState(self.clock.now(), ("j",), (self.position,)))
        f = self.frame()
        self.frames_published.append(f)
        if len(self.frames_published) > 5:
            del self.frames_published[0]
        self._img.publish(f)


class Wait(Skill):
    description = "Wait a number of seconds (test skill)."
    parameters = {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0,
                                                                "maximum": 60}},
                  "required": ["seconds"], "additionalProperties": False}
    resources = ()

    def start(self) -> None:
        self.end = self.ctx.clock.now() + float(self.params["seconds"])

    def tick(self) -> None:
        if self.ctx.clock.now() >= self.end:
            self.finish(reason="waited")


class Home(Skill):
    """Takes the arm 0.3 s and ends by itself: a monitor rule's ``then`` follow-up in tests."""

    description = "Go home (test skill)."
    resources = ("arm",)

    def start(self) -> None:
        self.end = self.ctx.clock.now() + 0.3

    def tick(self) -> None:
        if self.ctx.clock.now() >= self.end:
            self.finish(reason="home")


class MoveJoint(Skill):
    description = "Move the toy joint to a position (test skill)."
    parameters = {"type": "object", "properties": {"to": {"type": "number", "minimum": -5,
                                                           "maximum": 5}},
                  "required": ["to"], "additionalProperties": False}

    def start(self) -> None:
        robot: ToyRobot = self.ctx.port("robot")
        robot.target = float(self.params["to"])

    def tick(self) -> None:
        robot: ToyRobot = self.ctx.port("robot")
        if abs(robot.position - robot.target) < 1e-6:
            self.finish(reason="arrived")

    def on_stop(self, reason: str) -> None:
        robot: ToyRobot = self.ctx.port("robot")
        robot.target = robot.position


class PointAt(Skill):
    description = "Touch the thing at a point in the camera image (test skill)."
    parameters = {"type": "object", "properties": {"point": {
        "type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}},
        "required": ["point"], "additionalProperties": False}
    image_points = ("point",)
    camera = "cam"
    seen_points: list[list[float]] = []

    def start(self) -> None:
        PointAt.seen_points.append(list(self.params["point"]))
        self.end = self.ctx.clock.now() + 1.0

    def tick(self) -> None:
        if self.ctx.clock.now() >= self.end:
            self.finish()


class Spin(Skill):
    description = "Spin until stopped (test skill; ends only by its limit or the monitor)."
    ends_by_itself = False
    max_duration_s = 3.0
    resources = ("spinner",)


class Hidden(Skill):
    description = None  # left off the planner's tool list


class Boom(Skill):
    description = "A skill that raises (test skill)."
    resources = ()

    def tick(self) -> None:
        raise RuntimeError("kaboom")


DEFAULT_TOOLS: dict[str, Tool] = {
    "wait": Tool(Wait),
    "move_joint": Tool(MoveJoint, {"arm": "toy"}),
    "point_at": Tool(PointAt, {"camera": "cam", "secret_binding": "policy.yaml"}),
    "spin": Tool(Spin),
    "hidden": Tool(Hidden),
    "boom": Tool(Boom),
}


def record_events(bus: Bus, topic: str = names.SKILL_EVENTS, depth: int = 500) -> list[Any]:
    """Every agent event published on ``topic`` from now on, in order (a list the bus
    appends to; ``depth`` bounds how many the subscription queues between deliveries)."""
    events: list[Any] = []
    bus.subscribe(topic, names.T_AGENT_EVENT, callback=events.append, qos=QoS(depth=depth))
    return events


def started(events: Iterable[Any], tool: str) -> list[dict[str, Any]]:
    """The ``skill_started`` events of ``tool`` among recorded agent events."""
    return [e.data for e in events if e.kind == "skill_started" and e.data.get("skill") == tool]


def last_user_text(request: Any) -> str:
    """The text of the last user message of a model request (what the planner was woken with)."""
    return str([m for m in request.messages if m.role == "user"][-1].text())


@dataclass
class Harness:
    clock: FakeClock
    bus: Bus
    runtime: Runtime
    robot: ToyRobot
    executor: SkillExecutor
    planner: Planner
    provider: ScriptedProvider
    recorder: Recorder | None
    idle_calls: list[float] = field(default_factory=list)

    def run_until(self, pred: Any, timeout_s: float = 30.0) -> bool:
        return bool(self.runtime.run_until(pred, timeout_s))

    def say(self, text: str) -> None:
        self.planner.message(text)


def make_harness(
    script: Iterable[ScriptEntry] = (),
    *,
    tools: Mapping[str, Tool] | None = None,
    config: AgentConfig | dict[str, Any] | None = None,
    log_root: Path | None = None,
    caller: ModelCaller | None = None,
    reads_images: bool = True,
    max_image_side: int = 1568,
    vision_backend: Any = None,
    rng: Any = None,
    ports: Mapping[str, Any] | None = None,
    planner_clock: Clock | None = None,
) -> Harness:
    clock = FakeClock()
    bus = Bus()
    if config is None:
        cfg = AgentConfig(cameras=["cam"], planner_heartbeat_s=None)
    elif isinstance(config, dict):
        cfg = load_agent_config({"agent": {"cameras": ["cam"], "planner_heartbeat_s": None,
                                           **config}})
    else:
        cfg = config
    cfg = replace(cfg, monitor=None) if isinstance(config, (type(None), dict)) else cfg
    runtime = Runtime(clock, bus, period_s=cfg.control_period_s)
    robot = ToyRobot(bus, clock)
    executor = SkillExecutor(bus, clock, tools if tools is not None else DEFAULT_TOOLS,
                             {"robot": robot, **(ports or {})})
    provider = ScriptedProvider(script, reads_images=reads_images,
                                max_image_side=max_image_side)
    recorder = Recorder(log_root, clock, "0001_test") if log_root is not None else None
    h: Harness
    vision_backend, scene_observer = planner_vision(bus, clock, cfg, backend=vision_backend)
    # planner_clock: the planner on another clock than the simulated robot (a benchmark runs
    # it on the wall clock while the robot's loop runs in real time)
    planner = Planner(bus, planner_clock or clock, cfg, provider, recorder=recorder,
                      caller=caller or InlineCaller(), vision_backend=vision_backend,
                      scene_observer=scene_observer, router=build_router(cfg.events), rng=rng,
                      on_agent_idle=lambda: h.idle_calls.append(clock.now()))
    runtime.add("robot", robot.tick)
    runtime.add("executor", lambda dt: executor.tick())
    runtime.add("planner", lambda dt: planner.tick())
    h = Harness(clock, bus, runtime, robot, executor, planner, provider, recorder)
    runtime.step()  # first frames and joint states
    return h
