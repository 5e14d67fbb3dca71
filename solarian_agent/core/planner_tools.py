"""The planner's tool set and the records of its calls: the harness instructions and the
planner tools (``update_plan, observe, stop_action, ask_user, finish_task`` and the task and
timer tools), how a skill's catalogue entry becomes a tool for the model (the
:class:`ToolCatalogue`), the planner's model, the running actions and the turn in flight.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import names
from .attention import SceneObserverPort
from .errors import ConfigError
from .messages import MonitorVerdict
from .model_api import (
    Message,
    ModelProvider,
    ModelReply,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolDef,
)
from .model_caller import ModelCaller
from .monitor_rules import WATCH_FOR_RULE, Rule, floor, parse_questions
from .plan import PLAN_SCHEMA
from .routing import TASK_INSTRUCTIONS, TASK_TOOLS, describe_async
from .skill import ToolSpec
from .statuses import RunStatus
from .text import DATA_INSTRUCTIONS
from .tool_schema import tool_schema
from .transport import Bus, GoalHandle
from .views import ViewManager

HARNESS_INSTRUCTIONS = """\
You are the planner of a robot.  You act only through tools.
- A skill tool returns as soon as the skill has started and ends your turn; you are woken when
  it ends, fails, times out or the monitor flags something.  Refused calls and observe are
  answered at once.
- update_plan: keep a plan.  Steps may carry the tool and args that carry them out; when an
  action succeeds and nothing else runs, the harness starts the next complete step without you.
  Steps whose tool takes image points need you to point in a fresh image.
- Points are [x, y] pixels in an image you were shown; pass its observation_id.  A point on an
  image taken before the robot last moved is refused: observe first.
- A monitor flag can be wrong: check it against the newest image before stopping an action.
  A controller check is reliable.
- A timeout is not a failure: look at the newest image before undoing anything.
- When the task is done and checked in a fresh image, call finish_task.
"""

PLANNER_TOOLS: dict[str, ToolDef] = {
    "update_plan": ToolDef("update_plan",
                           "Replace the plan: a list of steps, each with a description and "
                           "optionally the tool and args that carry it out.", PLAN_SCHEMA),
    "observe": ToolDef("observe",
                       "Take fresh images now (all agent cameras, or the ones named). Answered "
                       "at once with new observation ids.",
                       {"type": "object", "properties": {"cameras": {
                           "type": "array", "items": {"type": "string"}}},
                        "additionalProperties": False}),
    "stop_action": ToolDef("stop_action", "Stop a running action by its id.",
                           {"type": "object", "properties": {
                               "action_id": {"type": "string"},
                               "reason": {"type": "string", "maxLength": 300}},
                            "required": ["action_id"], "additionalProperties": False}),
    "ask_user": ToolDef("ask_user", "Ask the operator a question; the run waits for the answer.",
                        {"type": "object", "properties": {
                            "question": {"type": "string", "minLength": 1, "maxLength": 2000}},
                         "required": ["question"], "additionalProperties": False}),
    "finish_task": ToolDef("finish_task",
                           "End the run: the task is done (checked in a fresh image) or cannot "
                           "be done.",
                           {"type": "object", "properties": {
                               "summary": {"type": "string", "maxLength": 2000},
                               "success": {"type": "boolean"}},
                            "required": ["summary", "success"], "additionalProperties": False}),
}

# a skill only starts a task, so the planner needs task_status, cancel_task, set_timer and
# cancel_timer to follow and end what it started
PLANNER_TOOLS.update(TASK_TOOLS)
HARNESS_INSTRUCTIONS += TASK_INSTRUCTIONS + DATA_INSTRUCTIONS

FRESH_FRAME_WAIT_S = 0.5  # the longest a wake waits for a frame newer than the last motion
FIRST_FRAME_WAIT_S = 5.0  # ... and for a camera's first frame (a ROS graph still starting)
STOP_WAIT_S = 1.0  # after a user stop, the re-plan call waits this long for the stops to land
ACTIVE_STATUSES = (RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.WAITING_USER)
SETTLE_S = 0.1  # the robot counts as still after this long without movement

RUN_STATUSES = tuple(RunStatus)


@dataclass
class PendingStart:
    call: ToolCall
    handle: GoalHandle
    action_id: str
    tool: str
    sent_at: float


@dataclass
class Turn:
    """The planner call in flight and the reply's calls awaiting their skill to start."""

    generation: int
    future: cf.Future[ModelReply] | None = None
    turn_file: str = ""
    started_at: float = 0.0
    wall_start: float = 0.0
    request: ModelRequest | None = None
    pending: list[PendingStart] = field(default_factory=list)
    results: dict[str, Message] = field(default_factory=dict)
    call_order: list[str] = field(default_factory=list)
    started_any: bool = False
    ended: bool = False
    waits: bool = False  # a call in the reply waits for an event (cancel_task, set_timer)
    # calls answered by work that may wait on a model (a view description, observe_scene)
    futures: list[tuple[ToolCall, cf.Future[Message]]] = field(default_factory=list)


