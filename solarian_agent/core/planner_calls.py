"""The planner's tool calls: each call of a reply validated and answered (``update_plan``,
``observe``, ``stop_action``, ``ask_user``, ``finish_task``, views, ``observe_scene``), a skill
tool started as a goal carrying the run's generation (image points mapped to capture pixels),
and the turn closed once every call is answered.  Plan steps and follow-ups are started here
too, without the planner.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from . import event_types as et
from . import images as im
from .attention import AttentionEpisode, SceneObserverPort
from .clock import Clock
from .config import AgentConfig
from .errors import ToolCallRejected
from .messages import Image
from .model_api import Message, ToolCall
from .observations import ObservationStore
from .planner_goals import GoalSender
from .planner_journal import Journal, StatePublisher
from .planner_runs import RunControl
from .planner_state import ActionBook, Refusals, RunState, Transcript, TurnSlot, Wakes
from .planner_tasks import TaskTools
from .planner_tools import PLANNER_TOOLS, PendingStart, PlannerModel, ToolCatalogue, Turn, tool_msg
from .routing import TASK_TOOLS
from .statuses import RunStatus, StepStatus
from .text import one_line, planner_wrote, quote, quote_prefix
from .tool_schema import (
    describe_bad_number,
    non_finite,
    schema_error,
    validate_params,
    validate_step_args,
)
from .transport import GoalStatus, Publisher
from .views import PreparedViews, ViewManager


class ToolCalls:
    """Dispatches and answers the planner's tool calls, and closes the turn once every call
    of its reply is answered."""

    def __init__(self, clock: Clock, config: AgentConfig, run: RunState, book: ActionBook,
                 wakes: Wakes, slot: TurnSlot, transcript: Transcript, journal: Journal,
                 state: StatePublisher, *, refusals: Refusals, runs: RunControl,
                 goals: GoalSender, task_tools: TaskTools, catalogue: ToolCatalogue,
                 views: ViewManager, model: PlannerModel, view_pub: Publisher[Image]) -> None:
        self._clock = clock
        self._config = config
        self._run = run
        self._book = book
        self._wakes = wakes
        self._slot = slot
        self._transcript = transcript
        self._journal = journal
        self._state = state
        self._refusals = refusals
        self._runs = runs
        self._goals = goals
        self._task_tools = task_tools
        self._catalogue = catalogue
        self._views = views
        self._store: ObservationStore = views.store
        self._model = model
        self._view_pub = view_pub
        self.finish_after_turn: tuple[bool, str] | None = None

    def check_retries(self, tool: str) -> None:
        """``budgets.retries_per_step``, enforced: a skill call that would retry a plan step
        the harness failed (or, with no plan step naming the tool, a tool that failed that
        many times in a row) is refused until the plan changes."""
        plan = self._run.plan
        step = plan.failed_for(tool)
        retries = self._config.budgets.retries_per_step
        if step is not None:
            raise ToolCallRejected(
                f"plan step {step.index} ({planner_wrote(step.description)}) failed "
                f"{step.failures} times in a row (retries_per_step {retries}); change the "
                "plan with update_plan (another approach as a new step, or this step skipped) "
                f"or ask_user before calling {tool} again")
        n = self._run.tool_failures.get(tool, 0)
        if n >= retries and not any(s.tool == tool for s in plan.steps):
            raise ToolCallRejected(
                f"{tool} failed {n} times in a row (retries_per_step {retries}); change your "
                "approach with update_plan or ask_user before calling it again")

    def srv_observe_scene(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """``agent/observe_scene`` for an operator (any front end): its own operator attention
        episode per request.  Runs on the caller's thread (a model call), never on the tick."""
        focus = req.get("focus") if isinstance(req, Mapping) else None
        observer = self._catalogue.scene_observer
        if observer is None:
            return {"ok": False, "error": "no vision backend is configured", "focus": ""}
        try:
            res = observer.handle({"focus": focus}, AttentionEpisode(autonomous=False))
        except ToolCallRejected as e:
            return {"ok": False, "error": e.reason, "focus": str(focus or "").strip()}
        except Exception as e:  # a service never raises into its caller
            return {"ok": False, "error": f"{type(e).__name__}: {e}",
                    "focus": str(focus or "").strip()}
        return {"ok": True, "error": "", "focus": res.focus, "description": res.description,
                "truncated": res.truncated, "observed_at": res.observed_at}

    def do_call(self, turn: Turn, call: ToolCall) -> None:
        if call.parse_error:
            # the name and the argument text are the model's: escaped, never a new line or a
            # quote of the operator
            raise ToolCallRejected(f"the arguments of {quote_prefix(call.name)} were not a "
                                   f"JSON object: {one_line(call.parse_error, 400)}")
        name, args = call.name, dict(call.arguments)
        # a NaN, an infinity or an integer no float holds is refused for every tool, before
        # any of them computes with it (a skill's schema may say only "number")
        bad = non_finite(args)
        if bad is not None:
            where = "/".join(one_line(p, 60, quotes=False) for p in bad[0])
            raise ToolCallRejected(f"invalid arguments for {one_line(name, 60)} at "
                                   f"{where or '(arguments)'}: {describe_bad_number(bad[1])}")
        if name in PLANNER_TOOLS:
            err = schema_error(PLANNER_TOOLS[name].parameters, args, name)
            if err:
                raise ToolCallRejected(err)
        if name == "update_plan":
            self.update_plan(turn, call, args)
        elif name == "observe":
            prepared = self._views.observe(args.get("cameras") or None)
            obs = [v.observation for v in prepared.views]
            log = self._journal.log
            if log is not None:
                for o in obs:
                    log.save_image(o.file_name, o.data)
            self._journal.event(et.Observe(observations=[o.id for o in obs],
                                images=[f"images/{o.file_name}" for o in obs]))
            self.answer_views(turn, call, prepared)
        elif name == "stop_action":
            aid = args["action_id"]
            info = self._book.get(aid)
            if info is None:
                raise ToolCallRejected(f"action {quote_prefix(aid)} is not running (running: "
                                       f"{', '.join(self._book.running) or 'none'})")
            info.handle.cancel()
            self._slot.attention.record_effect()
            self._journal.event(et.StopAction(by="agent", action_id=aid,
                                reason=args.get("reason", "")))
            if any(ps.action_id == aid for ps in turn.pending):
                # started by this very reply and not yet running: no end event follows (its
                # own call says how it ended), so no wake is promised and the turn goes on
                turn.results[call.id] = tool_msg(
                    call, f"stopping {aid} before it started: the result of the call that "
                          "started it, in this reply, says how it ended")
                return
            turn.results[call.id] = tool_msg(call, f"stopping {aid}; you will be woken when it "
                                             "has stopped")
            turn.ended = True
        elif name == "ask_user":
            self._run.status = RunStatus.WAITING_USER
            self._transcript.say("agent", args["question"])
            self._journal.event(et.AskUser(question=args["question"]))
            turn.results[call.id] = tool_msg(call, "asked; the run waits for the answer")
            turn.ended = True
        elif name == "finish_task":
            running = [f"{a.action_id} ({a.tool})" for a in self._book.running.values()]
            if args["success"] and running:
                # a success while something still moves is not one: the planner waits for
                # the end (or stops it) and reports what it then sees
                raise ToolCallRejected(
                    f"finish_task(success=true) while {', '.join(running)} "
                    f"{'is' if len(running) == 1 else 'are'} still running: wait for "
                    "its end (you are woken then) or stop_action it, then check a fresh "
                    "image before finishing")
            self._slot.attention.record_effect()
            turn.results[call.id] = tool_msg(call, "run ended")
            turn.ended = True
            self.finish_after_turn = (bool(args["success"]), str(args["summary"]))
        elif name in TASK_TOOLS:
            self._task_tools.task_tool(turn, call, name, args)
        elif name in ViewManager.TOOL_NAMES:
            self.answer_views(turn, call, self._views.prepare(name, args))
        elif name == "observe_scene" and self._catalogue.scene_observer is not None:
            observer, episode = self._catalogue.scene_observer, self._slot.attention
            # the slot is claimed here, in call order, before any effect of this reply; the
            # interpretation (a model call) runs on the worker
            try:
                slot = observer.claim(args, episode)
            except ToolCallRejected as e:
                raise ToolCallRejected(e.reason) from None
            turn.futures.append((call, self._model.caller.submit(
                lambda: observe_scene_msg(observer, episode, call, args, slot))))
            self._wakes.continue_turn = True
        elif name in self._catalogue.specs:
            self.call_skill(turn, call)
        else:
            tools = sorted(t.name for t in self._catalogue.tool_defs())
            raise ToolCallRejected(f"unknown tool {quote_prefix(name)}; tools: "
                                   f"{', '.join(tools)}")

    def update_plan(self, turn: Turn, call: ToolCall, args: dict[str, Any]) -> None:
        """Every step's tool must be known and its args valid before the plan changes."""
        specs = self._catalogue.specs
        for i, st in enumerate(args["steps"], start=1):
            tool = st.get("tool")
            if tool is not None and tool not in specs:
                raise ToolCallRejected(f"steps[{i}].tool: unknown tool "
                                       f"{quote_prefix(tool)}; tools: "
                                       f"{', '.join(sorted(specs))}")
            if tool is not None and st.get("args") is not None:
                e = validate_step_args(specs[tool], st["args"])
                if e:
                    raise ToolCallRejected(f"steps[{i}]: {e}")
        self._run.replace_plan(args["steps"])
        self._journal.event(et.PlanChanged(plan=self._run.plan.as_list()))
        # a plan applied as the model wrote it (each step in the state it asked for) is not
        # echoed: every wake lists it with its step numbers, and an echo would be input
        # tokens paid twice each turn.  A plan whose steps kept another state (a failed step
        # the model marked skipped) is echoed, since the model did not write those states.
        steps = self._run.plan.steps
        asked = [str(st.get("status") or StepStatus.PENDING.value) for st in args["steps"]]
        if steps and asked == [str(getattr(st.status, "value", st.status)) for st in steps]:
            n = len(steps)
            text = (f"plan updated: {n} step{'s' * (n != 1)}, as written; the plan with its "
                    "step numbers comes with each wake")
        else:
            text = "plan updated:\n" + self._run.plan.render()
        turn.results[call.id] = tool_msg(call, text)
        self._wakes.continue_turn = True

    def answer_views(self, turn: Turn, call: ToolCall, prepared: PreparedViews) -> None:
        """Views answer at once; for a text-only planner their descriptions (model calls) are
        made on the worker and the turn waits for them."""
        if prepared.views and self._model.describes_views:
            turn.futures.append((call, self._model.caller.submit(
                lambda: Message("tool", tuple(prepared.render()), (), call.id))))
        else:
            turn.results[call.id] = Message("tool", tuple(prepared.render()), (), call.id)
        self._wakes.continue_turn = True

    def call_skill(self, turn: Turn, call: ToolCall) -> None:
        spec = self._catalogue.specs[call.name]
        args = dict(call.arguments)
        err = validate_params(spec, args, model_facing=True)
        if err:
            raise ToolCallRejected(err)
        self.check_retries(call.name)
        obs_id = str(args.pop("observation_id", ""))
        watch_for = tuple(args.pop("watch_for", ()) or ())
        points_view: list[tuple[float, float]] = []
        for p in spec.image_points:
            if p in args:
                points_view.append((float(args[p][0]), float(args[p][1])))
                cx, cy = self._store.map_point(obs_id, args[p], spec.camera, p)
                args[p] = [round(cx, 2), round(cy, 2)]
        if points_view:
            self.publish_view(obs_id, points_view)
        if self._config.dry_run:
            self._journal.event(et.DryRunCall(tool=call.name, params=args,
                                observation_id=obs_id))
            turn.results[call.id] = tool_msg(call, f"dry run: {call.name} would start with "
                                             f"{json.dumps(args)}; nothing was started")
            self._wakes.continue_turn = True
            return
        action_id, handle = self._goals.for_call(call.name, args, obs_id, watch_for,
                                                 bool(spec.monitor or watch_for))
        # an effect of this attention episode: no acquisition after it (an episode looks, then
        # acts; what the action did is seen at the next wake, in a fresh episode)
        self._slot.attention.record_effect()
        turn.pending.append(PendingStart(call, handle, action_id, call.name,
                                         self._clock.now()))

    def poll_pending(self, turn: Turn) -> None:
        now = self._clock.now()
        book, journal, refusals = self._book, self._journal, self._refusals
        for ps in list(turn.pending):
            st = ps.handle.status
            # the executor sends a "started" feedback when the skill starts: a skill that
            # started and already ended counts as started; its end is handled as an event
            if st == GoalStatus.EXECUTING or ps.handle.feedback is not None:
                turn.pending.remove(ps)
                turn.started_any = True
                refusals.started()
                step = self._run.claim_step(ps.tool, ps.action_id)
                info = book.get(ps.action_id)
                if step is not None and info is not None:
                    info.step = step.index
                journal.event(et.ActionStarted(action_id=ps.action_id, tool=ps.tool,
                              params=info.params if info is not None else {},
                              step=step.index if step else None))
                turn.results[ps.call.id] = tool_msg(
                    ps.call, f"started action {ps.action_id} ({ps.tool}): task id "
                             # when it wakes the planner is the system prompt's (cached)
                             f"{ps.action_id}, no result yet")
            elif st.terminal:
                turn.pending.remove(ps)
                book.pop(ps.action_id)
                book.answered_at_start.add(ps.action_id)
                res = ps.handle.result
                reason = getattr(res, "reason", "") or st.name.lower()
                said = reason[len("refused: "):] if reason.startswith("refused: ") else reason
                turn.results[ps.call.id] = tool_msg(ps.call, refusals.refuse(
                    ps.tool, f"refused: {quote('skill', said)}"), error=True)
                journal.event(et.ToolRefused(tool=ps.tool, action_id=ps.action_id,
                              reason=reason))
            elif now - ps.sent_at > 5.0:
                turn.pending.remove(ps)
                ps.handle.cancel()
                book.answered_at_start.add(ps.action_id)
                turn.results[ps.call.id] = tool_msg(ps.call, refusals.refuse(
                    ps.tool, "refused: the skill did not start within 5 s"), error=True)
        for call, fut in list(turn.futures):
            if fut.done():
                turn.futures.remove((call, fut))
                try:
                    turn.results[call.id] = fut.result()
                except Exception as e:
                    turn.results[call.id] = tool_msg(
                        call, f"failed: {quote('error', f'{type(e).__name__}: {e}')}", error=True)
        if turn.pending or turn.futures:
            return
        self.close_turn(turn)

    def close_turn(self, turn: Turn) -> None:
        """Every call of the reply is answered: its results join the messages in call order,
        then the run ends (``finish_task``, the refusal budget) or the planner is called again
        unless the reply started something, ended the turn or waits for an event."""
        for cid in turn.call_order:
            msg = turn.results.get(cid)
            if msg is not None:
                self._transcript.messages.append(msg)
        self._slot.current = None
        refusals = self._refusals
        used_up = refusals.close_turn(turn.started_any)
        finish = self.finish_after_turn
        self.finish_after_turn = None
        if finish is not None:
            ok, summary = finish
            if self._book.running:
                self._runs.advance_generation("finish_task", "agent")
            self._runs.end_run(RunStatus.SUCCEEDED if ok else RunStatus.FAILED, summary)
            return
        if used_up:
            limit = refusals.limit
            last = refusals.last[1] if refusals.last else ""
            self._runs.stop_everything("refusals")
            self._runs.end_run(RunStatus.FAILED,
                               f"the planner's calls were refused {limit} times in "
                               f"a row ({limit} turns, {refusals.in_row} calls, "
                               "no action started; budgets.max_refused_in_row); "
                               f"the last refusal: {last}")
            return
        self._wakes.continue_turn = not (turn.started_any or turn.ended or turn.waits)
        self._state.publish()

    def publish_view(self, obs_id: str, points: list[tuple[float, float]]) -> None:
        obs = self._store.get(obs_id)
        if obs is None:
            return
        view = im.draw_points(im.decode(obs.data), points, obs_id)
        view.setflags(write=False)
        self._view_pub.publish(Image(view, self._clock.now(), obs.camera, 0))


def observe_scene_msg(observer: SceneObserverPort, episode: AttentionEpisode, call: ToolCall,
                      args: Mapping[str, Any], slot: int) -> Message:
    """Runs on the model worker: one frame, one interpretation, bounded text.  The result is
    model-generated and only ever shown to the planner, never copied into state."""
    try:
        return tool_msg(call, observer.handle_claimed(args, episode, slot).text())
    except ToolCallRejected as e:
        return tool_msg(call, f"refused: {e.reason}", error=True)
    except Exception as e:
        return tool_msg(call, f"observe_scene failed: "
                              f"{quote('error', f'{type(e).__name__}: {e}')}", error=True)
