"""What the offline planner reads in a request: the whole task, the newest images and readings,
the plan as the harness shows it, and what happened to its actions.

The ``rules`` planner is stateless between calls: like a model it knows only what the request
holds (the conversation so far).  :class:`RequestState` reads that once per call:

* the task (every line of the ``Task:`` message), the newest overhead view (colour segmentation
  of its pixels, never the simulator's truth) and wrist image, and the readings of the newest
  wake (tool point position, the jaws' opening);
* the plan as the newest wake renders it (step statuses, descriptions, tools, args);
* every action's end the harness reported ("Action a7 (pick_object) succeeded ..."), with a
  result's data, and the planner's own earlier replies (which object each pick was for, what it
  predicted);
* what the gripper holds: the arm's state (the last action that changed the grip and its
  outcome, a ``verify_state`` that said so) and the jaws' opening count, not only the wrist image:
  open jaws or jaws closed on nothing hold nothing, whatever the wrist camera sees beyond them
  (the pick skill's own figures, :data:`OPEN_JAWS_MM` and :data:`CLOSED_JAWS_MM`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..core.model_api import ImagePart, Message, ModelRequest
from ..core.result_text import read_result
from ..core.text import OPERATOR, TASK_PREFIX, find_quotes
from ..perception import images as im
from ..perception import scene

# jaws at least this far apart (mm, the opening between the jaws at the tool point) hold
# nothing: the gripper is open; closer than the other they closed on nothing, past the
# narrowest object.  The pick skill's own figures (arm.grasp: HELD_MIN_OPENING,
# held_max_opening(); pick_opening() lets go), written out so that the planner reads only what
# a request holds and imports nothing of the arm; a test holds them equal
OPEN_JAWS_MM = 87.3
CLOSED_JAWS_MM = 35.0
RELEASE_MM = 98  # the opening that lets go of a held object: a pick's own
# home (the folded rest pose, jaws up) puts the tool point near (83, 0, 299) mm
HOME_TIP_MM = (83.3, 0.0, 298.9)
HOME_TOL_MM = 15.0

# "finished by the monitor": a monitor finish rule ended the action as done (the skill counts
# as succeeded; the rule's follow-up, e.g. home_holding, was started by the harness)
_OUTCOME = re.compile(r"Action ([\w-]+) \((\w+)\) (succeeded|failed|was stopped|was refused|"
                      r"ran its limit|finished by the monitor)(.*)")
_MONITOR_FAIL = re.compile(r"The (?:monitor|controller check) failed action ([\w-]+) "
                           r"\((\w+)\)")
_PLAN_LINE = re.compile(r"^(\d+)\. \[(\w+)\] (.+?)(?: -> (\w+)\((.*)\))?(?: \[[\w-]+\])?$")
_MARK = re.compile(r"\[rules planner\] .*?\b(pick_object|place_at) (\w+)(?: -> (\w+))?"
                   r"(?: \{(.*?)\})?(?:;|$)")


@dataclass
class View:
    observation_id: str
    detections: dict[str, scene.Detection]
    report: dict[str, dict[str, Any]]

    def location(self, name: str) -> str:
        return str(self.report.get(name, {}).get("location", "not_seen"))


@dataclass(frozen=True)
class Outcome:
    """One action's end as the harness reported it (news, in order)."""

    action_id: str
    tool: str
    outcome: str  # succeeded | failed | stopped | refused | timed_out
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanLine:
    index: int
    status: str
    description: str
    tool: str | None
    args: str = ""  # as the plan renders them: "point=[312, 240]"

    def point(self) -> list[int] | None:
        m = re.search(r"point=\[(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\]", self.args)
        return [int(float(m.group(1))), int(float(m.group(2)))] if m else None


@dataclass(frozen=True)
class Mark:
    """What an earlier reply of this planner said it did: ``pick_object red_cup`` or
    ``place_at red_cup -> tray``, with its predictions."""

    tool: str
    obj: str
    dest: str | None
    note: dict[str, Any]
    action_id: str = ""  # the action the call started ('' when it was refused)


def newest_image(req: ModelRequest, camera: str) -> ImagePart | None:
    for msg in reversed(req.messages):
        for part in reversed(msg.content):
            if isinstance(part, ImagePart) and part.label == camera:
                return part
    return None


