"""The plan queue the harness runs, so that steps whose calls are complete cost no planner turn
(a pick-and-place takes about four: plan and move, point the pick, point the place, finish).

Each ``update_plan`` step may carry the tool and args that carry it out.  When an action
succeeds and nothing else runs, the harness marks its step done and starts the next step whose
call is complete, without calling the planner.  It wakes the planner only when the next step
needs a point in a fresh image (a tool with image_points), has no tool (checking the result is
the planner's), cannot start, has failed, or when every step is done.

``retries_per_step`` is the harness's: a step whose actions failed that many times in a row is
``failed``; the queue never starts it again and the planner must change the plan (another step,
or this one ``skipped``) or ask the user.  Re-listing the step unchanged in ``update_plan``
keeps its count and its ``failed`` status, so rewriting the plan does not reset the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .statuses import Outcome, StepStatus
from .text import one_line

STEP_STATUSES = ("pending", "running", "done", "failed", "skipped")


@dataclass
class PlanStep:
    index: int
    description: str
    tool: str | None = None
    args: dict[str, Any] | None = None
    status: str = StepStatus.PENDING
    action_id: str | None = None
    failures: int = 0
    # failed by the monitor (or a controller check), not by the retry budget: the queue never
    # starts it again by itself, but the planner may (its own call of the tool, or the step
    # re-listed as pending in update_plan)
    decide: bool = False

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"step": self.index, "description": self.description,
                             "status": self.status}
        if self.tool:
            d["tool"] = self.tool
        if self.args is not None:
            d["args"] = self.args
        if self.action_id:
            d["action_id"] = self.action_id
        return d


PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "minLength": 1, "maxLength": 500},
                    "tool": {"type": "string"},
                    "args": {"type": "object"},
                    "status": {"enum": ["pending", "done", "skipped"]},
                },
                "required": ["description"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["steps"],
    "additionalProperties": False,
}


@dataclass
class NextStep:
    """What the queue wants after an action ended: start ``step``, or wake the planner."""

    step: PlanStep | None
    wake_reason: str = ""  # why the planner must be woken ('' when a step can start)


@dataclass
class PlanQueue:
    steps: list[PlanStep] = field(default_factory=list)

    def replace(self, steps: list[dict[str, Any]]) -> None:
        """Replace the plan.  A step identical to a running one keeps its action; one
        identical to a step that failed before keeps its failures in a row (and stays
        ``failed`` unless it is now marked done or skipped)."""
        running = {(s.description, s.tool): s for s in self.steps
                   if s.status == StepStatus.RUNNING}
        # `and` or `or` here differ only for a step with failures that is done, skipped or
        # running, and none carries its count: done and skipped have none left, a running one
        # is taken by ``running`` (its status is not pending below): equivalent (listed in
        # pyproject.toml)
        tried = {(s.description, s.tool): s for s in self.steps
                 if s.failures and s.status in (StepStatus.PENDING, StepStatus.FAILED)}
        new: list[PlanStep] = []
        for i, raw in enumerate(steps, start=1):
            st = PlanStep(i, str(raw["description"]), raw.get("tool"), raw.get("args"),
                          str(raw.get("status", "pending")))
            old = running.pop((st.description, st.tool), None)
            if old is not None and st.status == StepStatus.PENDING:
                st.status, st.action_id = StepStatus.RUNNING, old.action_id
            before = tried.pop((st.description, st.tool), None)
            if before is not None and st.status == StepStatus.PENDING:
                st.failures = before.failures
                if before.status == StepStatus.FAILED and not before.decide:
                    st.status = StepStatus.FAILED
            new.append(st)
        self.steps = new

    def claim(self, tool: str, action_id: str) -> PlanStep | None:
        """An action the planner starts itself takes the first unfinished step naming its tool
        (a step the monitor failed included: calling its tool again is the planner's
        decision)."""
        for s in self.steps:
            if s.tool == tool and (s.status == StepStatus.PENDING
                                   or (s.status == StepStatus.FAILED and s.decide)):
                s.decide = False
                s.status, s.action_id = StepStatus.RUNNING, action_id
                return s
        return None

    def start(self, index: int, action_id: str) -> None:
        """The harness started step ``index`` itself (the queue's next complete step)."""
        for s in self.steps:
            if s.index == index:
                s.status, s.action_id = StepStatus.RUNNING, action_id

    def step_of(self, action_id: str) -> PlanStep | None:
        return next((s for s in self.steps if s.action_id == action_id), None)

    def action_ended(self, action_id: str, outcome: str, retries: int = 0,
                     by_monitor: bool = False) -> PlanStep | None:
        """Mark the step ``action_id`` ran.  A failure counts toward ``retries`` (the step is
        ``failed`` at that many in a row; 0: no limit); a stop or a timeout does not (a
        timeout is not a failure, a stop is someone's decision).  ``by_monitor``: the
        monitor (or a controller check) failed it, so it stays ``failed`` until the planner
        decides, whatever ends after it (a rule's follow-up included)."""
        s = self.step_of(action_id)
        if s is None:
            return None
        if outcome == Outcome.SUCCEEDED:
            s.status = StepStatus.DONE
            s.failures = 0
            return s
        s.status = StepStatus.PENDING  # the queue waits for the planner's reply
        if outcome == Outcome.FAILED:
            s.failures += 1
            if retries and s.failures >= retries:
                s.status = StepStatus.FAILED
            elif by_monitor:
                s.status, s.decide = StepStatus.FAILED, True
        return s

    def failed_for(self, tool: str) -> PlanStep | None:
        """The failed step a call of ``tool`` would retry: one naming ``tool`` that failed,
        with no pending step of that tool left for the call to take instead."""
        if any(s.status == StepStatus.PENDING and s.tool == tool for s in self.steps):
            return None
        return next((s for s in self.steps if s.status == StepStatus.FAILED and s.tool == tool
                     and not s.decide), None)

    def follow_up(self, action_id: str, tool: str, new_action_id: str) -> PlanStep | None:
        """A ``then`` follow-up started after a finish, without waking the planner: it takes the
        next step when the plan names its tool there, else it carries the action's own step on.
        Returns the step the follow-up now runs, if any."""
        s = self.step_of(action_id)
        after = self.steps[self.steps.index(s) + 1:] if s is not None else self.steps
        nxt = next((x for x in after if x.status == StepStatus.PENDING), None)
        if nxt is not None and nxt.tool == tool:
            nxt.status, nxt.action_id = StepStatus.RUNNING, new_action_id
            return nxt
        if s is not None:
            s.status, s.action_id = StepStatus.RUNNING, new_action_id
        return s

    def next_step(self, needs_point: set[str], known_tools: set[str]) -> NextStep:
        for s in self.steps:
            if s.status in (StepStatus.DONE, StepStatus.SKIPPED, StepStatus.RUNNING):
                continue
            if s.status == StepStatus.FAILED and s.decide:
                return NextStep(None, f"plan step {s.index} ({s.description!r}) was failed by "
                                      "the monitor: call its tool again, change the plan or "
                                      "ask the user")
            if s.status == StepStatus.FAILED:
                return NextStep(None, f"plan step {s.index} ({s.description!r}) failed "
                                      f"{s.failures} times in a row: change the plan or ask "
                                      "the user")
            if not s.tool:
                return NextStep(None, f"plan step {s.index} ({s.description!r}) has no tool: "
                                      "checking the result is yours")
            if s.tool not in known_tools:
                return NextStep(None, f"plan step {s.index} names unknown tool {s.tool!r}")
            if s.tool in needs_point:
                return NextStep(None, f"plan step {s.index} ({s.tool}) needs a point in a "
                                      "fresh image")
            return NextStep(s)
        if self.steps:
            return NextStep(None, "every plan step is done")
        return NextStep(None, "there is no plan")

    @property
    def running(self) -> list[PlanStep]:
        return [s for s in self.steps if s.status == StepStatus.RUNNING]

    def as_list(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self.steps]

    def render(self) -> str:
        if not self.steps:
            return "(no plan yet)"
        lines = []
        for s in self.steps:
            call = f" -> {s.tool}({_short(s.args)})" if s.tool else ""
            act = f" [{s.action_id}]" if s.action_id and s.status == StepStatus.RUNNING else ""
            lines.append(one_line(
                f"{s.index}. [{s.status}] {s.description}{call}{act}", 800,
                quotes=False,  # None would read the same: an equivalent mutant
            ))
        return "\n".join(lines)


def _short(args: dict[str, Any] | None) -> str:
    if not args:
        return ""
    return ", ".join(f"{k}={v!r}" for k, v in args.items())[:120]
