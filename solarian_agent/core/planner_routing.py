"""The planner's event-routing glue: every event goes through the router (rules,
else the router model off the control path); an interrupt cuts the turn in flight and answers
starting calls with placeholders; queued user additions are held until the next tool result;
quick independent questions are answered in parallel; timers, task progress and starts that
were answered with a placeholder are polled here.  The rule table itself is :mod:`.routing`.
"""

from __future__ import annotations

import json
import time

from . import event_types as et
from .clock import Clock
from .config import AgentConfig
from .events import Event
from .messages import MonitorVerdict, SkillFeedback
from .model_api import ModelError, ModelReply
from .planner_calls import ToolCalls
from .planner_events import EventHandlers
from .planner_goals import GoalSender
from .planner_journal import Journal, StatePublisher
from .planner_runs import RunControl
from .planner_side import SideAnswers, SideCall
from .planner_state import ActionBook, RunState, Transcript, TurnSlot, Wakes
from .planner_tools import ACTIVE_STATUSES, PendingStart, PlannerModel, tool_msg
from .routing import (
    NewsItem,
    RouteContext,
    RouteDecision,
    Router,
    RunningAction,
    label_for,
    parallel_note,
    pct,
    placeholder_cancelled,
    placeholder_running,
    replace_progress,
)
from .statuses import RunStatus
from .text import OPERATOR, clean_reply, one_line, quote
from .timers import Timers
from .transport import GoalStatus


