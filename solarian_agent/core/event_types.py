"""Every agent event kind as a typed record (the statuses they carry are :mod:`.statuses`).

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .event_record import Absent, SpreadEvent, TypedEvent, empty_list, empty_map, optional


# --- the episode log ------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeStarted(SpreadEvent, kind="episode_started"):
    episode: str = ""
    task: str = ""
    clock: Mapping[str, Any] = empty_map()


@dataclass(frozen=True)
class EpisodeEnded(TypedEvent, kind="episode_ended"):
    episode: str = ""


# --- the planner's runs ---------------------------------------------------------------------
@dataclass(frozen=True)
class RunStarted(TypedEvent, kind="run_started"):
    run_id: str = ""
    task: str = ""
    models: Mapping[str, Any] = empty_map()
    system_prompt: str = ""
    tools: Sequence[Any] = empty_list()
    generation: int = 0
    config: Mapping[str, Any] = empty_map()


@dataclass(frozen=True)
class RunContinued(TypedEvent, kind="run_continued"):
    run_id: str = ""
    status: str = ""
    task: str = ""
    plan: Sequence[Mapping[str, Any]] = empty_list()
    continues_from: str = ""
    config: Mapping[str, Any] = empty_map()


@dataclass(frozen=True)
class RunEnded(TypedEvent, kind="run_ended"):
    status: str = ""
    summary: str = ""
    usage: Mapping[str, Any] = empty_map()
    turns: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class RunPaused(TypedEvent, kind="run_paused"):
    by: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class RunResumed(TypedEvent, kind="run_resumed"):
    by: str | None = None
    generation: int = 0


@dataclass(frozen=True)
class ConversationReset(TypedEvent, kind="conversation_reset"):
    by: str | None = None


@dataclass(frozen=True)
class OperatorTakeover(TypedEvent, kind="operator_takeover"):
    by: str | None = None
    action: str = ""
    detail: Mapping[str, Any] = empty_map()


@dataclass(frozen=True)
class HarnessError(TypedEvent, kind="harness_error"):
    error: str = ""


# --- the planner's turns --------------------------------------------------------------------
@dataclass(frozen=True)
class PlannerTurn(TypedEvent, kind="planner_turn"):
    turn: str = ""
    latency_s: float = 0.0
    usage: Mapping[str, Any] | None = None
    model: str = ""
    text: str = ""
    tools: Sequence[str] = empty_list()
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PlannerModelRetry(TypedEvent, kind="planner_model_retry"):
    attempt: int = 0
    attempts: int = 0
    error: str = ""
    retry_in_s: float = 0.0


@dataclass(frozen=True)
class PlannerSilent(TypedEvent, kind="planner_silent"):
    failures: int = 0
    error: str = ""
    reason: str = ""


@dataclass(frozen=True)
class PlannerModelOk(TypedEvent, kind="planner_model_ok"):
    after_failures: int = 0


@dataclass(frozen=True)
class PlannerReplyDiscarded(TypedEvent, kind="planner_reply_discarded"):
    turn: str = ""
    reason: str = ""


@dataclass(frozen=True)
class WaitingUser(TypedEvent, kind="waiting_user"):
    question: str = ""


@dataclass(frozen=True)
class ToolRefused(TypedEvent, kind="tool_refused"):
    tool: str = ""
    action_id: str | Absent = optional()
    reason: str = ""


# --- the planner's tool calls ---------------------------------------------------------------
@dataclass(frozen=True)
class AskUser(TypedEvent, kind="ask_user"):
    question: str = ""


@dataclass(frozen=True)
class Observe(TypedEvent, kind="observe"):
    observations: Sequence[str] = empty_list()
    images: Sequence[Any] = empty_list()


@dataclass(frozen=True)
class StopAction(TypedEvent, kind="stop_action"):
    by: str | None = None
    action_id: str = ""
    tool: str | Absent = optional()
    reason: str = ""
    accepted: bool | Absent = optional()


@dataclass(frozen=True)
class PlanChanged(TypedEvent, kind="plan_changed"):
    plan: Sequence[Mapping[str, Any]] = empty_list()


@dataclass(frozen=True)
class DryRunCall(TypedEvent, kind="dry_run_call"):
    tool: str = ""
    params: Mapping[str, Any] = empty_map()
    observation_id: str = ""


@dataclass(frozen=True)
class ActionStarted(TypedEvent, kind="action_started"):
    action_id: str = ""
    tool: str = ""
    params: Mapping[str, Any] = empty_map()
    by_harness: bool | Absent = optional()  # the plan queue started it
    step: int | None | Absent = optional()
    after_placeholder: bool | Absent = optional()


@dataclass(frozen=True)
class TimerSet(TypedEvent, kind="timer_set"):
    timer_id: str = ""
    seconds: float = 0.0
    note: str = ""
    repeat: bool = False


@dataclass(frozen=True)
class TimerCancelled(TypedEvent, kind="timer_cancelled"):
    timer_id: str = ""


# --- the planner's routing ------------------------------------------------------------------
@dataclass(frozen=True)
class Route(TypedEvent, kind="route"):
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


@dataclass(frozen=True)
class EventHeld(TypedEvent, kind="event_held"):
    event: str = ""
    content: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Interrupt(TypedEvent, kind="interrupt"):
    event: str = ""
    source: str = ""
    content: str = ""
    cut: Any = None
    stopped: Sequence[str] = empty_list()
    kept: Sequence[str] = empty_list()
    released_events: int = 0
    reason: str = ""


@dataclass(frozen=True)
class ToolPlaceholder(TypedEvent, kind="tool_placeholder"):
    tool: str = ""
    action_id: str = ""
    text: str = ""


@dataclass(frozen=True)
class TimersCleared(TypedEvent, kind="timers_cleared"):
    timers: Sequence[str] = empty_list()
    reason: str = ""


@dataclass(frozen=True)
class TimerFired(TypedEvent, kind="timer_fired"):
    timer_id: str | None = None
    note: str = ""
    fired: Any = None


@dataclass(frozen=True)
class TaskProgress(TypedEvent, kind="task_progress"):
    action_id: str = ""
    tool: str = ""
    progress: float | None = None
    phase: str | None = None


@dataclass(frozen=True)
class ParallelQuestion(TypedEvent, kind="parallel_question"):
    question: str = ""


@dataclass(frozen=True)
class ParallelTools(TypedEvent, kind="parallel_tools"):
    question: str = ""
    tools: Sequence[str] = empty_list()


@dataclass(frozen=True)
class ParallelToolRefused(TypedEvent, kind="parallel_tool_refused"):
    tool: str = ""
    question: str = ""


@dataclass(frozen=True)
class ParallelAnswer(TypedEvent, kind="parallel_answer"):
    question: str = ""
    answer: str = ""
    latency_s: float = 0.0
    usage: Any = None


@dataclass(frozen=True)
class ParallelFailed(TypedEvent, kind="parallel_failed"):
    question: str = ""
    error: str = ""


# --- the planner's action results and monitor verdicts --------------------------------------
@dataclass(frozen=True)
class ActionEnded(TypedEvent, kind="action_ended"):
    action_id: str = ""
    tool: str = ""
    outcome: str = ""
    reason: str = ""
    data: Mapping[str, Any] = empty_map()


@dataclass(frozen=True)
class ActionRefused(TypedEvent, kind="action_refused"):
    action_id: str = ""
    tool: str = ""
    reason: str = ""


@dataclass(frozen=True)
class FollowupDropped(TypedEvent, kind="followup_dropped"):
    action_id: str = ""
    tool: str = ""
    decision: str = ""
    outcome: str = ""


@dataclass(frozen=True)
class PlanStep(TypedEvent, kind="plan_step"):
    step: int = 0
    tool: str | None = None
    args: Mapping[str, Any] = empty_map()
    action_id: str = ""


@dataclass(frozen=True)
class PlanStepFailed(TypedEvent, kind="plan_step_failed"):
    step: int = 0
    tool: str | None = None
    failures: int = 0
    description: str = ""


@dataclass(frozen=True)
class MonitorAnswer(TypedEvent, kind="monitor_answer"):
    action_id: str = ""
    tool: str = ""
    question: str = ""
    value: str = ""
    probability: float | None = None
    decision: str = ""
    source: str = "monitor"
    reason: str = ""


@dataclass(frozen=True)
class MonitorDecision(TypedEvent, kind="monitor_decision"):
    action_id: str = ""
    decision: str = ""
    source: str = "monitor"
    then: str = ""
    accepted: bool = True
    reason: str = ""


# --- the executor ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GenerationAdvanced(TypedEvent, kind="generation_advanced"):
    generation: int = 0
    reason: str = ""
    by: str | None = None


@dataclass(frozen=True)
class SkillStarted(TypedEvent, kind="skill_started"):
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


@dataclass(frozen=True)
class SkillStop(TypedEvent, kind="skill_stop"):
    by: str | None = None
    skill: str = ""
    action_id: str = ""
    reason: str = ""


@dataclass(frozen=True)
class SkillEnded(TypedEvent, kind="skill_ended"):
    skill: str = ""
    action_id: str = ""
    outcome: str = ""
    reason: str = ""
    duration_s: float | Absent = optional()  # absent when the skill never started


@dataclass(frozen=True)
class SkillError(TypedEvent, kind="skill_error"):
    action_id: str = ""
    skill: str = ""
    error: str | Absent = optional()
    traceback: str | Absent = optional()


@dataclass(frozen=True)
class TargetRejected(TypedEvent, kind="target_rejected"):
    tool: str = ""
    action_id: str = ""
    target_area: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class ServiceStarted(TypedEvent, kind="service_started"):
    by: str | None = None
    module: str = ""
    field: str = ""
    params: Mapping[str, Any] = empty_map()
    action_id: str = ""


@dataclass(frozen=True)
class ServiceStopped(TypedEvent, kind="service_stopped"):
    by: str | None = None
    module: str | Absent = optional()  # older logs name it
    field: str = ""


@dataclass(frozen=True)
class ServiceStopFailed(TypedEvent, kind="service_stop_failed"):
    by: str | None = None
    field: str = ""
    error: str = ""


# --- the monitor ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MonitorTick(TypedEvent, kind="monitor_tick"):
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


@dataclass(frozen=True)
class MonitorFrame(TypedEvent, kind="monitor_frame"):
    action_id: str = ""
    tool: str = ""
    tick: int = 0
    images: Sequence[Mapping[str, Any]] = empty_list()
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class MonitorSkip(TypedEvent, kind="monitor_skip"):
    action_id: str = ""
    tool: str = ""
    tick: int = 0
    reason: str = ""


@dataclass(frozen=True)
class MonitorError(TypedEvent, kind="monitor_error"):
    action_id: str | Absent = optional()  # absent when no one action failed
    error: str = ""


# --- the planner's views --------------------------------------------------------------------
@dataclass(frozen=True)
class ViewDescribed(TypedEvent, kind="view_described"):
    observation_id: str = ""
    backend: str = ""
    model: str = ""
    latency_s: float = 0.0


# --- the scene observer ---------------------------------------------------------------------
@dataclass(frozen=True)
class ObserveScene(TypedEvent, kind="observe_scene"):
    focus: str = ""
    camera: str = ""
    frame_bytes: int = 0
    observed_at: float = 0.0
    latency_s: float = 0.0
    truncated: bool = False
    chars: int = 0
    model: str = ""
    usage: Any = None


@dataclass(frozen=True)
class ObserveSceneRejected(TypedEvent, kind="observe_scene_rejected"):
    code: str = ""
    reason: str = ""


# --- the episode viewer, from a bag's topics ------------------------------------------------
@dataclass(frozen=True)
class OperatorEventSeen(TypedEvent, kind="operator_event"):
    by: str | None = None
    action: str = ""
    detail: Mapping[str, Any] = empty_map()


@dataclass(frozen=True)
class MonitorVerdictSeen(TypedEvent, kind="monitor_verdict"):
    action_id: str = ""
    tool: str = ""
    question: str = ""
    value: str = ""
    probability: float | None = None
    decision: str = ""
    reason: str = ""
    source: str = "monitor"
