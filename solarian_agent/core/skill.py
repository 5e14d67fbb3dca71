"""The skill contract and tools.

Everything the planner and the monitor know about a tool comes from its skill through
:meth:`Skill.tool_spec`.  By default that is the class attributes below; a skill whose behaviour
comes from config overrides ``tool_spec``.  A tool is a skill class plus the params the
controller binds; bound params never reach the model.

Skills run on the control loop: the executor calls ``start()`` once and ``tick()`` every control
period, between which a skill must return promptly (no waiting, no model calls).  A skill ends by
calling :meth:`Skill.finish` or :meth:`Skill.fail`; one that never ends by itself sets
``ends_by_itself = False`` and is ended by a monitor rule or ``max_duration_s``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .clock import Clock
from .errors import SkillFailed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str | None
    parameters: dict[str, Any]
    image_points: tuple[str, ...] = ()
    examples: tuple[dict[str, Any], ...] = ()
    ends_by_itself: bool = True
    max_duration_s: float | None = None
    max_target_area: float | None = None
    monitor: tuple[dict[str, Any], ...] = ()
    camera: str | None = None  # the camera whose image the image_points refer to
    resources: tuple[str, ...] = ("arm",)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "parameters": self.parameters,
            "image_points": list(self.image_points), "examples": list(self.examples),
            "ends_by_itself": self.ends_by_itself, "max_duration_s": self.max_duration_s,
            "max_target_area": self.max_target_area, "monitor": list(self.monitor),
            "camera": self.camera, "resources": list(self.resources),
        }


@dataclass(frozen=True)
class TrackerRequest:
    """A service the harness starts with the planner's point before the skill (``services_for``).

    ``field`` names what the tracker publishes (``<camera>.<name>``); ``point_param`` is the
    image point param that seeds it.
    """

    field: str
    camera: str
    point_param: str
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass
class SkillContext:
    """What a running skill may touch: the clock, named ports (arm, cameras, trackers, world
    model) and an event sink.  Ports are plain objects supplied by the runtime."""

    clock: Clock
    ports: Mapping[str, Any]
    emit: Callable[[str, dict[str, Any]], None] = lambda kind, data: None
    action_id: str = ""
    generation: int = 0

    def port(self, name: str) -> Any:
        try:
            return self.ports[name]
        except KeyError:
            raise SkillFailed(f"this robot has no {name!r} port "
                              f"(available: {', '.join(sorted(self.ports))})") from None


class Skill:
    """Base class of every skill.  Subclasses set the contract attributes and implement
    ``start`` / ``tick``; they end with ``finish()`` or ``fail(reason)``."""

    description: ClassVar[str | None] = None
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {},
                                            "additionalProperties": False}
    image_points: ClassVar[tuple[str, ...]] = ()
    examples: ClassVar[tuple[dict[str, Any], ...]] = ()
    ends_by_itself: ClassVar[bool] = True
    max_duration_s: ClassVar[float | None] = None
    max_target_area: ClassVar[float | None] = None
    monitor: ClassVar[tuple[dict[str, Any], ...]] = ()
    camera: ClassVar[str | None] = None
    resources: ClassVar[tuple[str, ...]] = ("arm",)

    def __init__(self, params: dict[str, Any], ctx: SkillContext) -> None:
        self.params = params
        self.ctx = ctx
        self.done = False
        self.result: dict[str, Any] = {}
        self.phase = "starting"
        self.progress = -1.0
        self.started_at = ctx.clock.now()

    # contract -----------------------------------------------------------------------------
    @classmethod
    def tool_spec(cls, bound: Mapping[str, Any]) -> ToolSpec:
        return ToolSpec(
            name="",
            description=cls.description,
            parameters=cls.parameters,
            image_points=cls.image_points,
            examples=cls.examples,
            ends_by_itself=cls.ends_by_itself,
            max_duration_s=cls.max_duration_s,
            max_target_area=cls.max_target_area,
            monitor=cls.monitor,
            camera=bound.get("camera", cls.camera),
            resources=cls.resources,
        )

    @classmethod
    def services_for(cls, params: Mapping[str, Any]) -> list[TrackerRequest]:
        return []

    # lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Called once on the control loop when the action starts."""

    def tick(self) -> None:
        """Called every control period while running."""

    def on_stop(self, reason: str) -> None:
        """Called when the action is stopped from outside (cancel, timeout, monitor, e-stop):
        leave the robot holding still."""

    # ending -------------------------------------------------------------------------------
    def finish(self, **result: Any) -> None:
        self.done = True
        self.result.update(result)

    def fail(self, reason: str) -> None:
        raise SkillFailed(reason)

    def feedback(self, phase: str, progress: float = -1.0) -> None:
        self.phase = phase
        self.progress = progress


@dataclass(frozen=True)
class Tool:
    """A skill class plus the params the controller binds (never shown to the model)."""

    skill: type[Skill]
    bound: Mapping[str, Any] = field(default_factory=dict)

    def spec(self, name: str) -> ToolSpec:
        spec = self.skill.tool_spec(self.bound)
        return ToolSpec(**{**spec.__dict__, "name": name})


def usable_tools(tools: Mapping[str, Tool]) -> dict[str, ToolSpec]:
    """Specs of the tools the planner may see; a skill without a description is left off with a
    warning, since the planner could not know when to choose it."""
    out: dict[str, ToolSpec] = {}
    for name, tool in tools.items():
        spec = tool.spec(name)
        if not spec.description:
            log.warning("tool %r (skill %s) has no description: left off the planner's list",
                        name, tool.skill.__name__)
            continue
        out[name] = spec
    return out


# -------------------------------------------------------------------------------------------
# Arrival: a move ends when the robot gets there, not after a fixed time, since every second a
# finished move keeps running delays the next step
# -------------------------------------------------------------------------------------------

@dataclass
class Arrival:
    """Ends a move when every targeted field reads within tolerance of its target, or when none
    has moved for ``still_s`` (0.3 s) counted from ``grace_s`` (0.5 s) after the move was sent: a
    gripper closed on an object, or a pose just out of reach.  A pose the robot is already at
    ends on the first check.

    ``targets`` maps a field name to ``(target, tolerance)``; ``motion_eps`` maps a field to the
    change that counts as movement (default: a tenth of its tolerance).
    """

    targets: dict[str, tuple[float, float]]
    sent_at: float
    grace_s: float = 0.5
    still_s: float = 0.3
    motion_eps: dict[str, float] = field(default_factory=dict)
    _last: dict[str, float] = field(default_factory=dict, init=False)
    _last_moved: float | None = field(default=None, init=False)
    reason: str = field(default="", init=False)

    def check(self, observations: Mapping[str, float], now: float) -> bool:
        missing = [k for k in self.targets if k not in observations]
        if missing:
            raise SkillFailed(f"no reading for {', '.join(missing)}")
        if all(abs(observations[k] - t) <= tol for k, (t, tol) in self.targets.items()):
            self.reason = "arrived"
            return True
        moved = False
        for k, (_, tol) in self.targets.items():
            v = observations[k]
            prev = self._last.get(k)
            eps = self.motion_eps.get(k, tol / 10.0)
            if prev is None or abs(v - prev) > eps:
                moved = True
                self._last[k] = v
        if moved or self._last_moved is None:
            self._last_moved = now
        counting_from = max(self._last_moved, self.sent_at + self.grace_s)
        if now - counting_from >= self.still_s:
            self.reason = "stopped moving"
            return True
        return False
