"""The planner's event-routing glue: every event goes through the router (rules,
else the router model off the control path); an interrupt cuts the turn in flight and answers
starting calls with placeholders; queued user additions are held until the next tool result;
quick independent questions are answered in parallel; timers, task progress and starts that
were answered with a placeholder are polled here.  The rule table itself is :mod:`.routing`.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import names, planner_side
from .attention import AttentionEpisode
from .events import Event
from .messages import MonitorVerdict, SkillFeedback
from .model_api import Message, ModelError, ModelReply
from .planner_tools import ACTIVE_STATUSES, STOP_WAIT_S, ActionInfo, PendingStart, tool_msg
from .routing import (
    NewsItem,
    RouteContext,
    RouteDecision,
    RunningAction,
    label_for,
    parallel_note,
    pct,
    placeholder_cancelled,
    placeholder_running,
    replace_progress,
)
from .text import OPERATOR, clean_reply, one_line, quote
from .transport import GoalStatus

if TYPE_CHECKING:
    from .planner import Planner


@dataclass
class SideCall:
    """A model call beside the main one, so the main turn never waits on it: the router model
    or a parallel answer."""

    kind: str  # router | parallel
    event: Event
    future: cf.Future[ModelReply] | None
    started_at: float
    wall_start: float
    entry: dict[str, Any] | None = None  # the conversation entry of a parallel question
    # a parallel side session: its messages so far, model calls made, attention episode
    messages: list[Message] = field(default_factory=list)
    rounds: int = 0
    episode: AttentionEpisode | None = None


class EventRouting:
    """Routes events and keeps the routing state of a run.  ``self.p``: the planner."""

    def __init__(self, planner: Planner) -> None:
        self.p = planner
        self.side: list[SideCall] = []  # router / parallel calls in flight
        self.held: list[NewsItem] = []  # queued user additions waiting for a tool result
        self.held_since = 0.0
        self.boundary = False  # a tool result arrived this tick
        self.urgent = False  # the next call is an interrupt's: no waiting for fresh frames
        self.stopping: dict[str, float] = {}  # action_id -> when a user stop was sent
        self.background: list[PendingStart] = []  # starts answered with a placeholder
        self.progress_seen: dict[str, int] = {}  # action_id -> progress steps reported
        self.ended_tasks: dict[str, str] = {}  # action_id -> how it ended

    def route_ctx(self) -> RouteContext:
        now = self.p.clock.now()
        steps = {s.index: s.description for s in self.p.plan.steps}
        return RouteContext(
            active=self.p.status in ACTIVE_STATUSES,
            busy=self.p.status == "running" and (self.p.turn is not None or bool(self.p.actions)),
            task=self.p.task,
            running=tuple(f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                          for a in self.p.actions.values()),
            actions=tuple(RunningAction(a.action_id, a.tool, steps.get(a.step, "")
                                        if a.step is not None else "",
                                        json.dumps(a.params, default=str)[:300])
                          for a in self.p.actions.values()))

    def route(self, ev: Event) -> None:
        """Route one event: the rule table decides at once; an event no rule covers goes to the
        router model (off the control path, polled like every model call)."""
        ctx = self.route_ctx()
        decision = self.p.router.route(ev, ctx)
        if decision is not None:
            self.apply_route(ev, decision)
            return
        model, req = self.p.router.model, self.p.router.request(ev, ctx)
        timeout = self.p.router.timeout_s
        fut = self.p.caller.submit(lambda: clean_reply(model.complete(req, timeout_s=timeout)))
        self.side.append(SideCall("router", ev, fut, self.p.clock.now(), time.monotonic()))

    def apply_route(self, ev: Event, d: RouteDecision) -> None:
        self.p.log_event("route", by=d.by, event=ev.kind, source=ev.source, channel=ev.channel,
                         content=ev.content[:200], urgency=d.urgency, reason=d.reason, rule=d.rule,
                         stop=d.stop, stop_actions=d.as_dict()["stop_actions"], seq=ev.seq)
        if (d.urgency == "parallel" and ev.kind == "message" and self.p.config.events.parallel
                and self.p.status == "running"):
            planner_side.ask(self, ev)
            return
        if d.urgency == "interrupt":
            self.interrupt(ev, d)
        self.dispatch(ev, d)

    def dispatch(self, ev: Event, d: RouteDecision) -> None:
        """Handle a routed event and tag what it told the planner for batch markers."""
        self.p.last_activity = self.p.clock.now()
        n0 = len(self.p.news)
        label, source, task_id = label_for(ev, d.urgency), ev.source, ""
        hold = False
        if ev.kind == "message":
            if self.p.status not in ACTIVE_STATUSES:
                self.reset_event_state()
            hold = (d.urgency == "queue" and self.p.status == "running" and bool(self.p.actions)
                    and self.p.turn is None)
            if d.urgency == "interrupt" and self.p.status in ("running", "waiting_user"):
                self.p.wake("interrupt", hold=True)
            self.p.runs.handle_message(ev, wake=not hold)
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
                self.ended_tasks[task_id] = res.outcome + (f": {res.reason}" if res.reason
                                                           else "")
                # an undelivered progress report of a task that has ended is no news
                self.p.news[:] = [n for n in self.p.news if not (
                    isinstance(n, NewsItem) and n.label == "progress report"
                    and n.task_id == task_id)]
                n0 = len(self.p.news)
                if len(self.ended_tasks) > 200:
                    del self.ended_tasks[next(iter(self.ended_tasks))]
            elif ev.kind == "monitor_flag":
                v = ev.context.get("verdict")
                if isinstance(v, MonitorVerdict):
                    source, task_id = f"{v.source} on {v.tool} {v.action_id}", v.action_id
            self.p.handlers.handle_event(ev)
        added: list[NewsItem] = []
        for i in range(min(n0, len(self.p.news)), len(self.p.news)):
            item = self.p.news[i]
            if not isinstance(item, NewsItem):
                item = NewsItem(item, label, source, task_id)
                self.p.news[i] = item
            added.append(item)
        if hold and added:
            if not self.held:
                self.held_since = self.p.clock.now()
            self.held.extend(added)
            self.p.log_event("event_held", event=ev.kind, content=ev.content[:200],
                             reason="queued until the next tool result")

    def interrupt(self, ev: Event, d: RouteDecision) -> None:
        """Force an early boundary: cut the model call in flight, answer tool calls still
        starting with a placeholder, stop running actions when asked, deliver everything
        pending with the urgent event and call the model at once."""
        if self.p.status not in ACTIVE_STATUSES:
            return
        if ev.kind == "monitor_flag":
            v = ev.context.get("verdict")
            if not (isinstance(v, MonitorVerdict) and v.decision == "fail"
                    and v.action_id in self.p.actions and v.action_id not in self.p.woken_for_fail
                    and self.p.status == "running"):
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
            now = self.p.clock.now()
            for aid, info in list(self.p.actions.items()):
                if not d.stops(aid):  # a stop names what it stops: the rest goes on
                    kept.append(aid)
                    continue
                # a call cancelled before it started has already ended: wait for its end too
                if info.handle.status.terminal or self.stop_task(aid, info, f"cancelled {who}",
                                                                 by="user"):
                    stopped.append(aid)
                    self.stopping[aid] = now
            self.p.plan_hold = True
            if kept:
                on = ", ".join(f"{a} ({self.p.actions[a].tool})" for a in kept)
                self.p.news.append(
                    f"The user's stop named only {', '.join(stopped) or 'nothing that runs'}; "
                    f"still running: {on}.")
        released = self.release_held()
        self.urgent = True
        self.p.log_event("interrupt", event=ev.kind, source=ev.source, content=ev.content[:200],
                         cut=cut, stopped=stopped, kept=kept, released_events=released,
                         reason=d.reason)

    def cut_turn(self, what: str, d: RouteDecision, who: str) -> str:
        """End the turn in flight now.  Returns what was cut: '' (nothing), 'model_call' (the
        reply is discarded: the turn token is dropped, so a reply still being computed on a
        worker thread is never read) or 'pending_calls' (placeholders were given)."""
        turn = self.p.turn
        if turn is None:
            return ""
        if turn.future is not None:
            turn.future.cancel()  # a call not yet running never runs
            self.p.turn = None
            self.p.log_event("planner_reply_discarded", turn=turn.turn_file,
                             reason=f"interrupted by {what}")
            return "model_call"
        self.p.calls.poll_pending(turn)  # skills that did start get their real result
        if self.p.turn is not turn:
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
            self.p.log_event("tool_placeholder", tool=ps.tool, action_id=ps.action_id, text=text)
        turn.pending.clear()
        self.p.calls.poll_pending(turn)
        return "pending_calls"

    def stop_task(self, aid: str, info: ActionInfo, reason: str, by: str) -> bool:
        """Stop a running task with a reason the planner will read in its end event."""
        try:
            r = self.p.bus.call(names.SKILL_CONCLUDE, {
                "action_id": aid, "outcome": "stopped", "generation": self.p.generation,
                "reason": reason}, timeout_s=2.0)
            ok = bool(r.get("ok"))
        except Exception:
            ok = False
        if not ok:  # not started yet, or the conclude service is unreachable
            ok = info.handle.cancel()
        self.p.log_event("stop_action", by=by, action_id=aid, tool=info.tool, reason=reason,
                         accepted=ok)
        return ok

    def release_held(self) -> int:
        n = len(self.held)
        if n:
            self.held.clear()
            self.p.wake("message", hold=True)
        return n

    def waiting_for_stop(self, now: float) -> bool:
        """After a user stop, the re-plan call waits (at most ``STOP_WAIT_S``) for the stopped
        actions to end, so it sees their ends instead of being woken again for them."""
        for aid, t in list(self.stopping.items()):
            if aid not in self.p.actions or now - t >= STOP_WAIT_S:
                del self.stopping[aid]
        return bool(self.stopping)

    def reset_event_state(self) -> None:
        self.held.clear()
        self.stopping.clear()
        self.background.clear()
        self.progress_seen.clear()
        self.p.plan_hold = False
        self.urgent = False
        self.boundary = False
        gone = self.p.timers.clear()
        if gone:
            self.p.log_event("timers_cleared", timers=[t.timer_id for t in gone],
                             reason="the run is over")

    def poll_side(self, now: float) -> None:
        """Everything routing adds to a tick: side calls, timers, task progress, starts that
        were answered with a placeholder, and the release of held events."""
        for sc in list(self.side):
            limit = (self.p.router.timeout_s if sc.kind == "router"
                     else self.p.config.planner.timeout_s) + 5.0
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
        if self.p.status not in ACTIVE_STATUSES:
            if self.held or len(self.p.timers) or self.background:
                self.reset_event_state()
            return
        for t in self.p.timers.pop_due():
            self.route(Event("timer", "timer", t.note, {
                "timer_id": t.timer_id, "repeat": t.repeat, "fired": t.fired,
                "seconds": t.seconds}, "queue", "timer", now))
        self.poll_progress(now)
        self.poll_background(now)
        self.held = [h for h in self.held if any(n is h for n in self.p.news)]
        if self.held and (self.boundary or not self.p.actions or self.p.status != "running"
                          or self.p.wake_reasons
                          or now - self.held_since >= self.p.config.events.max_hold_s):
            self.release_held()
        self.boundary = False

    def side_done(self, sc: SideCall, reply: ModelReply | None,
                  error: BaseException | None) -> None:
        if sc.kind == "router":
            self.apply_route(sc.event, self.p.router.parse(reply, error, self.route_ctx(),
                                                           sc.event))
            return
        question = sc.event.content
        if reply is not None:
            for k, v in reply.usage.as_dict().items():
                self.p.usage_total[k] = self.p.usage_total.get(k, 0) + v
            if planner_side.carry_on(self, sc, reply):
                return  # it asked for read-only tools: answered, and called again
        answer = reply.text.strip()[:2000] if reply is not None else ""
        if not answer:
            why = (f"{error.kind}: {error.message}" if isinstance(error, ModelError)
                   else f"{type(error).__name__}: {error}" if error is not None
                   else "empty answer")
            self.p.log_event("parallel_failed", question=question, error=why)
            if sc.entry is not None and sc.entry in self.p.conversation:
                self.p.conversation.remove(sc.entry)  # the main task answers it instead
            self.dispatch(sc.event, RouteDecision(
                "queue", f"the parallel answer failed ({why})", "fallback"))
            return
        self.p.conversation.append({"role": "agent", "text": answer, "parallel": True})
        self.p.log_event("parallel_answer", question=question, answer=answer,
                         latency_s=round(time.monotonic() - sc.wall_start, 4),
                         usage=None if reply is None else reply.usage.as_dict())
        if self.p.status in ACTIVE_STATUSES:
            # joins the main trajectory with the next delivery; it wakes nothing
            self.p.news.append(NewsItem(parallel_note(question, answer), "parallel answer",
                                        str(sc.event.context.get("by") or "user")))
        self.p.publish_state()

    def handle_timer(self, ev: Event) -> None:
        c = ev.context
        every = (f" (#{c.get('fired')}, repeats every {float(c.get('seconds') or 0):g} s)"
                 if c.get("repeat") else "")
        self.p.log_event("timer_fired", timer_id=c.get("timer_id"), note=ev.content,
                         fired=c.get("fired"))
        if self.p.status not in ACTIVE_STATUSES:
            return
        self.p.news.append(f"Timer {c.get('timer_id')} fired{every}"
                           + (f": {quote('timer note', ev.content, 300)}" if ev.content
                              else "."))
        self.p.wake("timer")

    def poll_progress(self, now: float) -> None:
        """Progress from goal feedback, as a queue event each time a task crosses another
        ``progress_step`` (rate-limited; it never wakes the planner by itself)."""
        step = self.p.config.events.progress_step
        for aid in [a for a in self.progress_seen if a not in self.p.actions]:
            del self.progress_seen[aid]
        for aid, info in list(self.p.actions.items()):
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
        self.p.log_event("task_progress", action_id=aid, tool=tool, progress=c.get("progress"),
                         phase=c.get("phase"))
        if self.p.status not in ACTIVE_STATUSES or aid not in self.p.actions:
            return
        replace_progress(self.p.news, NewsItem(
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
                step = self.p.plan.claim(ps.tool, ps.action_id)
                info = self.p.actions.get(ps.action_id)
                if info is not None and step is not None:
                    info.step = step.index
                self.p.log_event("action_started", action_id=ps.action_id, tool=ps.tool,
                                 params=info.params if info else {},
                                 step=step.index if step else None, after_placeholder=True)
                self.p.news.append(NewsItem(
                    f"Task {ps.action_id} ({ps.tool}) has now started (its call was answered "
                    "with a placeholder); its result arrives as its own event.",
                    "tool result", f"{ps.tool} {ps.action_id}", ps.action_id))
            elif now - ps.sent_at > 5.0:
                self.background.remove(ps)
                ps.handle.cancel()  # its end ("cancelled before it started") is reported
