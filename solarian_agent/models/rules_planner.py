"""``rules``: an offline planner provider for the tidy-up task (clearly not a language model).

It reads the whole task (:mod:`.task_reading`: every line, objects by colour and kind, goals in
the order given, negations and requests it cannot do answered, never acted on), plans with the
plan queue, finds the objects by colour segmentation of the newest overhead image (never the
simulator's ground truth), points, picks and places, and finishes.  It speaks the provider
interface like any model: it reads the request's messages (:mod:`.rules_state`) and answers
with tool calls, so the harness treats it exactly as it would a real planner.

Three execution strategies, compared on the same task with recoverable grasp faults to show
what looking again after each step buys, chosen by ``strategy`` (or the model name:
``rules-open-loop``, ``rules-step-verified`` = ``rules-v1``, ``rules-predictive``):

* ``open_loop`` — the whole pick / place / home sequence from the first overhead image (its
  points written into the plan), run step by step without looking again and without reacting
  to any failure; then it claims success.
* ``step_verified`` — a ``verify_state`` after every pick and every place (plan steps the
  harness runs); a failed skill is redone on its own from the fresh view; home and a final
  ``verify_state`` before finishing.
* ``predictive`` — step verification plus :class:`~.rules_predict.OutcomeModel`: it ranks the
  next object by expected cost (when the task leaves the order open), predicts the jaws' opening a
  pick ends at and whether a release lands inside the receptacle, and calls ``verify_state``
  only when an outcome departs from a confident prediction; the final check always.

When one object cannot be found or reached, or its step failed ``retries_per_step`` times in a
row twice (the second time after going home for a clear view), it finishes the rest and says
what it could not do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.model_api import ModelConfigError, ModelReply, ModelRequest, TextPart, ToolCall, Usage
from .rules_predict import OutcomeModel
from .rules_state import RELEASE_MM, PlanLine, RequestState
from .task_reading import TaskReading, label, read_task

STRATEGIES = ("open_loop", "step_verified", "predictive")
MODEL_STRATEGY = {"rules-v1": "step_verified", "rules-open-loop": "open_loop",
                  "rules-step-verified": "step_verified", "rules-predictive": "predictive"}
HELP = ("I can tidy the table when told what goes where, for example: put the red cup on the "
        "tray and the yellow paper in the bin. What should I do?")
AGAIN = " (another try from home)"
# failed picks (or places) of one object in the whole run before it is given up: a bound that
# holds even when a check and the newest image disagree about where the object is and the
# plan step keeps being redone afresh (never reaching retries_per_step in a row)
MAX_FAILURES_PER_OBJECT = 6
# places of one object that succeeded while the newest look still does not see it where it
# belongs: the same bound for picks that now succeed (a check that misreads the receptacle
# would otherwise have the object picked out and put back until the turn budget is spent)
MAX_PLACES_PER_OBJECT = 4
Call = tuple[str, dict[str, Any], str]  # tool, args, what the reply's text says of it


def parse_task(task: str) -> list[tuple[str, str]]:
    """[(object, receptacle)] in the order given (see :func:`.task_reading.read_task`)."""
    return list(read_task(task).goals)


def _place_word(dest: str) -> str:
    return "on the tray" if dest == "tray" else f"in the {dest}"


def _pt(c: tuple[float, float]) -> list[int]:
    return [int(round(c[0])), int(round(c[1]))]


def _plan_unchanged(shown: Sequence[PlanLine], steps: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``steps`` (an update_plan's) are the plan the wake shows, step for step, as
    :meth:`~solarian_agent.core.plan.Plan.render` writes it (any doubt reads as changed)."""
    if len(shown) != len(steps):
        return False
    for line, s in zip(shown, steps, strict=True):
        args = s.get("args") or {}
        written = ", ".join(f"{k}={v!r}" for k, v in args.items())[:120]
        if (line.description, line.tool or None, line.status, line.args) != (
                s.get("description"), s.get("tool"), s.get("status", "pending"), written):
            return False
    return True


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


