"""The planner's tool calls: each call of a reply validated and answered (``update_plan``,
``observe``, ``stop_action``, ``ask_user``, ``finish_task``, views, ``observe_scene``), a skill
tool started as a goal carrying the run's generation (image points mapped to capture pixels),
and the turn closed once every call is answered.  Plan steps and follow-ups are started here
too, without the planner.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import images as im
from . import names
from .attention import AttentionEpisode, SceneObserverPort
from .errors import ToolCallRejected
from .executor import new_action_id
from .messages import Image, SkillGoal
from .model_api import Message, ToolCall
from .planner_tools import PLANNER_TOOLS, SETTLE_S, ActionInfo, PendingStart, Turn, tool_msg
from .routing import TASK_TOOLS
from .text import one_line, planner_wrote, quote, quote_prefix
from .tool_schema import (
    describe_bad_number,
    non_finite,
    schema_error,
    validate_params,
    validate_step_args,
)
from .transport import GoalStatus
from .views import PreparedViews, ViewManager

if TYPE_CHECKING:
    from .planner import Planner


class ToolCalls:
    """Dispatches and answers the planner's tool calls.  ``self.p``: the planner."""

    def __init__(self, planner: Planner) -> None:
        self.p = planner
        self.finish_after_turn: tuple[bool, str] | None = None
        # actions whose end the planner already got as a refused tool result (they failed or
        # were refused before they started): their action_ended is not delivered again
        self.answered_at_start: set[str] = set()
        self.reset_refusals()

    # refusals ---------------------------------------------------------------------------
    def reset_refusals(self) -> None:
        # refused calls, and turns whose calls were all refused, since an action last started;
        # budgets.max_refused_in_row counts the turns (one reply of many bad calls is one)
        self.refused_in_row = 0
        self.refused_turns = 0
        self.last_refusal: tuple[str, str] | None = None
        self.refused_this_turn = False
        # the last closed turn had a refused call: the next call waits for still frames
        self.refused_last_turn = False

    def refusal(self, tool: str, reason: str) -> str:
        """Count a refused call and answer it with what must change: the harness's reason,
        a note when the very same call was refused just before, and how many refusals in a
        row are left before the run fails (``budgets.max_refused_in_row``)."""
        self.refused_in_row += 1
        self.refused_this_turn = True
        text = reason if reason.startswith("refused") else f"refused: {reason}"
        moved = self.p.observations.motion.last_moved
        if "before the robot last moved" in reason and \
                self.p.clock.now() - moved < SETTLE_S:
            text += (" The robot is still moving: you are called again once it is still, "
                     "with fresh images.")
        if self.last_refusal == (tool, reason):
            text += (" This very call was refused just before: calling it again unchanged is "
                     "refused again.")
        self.last_refusal = (tool, reason)
        limit = self.p.config.budgets.max_refused_in_row
        if self.refused_turns:
            text += (f" ({self.refused_turns} turn{'s' if self.refused_turns > 1 else ''} "
                     "before this one with only refused calls and no action started; the "
                     f"run fails at {limit}.)")
        return text

    def check_retries(self, tool: str) -> None:
        """``budgets.retries_per_step``, enforced: a skill call that would retry a plan step
        the harness failed (or, with no plan step naming the tool, a tool that failed that
        many times in a row) is refused until the plan changes."""
        step = self.p.plan.failed_for(tool)
        retries = self.p.config.budgets.retries_per_step
        if step is not None:
            raise ToolCallRejected(
                f"plan step {step.index} ({planner_wrote(step.description)}) failed "
                f"{step.failures} times in a row (retries_per_step {retries}); change the "
                "plan with update_plan (another approach as a new step, or this step skipped) "
                f"or ask_user before calling {tool} again")
        n = self.p.tool_failures.get(tool, 0)
        if n >= retries and not any(s.tool == tool for s in self.p.plan.steps):
            raise ToolCallRejected(
                f"{tool} failed {n} times in a row (retries_per_step {retries}); change your "
                "approach with update_plan or ask_user before calling it again")

    def srv_observe_scene(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """``agent/observe_scene`` for an operator (any front end): its own operator attention
        episode per request.  Runs on the caller's thread (a model call), never on the tick."""
        focus = req.get("focus") if isinstance(req, Mapping) else None
        observer = self.p.scene_observer
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
            for i, st in enumerate(args["steps"], start=1):
                tool = st.get("tool")
                if tool is not None and tool not in self.p.specs:
                    raise ToolCallRejected(f"steps[{i}].tool: unknown tool "
                                           f"{quote_prefix(tool)}; tools: "
                                           f"{', '.join(sorted(self.p.specs))}")
                if tool is not None and st.get("args") is not None:
                    e = validate_step_args(self.p.specs[tool], st["args"])
                    if e:
                        raise ToolCallRejected(f"steps[{i}]: {e}")
            self.p.plan.replace(args["steps"])
            for st in self.p.plan.steps:  # a new plan: the tools it names start afresh
                if st.tool and st.failures == 0:
                    self.p.tool_failures.pop(st.tool, None)
            self.p.log_event("plan_changed", plan=self.p.plan.as_list())
            turn.results[call.id] = tool_msg(call, "plan updated:\n" + self.p.plan.render())
            self.p.continue_turn = True
        elif name == "observe":
            prepared = self.p.views.observe(args.get("cameras") or None)
            obs = [v.observation for v in prepared.views]
            if self.p.log is not None:
                for o in obs:
                    self.p.log.save_image(o.file_name, o.data)
            self.p.log_event("observe", observations=[o.id for o in obs],
                             images=[f"images/{o.file_name}" for o in obs])
            self.answer_views(turn, call, prepared)
        elif name == "stop_action":
            aid = args["action_id"]
            info = self.p.actions.get(aid)
            if info is None:
                raise ToolCallRejected(f"action {quote_prefix(aid)} is not running (running: "
                                       f"{', '.join(self.p.actions) or 'none'})")
            info.handle.cancel()
            self.p.attention.record_effect()
            self.p.log_event("stop_action", by="agent", action_id=aid,
                             reason=args.get("reason", ""))
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
            self.p.status = "waiting_user"
            self.p.conversation.append({"role": "agent", "text": args["question"]})
            self.p.log_event("ask_user", question=args["question"])
            turn.results[call.id] = tool_msg(call, "asked; the run waits for the answer")
            turn.ended = True
        elif name == "finish_task":
            running = [f"{a.action_id} ({a.tool})" for a in self.p.actions.values()]
            if args["success"] and running:
                # a success while something still moves is not one: the planner waits for
                # the end (or stops it) and reports what it then sees
                raise ToolCallRejected(
                    f"finish_task(success=true) while {', '.join(running)} "
                    f"{'is' if len(running) == 1 else 'are'} still running: wait for "
                    "its end (you are woken then) or stop_action it, then check a fresh "
                    "image before finishing")
            self.p.attention.record_effect()
            turn.results[call.id] = tool_msg(call, "run ended")
            turn.ended = True
            self.finish_after_turn = (bool(args["success"]), str(args["summary"]))
        elif name in TASK_TOOLS:
            self.p.task_tools.task_tool(turn, call, name, args)
        elif name in ViewManager.TOOL_NAMES:
            self.answer_views(turn, call, self.p.views.prepare(name, args))
        elif name == "observe_scene" and self.p.scene_observer is not None:
            observer, episode = self.p.scene_observer, self.p.attention
            # the slot is claimed here, in call order, before any effect of this reply; the
            # interpretation (a model call) runs on the worker
            try:
                slot = observer.claim(args, episode)
            except ToolCallRejected as e:
                raise ToolCallRejected(e.reason) from None
            turn.futures.append((call, self.p.caller.submit(
                lambda: observe_scene_msg(observer, episode, call, args, slot))))
            self.p.continue_turn = True
        elif name in self.p.specs:
            self.call_skill(turn, call)
        else:
            raise ToolCallRejected(f"unknown tool {quote_prefix(name)}; tools: "
                                   f"{', '.join(sorted(t.name for t in self.p.tool_defs()))}")

    def answer_views(self, turn: Turn, call: ToolCall, prepared: PreparedViews) -> None:
        """Views answer at once; for a text-only planner their descriptions (model calls) are
        made on the worker and the turn waits for them."""
        if self.p.cycle.needs_describer(prepared):
            turn.futures.append((call, self.p.caller.submit(
                lambda: Message("tool", tuple(prepared.render()), (), call.id))))
        else:
            turn.results[call.id] = Message("tool", tuple(prepared.render()), (), call.id)
        self.p.continue_turn = True

    def call_skill(self, turn: Turn, call: ToolCall) -> None:
        spec = self.p.specs[call.name]
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
                cx, cy = self.p.observations.map_point(obs_id, args[p], spec.camera, p)
                args[p] = [round(cx, 2), round(cy, 2)]
        if points_view:
            self.publish_view(obs_id, points_view)
        if self.p.config.dry_run:
            self.p.log_event("dry_run_call", tool=call.name, params=args, observation_id=obs_id)
            turn.results[call.id] = tool_msg(call, f"dry run: {call.name} would start with "
                                             f"{json.dumps(args)}; nothing was started")
            self.p.continue_turn = True
            return
        action_id = new_action_id()
        goal = SkillGoal(call.name, args, self.p.generation, action_id, obs_id, watch_for)
        try:
            handle = self.p.bus.send_goal(names.skill_action(call.name), goal,
                                          done_cb=self.p.on_goal_done)
        except Exception as e:
            raise ToolCallRejected(f"{call.name} is unavailable: {e}") from e
        self.p.actions[action_id] = ActionInfo(action_id, call.name, args, self.p.clock.now(),
                                               handle, bool(spec.monitor or watch_for))
        # an effect of this attention episode: no acquisition after it (an episode looks, then
        # acts; what the action did is seen at the next wake, in a fresh episode)
        self.p.attention.record_effect()
        turn.pending.append(PendingStart(call, handle, action_id, call.name,
                                         self.p.clock.now()))

    def send_goal(self, tool: str, args: dict[str, Any], *, by_harness: bool,
                  step_index: int | None = None) -> str:
        """Start a tool without the planner (plan step or ``then``).  '' if it was refused."""
        spec = self.p.specs.get(tool)
        if spec is None:
            self.p.news.append(f"Could not start {quote_prefix(tool)}: no such tool.")
            return ""
        action_id = new_action_id()
        goal = SkillGoal(tool, args, self.p.generation, action_id)
        try:
            handle = self.p.bus.send_goal(names.skill_action(tool), goal,
                                          done_cb=self.p.on_goal_done)
        except Exception as e:
            self.p.news.append(f"Could not start {tool}: {quote('error', e)}")
            return ""
        if handle.status == GoalStatus.ABORTED:
            reason = getattr(handle.result, "reason", "")
            self.p.news.append(f"Could not start {tool}: {quote('skill', reason)}")
            return ""
        info = ActionInfo(action_id, tool, args, self.p.clock.now(), handle,
                          bool(spec.monitor), step_index)
        self.p.actions[action_id] = info
        if step_index is not None:
            for s in self.p.plan.steps:
                if s.index == step_index:
                    s.status, s.action_id = "running", action_id
        self.p.log_event("action_started", action_id=action_id, tool=tool, params=args,
                         by_harness=by_harness)
        self.p.publish_state()
        return action_id

    def poll_pending(self, turn: Turn) -> None:
        now = self.p.clock.now()
        for ps in list(turn.pending):
            st = ps.handle.status
            # the executor sends a "started" feedback when the skill starts: a skill that
            # started and already ended counts as started; its end is handled as an event
            if st == GoalStatus.EXECUTING or ps.handle.feedback is not None:
                turn.pending.remove(ps)
                turn.started_any = True
                self.refused_in_row = self.refused_turns = 0
                self.last_refusal = None
                step = self.p.plan.claim(ps.tool, ps.action_id)
                if step is not None and ps.action_id in self.p.actions:
                    self.p.actions[ps.action_id].step = step.index
                self.p.log_event("action_started", action_id=ps.action_id, tool=ps.tool,
                                 params=self.p.actions[ps.action_id].params if ps.action_id in
                                 self.p.actions else {}, step=step.index if step else None)
                turn.results[ps.call.id] = tool_msg(
                    ps.call, f"started action {ps.action_id} ({ps.tool}): task id "
                             f"{ps.action_id}, running in the background with no result yet; "
                             "its result arrives as its own event. You will be woken when it "
                             "ends or something needs you")
            elif st.terminal:
                turn.pending.remove(ps)
                self.p.actions.pop(ps.action_id, None)
                self.answered_at_start.add(ps.action_id)
                res = ps.handle.result
                reason = getattr(res, "reason", "") or st.name.lower()
                said = reason[len("refused: "):] if reason.startswith("refused: ") else reason
                turn.results[ps.call.id] = tool_msg(ps.call, self.refusal(
                    ps.tool, f"refused: {quote('skill', said)}"),
                                                    error=True)
                self.p.log_event("tool_refused", tool=ps.tool, action_id=ps.action_id,
                                 reason=reason)
            elif now - ps.sent_at > 5.0:
                turn.pending.remove(ps)
                ps.handle.cancel()
                self.answered_at_start.add(ps.action_id)
                turn.results[ps.call.id] = tool_msg(ps.call, self.refusal(
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
        # every call of the reply is answered: close the turn
        for cid in turn.call_order:
            msg = turn.results.get(cid)
            if msg is not None:
                self.p.messages.append(msg)
        self.p.turn = None
        if self.refused_this_turn and not turn.started_any and self.refused_in_row:
            self.refused_turns += 1
        self.refused_last_turn, self.refused_this_turn = self.refused_this_turn, False
        finish = self.finish_after_turn
        self.finish_after_turn = None
        if finish is not None:
            ok, summary = finish
            if self.p.actions:
                self.p.runs.advance_generation("finish_task", "agent")
            self.p.runs.end_run("succeeded" if ok else "failed", summary)
            return
        limit = self.p.config.budgets.max_refused_in_row
        if self.refused_turns >= limit:
            last = self.last_refusal[1] if self.last_refusal else ""
            self.p.runs.stop_everything("refusals")
            self.p.runs.end_run("failed", f"the planner's calls were refused {limit} times in "
                                          f"a row ({limit} turns, {self.refused_in_row} calls, "
                                          "no action started; budgets.max_refused_in_row); "
                                          f"the last refusal: {last}")
            return
        if turn.started_any or turn.ended or turn.waits:
            self.p.continue_turn = False
        else:
            self.p.continue_turn = True
        self.p.publish_state()

    def needs_point(self) -> set[str]:
        return {n for n, s in self.p.specs.items() if s.image_points}

    def publish_view(self, obs_id: str, points: list[tuple[float, float]]) -> None:
        obs = self.p.observations.get(obs_id)
        if obs is None:
            return
        view = im.draw_points(im.decode(obs.data), points, obs_id)
        view.setflags(write=False)
        self.p.view_pub.publish(Image(view, self.p.clock.now(), obs.camera, 0))


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
