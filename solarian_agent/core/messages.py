"""The core's message types: plain dataclasses mirroring the ROS interfaces field for field.

``solarian_agent.rosmsg.convert`` maps each onto its ROS type (standard types where they exist,
the package's own ``msg/ srv/ action/`` otherwise).  Times are seconds on the run's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from .event_record import TypedEvent, parse
from .statuses import Decision

Outcome = Literal["succeeded", "failed", "stopped", "timed_out", "refused"]
OUTCOMES: tuple[str, ...] = ("succeeded", "failed", "stopped", "timed_out", "refused")


@dataclass(frozen=True)
class Image:
    """A camera frame (``sensor_msgs/Image``, encoding bgr8).  ``data`` is read-only and shared:
    subscribers get the same array, never a copy."""

    data: np.ndarray
    stamp: float
    frame_id: str
    seq: int = 0
    encoding: str = "bgr8"

    @property
    def height(self) -> int:
        return int(self.data.shape[0])

    @property
    def width(self) -> int:
        return int(self.data.shape[1])


@dataclass(frozen=True)
class CameraInfo:
    width: int
    height: int
    k: tuple[float, ...]  # 3x3 row-major intrinsics
    d: tuple[float, ...] = ()
    frame_id: str = ""
    stamp: float = 0.0
    distortion_model: str = "plumb_bob"


@dataclass(frozen=True)
class JointState:
    """Joint positions in radians (URDF units); the gripper's is the moving jaw's angle."""

    stamp: float
    name: tuple[str, ...]
    position: tuple[float, ...]
    velocity: tuple[float, ...] = ()
    effort: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.name, self.position, strict=False))


@dataclass(frozen=True)
class JointCommand:
    """Target positions for named joints; the driver clamps and speed-limits them."""

    stamp: float
    name: tuple[str, ...]
    position: tuple[float, ...]
    max_velocity: float = 0.0  # rad/s; 0 = the driver's configured limit
    source: str = "agent"  # agent | operator


@dataclass(frozen=True)
class SkillGoal:
    tool: str
    params: dict[str, Any]
    generation: int
    action_id: str
    observation_id: str = ""
    watch_for: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillFeedback:
    action_id: str
    phase: str
    progress: float = -1.0  # 0..1, or -1 when unknown


@dataclass(frozen=True)
class SkillResult:
    action_id: str
    outcome: str  # one of OUTCOMES
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentEvent:
    """One agent event as it travels (``agent/events``): its time, kind and record.  Emitters
    build it from a typed event (:meth:`of`); readers get the typed event back
    (:meth:`typed`), a kind without a type of its own as a generic one."""

    t: str
    kind: str
    data: dict[str, Any]

    @classmethod
    def of(cls, t: str, ev: TypedEvent) -> AgentEvent:
        return cls(t, ev.kind, ev.to_record())

    def typed(self) -> TypedEvent:
        return parse(self.kind, self.data)


@dataclass(frozen=True)
class Generation:
    value: int
    reason: str = ""


@dataclass(frozen=True)
class Heartbeat:
    """A component says it is alive (the planner, on ``agent/heartbeat``)."""

    stamp: float
    node: str
    status: str = ""
    generation: int = 0
    instance: str = ""  # random per process start: a new instance is a restarted node


@dataclass(frozen=True)
class OperatorEvent:
    """Anything the operator did: a key, a click, a skill start or stop, teleop."""

    kind: str
    detail: dict[str, Any] = field(default_factory=dict)
    stamp: float = 0.0


@dataclass(frozen=True)
class MonitorVerdict:
    action_id: str
    tool: str
    question: str
    value: str
    probability: float
    decision: str = ""  # a Decision: finish | fail | escalate | "" (no rule fired)
    reason: str = ""
    stamp: float = 0.0
    then: str = ""  # a tool to start, without arguments, once the action has stopped
    source: str = "monitor"  # monitor | controller (a check_agent_action tripwire)
    generation: int = 0

    DECISIONS: ClassVar[tuple[str, ...]] = ("", "finish", "fail", "escalate")
    SOURCES: ClassVar[tuple[str, ...]] = ("monitor", "controller")

    def __post_init__(self) -> None:
        # eleven fields, five of them strings: a verdict built with its fields in the wrong
        # order is refused here instead of reaching the planner as a different verdict
        for name in ("action_id", "tool", "question", "value", "reason", "then"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"MonitorVerdict.{name} must be a string, got "
                                f"{type(getattr(self, name)).__name__}")
        for name in ("probability", "stamp"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError(f"MonitorVerdict.{name} must be a number, got {v!r}")
        if isinstance(self.generation, bool) or not isinstance(self.generation, int):
            raise TypeError(f"MonitorVerdict.generation must be an int, got {self.generation!r}")
        if self.decision not in self.DECISIONS:
            raise ValueError(f"MonitorVerdict.decision must be one of {self.DECISIONS}, got "
                             f"{self.decision!r}")
        # held as the enum (its string form is the wire's): a decision is one of four, typed
        object.__setattr__(self, "decision", Decision(self.decision))
        if self.source not in self.SOURCES:
            raise ValueError(f"MonitorVerdict.source must be one of {self.SOURCES}, got "
                             f"{self.source!r}")


@dataclass(frozen=True)
class AgentState:
    generation: int
    status: str
    task: str
    plan: tuple[dict[str, Any], ...]
    actions: tuple[dict[str, Any], ...]
    conversation: tuple[dict[str, Any], ...]
    stamp: float = 0.0
    arm_holder: str = ""  # the command source holding the arm, or "" when none does
    nodes: tuple[dict[str, Any], ...] = ()  # {"node", "state": up|lost|back, "since_s"}