class RulesPlanner:
    """The offline planner.  Stateless between calls: everything it decides comes from the
    request (the task, the newest images, the readings, the plan and what happened)."""

    name = "rules"
    reads_images = True
    max_image_side = 1024

    def __init__(self, model: str = "rules-v1", camera: str = "overhead",
                 wrist_camera: str = "wrist", strategy: str | None = None) -> None:
        self.model = model
        self.camera = camera
        self.wrist_camera = wrist_camera
        chosen = strategy or MODEL_STRATEGY.get(model)
        if chosen not in STRATEGIES:
            what = f"strategy {strategy!r}" if strategy else f"model {model!r}"
            allowed = STRATEGIES if strategy else tuple(MODEL_STRATEGY)
            raise ModelConfigError(f"rules planner: {what} is not one of {', '.join(allowed)}")
        self.strategy = chosen
        self.outcomes = OutcomeModel()
        self.calls = 0

    # -- the provider interface --------------------------------------------------------------
    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply:
        self.calls += 1
        from ..core.routing import PARALLEL_SYSTEM

        if request.system == PARALLEL_SYSTEM:
            return self._side_answer(request)
        st = RequestState(request, self.camera, self.wrist_camera)
        calls = self._decide(st)
        if calls and calls[0][0] == "update_plan" and _plan_unchanged(st.plan,
                                                                      calls[0][1]["steps"]):
            calls = calls[1:]  # the plan the wake shows already: resending it costs tokens
        tool_calls = tuple(ToolCall(f"rules_{self.calls}_{i}", n, a)
                           for i, (n, a, _) in enumerate(calls))
        text = "; ".join(note or n for n, _, note in calls) or "waiting for the running action"
        return ModelReply(text=f"[rules planner] {self.strategy}: {text}",
                          tool_calls=tool_calls, usage=Usage(0, 0), model=self.model,
                          stop_reason="tool_use" if calls else "end_turn")

    def _side_answer(self, request: ModelRequest) -> ModelReply:
        """A side question (a parallel answer): the offline planner reads no questions; it
        says the time and what runs, from the request, and calls no tool."""
        first = request.messages[0].text() if request.messages else ""
        lines = {k: v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines())
                 if v}
        text = (f"[rules planner] I answer no side questions offline. Now: "
                f"{lines.get('Now', '?')}; running: {lines.get('Running', 'nothing')}.")
        return ModelReply(text=text, tool_calls=(), usage=Usage(0, 0), model=self.model,
                          stop_reason="end_turn")

    # -- decisions ---------------------------------------------------------------------------
    def _decide(self, st: RequestState) -> list[Call]:
        r = read_task(st.task)
        if not r.understood:
            return [("ask_user", {"question": HELP}, "")]
        if r.questions:
            q = " ".join((*r.questions, *r.impossible))
            return [("ask_user", {"question": f"{q} What should I do?"}, "")]
        if not r.goals:
            return [("finish_task", {"summary": self._answer(r, [], {}),
                                     "success": not r.impossible}, "")]
        if st.running():
            return []  # a monitor flag while an action runs: the action's end decides
        if st.view is None:
            if "fresh images" in st.last_tool_text():
                return [("finish_task", {"summary": "no overhead image arrives",
                                         "success": False}, "")]
            return [("observe", {"cameras": [self.camera]}, "")]
        last = st.last_tool_text()
        if "observe again" in last or "taken before the robot last moved" in last:
            return [("observe", {"cameras": [self.camera]}, "")]
        if self.strategy == "open_loop":
            return self._open_loop(st, r)
        return self._closed_loop(st, r)

    def _answer(self, r: TaskReading, done: list[tuple[str, str]], gave_up: dict[str, str],
                checked: str = "") -> str:
        parts: list[str] = []
        if done:
            parts.append(f"done{', checked in ' + checked if checked else ''}: " + "; ".join(
                f"{label(o)} {_place_word(d)}" for o, d in done))
        for o, why in gave_up.items():
            parts.append(f"I could not put the {label(o)} {_place_word(dict(r.goals)[o])}: "
                         f"{why}")
        parts += list(r.impossible)
        if r.declined:
            parts.append("As you asked, I did not act on: " + "; ".join(
                d.removeprefix("you asked me not to ") for d in r.declined))
        kept = [f"the {label(o)}" for o in r.kept()]
        if kept and not done and not gave_up:
            parts.append("I left the table as it is: " + " and ".join(kept)
                         + (" are where they were." if len(kept) > 1 else " is where it was."))
        return " ".join(p if p.endswith(".") else p + "." for p in parts)

    # open loop ------------------------------------------------------------------------------
    def _open_loop(self, st: RequestState, r: TaskReading) -> list[Call]:
        view = st.view
        assert view is not None
        made = [m for m in st.marks if m.tool in ("pick_object", "place_at")]
        seq = [p for p in st.plan if p.tool in ("pick_object", "place_at") and p.point()]
        if not st.plan:  # the first turn: the whole sequence from this one image
            steps: list[dict[str, Any]] = []
            for o, d in r.goals:
                od, dd = view.detections.get(o), view.detections.get(d)
                if od is None or dd is None:
                    continue
                steps.append({"description": f"pick the {label(o)}", "tool": "pick_object",
                              "args": {"point": _pt(od.inner)}})
                steps.append({"description": f"place the {label(o)} {_place_word(d)}",
                              "tool": "place_at", "args": {"point": _pt(dd.inner)}})
            steps += [{"description": "go home", "tool": "home", "args": {}},
                      {"description": "finish"}]
            if len(steps) == 2:
                return [("finish_task", {"summary": "nothing I can see to move",
                                         "success": False}, "")]
            first = steps[0]
            return [("update_plan", {"steps": steps}, ""),
                    ("pick_object", {"point": first["args"]["point"],
                                     "observation_id": view.observation_id},
                     f"pick_object {self._named(r, first['description'])}")]
        if len(made) < len(seq):
            step = seq[len(made)]
            return [(step.tool or "", {"point": step.point(),
                                       "observation_id": view.observation_id},
                     f"{step.tool} {self._named(r, step.description)}")]
        if not st.at_home():
            return [("home", {}, "")]
        return [("finish_task", {"summary": "done (open loop: the planned sequence ran "
                                            "without looking again)", "success": True}, "")]

    @staticmethod
    def _named(r: TaskReading, description: str) -> str:
        return next((o for o, _ in r.goals if f"the {label(o)}" in description), "object")

    # step-verified and predictive ----------------------------------------------------------
    def _closed_loop(self, st: RequestState, r: TaskReading) -> list[Call]:
        view = st.view
        assert view is not None
        goals = list(r.goals)
        gave_up, again, fresh = self._given_up(st, goals)
        held = st.held
        # a check that just ran is what a claim rests on; otherwise the newest image
        check = st.outcomes[-1] if st.outcomes and st.outcomes[-1].tool == "verify_state" \
            and st.outcomes[-1].outcome == "succeeded" else None
        report = check.data.get("report", {}) if check is not None else view.report

        def where(o: str) -> str:
            if held == o:
                return "held"
            return str(report.get(o, {}).get("location", "not_seen"))

        remaining = [(o, d) for o, d in goals if o not in gave_up and where(o) != d]
        done = [(o, d) for o, d in goals if o not in gave_up and where(o) == d]
        # an object no longer to be had: seen nowhere even from home
        for o, d in list(remaining):
            if where(o) == "not_seen" and st.at_home():
                gave_up[o] = "I cannot find it on the table"
                remaining.remove((o, d))
            elif held != o and st.outcomes_of(o, "place_at", "succeeded") >= \
                    MAX_PLACES_PER_OBJECT:
                gave_up[o] = (f"I put it {_place_word(d)} {MAX_PLACES_PER_OBJECT} times and "
                              "still do not see it there")
                remaining.remove((o, d))
        order = self._order(st, r, remaining, held)
        final = self._final_check(st) if not order else None
        plan = self._plan(goals, done, order, gave_up, again, held,
                          home_done=not order and st.at_home(),
                          check_done=final is not None and final[1] == "")
        if not order:
            return self._finish(st, r, plan, done, gave_up, held, final)
        o, d = order[0]
        up = ("update_plan", {"steps": plan}, "")
        doubt = self._doubt(st)
        if doubt:
            return [up, ("verify_state", {}, f"verify_state ({doubt})")]
        if held == o:
            target = view.detections.get(d)
            if target is None:
                if st.last_outcome("home_holding") is None:
                    return [up, ("home_holding", {}, "")]
                return [up, ("ask_user", {"question": f"I cannot see the {d}; where is it?"},
                             "")]
            point = _pt(target.inner)
            sure = self.outcomes.place_confident(d, point, view.detections)
            return [up, ("place_at", {"point": point, "observation_id": view.observation_id},
                         f"place_at {o} -> {d} {{confident={'yes' if sure else 'no'}}}")]
        if held is not None:  # holding what no goal wants now: let go of it here
            return [up, ("set_gripper", {"opening_mm": RELEASE_MM}, "")]
        det = view.detections.get(o)
        if det is None:
            return [up, ("home", {}, "")]  # the arm may hide it: look again from home
        wake = st.wake
        goal = view.detections.get(d)
        failed_pick = "(pick_object) failed" in wake
        over_goal = goal is not None and _overlap(det.box, goal.box)
        if ((failed_pick or over_goal or o in fresh or "point again" in st.last_tool_text())
                and not st.at_home()):
            # the arm may hide the object from the overhead camera (or hide part of the
            # receptacle it may be in): clear the view first
            return [up, ("home", {}, "")]
        pred = self.outcomes.predict_pick(o, view.detections)
        return [up, ("pick_object", {"point": _pt(det.inner),
                                     "observation_id": view.observation_id},
                     f"pick_object {o} {{low={pred.low_mm},high={pred.high_mm}}}")]

    def _given_up(self, st: RequestState, goals: list[tuple[str, str]]
                  ) -> tuple[dict[str, str], set[str], set[str]]:
        """Objects given up (with why), objects on their second approach, and those whose
        step the harness has just failed (a fresh look from home comes first), from the plan
        the harness shows and the newest refusals."""
        gave_up: dict[str, str] = {}
        again: set[str] = set()
        fresh: set[str] = set()
        for p in st.plan:
            m = re.match(r"pick the (.+?): skipped, (.+)$", p.description)
            if m and p.status == "skipped":
                gave_up[m.group(1).replace(" ", "_")] = m.group(2)
        for o, _ in goals:
            if o in gave_up:
                continue
            for tool, what in (("pick_object", "pick"), ("place_at", "place")):
                n = st.failures_of(o, tool)
                if n >= MAX_FAILURES_PER_OBJECT:
                    gave_up[o] = f"{n} attempts to {what} it failed"
            if o in gave_up:
                continue
            mine = [p for p in st.plan if f"the {label(o)}" in p.description
                    and p.tool in ("pick_object", "place_at")]
            second = any(AGAIN in p.description for p in mine)
            if second:
                again.add(o)
            if any(p.status == "failed" for p in mine):
                if second:
                    gave_up[o] = ("its step failed again after a fresh look from home "
                                  "(retries_per_step reached twice)")
                else:
                    again.add(o)
                    fresh.add(o)
        results = st.tool_results()
        if results and results[-1][0] in ("pick_object", "place_at") and \
                "out of reach" in results[-1][1]:
            mine = [m for m in st.marks if m.tool == results[-1][0]]
            if mine:
                gave_up[mine[-1].obj] = "it is out of the arm's reach"
        return gave_up, again, fresh

    def _order(self, st: RequestState, r: TaskReading, remaining: list[tuple[str, str]],
               held: str | None) -> list[tuple[str, str]]:
        """The remaining goals, the one to work on first (a held object is placed first)."""
        first = [g for g in remaining if g[0] == held]
        rest = [g for g in remaining if g[0] != held]
        if self.strategy == "predictive" and not r.ordered and len(rest) > 1 and st.view:
            counts = {o: (0, st.failures_of(o)) for o, _ in rest}
            rest = [g for _, g in self.outcomes.rank(rest, st.view.detections, counts)]
        return first + rest

    def _doubt(self, st: RequestState) -> str:
        """Predictive: why the last skill's outcome needs a verify_state ('' when it matched a
        confident prediction, or a check already followed it)."""
        if self.strategy != "predictive" or not st.outcomes:
            return ""
        last = st.outcomes[-1]
        if last.tool == "verify_state":
            return ""
        mark = next((m for m in reversed(st.marks) if m.action_id == last.action_id), None)
        if last.tool == "pick_object" and last.outcome == "succeeded" and mark is not None:
            try:
                low, high = float(mark.note["low"]), float(mark.note["high"])
            except (KeyError, ValueError):
                return "no prediction for the pick"
            ap = last.data.get("opening_mm")
            if not (isinstance(ap, int | float) and low <= ap <= high):
                return f"the jaws stopped {ap} mm apart, not within {low}-{high} mm"
            return ""
        if last.tool == "place_at" and last.outcome == "succeeded" and mark is not None:
            return "" if mark.note.get("confident") == "yes" else "the release was near an edge"
        if last.outcome in ("stopped", "timed_out"):
            return f"{last.tool} {last.outcome.replace('_', ' ')}"
        return ""

    @staticmethod
    def _final_check(st: RequestState) -> tuple[Any, str] | None:
        """The newest successful verify_state with nothing but homes after it, and what is
        left to do before it confirms the end ('' when nothing)."""
        idx = next((i for i in range(len(st.outcomes) - 1, -1, -1)
                    if st.outcomes[i].tool == "verify_state"
                    and st.outcomes[i].outcome == "succeeded"), None)
        if idx is None:
            return None
        after = st.outcomes[idx + 1:]
        if any(o.tool != "home" for o in after):
            return None
        check = st.outcomes[idx]
        if check.data.get("held"):
            return check, "let go"
        if not check.data.get("arm_at_home"):
            return check, "check again" if after else "go home"
        return check, ""

    def _finish(self, st: RequestState, r: TaskReading, plan: list[dict[str, Any]],
                done: list[tuple[str, str]], gave_up: dict[str, str], held: str | None,
                final: tuple[Any, str] | None) -> list[Call]:
        """Every goal done or given up: let go, go home, and finish on a fresh check."""
        up = ("update_plan", {"steps": plan}, "")
        if held is not None or (final is not None and final[1] == "let go"):
            return [up, ("set_gripper", {"opening_mm": RELEASE_MM}, "")]
        if not st.at_home() or (final is not None and final[1] == "go home"):
            return [up, ("home", {}, "")]
        if final is None or final[1]:
            return [up, ("verify_state", {}, "verify_state (final check)")]
        check = final[0]
        return [("update_plan", {"steps": self._plan_finished(plan)}, ""),
                ("finish_task", {"summary": self._answer(r, done, gave_up, check.action_id),
                                 "success": not gave_up and not r.impossible}, "")]

    def _plan(self, goals: list[tuple[str, str]], done: list[tuple[str, str]],
              order: list[tuple[str, str]], gave_up: dict[str, str], again: set[str],
              held: str | None, home_done: bool = False, check_done: bool = False
              ) -> list[dict[str, Any]]:
        verify = self.strategy == "step_verified"
        steps: list[dict[str, Any]] = []

        def add(o: str, d: str, picked: str, placed: str) -> None:
            sfx = AGAIN if o in again else ""
            steps.append({"description": f"pick the {label(o)}{sfx}", "tool": "pick_object",
                          **({"status": picked} if picked != "pending" else {})})
            if verify:
                steps.append({"description": f"check the {label(o)} is held{sfx}",
                              "tool": "verify_state", "args": {},
                              **({"status": picked} if picked != "pending" else {})})
            steps.append({"description": f"place the {label(o)} {_place_word(d)}{sfx}",
                          "tool": "place_at",
                          **({"status": placed} if placed != "pending" else {})})
            if verify:
                steps.append({"description": f"check the {label(o)} is {_place_word(d)}{sfx}",
                              "tool": "verify_state", "args": {},
                              **({"status": placed} if placed != "pending" else {})})

        for o, d in done:
            add(o, d, "done", "done")
        for o, d in order:
            add(o, d, "done" if held == o else "pending", "pending")
        for o, d in goals:
            if o in gave_up:
                steps.append({"description": f"pick the {label(o)}: skipped, {gave_up[o]}",
                              "tool": "pick_object", "status": "skipped"})
                steps.append({"description": f"place the {label(o)} {_place_word(d)}: skipped",
                              "tool": "place_at", "status": "skipped"})
        steps.append({"description": "go home", "tool": "home", "args": {},
                      **({"status": "done"} if home_done else {})})
        steps.append({"description": "final check of the table", "tool": "verify_state",
                      "args": {}, **({"status": "done"} if check_done else {})})
        steps.append({"description": "finish: report what was done"})
        return steps

    @staticmethod
    def _plan_finished(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The plan as it ends: home, the final check and the finish done, nothing pending."""
        return [{**s, "status": s.get("status", "done")} for s in plan]


__all__ = ["STRATEGIES", "RulesPlanner", "TextPart", "parse_task"]
