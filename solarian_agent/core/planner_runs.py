"""The planner's run lifecycle and operator handling (the operator always wins): a message
starts or resumes a run, ``/cancel`` and ``/reset`` end it, an operator takeover pauses it;
budgets end it; the generation is advanced where skills are executed (a cancel, reset or
takeover) or adopted from the executor, so nothing decided before is executed after.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from . import event_types as et
from . import names
from .clock import Clock
from .config import AgentConfig
from .episode_log import EpisodeLog, Recorder
from .events import Event
from .messages import Generation
from .model_api import Message
from .planner_journal import Journal, StatePublisher
from .planner_state import (
    ActionBook,
    ModelRetries,
    Refusals,
    RunState,
    Transcript,
    TurnSlot,
    Wakes,
)
from .planner_tools import PlannerModel, ToolCatalogue, system_prompt
from .statuses import RunStatus
from .text import OPERATOR, OPERATOR_CAP, TASK_PREFIX, operator_message, quote
from .transport import Bus, Subscription
from .views import ViewManager


def watched_at_start(cameras: list[str], start: list[str] | None) -> list[str]:
    """The cameras a run watches from its start, from ``watch_at_start``: None watches every
    camera; an empty list watches none (the planner watch()es what it needs); otherwise the
    listed cameras this robot has, or every camera when it has none of them (a robot whose
    cameras a launch named differently must not start blind by accident)."""
    if start is None:
        return list(cameras)
    if not start:
        return []
    return [c for c in cameras if c in start] or list(cameras)


class RunControl:
    """Starts, resumes, pauses and ends the planner's run, and keeps its generation."""

    def __init__(self, bus: Bus, clock: Clock, config: AgentConfig, run: RunState,
                 book: ActionBook, wakes: Wakes, slot: TurnSlot, transcript: Transcript,
                 journal: Journal, state: StatePublisher, *, views: ViewManager,
                 cameras: list[str], generations: Subscription[Any],
                 recorder: Recorder | None, model: PlannerModel, catalogue: ToolCatalogue,
                 refusals: Refusals, retries: ModelRetries,
                 on_idle: Callable[[], None] | None) -> None:
        self._bus = bus
        self._clock = clock
        self._config = config
        self._run = run
        self._book = book
        self._wakes = wakes
        self._slot = slot
        self._transcript = transcript
        self._journal = journal
        self._state = state
        self._views = views
        self._cameras = cameras
        self._generations = generations
        self._recorder = recorder
        self._model = model
        self._catalogue = catalogue
        self._refusals = refusals
        self._retries = retries
        self._on_idle = on_idle
        self._claimed = False  # this planner's own generation claimed from the executor

    def handle_message(self, ev: Event, wake: bool = True) -> None:
        text = ev.content
        run = self._run
        self._transcript.say("user", text, by=ev.context.get("by"))
        if run.status in (RunStatus.IDLE, RunStatus.SUCCEEDED, RunStatus.FAILED,
                          RunStatus.CANCELLED, RunStatus.BUDGET_EXHAUSTED):
            self.start_run(text)
            return
        if run.status == RunStatus.PAUSED:
            self.adopt_generation()
            did = "; ".join(run.operator_actions) or "took over"
            self._wakes.news.append(
                f"While the run was paused the operator: {quote('operator event', did)}.")
            run.operator_actions.clear()
            run.status = RunStatus.RUNNING
            self._journal.event(et.RunResumed(by="operator", generation=run.generation))
        elif run.status == RunStatus.WAITING_USER:
            run.status = RunStatus.RUNNING
        self._wakes.news.append(operator_message(text))
        if wake:  # a queued addition held for the next tool result is woken for later
            self._wakes.wake("message", hold=True)

    def handle_cancel(self, ev: Event, forget: bool) -> None:
        by = str(ev.context.get("by", "operator"))
        active = self._run.active
        if active or self._book.running:
            self.advance_generation("reset" if forget else "cancel", by)
        if active:
            self.end_run(RunStatus.CANCELLED, "reset by the operator" if forget
                         else "cancelled by the operator")
        if forget:
            self._transcript.clear()
            self._run.forget()
            self._views.pins.clear()
            self._views.keep = 0
            self._journal.event(et.ConversationReset(by=by))
        self._state.publish()

    def handle_operator(self, ev: Event) -> None:
        desc = ev.content + (f" {json.dumps(ev.context, default=str)}" if ev.context else "")
        self._journal.event(et.OperatorTakeover(by="operator", action=ev.content,
                            detail=ev.context))
        run = self._run
        if run.active:
            # what the operator did during this run, told on resume (the last 20: bounded);
            # an event between runs belongs to no run
            run.operator_actions.append(desc)
            del run.operator_actions[:-20]
        # the executor advanced the generation itself when the event was published; the
        # planner only stops listening to its old decisions and adopts the new generation
        self.adopt_generation()
        if run.status in (RunStatus.RUNNING, RunStatus.WAITING_USER):
            run.status = RunStatus.PAUSED
            self._journal.event(et.RunPaused(by="operator", reason=desc))
            self._slot.drop()  # a reply in flight belongs to the old generation: discarded
            self._wakes.settle()
            self._state.publish()

    def advance_generation(self, reason: str, by: str) -> bool:
        """Whether the executor answered with its new generation."""
        try:
            gen = self._bus.call(names.EXECUTOR_ADVANCE, {"reason": reason, "by": by},
                                 timeout_s=2.0)
            self._run.generation = int(gen)
            return True
        except Exception as e:
            # the executor is unreachable: we still never send with the old generation
            self._run.generation += 1
            self._journal.event(et.HarnessError(error=f"could not advance generation: {e}"))
            return False

    def adopt_generation(self) -> None:
        g = self._generations.latest()
        if isinstance(g, Generation):
            self._run.adopt(g.value)

    def start_run(self, task: str) -> None:
        self.adopt_generation()
        if not self._claimed:
            # a planner's first run claims a generation of its own from the executor, above
            # anything it has seen: goals a dead planner had in flight (a restart, whatever
            # the timing) carry an older one and are refused
            self._claimed = self.advance_generation(
                "a new planner started: goals sent before are refused", "agent")
        # the cameras watched from the start come with every turn until the planner
        # unwatch()es them (see watched_at_start)
        self._views.watched = watched_at_start(list(self._cameras),
                                               self._config.watch_at_start)
        run = self._run
        run.begin(task, self._clock.now())
        self._refusals.reset()
        self._book.answered_at_start.clear()
        self._wakes.news.clear()
        self._wakes.reasons.clear()
        if self._recorder is not None:  # every run in its own episode
            log = self._journal.log = self._recorder.episode_for_run(task)
            run.run_id = log.run_id
        else:
            run.run_id = f"run-{int(time.time())}"
        provider = self._model.provider
        self._journal.event(et.RunStarted(run_id=run.run_id, task=task,
                            models={"planner": {"provider": provider.name,
                                                "model": provider.model}},
                            system_prompt=system_prompt(self._config.system_prompt),
                            tools=[d.__dict__ for d in self._catalogue.tool_defs()],
                            generation=run.generation,
                            config={"dry_run": self._config.dry_run,
                                    "budgets": self._config.budgets.__dict__}))
        self._transcript.messages.append(Message.user(
            TASK_PREFIX + quote(OPERATOR, task, OPERATOR_CAP)))
        self._wakes.wake("message")
        self._state.publish()

    def continue_in(self, log: EpisodeLog) -> None:
        """Carry a run on in the next episode's log, opening it with a ``run_continued`` event
        (the run's config, status, plan so far and the episode it continues from) so each log
        reads on its own."""
        old = self._journal.log
        self._journal.log = log
        log.has_run = True
        run = self._run
        self._journal.event(et.RunContinued(run_id=run.run_id, status=run.status,
                            task=run.task, plan=run.plan.as_list(),
                            continues_from=old.run_id if old else "",
                            config={"dry_run": self._config.dry_run,
                                    "budgets": self._config.budgets.__dict__}))
        self._journal.turn_cursor = len(self._transcript.messages)

    def end_run(self, status: str, summary: str) -> None:
        run = self._run
        run.status = status
        run.summary = summary
        self._slot.drop()
        self._wakes.settle()
        self._retries.answered()  # a backoff or silence ends with the run
        self._journal.event(et.RunEnded(status=status, summary=summary, usage=run.usage,
                            turns=run.turns,
                            duration_s=round(self._clock.now() - run.started_at, 3)))
        self._transcript.say("agent", summary)
        self._state.publish()
        if self._on_idle is not None:
            try:
                self._on_idle()
            except Exception as e:
                self._journal.event(et.HarnessError(error=f"on_agent_idle raised {e!r}"))

    def check_budgets(self, now: float) -> None:
        b = self._config.budgets
        run = self._run
        if run.turns >= b.max_turns and self._wakes.due:
            self.stop_everything("budget")
            self.end_run(RunStatus.BUDGET_EXHAUSTED, f"used all {b.max_turns} planner turns")
        elif now - run.started_at > b.max_minutes * 60:
            self.stop_everything("budget")
            self.end_run(RunStatus.BUDGET_EXHAUSTED, f"ran past max_minutes={b.max_minutes:g}")

    def stop_everything(self, reason: str) -> None:
        if self._book.running:
            self.advance_generation(reason, "agent")
