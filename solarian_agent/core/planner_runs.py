"""The planner's run lifecycle and operator handling (the operator always wins): a message
starts or resumes a run, ``/cancel`` and ``/reset`` end it, an operator takeover pauses it;
budgets end it; the generation is advanced where skills are executed (a cancel, reset or
takeover) or adopted from the executor, so nothing decided before is executed after.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from . import names
from .episode_log import EpisodeLog
from .events import Event
from .messages import Generation
from .model_api import Message
from .plan import PlanQueue
from .text import OPERATOR, OPERATOR_CAP, TASK_PREFIX, operator_message, quote

if TYPE_CHECKING:
    from .planner import Planner


class RunControl:
    """Starts, resumes, pauses and ends the planner's run.  ``self.p``: the planner whose run
    state it changes."""

    def __init__(self, planner: Planner) -> None:
        self.p = planner

    def handle_message(self, ev: Event, wake: bool = True) -> None:
        text = ev.content
        self.p.conversation.append({"role": "user", "text": text, "by": ev.context.get("by")})
        if self.p.status in ("idle", "succeeded", "failed", "cancelled", "budget_exhausted"):
            self.start_run(text)
            return
        if self.p.status == "paused":
            self.adopt_generation()
            did = "; ".join(self.p.operator_actions) or "took over"
            self.p.news.append(
                f"While the run was paused the operator: {quote('operator event', did)}.")
            self.p.operator_actions.clear()
            self.p.status = "running"
            self.p.log_event("run_resumed", by="operator", generation=self.p.generation)
        elif self.p.status == "waiting_user":
            self.p.status = "running"
        self.p.news.append(operator_message(text))
        if wake:  # a queued addition held for the next tool result is woken for later
            self.p.wake("message", hold=True)

    def handle_cancel(self, ev: Event, forget: bool) -> None:
        by = str(ev.context.get("by", "operator"))
        active = self.p.status in ("running", "paused", "waiting_user")
        if active or self.p.actions:
            self.advance_generation("reset" if forget else "cancel", by)
        if active:
            self.end_run("cancelled", "reset by the operator" if forget
                         else "cancelled by the operator")
        if forget:
            self.p.messages.clear()
            self.p.conversation.clear()
            self.p.plan = PlanQueue()
            self.p.task = ""
            self.p.views.pins.clear()
            self.p.views.keep = 0
            self.p.log_event("conversation_reset", by=by)
        self.p.publish_state()

    def handle_operator(self, ev: Event) -> None:
        desc = ev.content + (f" {json.dumps(ev.context, default=str)}" if ev.context else "")
        self.p.log_event("operator_takeover", by="operator", action=ev.content, detail=ev.context)
        if self.p.status in ("running", "waiting_user", "paused"):
            # what the operator did during this run, told on resume (the last 20: bounded);
            # an event between runs belongs to no run
            self.p.operator_actions.append(desc)
            del self.p.operator_actions[:-20]
        # the executor advanced the generation itself when the event was published; the
        # planner only stops listening to its old decisions and adopts the new generation
        self.adopt_generation()
        if self.p.status in ("running", "waiting_user"):
            self.p.status = "paused"
            self.p.log_event("run_paused", by="operator", reason=desc)
            self.drop_turn()  # a reply in flight belongs to the old generation: discarded
            self.p.continue_turn = False
            self.p.wake_reasons.clear()
            self.p.publish_state()

    def drop_turn(self) -> None:
        """Forget the turn in flight; its model call, if still running, is cancelled: no
        retry and no wait for one goes on for a reply nobody will read."""
        turn = self.p.turn
        if turn is not None and turn.future is not None:
            turn.future.cancel()
        self.p.turn = None

    def advance_generation(self, reason: str, by: str) -> None:
        try:
            gen = self.p.bus.call(names.EXECUTOR_ADVANCE, {"reason": reason, "by": by},
                                  timeout_s=2.0)
            self.p.generation = int(gen)
        except Exception as e:
            # the executor is unreachable: we still never send with the old generation
            self.p.generation += 1
            self.p.log_event("harness_error", error=f"could not advance generation: {e}")

    def adopt_generation(self) -> None:
        g = self.p.generation_sub.latest()
        if isinstance(g, Generation) and g.value > self.p.generation:
            self.p.generation = g.value

    def start_run(self, task: str) -> None:
        self.adopt_generation()
        # the agent's cameras come with every turn until the planner unwatch()es them
        self.p.views.watched = list(self.p.cameras)
        self.p.task = task
        self.p.status = "running"
        self.p.turns = 0
        self.p.usage_total = {}
        self.p.run_started_at = self.p.clock.now()
        self.p.plan = PlanQueue()
        self.p.tool_failures = {}
        self.p.calls.reset_refusals()
        self.p.calls.answered_at_start.clear()
        self.p.news = []
        self.p.wake_reasons = []
        self.p.operator_actions.clear()
        if self.p.recorder is not None:  # every run in its own episode
            self.p.log = self.p.recorder.episode_for_run(task)
            self.p.run_id = self.p.log.run_id
        else:
            self.p.run_id = f"run-{int(time.time())}"
        self.p.log_event("run_started", run_id=self.p.run_id, task=task,
                         models={"planner": {"provider": self.p.provider.name,
                                             "model": self.p.provider.model}},
                         system_prompt=self.p.cycle.system_prompt(),
                         tools=[d.__dict__ for d in self.p.tool_defs()],
                         generation=self.p.generation,
                         config={"dry_run": self.p.config.dry_run,
                                 "budgets": self.p.config.budgets.__dict__})
        self.p.messages.append(Message.user(
            TASK_PREFIX + quote(OPERATOR, task, OPERATOR_CAP)))
        self.p.wake("message")
        self.p.publish_state()

    def continue_in(self, log: EpisodeLog) -> None:
        """Carry a run on in the next episode's log, opening it with a ``run_continued`` event
        (the run's config, status, plan so far and the episode it continues from) so each log
        reads on its own."""
        old = self.p.log
        self.p.log = log
        log.has_run = True
        self.p.log_event("run_continued", run_id=self.p.run_id, status=self.p.status,
                         task=self.p.task,
                         plan=self.p.plan.as_list(), continues_from=old.run_id if old else "",
                         config={"dry_run": self.p.config.dry_run,
                                 "budgets": self.p.config.budgets.__dict__})
        self.p.cycle.turn_cursor = len(self.p.messages)

    def end_run(self, status: str, summary: str) -> None:
        self.p.status = status
        self.p.summary = summary
        self.drop_turn()
        self.p.continue_turn = False
        self.p.wake_reasons.clear()
        self.p.cycle.model_answered(quiet=True)  # a backoff or silence ends with the run
        self.p.log_event("run_ended", status=status, summary=summary, usage=self.p.usage_total,
                         turns=self.p.turns,
                         duration_s=round(self.p.clock.now() - self.p.run_started_at, 3))
        self.p.conversation.append({"role": "agent", "text": summary})
        self.p.publish_state()
        if self.p.on_agent_idle is not None:
            try:
                self.p.on_agent_idle()
            except Exception as e:
                self.p.log_event("harness_error", error=f"on_agent_idle raised {e!r}")

    def check_budgets(self, now: float) -> None:
        b = self.p.config.budgets
        if self.p.turns >= b.max_turns and (self.p.wake_reasons or self.p.continue_turn):
            self.stop_everything("budget")
            self.end_run("budget_exhausted", f"used all {b.max_turns} planner turns")
        elif now - self.p.run_started_at > b.max_minutes * 60:
            self.stop_everything("budget")
            self.end_run("budget_exhausted", f"ran past max_minutes={b.max_minutes:g}")

    def stop_everything(self, reason: str) -> None:
        if self.p.actions:
            self.advance_generation(reason, "agent")