@dataclass
class ActionInfo:
    action_id: str
    tool: str
    params: dict[str, Any]
    started_at: float
    handle: GoalHandle
    watched: bool
    step: int | None = None


def tool_msg(call: ToolCall, text: str, error: bool = False) -> Message:
    return Message("tool", (TextPart(text),), (), call.id, error)


def describe_tool(spec: ToolSpec) -> str:
    parts = [spec.description or ""]
    if spec.image_points:
        parts.append(f"Points ({', '.join(spec.image_points)}) are [x, y] pixels in the "
                     f"{spec.camera or 'camera'} image; pass its observation_id.")
    if spec.max_duration_s:
        parts.append(f"Stopped as timed out after {spec.max_duration_s:g} s.")
    if not spec.ends_by_itself:
        parts.append("Runs until the monitor or its time limit ends it.")
    for ex in spec.examples:
        parts.append(f"Example: {json.dumps(ex.get('params', {}))} when {ex.get('when', '')}")
    return describe_async(" ".join(p for p in parts if p))


def spec_from_dict(d: Mapping[str, Any]) -> ToolSpec:
    return ToolSpec(
        name=d["name"], description=d.get("description"), parameters=d["parameters"],
        image_points=tuple(d.get("image_points", ())), examples=tuple(d.get("examples", ())),
        ends_by_itself=bool(d.get("ends_by_itself", True)),
        max_duration_s=d.get("max_duration_s"), max_target_area=d.get("max_target_area"),
        monitor=tuple(d.get("monitor", ())), camera=d.get("camera"),
        resources=tuple(d.get("resources", ("arm",))))


def system_prompt(config_prompt: str) -> str:
    """The planner's system prompt: the configured one, then the harness instructions."""
    return (config_prompt.strip() + "\n\n" + HARNESS_INSTRUCTIONS).strip()


@dataclass
class PlannerModel:
    """The planner's model and the worker its calls run on.  The provider is read at every
    call, never copied: a test (or an operator tool) may swap it between runs."""

    provider: ModelProvider
    caller: ModelCaller
    has_describer: bool = False  # a vision backend is configured

    @property
    def describes_views(self) -> bool:
        """A planner that reads no images is told its views by the vision backend (a model
        call on the worker)."""
        return not self.provider.reads_images and self.has_describer


class ToolCatalogue:
    """The skills' tool specs, fetched from the executor's catalogue service at first use
    (the executor may come up after the planner), and the tool set offered to the model:
    the planner tools, the view tools, ``observe_scene`` while it can run, the skills."""

    def __init__(self, bus: Bus, views: ViewManager,
                 scene_observer: SceneObserverPort | None) -> None:
        self._bus = bus
        self._views = views
        self.scene_observer = scene_observer
        self._specs: dict[str, ToolSpec] | None = None
        self._floors: dict[str, dict[str, tuple[Rule, ...]]] = {}

    @property
    def specs(self) -> dict[str, ToolSpec]:
        if self._specs is None:
            raw = self._bus.call(names.TOOL_CATALOGUE, {}, timeout_s=5.0)
            self._specs = {d["name"]: spec_from_dict(d) for d in raw}
        return self._specs

    def fetched(self) -> dict[str, ToolSpec]:
        """The specs if they were fetched already, else none: a view of the planner (the
        plan markers) never makes the service call itself."""
        return self._specs or {}

    def preload(self, specs: dict[str, ToolSpec]) -> None:
        """Use these specs instead of asking the catalogue service (a graph without one)."""
        self._specs = dict(specs)
        self._floors.clear()

    def needs_point(self) -> set[str]:
        return {n for n, s in self.specs.items() if s.image_points}

    def tool_defs(self) -> list[ToolDef]:
        defs = list(PLANNER_TOOLS.values())
        defs += self._views.tool_defs()
        if self.scene_observer is not None:
            defs += self.scene_observer.tool_defs()  # offered only while it can run
        for spec in self.specs.values():
            defs.append(ToolDef(spec.name, describe_tool(spec), tool_schema(spec)))
        return defs

    def answer_floor(self, v: MonitorVerdict) -> float | None:
        """The confidence floor of the rules that judge ``v`` (:func:`.monitor_rules.floor`),
        from its tool's monitor questions; a question the tool does not declare is the
        planner's watch_for condition."""
        floors = self._floors.get(v.tool)
        if floors is None:
            spec = self.specs.get(v.tool)
            try:
                qs = parse_questions(v.tool, list(getattr(spec, "monitor", ()) or ()))
            except ConfigError:
                qs = ()
            floors = self._floors[v.tool] = {q.name: q.rules for q in qs}
        rules = floors.get(v.question, (WATCH_FOR_RULE,))
        return floor(rules, v.value)
