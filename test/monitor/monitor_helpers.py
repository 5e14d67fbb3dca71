"""Test rig for the monitor engine: a bare Bus + FakeClock, a catalogue service, skill events
published by hand, a scripted vision backend and a caller the test completes explicitly."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.config import MonitorConfig
from solarian_agent.core.messages import AgentEvent, Image, JointState, MonitorVerdict
from solarian_agent.core.model_api import ModelError
from solarian_agent.core.monitor import MonitorEngine
from solarian_agent.core.planner import ModelCaller
from solarian_agent.core.transport import Bus, QoS
from solarian_agent.perception.vision import (
    Description,
    FrameForVision,
    MonitorAnswer,
    MonitorTickRequest,
    TickReply,
    predicate_answer,
)

Answer = tuple[str, float] | float | None  # choice (value, p), predicate p, or no answer


def choice(value: str, p: float) -> tuple[str, float]:
    return (value, p)


class FakeBackend:
    """Answers each tick from ``script`` (a list of {question: Answer} dicts, or exceptions);
    records every request."""

    name = "fake"
    model = "fake-vision"
    inline = True  # the engine calls it on the tick thread unless a caller is given

    def __init__(self, script: Sequence[Any] = (), default: dict[str, Answer] | None = None
                 ) -> None:
        self.script = list(script)
        self.default = default
        self.requests: list[MonitorTickRequest] = []
        self.describe_calls: list[tuple[FrameForVision, str]] = []

    def answer_tick(self, request: MonitorTickRequest, *, timeout_s: float) -> TickReply:
        self.requests.append(request)
        entry = self.script.pop(0) if self.script else self.default
        if isinstance(entry, BaseException):
            raise entry
        if callable(entry):
            entry = entry(request)
        answers: dict[str, MonitorAnswer] = {}
        for q in request.questions:
            a = (entry or {}).get(q.name)
            if a is None:
                continue
            if isinstance(a, tuple):
                answers[q.name] = MonitorAnswer(q.name, a[0], a[1], "scripted")
            else:
                answers[q.name] = predicate_answer(q.name, float(a), "scripted")
        return TickReply(answers, model=self.model, latency_s=0.25)

    def describe(self, frame: FrameForVision, focus: str, *, timeout_s: float) -> Description:
        self.describe_calls.append((frame, focus))
        return Description(f"a scene ({frame.width}x{frame.height})", model=self.model)


class ManualCaller(ModelCaller):
    """Holds every call until the test runs it: a call stays "in flight" as long as it wants."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], Any], cf.Future[Any]]] = []
        self.submitted = 0

    def submit(self, fn: Callable[[], Any]) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        self.pending.append((fn, fut))
        self.submitted += 1
        return fut

    def run_all(self) -> int:
        n = 0
        while self.pending:
            fn, fut = self.pending.pop(0)
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)
            n += 1
        return n


def pattern(h: int = 480, w: int = 640, seed: int = 0) -> np.ndarray:
    """A frame where every pixel differs from its neighbours (pixel-exact crop checks)."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    img.setflags(write=False)
    return img


def grip_tool(monitor: Sequence[dict[str, Any]], name: str = "grip", **extra: Any
              ) -> dict[str, Any]:
    return {"name": name, "description": f"{name} (test)", "parameters": {"type": "object"},
            "image_points": [], "examples": [], "ends_by_itself": False, "max_duration_s": 30,
            "max_target_area": None, "monitor": list(monitor), "camera": None,
            "resources": ["arm"], **extra}


PROGRESS = {
    "name": "progress", "type": "choice", "instructions": "Which phase.",
    "choices": {"approaching": "a", "grasping": "g", "holding": "h", "failed": "f"},
}


class Rig:
    def __init__(
        self,
        monitor: Sequence[dict[str, Any]] = (),
        *,
        config: MonitorConfig | None = None,
        cameras: Sequence[str] = ("cam",),
        backend: Any = "default",
        caller: ModelCaller | None = None,
        catalogue: list[dict[str, Any]] | None = None,
        frame_size: tuple[int, int] = (480, 640),
        **engine_kw: Any,
    ) -> None:
        self.clock = FakeClock()
        self.bus = Bus()
        self.catalogue = catalogue if catalogue is not None else [
            grip_tool(monitor), grip_tool([], "home_holding"), grip_tool([], "carry")]
        self.bus.create_service(names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE,
                                lambda _req: self.catalogue)
        self._events = self.bus.publisher(names.SKILL_EVENTS, names.T_AGENT_EVENT,
                                          QoS(depth=200))
        self.cameras = list(cameras)
        self._img = {c: self.bus.publisher(names.image_topic(c), names.T_IMAGE) for c in cameras}
        self._js = self.bus.publisher(names.JOINT_STATES, names.T_JOINT_STATE)
        self.verdict_sub = self.bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                                              qos=QoS(depth=1000))
        self.config = config or MonitorConfig(period_s=1.5, history=2, reference=False)
        self.backend = FakeBackend() if backend == "default" else backend
        self.caller = caller
        self.frame_size = frame_size
        self.seq = 0
        self.images: dict[str, np.ndarray] = {}
        self.engine = MonitorEngine(self.bus, self.clock, self.config, self.backend,
                                    cameras=self.cameras, catalogue=self.catalogue,
                                    caller=caller, **engine_kw)
        self.publish_frames()

    # inputs ---------------------------------------------------------------------------------
    def publish_frames(self) -> None:
        h, w = self.frame_size
        for cam in self.cameras:
            self.seq += 1
            img = self.images.get(cam)
            if img is None:
                img = pattern(h, w, self.seq)
            self._img[cam].publish(Image(img, self.clock.now(), cam, self.seq))
        self._js.publish(JointState(self.clock.now(), ("j1", "gripper"), (0.1, 0.02)))

    def start(self, action_id: str = "a1", tool: str = "grip", *, params: dict[str, Any]
              | None = None, watch_for: Sequence[str] = (), generation: int = 1,
              trackers: Sequence[str] = (), by: str = "agent") -> None:
        self._events.publish(AgentEvent(self.clock.wall(), "skill_started", {
            "by": by, "skill": tool, "params": params or {}, "action_id": action_id,
            "generation": generation, "observation_id": "", "watch_for": list(watch_for),
            "trackers": list(trackers)}))

    def end(self, action_id: str = "a1", outcome: str = "succeeded") -> None:
        self._events.publish(AgentEvent(self.clock.wall(), "skill_ended", {
            "skill": "grip", "action_id": action_id, "outcome": outcome}))

    def tick(self, dt: float | None = None) -> None:
        """Advance one monitor period (or dt), publish fresh frames, tick the engine."""
        self.clock.advance(self.config.period_s if dt is None else dt)
        self.publish_frames()
        self.engine.tick()

    # outputs --------------------------------------------------------------------------------
    def verdicts(self) -> list[MonitorVerdict]:
        return self.verdict_sub.drain()

    def decisions(self) -> list[MonitorVerdict]:
        return [v for v in self.verdicts() if v.decision]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.engine.recent if e["kind"] == kind]


def config(**kw: Any) -> MonitorConfig:
    return replace(MonitorConfig(period_s=1.5, history=2, reference=False), **kw)


def model_error(kind: str = "timeout") -> ModelError:
    return ModelError(kind, f"scripted {kind}")
