"""Skill execution: the control side.  One action server per tool (``skills/<tool>``).

The executor owns the run's *generation* where skills are executed.  Every goal carries the
generation its sender believed current; cancel, reset and operator takeover advance it here, so a
goal decided before them is refused with a reason instead of executed after them — across
processes and under any interleaving, because the check happens both when the goal arrives and
again on the control loop right before the skill starts.

Concurrency: goals, cancels and generation changes may arrive on any thread (a planner worker, a
ROS executor thread, the web panel).  They only enqueue requests under ``_lock``; skills are
started, ticked and stopped exclusively inside :meth:`tick` on the control loop, so a skill never
runs on two threads and a stop always lands between two ticks.  Nothing in ``tick`` waits on a
model or on I/O.
"""

from __future__ import annotations

import functools
import itertools
import threading
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import event_types as et
from . import names
from .approval import SkillApprovals
from .clock import Clock
from .errors import SkillFailed
from .event_record import ABSENT, GenericEvent, TypedEvent
from .messages import AgentEvent, Generation, SkillFeedback, SkillGoal, SkillResult
from .skill import Skill, SkillContext, Tool, ToolSpec, TrackerRequest, usable_tools
from .statuses import Outcome
from .tool_schema import schema_error, tool_schema, validate_params
from .transport import LATCHED, ActionServer, Bus, GoalHandle, GoalStatus, QoS


@dataclass
class TrackerResult:
    """The first (or latest) result of a tracker: its mask's share of the image and its box."""

    area_fraction: float | None  # None: no mask at all
    box: tuple[int, int, int, int] | None = None  # x0, y0, x1, y1 in capture pixels
    mask: Any = None


class TrackerPort(Protocol):
    """Trackers the harness seeds with the planner's point (``services_for``)."""

    def start(self, request: TrackerRequest, point: tuple[float, float]) -> TrackerResult: ...

    def stop(self, field: str) -> None: ...


@dataclass
class RunningAction:
    action_id: str
    tool: str
    spec: ToolSpec
    skill: Skill
    handle: GoalHandle
    generation: int
    started_at: float
    by: str
    trackers: list[str] = field(default_factory=list)
    deadline: float | None = None
    stop_request: tuple[str, str] | None = None  # (outcome, reason)
    conclusions: list[str] = field(default_factory=list)


@dataclass
class _Pending:
    handle: GoalHandle
    tool: str
    goal: SkillGoal
    by: str
    cancel_requested: bool = False  # a cancel that arrived while tick() was starting it


_action_ids = itertools.count(1)


def new_action_id() -> str:
    return f"a{next(_action_ids)}"