def _json_object(text: str) -> dict[str, Any]:
    """``text`` as a JSON object, also when the harness quoted it (``⟦skill: "..."⟧``, the
    form outside text comes in); {} if it is none."""
    quoted = find_quotes(text)
    if quoted:
        text = quoted[0][1]
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return dict(value) if isinstance(value, dict) else {}


def readings_of(text: str) -> dict[str, Any]:
    m = re.search(r"^Readings: (\{.*\})$", text, re.M)
    return _json_object(m.group(1)) if m else {}


def _result_data(rest: str) -> dict[str, Any]:
    m = re.search(r"Result: (.*?)\s*$", rest)
    if not m:
        return {}
    quoted = find_quotes(m.group(1))
    return read_result(quoted[0][1] if quoted else m.group(1))


def _is_task(msg: Message) -> bool:
    """The message a run starts with (the harness's task message)."""
    return msg.role == "user" and msg.text().startswith(TASK_PREFIX)


class RequestState:
    """Everything one call of the rules planner decides from (see the module docstring)."""

    def __init__(self, req: ModelRequest, camera: str = "overhead",
                 wrist_camera: str = "wrist") -> None:
        # this run only: the conversation outlives runs (until /reset), and what an earlier
        # run did, checked or planned says nothing of this one
        start = max((i for i, m in enumerate(req.messages) if _is_task(m)), default=0)
        req = dataclasses.replace(req, messages=req.messages[start:])
        self.req = req
        self.task = self._task()
        # the newest wake message: what happened, the plan, what runs, the readings
        self.wake = next((m.text() for m in reversed(req.messages)
                          if m.role == "user" and m.text().startswith("[woken")), "")
        self.last = req.messages[-1] if req.messages else None
        part = newest_image(req, camera)
        self.view: View | None = None
        if part is not None:
            dets = scene.detect(im.decode(part.data))
            self.view = View(part.observation_id, dets, scene.report(dets))
        wpart = newest_image(req, wrist_camera)
        self.wrist_sees = (scene.held_in_wrist(im.decode(wpart.data))[0]
                           if wpart is not None else None)
        self.readings = readings_of(self.wake)
        self.outcomes = self._outcomes()
        self.plan = self._plan()
        self.marks = self._marks()
        self.held = self._held()

    # the request ---------------------------------------------------------------------------
    def _task(self) -> str:
        """The operator's whole task (every line): this run's task message's quote from the
        operator."""
        for msg in self.req.messages:
            if _is_task(msg):
                said = [t for src, t in find_quotes(msg.text()) if src == OPERATOR]
                return said[0] if said else ""
        return ""

    def last_tool_text(self) -> str:
        return self.last.text() if self.last is not None and self.last.role == "tool" else ""

    def tool_results(self) -> list[tuple[str, str]]:
        """(tool name, result text) of this reply's calls' results, newest last."""
        names: dict[str, str] = {}
        out: list[tuple[str, str]] = []
        for m in self.req.messages:
            for c in m.tool_calls:
                names[c.id] = c.name
            if m.role == "tool":
                out.append((names.get(m.tool_call_id or "", ""), m.text()))
        return out

    def _outcomes(self) -> list[Outcome]:
        out: list[Outcome] = []
        failed_by_monitor: set[str] = set()
        for m in self.req.messages:
            if m.role != "user":
                continue
            for line in m.text().splitlines():
                mf = _MONITOR_FAIL.search(line)
                if mf:
                    failed_by_monitor.add(mf.group(1))
                mo = _OUTCOME.search(line)
                if not mo:
                    continue
                aid, tool, word, rest = mo.groups()
                outcome = {"succeeded": "succeeded", "failed": "failed",
                           "was stopped": "stopped", "was refused": "refused",
                           "ran its limit": "timed_out",
                           "finished by the monitor": "succeeded"}[word]
                if aid in failed_by_monitor and outcome == "stopped":
                    outcome = "failed"
                out.append(Outcome(aid, tool, outcome, line, _result_data(rest)))
        return out

    def _plan(self) -> list[PlanLine]:
        m = re.search(r"^Plan:\n((?:\d+\. .*\n?)+)", self.wake, re.M)
        if not m:
            return []
        lines = []
        for raw in m.group(1).splitlines():
            pm = _PLAN_LINE.match(raw.strip())
            if pm:
                lines.append(PlanLine(int(pm.group(1)), pm.group(2), pm.group(3), pm.group(4),
                                      pm.group(5) or ""))
        return lines

    def _marks(self) -> list[Mark]:
        """This planner's own earlier calls: each pick_object / place_at call is named in its
        reply's text (in call order) and its tool result names the action it started."""
        out: list[Mark] = []
        by_call: dict[str, int] = {}
        for m in self.req.messages:
            if m.role == "assistant":
                marks = list(_MARK.finditer(m.text()))
                calls = [c for c in m.tool_calls if c.name in ("pick_object", "place_at")]
                for mk, call in zip(marks, calls, strict=False):
                    note: dict[str, Any] = {}
                    for kv in (mk.group(4) or "").split(","):
                        if "=" in kv:
                            k, v = kv.split("=", 1)
                            note[k.strip()] = v.strip()
                    by_call[call.id] = len(out)
                    out.append(Mark(mk.group(1), mk.group(2), mk.group(3), note))
            elif m.role == "tool" and m.tool_call_id in by_call:
                started = re.match(r"started action ([\w-]+)", m.text())
                if started:
                    i = by_call[m.tool_call_id]
                    mk0 = out[i]
                    out[i] = Mark(mk0.tool, mk0.obj, mk0.dest, mk0.note, started.group(1))
        return out

    def object_of(self, action_id: str) -> str | None:
        return next((m.obj for m in self.marks if m.action_id == action_id), None)

    # readings --------------------------------------------------------------------------------
    @property
    def jaw_opening(self) -> float | None:
        ap = self.readings.get("gripper", {}).get("opening_mm")
        return float(ap) if isinstance(ap, int | float) else None

    def at_home(self) -> bool:
        arm = self.readings.get("arm", {})
        if not arm:
            return False
        return all(abs(float(arm.get(k, 0.0)) - h) < HOME_TOL_MM
                   for k, h in zip(("x", "y", "z"), HOME_TIP_MM, strict=True))

    def last_pick_for(self) -> str | None:
        picks = [m for m in self.marks if m.tool == "pick_object" and m.action_id]
        return picks[-1].obj if picks else None

    def _held(self) -> str | None:
        """What the gripper holds (see the module docstring)."""
        ap = self.jaw_opening
        if ap is not None and not CLOSED_JAWS_MM <= ap < OPEN_JAWS_MM:
            return None  # open, or closed on nothing
        state: str | None = None  # the arm's state: held object, "" nothing, None unknown
        for o in self.outcomes:
            if o.tool == "pick_object":
                state = (self.object_of(o.action_id) or "something") \
                    if o.outcome == "succeeded" else ("" if o.outcome == "failed" else None)
            elif o.tool == "verify_state" and o.outcome == "succeeded" and "held" in o.data:
                state = o.data["held"] or ""
            elif o.tool in ("place_at", "set_gripper") and o.outcome == "succeeded":
                state = ""
        if state:
            return self.wrist_sees if state == "something" and self.wrist_sees else state
        if state == "":
            return None
        # unknown (a stopped pick, no history): jaws stopped on something the wrist sees
        return self.wrist_sees if ap is not None else None

    def last_outcome(self, tool: str) -> Outcome | None:
        return next((o for o in reversed(self.outcomes) if o.tool == tool), None)

    def running(self) -> bool:
        m = re.search(r"^Running: (.*)$", self.wake, re.M)
        return bool(m) and m.group(1).strip() != "nothing"

    def failures_of(self, obj: str, tool: str = "pick_object") -> int:
        """Failed ``tool`` actions for ``obj`` this run."""
        return self.outcomes_of(obj, tool, "failed")

    def outcomes_of(self, obj: str, tool: str, outcome: str) -> int:
        """``tool`` actions for ``obj`` this run that ended ``outcome``."""
        return sum(1 for o in self.outcomes if o.tool == tool and o.outcome == outcome
                   and self.object_of(o.action_id) == obj)

    def step(self, description_start: str) -> PlanLine | None:
        return next((p for p in self.plan if p.description.startswith(description_start)),
                    None)


__all__ = ["CLOSED_JAWS_MM", "OPEN_JAWS_MM", "RELEASE_MM", "Mark", "Outcome", "PlanLine",
           "RequestState", "View", "newest_image", "readings_of"]
