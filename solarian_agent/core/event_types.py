"""Every agent event kind as a typed record, and the statuses they carry as enums.

An event goes out on ``agent/events`` as an ``AgentEvent`` (its kind and its record) and into
the episode log as one JSON line; :mod:`.event_record` turns each type into that record and back,
so both wire forms read as they always have.  The kinds, by who emits them:

* the episode log: ``episode_started``, ``episode_ended``;
* the planner's runs: ``run_started``, ``run_continued``, ``run_ended``, ``run_paused``,
  ``run_resumed``, ``conversation_reset``, ``operator_takeover``, ``harness_error``;
* the planner's turns: ``planner_turn``, ``planner_model_retry``, ``planner_silent``,
  ``planner_model_ok``, ``planner_reply_discarded``, ``waiting_user``, ``tool_refused``;
* the planner's tool calls: ``ask_user``, ``observe``, ``stop_action``, ``plan_changed``,
  ``dry_run_call``, ``action_started``, ``timer_set``, ``timer_cancelled``;
* the planner's routing: ``route``, ``event_held``, ``interrupt``, ``tool_placeholder``,
  ``timers_cleared``, ``timer_fired``, ``task_progress``, ``parallel_question``,
  ``parallel_tools``, ``parallel_tool_refused``, ``parallel_answer``, ``parallel_failed``;
* the planner's action results and monitor verdicts: ``action_ended``, ``action_refused``,
  ``followup_dropped``, ``plan_step``, ``plan_step_failed``, ``monitor_answer``,
  ``monitor_decision``;
* the executor: ``generation_advanced``, ``skill_started``, ``skill_stop``, ``skill_ended``,
  ``skill_error``, ``target_rejected``, ``service_started``, ``service_stopped``,
  ``service_stop_failed`` (a skill's own events, named by the skill, stay generic);
* the monitor: ``monitor_tick``, ``monitor_frame``, ``monitor_skip``, ``monitor_error``;
* the planner's views: ``view_described``;
* the scene observer (``observe_scene``): ``observe_scene``, ``observe_scene_rejected``;
* the episode viewer, from a bag's topics: ``operator_event``, ``monitor_verdict``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .event_record import Absent, SpreadEvent, TypedEvent, empty_list, empty_map, kind, optional


class RunStatus(enum.StrEnum):
    """The planner's run (its ``agent/state`` status and ``run_ended``'s)."""

    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING_USER = "waiting_user"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"


class Outcome(enum.StrEnum):
    """How an action (a skill's goal) ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    TIMED_OUT = "timed_out"
    REFUSED = "refused"


class StepStatus(enum.StrEnum):
    """A plan step in the plan queue."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


class Decision(enum.StrEnum):
    """What a monitor verdict decides ('' when no rule fired)."""

    NONE = ""
    FINISH = "finish"
    FAIL = "fail"
    ESCALATE = "escalate"


# --- the episode log ------------------------------------------------------------------------

@kind("episode_started")
@dataclass(frozen=True)
class EpisodeStarted(SpreadEvent):
    episode: str = ""
    task: str = ""
    clock: Mapping[str, Any] = empty_map()


@kind("episode_ended")
@dataclass(frozen=True)
class EpisodeEnded(TypedEvent):
    episode: str = ""


# --- the planner's runs ---------------------------------------------------------------------

@kind("run_started")
@dataclass(frozen=True)
class RunStarted(TypedEvent):
    run_id: str = ""
    task: str = ""
    models: Mapping[str, Any] = empty_map()
    system_prompt: str = ""
    tools: Sequence[Any] = empty_list()
    generation: int = 0
    config: Mapping[str, Any] = empty_map()


@kind("run_continued")
@dataclass(frozen=True)
class RunContinued(TypedEvent):
    run_id: str = ""
    status: str = ""
    task: str = ""
    plan: Sequence[Mapping[str, Any]] = empty_list()
    continues_from: str = ""
    config: Mapping[str, Any] = empty_map()


@kind("run_ended")
@dataclass(frozen=True)
class RunEnded(TypedEvent):
    status: str = ""
    summary: str = ""
    usage: Mapping[str, Any] = empty_map()
    turns: int = 0
    duration_s: float = 0.0


@kind("run_paused")
@dataclass(frozen=True)
class RunPaused(TypedEvent):
    by: str | None = None
    reason: str = ""


@kind("run_resumed")
@dataclass(frozen=True)
class RunResumed(TypedEvent):
    by: str | None = None
    generation: int = 0


@kind("conversation_reset")
@dataclass(frozen=True)
class ConversationReset(TypedEvent):
    by: str | None = None


@kind("operator_takeover")
@dataclass(frozen=True)
class OperatorTakeover(TypedEvent):
    by: str | None = None
    action: str = ""
    detail: Mapping[str, Any] = empty_map()


@kind("harness_error")
@dataclass(frozen=True)
class HarnessError(TypedEvent):
    error: str = ""


# --- the planner's turns --------------------------------------------------------------------

@kind("planner_turn")
@dataclass(frozen=True)
class PlannerTurn(TypedEvent):
    turn: str = ""
    latency_s: float = 0.0
    usage: Mapping[str, Any] | None = None
    model: str = ""
    text: str = ""
    tools: Sequence[str] = empty_list()
    error: Mapping[str, Any] | None = None


@kind("planner_model_retry")
@dataclass(frozen=True)
class PlannerModelRetry(TypedEvent):
    attempt: int = 0
    attempts: int = 0
    error: str = ""
    retry_in_s: float = 0.0


@kind("planner_silent")
@dataclass(frozen=True)
class PlannerSilent(TypedEvent):
    failures: int = 0
    error: str = ""
    reason: str = ""


@kind("planner_model_ok")
@dataclass(frozen=True)
class PlannerModelOk(TypedEvent):
    after_failures: int = 0


@kind("planner_reply_discarded")
@dataclass(frozen=True)
class PlannerReplyDiscarded(TypedEvent):
    turn: str = ""
    reason: str = ""


@kind("waiting_user")
@dataclass(frozen=True)
class WaitingUser(TypedEvent):
    question: str = ""


@kind("tool_refused")
@dataclass(frozen=True)
class ToolRefused(TypedEvent):
    tool: str = ""
    action_id: str | Absent = optional()
    reason: str = ""


# --- the planner's tool calls ---------------------------------------------------------------

@kind("ask_user")
@dataclass(frozen=True)
class AskUser(TypedEvent):
    question: str = ""


@kind("observe")
@dataclass(frozen=True)
class Observe(TypedEvent):
    observations: Sequence[str] = empty_list()
    images: Sequence[Any] = empty_list()


@kind("stop_action")
@dataclass(frozen=True)
class StopAction(TypedEvent):
    by: str | None = None
    action_id: str = ""
    tool: str | Absent = optional()
    reason: str = ""
    accepted: bool | Absent = optional()


@kind("plan_changed")
@dataclass(frozen=True)
class PlanChanged(TypedEvent):
    plan: Sequence[Mapping[str, Any]] = empty_list()


@kind("dry_run_call")
@dataclass(frozen=True)
class DryRunCall(TypedEvent):
    tool: str = ""
    params: Mapping[str, Any] = empty_map()
    observation_id: str = ""


@kind("action_started")
@dataclass(frozen=True)
class ActionStarted(TypedEvent):
    action_id: str = ""
    tool: str = ""
    params: Mapping[str, Any] = empty_map()
    by_harness: bool | Absent = optional()  # the plan queue started it
    step: int | None | Absent = optional()
    after_placeholder: bool | Absent = optional()


@kind("timer_set")
@dataclass(frozen=True)
class TimerSet(TypedEvent):
    timer_id: str = ""
    seconds: float = 0.0
    note: str = ""
    repeat: bool = False


@kind("timer_cancelled")
@dataclass(frozen=True)
class TimerCancelled(TypedEvent):
    timer_id: str = ""


# --- the planner's routing ------------------------------------------------------------------

@kind("route")
@dataclass(frozen=True)
class Route(TypedEvent):
    by: str | None = None
    event: str = ""
    source: str = ""
    channel: str = ""
    content: str = ""
    urgency: str = ""
    reason: str = ""
    rule: str = ""
    stop: bool = False
    stop_actions: Sequence[str] | None = None
    seq: int = 0


@kind("event_held")
@dataclass(frozen=True)
class EventHeld(TypedEvent):
    event: str = ""
    content: str = ""
    reason: str = ""


@kind("interrupt")
@dataclass(frozen=True)
class Interrupt(TypedEvent):
    event: str = ""
    source: str = ""
    content: str = ""
    cut: Any = None
    stopped: Sequence[str] = empty_list()
    kept: Sequence[str] = empty_list()
    released_events: int = 0
    reason: str = ""


@kind("tool_placeholder")
@dataclass(frozen=True)
class ToolPlaceholder(TypedEvent):
    tool: str = ""
    action_id: str = ""
    text: str = ""


@kind("timers_cleared")
@dataclass(frozen=True)
class TimersCleared(TypedEvent):
    timers: Sequence[str] = empty_list()
    reason: str = ""


@kind("timer_fired")
@dataclass(frozen=True)
class TimerFired(TypedEvent):
    timer_id: str | None = None
    note: str = ""
    fired: Any = None


@kind("task_progress")
@dataclass(frozen=True)
class TaskProgress(TypedEvent):
    action_id: str = ""
    tool: str = ""
    progress: float | None = None
    phase: str | None = None


@kind("parallel_question")
@dataclass(frozen=True)
class ParallelQuestion(TypedEvent):
    question: str = ""


@kind("parallel_tools")
@dataclass(frozen=True)
class ParallelTools(TypedEvent):
    question: str = ""
    tools: Sequence[str] = empty_list()


@kind("parallel_tool_refused")
@dataclass(frozen=True)
class ParallelToolRefused(TypedEvent):
    tool: str = ""
    question: str = ""


@kind("parallel_answer")
@dataclass(frozen=True)
class ParallelAnswer(TypedEvent):
    question: str = ""
    answer: str = ""
    latency_s: float = 0.0
    usage: Any = None


@kind("parallel_failed")
@dataclass(frozen=True)
class ParallelFailed(TypedEvent):
    question: str = ""
    error: str = ""


# --- the planner's action results and monitor verdicts --------------------------------------

@kind("action_ended")
@dataclass(frozen=True)
class ActionEnded(TypedEvent):
    action_id: str = ""
    tool: str = ""
    outcome: str = ""
    reason: str = ""
    data: Mapping[str, Any] = empty_map()


@kind("action_refused")
@dataclass(frozen=True)
class ActionRefused(TypedEvent):
    action_id: str = ""
    tool: str = ""
    reason: str = ""


@kind("followup_dropped")
@dataclass(frozen=True)
class FollowupDropped(TypedEvent):
    action_id: str = ""
    tool: str = ""
    decision: str = ""
    outcome: str = ""


@kind("plan_step")
@dataclass(frozen=True)
class PlanStep(TypedEvent):
    step: int = 0
    tool: str | None = None
    args: Mapping[str, Any] = empty_map()
    action_id: str = ""


@kind("plan_step_failed")
@dataclass(frozen=True)
class PlanStepFailed(TypedEvent):
    step: int = 0
    tool: str | None = None
    failures: int = 0
    description: str = ""


@kind("monitor_answer")
@dataclass(frozen=True)
class MonitorAnswer(TypedEvent):
    action_id: str = ""
    tool: str = ""
    question: str = ""
    value: str = ""
    probability: float | None = None
    decision: str = ""
    source: str = "monitor"
    reason: str = ""


@kind("monitor_decision")
@dataclass(frozen=True)
class MonitorDecision(TypedEvent):
    action_id: str = ""
    decision: str = ""
    source: str = "monitor"
    then: str = ""
    accepted: bool = True
    reason: str = ""


# --- the executor ---------------------------------------------------------------------------

@kind("generation_advanced")
@dataclass(frozen=True)
class GenerationAdvanced(TypedEvent):
    generation: int = 0
    reason: str = ""
    by: str | None = None


@kind("skill_started")
@dataclass(frozen=True)
class SkillStarted(TypedEvent):
    by: str | None = None
    skill: str = ""
    params: Mapping[str, Any] = empty_map()
    action_id: str = ""
    generation: int = 0
    observation_id: str = ""
    watch_for: Sequence[str] = empty_list()
    trackers: Sequence[Any] = empty_list()
    start_s: float = 0.0
    target_area: float | None | Absent = optional()  # only for a skill with a target-area limit


@kind("skill_stop")
@dataclass(frozen=True)
class SkillStop(TypedEvent):
    by: str | None = None
    skill: str = ""
    action_id: str = ""
    reason: str = ""


@kind("skill_ended")
@dataclass(frozen=True)
class SkillEnded(TypedEvent):
    skill: str = ""
    action_id: str = ""
    outcome: str = ""
    reason: str = ""
    duration_s: float | Absent = optional()  # absent when the skill never started


@kind("skill_error")
@dataclass(frozen=True)
class SkillError(TypedEvent):
    action_id: str = ""
    skill: str = ""
    error: str | Absent = optional()
    traceback: str | Absent = optional()


@kind("target_rejected")
@dataclass(frozen=True)
class TargetRejected(TypedEvent):
    tool: str = ""
    action_id: str = ""
    target_area: float | None = None
    reason: str = ""


@kind("service_started")
@dataclass(frozen=True)
class ServiceStarted(TypedEvent):
    by: str | None = None
    module: str = ""
    field: str = ""
    params: Mapping[str, Any] = empty_map()
    action_id: str = ""


@kind("service_stopped")
@dataclass(frozen=True)
class ServiceStopped(TypedEvent):
    by: str | None = None
    module: str | Absent = optional()  # older logs name it
    field: str = ""


@kind("service_stop_failed")
@dataclass(frozen=True)
class ServiceStopFailed(TypedEvent):
    by: str | None = None
    field: str = ""
    error: str = ""


# --- the monitor ----------------------------------------------------------------------------

@kind("monitor_tick")
@dataclass(frozen=True)
class MonitorTick(TypedEvent):
    action_id: str = ""
    tool: str = ""
    tick: int = 0
    elapsed_s: float = 0.0
    questions: Sequence[str] = empty_list()
    images: Sequence[Mapping[str, Any]] = empty_list()
    # readings, problems, latency_s, usage and model are absent from a tick given up
    # unanswered
    readings: Mapping[str, Any] | Absent = optional()
    answers: Mapping[str, Any] = empty_map()
    problems: Sequence[Any] | Absent = optional()
    latency_s: float | Absent = optional()
    usage: Mapping[str, Any] | None | Absent = optional()
    model: str | Absent = optional()
    error: Any = None
    verdicts: Sequence[Mapping[str, Any]] = empty_list()
    discarded: str | Absent = optional()  # the answer came after the action ended


@kind("monitor_frame")
@dataclass(frozen=True)
class MonitorFrame(TypedEvent):
    action_id: str = ""
    tool: str = ""
    tick: int = 0
    images: Sequence[Mapping[str, Any]] = empty_list()
    elapsed_s: float = 0.0


@kind("monitor_skip")
@dataclass(frozen=True)
class MonitorSkip(TypedEvent):
    action_id: str = ""
    tool: str = ""
    tick: int = 0
    reason: str = ""


@kind("monitor_error")
@dataclass(frozen=True)
class MonitorError(TypedEvent):
    action_id: str | Absent = optional()  # absent when no one action failed
    error: str = ""


# --- the planner's views --------------------------------------------------------------------

@kind("view_described")
@dataclass(frozen=True)
class ViewDescribed(TypedEvent):
    observation_id: str = ""
    backend: str = ""
    model: str = ""
    latency_s: float = 0.0


# --- the scene observer ---------------------------------------------------------------------

@kind("observe_scene")
@dataclass(frozen=True)
class ObserveScene(TypedEvent):
    focus: str = ""
    camera: str = ""
    frame_bytes: int = 0
    observed_at: float = 0.0
    latency_s: float = 0.0
    truncated: bool = False
    chars: int = 0
    model: str = ""
    usage: Any = None


@kind("observe_scene_rejected")
@dataclass(frozen=True)
class ObserveSceneRejected(TypedEvent):
    code: str = ""
    reason: str = ""


# --- the episode viewer, from a bag's topics ------------------------------------------------

@kind("operator_event")
@dataclass(frozen=True)
class OperatorEventSeen(TypedEvent):
    by: str | None = None
    action: str = ""
    detail: Mapping[str, Any] = empty_map()


@kind("monitor_verdict")
@dataclass(frozen=True)
class MonitorVerdictSeen(TypedEvent):
    action_id: str = ""
    tool: str = ""
    question: str = ""
    value: str = ""
    probability: float | None = None
    decision: str = ""
    reason: str = ""
    source: str = "monitor"