class SkillExecutor:
    def __init__(
        self,
        bus: Bus,
        clock: Clock,
        tools: Mapping[str, Tool],
        ports: Mapping[str, Any],
        trackers: TrackerPort | None = None,
        node: str = "skills",
        approve_timeout_s: float | None = None,
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.tools = dict(tools)
        self.specs = usable_tools(self.tools)
        # operator-only skills (no description) are still executable, just not offered
        self.all_specs = {n: t.spec(n) for n, t in self.tools.items()}
        self.ports = ports
        self.trackers = trackers
        self._lock = threading.Lock()
        self.generation = 1
        self._pending: list[_Pending] = []
        # goals tick() has taken off _pending and is starting now (seeding trackers can take a
        # while): still visible to _conflict and _on_cancel, which run on other threads
        self._starting: list[_Pending] = []
        self.estop_latched = False
        self.running: dict[str, RunningAction] = {}
        self._events = bus.publisher(names.SKILL_EVENTS, names.T_AGENT_EVENT, QoS(depth=200),
                                     node=node)
        self._gen_pub = bus.publisher(names.EXECUTOR_GENERATION, names.T_GENERATION, LATCHED,
                                      node=node)
        self._gen_pub.publish(Generation(self.generation, "start"))
        for name in self.tools:
            bus.create_action_server(
                ActionServer(
                    names.skill_action(name), names.T_SKILL_ACTION,
                    on_goal=functools.partial(self._on_goal, name),
                    on_cancel=self._on_cancel,
                    rejected_result=lambda reason: SkillResult("", Outcome.REFUSED, reason),
                ),
                node=node,
            )
        # the operator always wins: a takeover advances the generation here, where skills run,
        # the moment it is published, so the running skill stops at the very next tick
        # whatever the planner is doing
        bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT,
                      callback=self._on_operator, qos=QoS(depth=100), node=node)
        bus.create_service(names.TOOL_CATALOGUE, names.T_TOOL_CATALOGUE,
                           lambda _req: [s.as_dict() for s in self.specs.values()], node=node)
        bus.create_service(names.EXECUTOR_ADVANCE, names.T_ADVANCE_GENERATION,
                           self._srv_advance, node=node)
        bus.create_service(names.SKILL_CONCLUDE, names.T_CONCLUDE, self._srv_conclude,
                           node=node)
        self.ticks = 0
        # approve: skills -- the agent's goals wait for the operator's yes (core/approval.py)
        self.approvals = SkillApprovals(bus, clock, approve_timeout_s, self._emit, node)

    # events ---------------------------------------------------------------------------------
    def _emit(self, ev: TypedEvent) -> None:
        self._events.publish(AgentEvent.of(self.clock.wall(), ev))

    # generation -----------------------------------------------------------------------------
    def advance_generation(self, reason: str, by: str = "agent") -> int:
        """Cancel / reset / takeover: every goal decided before this is refused from now on, and
        every running action is stopped at the next tick."""
        with self._lock:
            self.generation += 1
            gen = self.generation
            for ra in self.running.values():
                if ra.stop_request is None:
                    ra.stop_request = (Outcome.STOPPED, f"{reason} (generation advanced to {gen})")
        self._gen_pub.publish(Generation(gen, reason))
        self._emit(et.GenerationAdvanced(generation=gen, reason=reason, by=by))
        return gen

    def _on_operator(self, ev: Any) -> None:
        kind = getattr(ev, "kind", "event")
        # the arm driver (or simulator) announces its latched e-stop as an operator event:
        # while it is latched no skill starts, whoever asks
        if kind == "estop":
            self.estop_latched = True
        elif kind == "estop_reset":
            self.estop_latched = False
        # the event's own reason goes with it (an arm taken by the operator: by whom, from whom)
        why = getattr(ev, "detail", {}).get("reason", "") if kind == "arm_taken" else ""
        self.advance_generation(f"operator {kind}" + (f": {why}" if why else ""), "operator")

    def _srv_advance(self, req: Mapping[str, Any]) -> int:
        return self.advance_generation(str(req.get("reason", "")), str(req.get("by", "agent")))

    def _srv_conclude(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """The harness ends an action as a monitor rule or tripwire decided: outcome
        succeeded|failed.  Refused if the action is gone or the generation is stale."""
        action_id = str(req.get("action_id", ""))
        outcome = str(req.get("outcome", ""))
        reason = str(req.get("reason", ""))
        gen = int(req.get("generation", -1))
        if outcome not in (Outcome.SUCCEEDED, Outcome.FAILED, Outcome.STOPPED):
            return {"ok": False, "reason": f"outcome must be succeeded|failed|stopped, "
                                           f"got {outcome!r}"}
        with self._lock:
            if gen < self.generation:
                return {"ok": False, "reason": f"stale generation {gen} < {self.generation}"}
            ra = self.running.get(action_id)
            if ra is None:
                return {"ok": False, "reason": f"action {action_id} is not running"}
            if ra.stop_request is None:
                ra.stop_request = (outcome, reason)
            else:
                ra.conclusions.append(reason)
        return {"ok": True, "reason": ""}

    # goals ----------------------------------------------------------------------------------
    def _on_goal(self, tool: str, handle: GoalHandle) -> str | None:
        goal = handle.goal
        if not isinstance(goal, SkillGoal):
            return f"goal for {tool} must be a SkillGoal, got {type(goal).__name__}"
        by = "operator" if goal.action_id.startswith("op") else "agent"
        if self.estop_latched:
            return "refused: the e-stop is latched; the operator must reset it first"
        with self._lock:
            if goal.generation < self.generation:
                return (f"refused: stale generation {goal.generation} (current "
                        f"{self.generation}); a cancel, reset or operator takeover came after "
                        f"this decision")
            if goal.generation > self.generation:
                return (f"refused: generation {goal.generation} is ahead of the executor's "
                        f"{self.generation}")
            spec = self.all_specs[tool]
            err = validate_params(spec, goal.params)
            if err:
                return err
            busy = self._conflict(spec)
            if busy:
                return busy
            self._pending.append(_Pending(handle, tool, goal, by))
        return None

    def _conflict(self, spec: ToolSpec) -> str:
        claimed = {r for p in [*self._pending, *self._starting] if not p.cancel_requested
                   for r in self.all_specs[p.tool].resources}
        for ra in self.running.values():
            if ra.stop_request is None:
                claimed.update(ra.spec.resources)
        both = claimed.intersection(spec.resources)
        if both:
            who = [f"{ra.action_id} ({ra.tool})" for ra in self.running.values()
                   if set(ra.spec.resources) & both] or ["a starting action"]
            return (f"refused: {', '.join(sorted(both))} busy with {', '.join(who)}; "
                    "stop it first or wait for it to end")
        return ""

    def _on_cancel(self, handle: GoalHandle) -> bool:
        with self._lock:
            waiting = next((p for p in self._pending if p.handle is handle), None)
            if waiting is not None:
                self._pending.remove(waiting)
                self.approvals.forget(waiting.goal.action_id)
            else:
                # running first: _start moves a goal into running before it leaves _starting
                for ra in self.running.values():
                    if ra.handle is handle:
                        if ra.stop_request is None:
                            ra.stop_request = (Outcome.STOPPED, "cancel requested")
                        return True
                for p in self._starting:
                    if p.handle is handle:
                        p.cancel_requested = True  # honoured as soon as its start returns
                        return True
                return False
        # ended outside the lock: a done callback may call straight back into the executor
        handle.canceled(SkillResult(waiting.goal.action_id, Outcome.STOPPED,
                                    "cancelled before it started"))
        return True

    def stop_all(self, reason: str) -> None:
        with self._lock:
            for ra in self.running.values():
                if ra.stop_request is None:
                    ra.stop_request = (Outcome.STOPPED, reason)

    # the control loop -----------------------------------------------------------------------
    def tick(self) -> None:
        """One control period: stop requested skills, start pending ones, enforce deadlines
        and tick the rest.  Never raises: a skill's exception fails that skill only."""
        self.ticks += 1
        now = self.clock.now()
        # Stops first: an action asked to stop no longer claims its resources, so a goal for
        # them may be pending; the old skill's on_stop (an arm skill's hold) must reach the
        # arm before the new skill's first command, never after it and cancel it.
        with self._lock:
            stopping = [ra for ra in self.running.values() if ra.stop_request is not None]
        self._step_each(stopping, now)
        with self._lock:
            pending, self._pending = self._pending, []
            self._starting = list(pending)
        if self.approvals.enabled:
            pending, wait, refuse = self.approvals.due(pending, now)
            with self._lock:
                self._pending[:0] = wait  # still claiming their resources
                self._starting = list(pending)
            for p, why in refuse:
                p.handle.abort(SkillResult(p.goal.action_id, Outcome.REFUSED, why))
        for p in pending:
            try:
                self._start(p, now)
            except Exception as e:  # a harness bug refuses one goal; the loop goes on
                self._crashed(p.handle, p.goal.action_id, p.tool, e)
            finally:
                with self._lock:
                    self._starting.remove(p)
        self._step_each(list(self.running.values()), now)

    def _step_each(self, actions: list[RunningAction], now: float) -> None:
        for ra in actions:
            try:
                self._step(ra, now)
            except Exception as e:
                self._crashed(ra.handle, ra.action_id, ra.tool, e)

    def _crashed(self, handle: GoalHandle, action_id: str, tool: str, e: Exception) -> None:
        """Last line of defence for :meth:`tick`: whatever raised while starting or stepping
        an action, that action is stopped and its goal ended, never left half-started."""
        reason = f"harness error in {tool}: {type(e).__name__}: {e}"
        with self._lock:
            ra = self.running.pop(action_id, None)
            still_read = {f for other in self.running.values() for f in other.trackers}
        if ra is not None:
            try:
                ra.skill.on_stop(reason)
            except Exception:
                pass
            self._stop_trackers([f for f in ra.trackers if f not in still_read], by=ra.by)
        if not handle.done:
            try:
                handle.abort(SkillResult(action_id, Outcome.FAILED, reason))
            except Exception:
                pass
        try:
            self._emit(et.SkillError(action_id=action_id, skill=tool, error=reason,
                       traceback=traceback.format_exc(limit=5)))
        except Exception:
            pass

    def _start(self, p: _Pending, now: float) -> None:
        goal = p.goal
        with self._lock:
            gen = self.generation
        if goal.generation < gen:
            p.handle.abort(SkillResult(goal.action_id, Outcome.REFUSED,
                                       f"refused: stale generation {goal.generation} (current "
                                       f"{gen}) by the time it was due to start"))
            return
        spec = self.all_specs[p.tool]
        tool = self.tools[p.tool]
        params = {**goal.params, **dict(tool.bound)}
        t0 = now
        started_trackers: list[str] = []
        target_area: float | None = None
        try:
            requests = tool.skill.services_for(params) if self.trackers is not None else []
        except Exception as e:  # skill code: refuses this call, never escapes the tick
            p.handle.abort(SkillResult(goal.action_id, Outcome.REFUSED,
                                       f"refused: {p.tool} could not name its services: {e!r}"))
            return
        if self.trackers is not None:
            for req in requests:
                pt = params.get(req.point_param)
                if not (isinstance(pt, (list, tuple)) and len(pt) == 2):
                    continue
                try:
                    res = self.trackers.start(req, (float(pt[0]), float(pt[1])))
                except Exception as e:  # a tracker failure refuses the call, never escapes
                    self._stop_trackers(started_trackers + [req.field], by=p.by)
                    p.handle.abort(SkillResult(goal.action_id, Outcome.REFUSED,
                                               f"tracker {req.field} failed to start: {e}"))
                    return
                started_trackers.append(req.field)
                self._emit(et.ServiceStarted(by=p.by, module=req.field.split(".")[0],
                           field=req.field, params={"point": list(pt), **req.params},
                           action_id=goal.action_id))
                if spec.max_target_area is not None:
                    target_area = res.area_fraction
                    if res.area_fraction is None or res.area_fraction > spec.max_target_area:
                        self._stop_trackers(started_trackers, by=p.by)
                        shown = ("no mask" if res.area_fraction is None
                                 else f"a mask over {res.area_fraction:.1%} of the image")
                        reason = (f"refused: the point selected {shown}; the target may cover "
                                  f"at most {spec.max_target_area:.1%}. The point probably "
                                  "missed the object: point again at its centre.")
                        self._emit(et.TargetRejected(tool=p.tool, action_id=goal.action_id,
                                   target_area=res.area_fraction, reason=reason))
                        p.handle.abort(SkillResult(goal.action_id, Outcome.REFUSED, reason,
                                                   {"target_area": res.area_fraction}))
                        return
        with self._lock:
            gen = self.generation
            cancelled = p.cancel_requested
        if cancelled:
            self._stop_trackers(started_trackers, by=p.by)
            p.handle.canceled(SkillResult(goal.action_id, Outcome.STOPPED,
                                          "cancelled before it started"))
            return
        if goal.generation < gen:
            # a cancel, reset or takeover arrived (on another thread) while the trackers were
            # being seeded: the decision is stale, so the skill never starts
            self._stop_trackers(started_trackers, by=p.by)
            p.handle.abort(SkillResult(goal.action_id, Outcome.REFUSED,
                                       f"refused: stale generation {goal.generation} (current "
                                       f"{gen}) by the time it was due to start"))
            return
        ctx = SkillContext(self.clock, self.ports,
                           emit=lambda k, d: self._emit(GenericEvent(name=k, data=d)),
                           action_id=goal.action_id, generation=goal.generation)
        skill: Skill | None = None
        try:
            skill = tool.skill(params, ctx)
            skill.start()
        except SkillFailed as e:
            self._stop_after_failed_start(skill, p.tool, goal.action_id, e.reason)
            self._stop_trackers(started_trackers, by=p.by)
            p.handle.abort(SkillResult(goal.action_id, Outcome.FAILED, e.reason))
            self._emit(et.SkillEnded(skill=p.tool, action_id=goal.action_id,
                                     outcome=Outcome.FAILED, reason=e.reason))
            return
        except Exception as e:
            self._stop_after_failed_start(skill, p.tool, goal.action_id,
                                          f"could not start: {e!r}")
            self._stop_trackers(started_trackers, by=p.by)
            p.handle.abort(SkillResult(goal.action_id, Outcome.FAILED,
                                       f"skill {p.tool} could not start: {e!r}"))
            return
        deadline = now + spec.max_duration_s if spec.max_duration_s else None
        ra = RunningAction(goal.action_id, p.tool, spec, skill, p.handle, goal.generation, now,
                           p.by, started_trackers, deadline)
        with self._lock:
            self.running[ra.action_id] = ra
            if goal.generation < self.generation:
                # advanced while start() ran: advance_generation could not see this action
                # yet, so it is stopped here, in this very tick
                ra.stop_request = (Outcome.STOPPED, f"generation advanced to {self.generation} "
                                              "while it was starting")
            elif p.cancel_requested:
                ra.stop_request = (Outcome.STOPPED, "cancel requested")
        p.handle.execute()
        p.handle.publish_feedback(SkillFeedback(ra.action_id, "started", 0.0))
        self._emit(et.SkillStarted(
            by=p.by, skill=p.tool, params=goal.params, action_id=ra.action_id,
            generation=goal.generation, observation_id=goal.observation_id,
            watch_for=list(goal.watch_for), trackers=started_trackers,
            start_s=round(self.clock.now() - t0, 4),
            target_area=target_area if spec.max_target_area is not None else ABSENT))
        if skill.done:
            self._end(ra, Outcome.SUCCEEDED, skill.result.get("reason", ""), now)

    def _step(self, ra: RunningAction, now: float) -> None:
        with self._lock:
            req = ra.stop_request
        if req is not None:
            outcome, reason = req
            self._halt(ra, reason)
            self._end(ra, outcome, reason, now)
            return
        if ra.deadline is not None and now >= ra.deadline:
            reason = f"ran its limit of {ra.spec.max_duration_s:g} s"
            self._halt(ra, reason)
            self._end(ra, Outcome.TIMED_OUT, reason, now)
            return
        try:
            ra.skill.tick()
        except SkillFailed as e:
            self._halt(ra, e.reason)
            self._end(ra, Outcome.FAILED, e.reason, now)
            return
        except Exception as e:
            reason = f"skill {ra.tool} raised {type(e).__name__}: {e}"
            self._emit(et.SkillError(action_id=ra.action_id, skill=ra.tool,
                       traceback=traceback.format_exc(limit=5)))
            self._halt(ra, reason)
            self._end(ra, Outcome.FAILED, reason, now)
            return
        if ra.skill.done:
            self._end(ra, Outcome.SUCCEEDED, str(ra.skill.result.get("reason", "")), now)
            return
        ra.handle.publish_feedback(SkillFeedback(ra.action_id, ra.skill.phase,
                                                 ra.skill.progress))

    def _halt(self, ra: RunningAction, reason: str) -> None:
        self._emit(et.SkillStop(by=ra.by, skill=ra.tool, action_id=ra.action_id,
                   reason=reason))
        try:
            ra.skill.on_stop(reason)
        except Exception as e:  # stopping must not fail the loop
            self._emit(et.SkillError(action_id=ra.action_id, skill=ra.tool,
                       error=f"on_stop raised {e!r}"))

    def _stop_after_failed_start(self, skill: Skill | None, tool: str, action_id: str,
                                 reason: str) -> None:
        """A start() that raised may already have commanded the robot: stop it like any
        stopped skill, so nothing keeps moving toward a target nobody watches."""
        if skill is None:
            return
        try:
            skill.on_stop(reason)
        except Exception as e:
            self._emit(et.SkillError(action_id=action_id, skill=tool,
                       error=f"on_stop raised {e!r}"))

    def _end(self, ra: RunningAction, outcome: str, reason: str, now: float) -> None:
        with self._lock:
            # only tick() ends actions, and it ends only running ones: the default never
            # applies (a mutant without it is equivalent)
            self.running.pop(ra.action_id, None)
            still_read = {f for other in self.running.values() for f in other.trackers}
        self._stop_trackers([f for f in ra.trackers if f not in still_read], by=ra.by)
        data = dict(ra.skill.result)
        if ra.conclusions:
            data["skill_reasons"] = list(ra.conclusions)
        result = SkillResult(ra.action_id, outcome, reason, data)
        self._emit(et.SkillEnded(skill=ra.tool, action_id=ra.action_id, outcome=outcome,
                   reason=reason, duration_s=round(now - ra.started_at, 3)))
        if outcome == Outcome.SUCCEEDED:
            ra.handle.succeed(result)
        elif outcome == Outcome.STOPPED:
            ra.handle.canceled(result)
        else:
            ra.handle.abort(result)

    def _stop_trackers(self, fields: list[str], by: str) -> None:
        if self.trackers is None:
            return
        for f in fields:
            try:
                self.trackers.stop(f)
            except Exception as e:
                # the field is free for the next tracker either way; the operator is told the
                # old one may still run instead of seeing it released
                self._emit(et.ServiceStopFailed(by=by, field=f, error=f"{type(e).__name__}: {e}"))
                continue
            self._emit(et.ServiceStopped(by=by, field=f))

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self.running or self._pending or self._starting)


__all__ = ["GoalStatus", "SkillExecutor", "TrackerPort", "TrackerResult", "new_action_id",
           "schema_error", "tool_schema", "validate_params"]