class EventRouting:
    """Routes events and keeps the routing state of a run: the side calls in flight, starts
    answered with a placeholder, progress already reported."""

    def __init__(self, clock: Clock, config: AgentConfig, run: RunState, book: ActionBook,
                 wakes: Wakes, slot: TurnSlot, transcript: Transcript, journal: Journal,
                 state: StatePublisher, *, router: Router, timers: Timers, model: PlannerModel,
                 handlers: EventHandlers, runs: RunControl, calls: ToolCalls,
                 goals: GoalSender, side_answers: SideAnswers) -> None:
        self._clock = clock
        self._config = config
        self._run = run
        self._book = book
        self._wakes = wakes
        self._slot = slot
        self._transcript = transcript
        self._journal = journal
        self._state = state
        self.router = router
        self.timers = timers
        self._model = model
        self._handlers = handlers
        self._runs = runs
        self._calls = calls
        self._goals = goals
        self._side_answers = side_answers
        self.side: list[SideCall] = []  # router / parallel calls in flight
        self.boundary = False  # a tool result arrived this tick
        self.background: list[PendingStart] = []  # starts answered with a placeholder
        self.progress_seen: dict[str, int] = {}  # action_id -> progress steps reported

    def route_ctx(self) -> RouteContext:
        now = self._clock.now()
        steps = {s.index: s.description for s in self._run.plan.steps}
        return RouteContext(
            active=self._run.status in ACTIVE_STATUSES,
            busy=self._run.status == RunStatus.RUNNING and (self._slot.current is not None
                                                    or bool(self._book.running)),
            task=self._run.task,
            running=tuple(f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                          for a in self._book.running.values()),
            actions=tuple(RunningAction(a.action_id, a.tool, steps.get(a.step, "")
                                        if a.step is not None else "",
                                        json.dumps(a.params, default=str)[:300])
                          for a in self._book.running.values()))

    def route(self, ev: Event) -> None:
        """Route one event: the rule table decides at once; an event no rule covers goes to the
        router model (off the control path, polled like every model call)."""
        ctx = self.route_ctx()
        decision = self.router.route(ev, ctx)
        if decision is not None:
            self.apply_route(ev, decision)
            return
        model, req = self.router.model, self.router.request(ev, ctx)
        timeout = self.router.timeout_s
        fut = self._model.caller.submit(
            lambda: clean_reply(model.complete(req, timeout_s=timeout)))
        self.side.append(SideCall("router", ev, fut, self._clock.now(), time.monotonic()))

    def apply_route(self, ev: Event, d: RouteDecision) -> None:
        self._journal.event(et.Route(by=d.by, event=ev.kind, source=ev.source, channel=ev.channel,
                         content=ev.content[:200], urgency=d.urgency, reason=d.reason, rule=d.rule,
                         stop=d.stop, stop_actions=d.as_dict()["stop_actions"], seq=ev.seq))
        if (d.urgency == "parallel" and ev.kind == "message" and self._config.events.parallel
                and self._run.status == RunStatus.RUNNING):
            self.side.append(self._side_answers.ask(ev))
            self._state.publish()
            return
        if d.urgency == "interrupt":
            self.interrupt(ev, d)
        self.dispatch(ev, d)

    def dispatch(self, ev: Event, d: RouteDecision) -> None:
        """Handle a routed event and tag what it told the planner for batch markers."""
        self._wakes.last_activity = self._clock.now()
        n0 = len(self._wakes.news)
        label, source, task_id = label_for(ev, d.urgency), ev.source, ""
        hold = False
        if ev.kind == "message":
            if self._run.status not in ACTIVE_STATUSES:
                self.reset_event_state()
            hold = (d.urgency == "queue" and self._run.status == RunStatus.RUNNING
                    and bool(self._book.running) and self._slot.current is None)
            if d.urgency == "interrupt" and self._run.status in (RunStatus.RUNNING,
                                                                  RunStatus.WAITING_USER):
                self._wakes.wake("interrupt", hold=True)
            self._runs.handle_message(ev, wake=not hold)
            source = str(ev.context.get("by") or "user")
        elif ev.kind == "timer":
            self.handle_timer(ev)
            source = f"timer {ev.context.get('timer_id', '')}"
        elif ev.kind == "task_progress":
            self.handle_progress(ev)
            return
        else:
            if ev.kind == "action_ended":
                res, goal = ev.context["result"], ev.context["goal"]
                task_id = res.action_id
                source = f"{goal.tool} {task_id}"
                self.boundary = True
                self._book.record_end(task_id, res.outcome + (f": {res.reason}" if res.reason
                                                              else ""))
                # an undelivered progress report of a task that has ended is no news
                self._wakes.news[:] = [n for n in self._wakes.news if not (
                    isinstance(n, NewsItem) and n.label == "progress report"
                    and n.task_id == task_id)]
                n0 = len(self._wakes.news)
            elif ev.kind == "monitor_flag":
                v = ev.context.get("verdict")
                if isinstance(v, MonitorVerdict):
                    source, task_id = f"{v.source} on {v.tool} {v.action_id}", v.action_id
            self._handlers.handle_event(ev)
        added: list[NewsItem] = []
        for i in range(min(n0, len(self._wakes.news)), len(self._wakes.news)):
            item = self._wakes.news[i]
            if not isinstance(item, NewsItem):
                item = NewsItem(item, label, source, task_id)
                self._wakes.news[i] = item
            added.append(item)
        if hold and added:
            if not self._wakes.held:
                self._wakes.held_since = self._clock.now()
            self._wakes.held.extend(added)
            self._journal.event(et.EventHeld(event=ev.kind, content=ev.content[:200],
                             reason="queued until the next tool result"))

    def interrupt(self, ev: Event, d: RouteDecision) -> None:
        """Force an early boundary: cut the model call in flight, answer tool calls still
        starting with a placeholder, stop running actions when asked, deliver everything
        pending with the urgent event and call the model at once."""
        if self._run.status not in ACTIVE_STATUSES:
            return
        if ev.kind == "monitor_flag":
            v = ev.context.get("verdict")
            if not (isinstance(v, MonitorVerdict) and v.decision == "fail"
                    and v.action_id in self._book.running
                    and v.action_id not in self._book.woken_for_fail
                    and self._run.status == RunStatus.RUNNING):
                return  # a repeated or stale flag is no reason to cut anything
        said = quote(OPERATOR if ev.kind == "message" else ev.source, ev.content, 80)
        what = f"{one_line(ev.source, 60)} {ev.kind}" + (f" {said}" if ev.content else "")
        if ev.kind == "operator":
            who = "by the operator's takeover"
        elif ev.kind in ("cancel", "reset"):
            who = f"by the operator's {ev.kind}"
        else:
            who = f"by the user ({said})"
        cut = self.cut_turn(what, d, who)
        stopped: list[str] = []
        kept: list[str] = []
        if d.stop and ev.kind == "message":
            now = self._clock.now()
            for aid, info in list(self._book.running.items()):
                if not d.stops(aid):  # a stop names what it stops: the rest goes on
                    kept.append(aid)
                    continue
                # a call cancelled before it started has already ended: wait for its end too
                if info.handle.status.terminal or self._goals.stop(
                        aid, info, f"cancelled {who}", by="user"):
                    stopped.append(aid)
                    self._book.stopping[aid] = now
            self._wakes.hold = True
            if kept:
                on = ", ".join(f"{a} ({self._book.running[a].tool})" for a in kept)
                self._wakes.news.append(
                    f"The user's stop named only {', '.join(stopped) or 'nothing that runs'}; "
                    f"still running: {on}.")
        released = self.release_held()
        self._wakes.urgent = True
        self._journal.event(et.Interrupt(event=ev.kind, source=ev.source, content=ev.content[:200],
                         cut=cut, stopped=stopped, kept=kept, released_events=released,
                         reason=d.reason))

    def cut_turn(self, what: str, d: RouteDecision, who: str) -> str:
        """End the turn in flight now.  Returns what was cut: '' (nothing), 'model_call' (the
        reply is discarded: the turn token is dropped, so a reply still being computed on a
        worker thread is never read) or 'pending_calls' (placeholders were given)."""
        turn = self._slot.current
        if turn is None:
            return ""
        if turn.future is not None:
            turn.future.cancel()  # a call not yet running never runs
            self._slot.current = None
            self._journal.event(et.PlannerReplyDiscarded(turn=turn.turn_file,
                             reason=f"interrupted by {what}"))
            return "model_call"
        self._calls.poll_pending(turn)  # skills that did start get their real result
        if self._slot.current is not turn:
            return ""
        for ps in turn.pending:
            cancel = d.stops(ps.action_id)
            if cancel:
                ps.handle.cancel()
                text = placeholder_cancelled(ps.tool, ps.action_id, who)
            else:
                self.background.append(ps)
                text = placeholder_running(ps.tool, ps.action_id, what)
            turn.results[ps.call.id] = tool_msg(ps.call, text, error=cancel)
            self._journal.event(et.ToolPlaceholder(tool=ps.tool, action_id=ps.action_id,
                                text=text))
        turn.pending.clear()
        self._calls.poll_pending(turn)
        return "pending_calls"

    def release_held(self) -> int:
        n = len(self._wakes.held)
        if n:
            self._wakes.held.clear()
            self._wakes.wake("message", hold=True)
        return n

    def reset_event_state(self) -> None:
        self._wakes.held.clear()
        self._book.stopping.clear()
        self.background.clear()
        self.progress_seen.clear()
        self._wakes.hold = False
        self._wakes.urgent = False
        self.boundary = False
        gone = self.timers.clear()
        if gone:
            self._journal.event(et.TimersCleared(timers=[t.timer_id for t in gone],
                             reason="the run is over"))

    def poll_side(self, now: float) -> None:
        """Everything routing adds to a tick: side calls, timers, task progress, starts that
        were answered with a placeholder, and the release of held events."""
        for sc in list(self.side):
            limit = (self.router.timeout_s if sc.kind == "router"
                     else self._config.planner.timeout_s) + 5.0
            if sc.future is None:
                self.side.remove(sc)
                continue
            if not sc.future.done():
                if now - sc.started_at <= limit:
                    continue
                sc.future.cancel()
                self.side.remove(sc)
                self.side_done(sc, None, ModelError("timeout", f"no answer in {limit:g} s"))
                continue
            self.side.remove(sc)
            try:
                reply: ModelReply | None = sc.future.result()
                error: BaseException | None = None
            except BaseException as e:
                reply, error = None, e
            self.side_done(sc, reply, error)
        if self._run.status not in ACTIVE_STATUSES:
            if self._wakes.held or len(self.timers) or self.background:
                self.reset_event_state()
            return
        for t in self.timers.pop_due():
            self.route(Event("timer", "timer", t.note, {
                "timer_id": t.timer_id, "repeat": t.repeat, "fired": t.fired,
                "seconds": t.seconds}, "queue", "timer", now))
        self.poll_progress(now)
        self.poll_background(now)
        wakes = self._wakes
        wakes.held = [h for h in wakes.held if any(n is h for n in wakes.news)]
        if wakes.held and (self.boundary or not self._book.running
                           or self._run.status != RunStatus.RUNNING or wakes.reasons
                           or now - wakes.held_since >= self._config.events.max_hold_s):
            self.release_held()
        self.boundary = False

    def side_done(self, sc: SideCall, reply: ModelReply | None,
                  error: BaseException | None) -> None:
        if sc.kind == "router":
            self.apply_route(sc.event, self.router.parse(reply, error, self.route_ctx(),
                                                           sc.event))
            return
        question = sc.event.content
        if reply is not None:
            self._run.add_usage(reply.usage.as_dict())
            if self._side_answers.carry_on(sc, reply):
                self.side.append(sc)
                return  # it asked for read-only tools: answered, and called again
        answer = reply.text.strip()[:2000] if reply is not None else ""
        if not answer:
            why = (f"{error.kind}: {error.message}" if isinstance(error, ModelError)
                   else f"{type(error).__name__}: {error}" if error is not None
                   else "empty answer")
            self._journal.event(et.ParallelFailed(question=question, error=why))
            shown = self._transcript.conversation
            if sc.entry is not None and sc.entry in shown:
                shown.remove(sc.entry)  # the main task answers it instead
            self.dispatch(sc.event, RouteDecision(
                "queue", f"the parallel answer failed ({why})", "fallback"))
            return
        self._transcript.say("agent", answer, parallel=True)
        self._journal.event(et.ParallelAnswer(question=question, answer=answer,
                         latency_s=round(time.monotonic() - sc.wall_start, 4),
                         usage=None if reply is None else reply.usage.as_dict()))
        if self._run.status in ACTIVE_STATUSES:
            # joins the main trajectory with the next delivery; it wakes nothing
            self._wakes.news.append(NewsItem(parallel_note(question, answer), "parallel answer",
                                        str(sc.event.context.get("by") or "user")))
        self._state.publish()

    def handle_timer(self, ev: Event) -> None:
        c = ev.context
        every = (f" (#{c.get('fired')}, repeats every {float(c.get('seconds') or 0):g} s)"
                 if c.get("repeat") else "")
        self._journal.event(et.TimerFired(timer_id=c.get("timer_id"), note=ev.content,
                         fired=c.get("fired")))
        if self._run.status not in ACTIVE_STATUSES:
            return
        self._wakes.news.append(f"Timer {c.get('timer_id')} fired{every}"
                           + (f": {quote('timer note', ev.content, 300)}" if ev.content
                              else "."))
        self._wakes.wake("timer")

    def poll_progress(self, now: float) -> None:
        """Progress from goal feedback, as a queue event each time a task crosses another
        ``progress_step`` (rate-limited; it never wakes the planner by itself)."""
        step = self._config.events.progress_step
        for aid in [a for a in self.progress_seen if a not in self._book.running]:
            del self.progress_seen[aid]
        for aid, info in list(self._book.running.items()):
            fb = info.handle.feedback
            if not isinstance(fb, SkillFeedback) or not 0.0 <= fb.progress < 1.0:
                continue
            bucket = int(fb.progress / step + 1e-9)
            if bucket <= self.progress_seen.get(aid, 0):
                continue
            self.progress_seen[aid] = bucket
            self.route(Event("skills", "task", f"{pct(fb.progress)} ({fb.phase})", {
                "action_id": aid, "tool": info.tool, "progress": fb.progress,
                "phase": fb.phase, "elapsed_s": round(now - info.started_at, 2)},
                "queue", "task_progress", now))

    def handle_progress(self, ev: Event) -> None:
        c = ev.context
        aid, tool = str(c.get("action_id", "")), str(c.get("tool", ""))
        self._journal.event(et.TaskProgress(action_id=aid, tool=tool, progress=c.get("progress"),
                         phase=c.get("phase")))
        if self._run.status not in ACTIVE_STATUSES or aid not in self._book.running:
            return
        replace_progress(self._wakes.news, NewsItem(
            f"Task {aid} ({tool}) is {pct(float(c.get('progress', 0.0)))} done "
            f"(phase {quote('skill', c.get('phase'), 80)}, "
            f"{float(c.get('elapsed_s', 0.0)):.1f} s in); still "
            "running, no result yet.", "progress report", f"{tool} {aid}", aid))

    def poll_background(self, now: float) -> None:
        """Skill starts whose tool call an interrupt answered with a placeholder."""
        for ps in list(self.background):
            st = ps.handle.status
            if st.terminal:  # refused or already ended: its end event reports it
                self.background.remove(ps)
            elif st == GoalStatus.EXECUTING or ps.handle.feedback is not None:
                self.background.remove(ps)
                step = self._run.claim_step(ps.tool, ps.action_id)
                info = self._book.get(ps.action_id)
                if info is not None and step is not None:
                    info.step = step.index
                self._journal.event(et.ActionStarted(action_id=ps.action_id, tool=ps.tool,
                                 params=info.params if info else {},
                                 step=step.index if step else None, after_placeholder=True))
                self._wakes.news.append(NewsItem(
                    f"Task {ps.action_id} ({ps.tool}) has now started (its call was answered "
                    "with a placeholder); its result arrives as its own event.",
                    "tool result", f"{ps.tool} {ps.action_id}", ps.action_id))
            elif now - ps.sent_at > 5.0:
                self.background.remove(ps)
                ps.handle.cancel()  # its end ("cancelled before it started") is reported
