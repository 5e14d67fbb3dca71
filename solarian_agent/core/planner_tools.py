"""The planner's tool set and the records of its calls: the harness instructions and the
planner tools (``update_plan, observe, stop_action, ask_user, finish_task`` and the task and
timer tools), how a skill's catalogue entry becomes a tool for the model, the running actions
and the turn in flight.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model_api import Message, ModelReply, ModelRequest, TextPart, ToolCall, ToolDef
from .plan import PLAN_SCHEMA
from .routing import TASK_INSTRUCTIONS, TASK_TOOLS, describe_async
from .skill import ToolSpec
from .text import DATA_INSTRUCTIONS
from .transport import GoalHandle

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
ACTIVE_STATUSES = ("running", "paused", "waiting_user")
SETTLE_S = 0.1  # the robot counts as still after this long without movement

RUN_STATUSES = ("idle", "running", "paused", "waiting_user", "succeeded", "failed",
                "cancelled", "budget_exhausted")


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
