"""``rules``: an offline planner provider for the tidy-up task (clearly not a language model).

It understands instructions of the form "put X on/in Y" (several in one sentence, joined by
"and" / commas / "then"), plans with the plan queue, looks at the newest overhead image it was
sent, finds the objects by colour segmentation of that image (never the simulator's ground
truth), points, picks, places, checks the newest image, retries a failed step, and finishes.

It speaks the provider interface like any model: it reads the request's messages and answers
with tool calls, so the harness treats it exactly as it would a real planner.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..core.text import OPERATOR, TASK_PREFIX, find_quotes
from ..perception import images as im
from ..perception import scene
from .base import ImagePart, Message, ModelReply, ModelRequest, TextPart, ToolCall, Usage

# fingers at least this far apart (mm) hold nothing: the gripper is open; closer than this
# they closed on nothing (the pick skill's test)
OPEN_APERTURE_MM = 50.0
CLOSED_APERTURE_MM = 5.0
_SPLIT = re.compile(r"\s*(?:,|;|\band then\b|\bthen\b|\band\b|\.)\s*", re.I)
# the verb is optional after the first clause: "put the cup on the tray and the paper in the bin"
_PUT = re.compile(r"^(?:(?:please\s+)?(?:put|place|move|drop|throw|bring|toss|set)\s+)?"
                  r"(?:the\s+)?(.+?)\s+(?:on top of|onto|into|inside|on|in|to)\s+"
                  r"(?:the\s+)?(.+)$", re.I)


def parse_task(task: str) -> list[tuple[str, str]]:
    """[(object, receptacle)] scene names from "put the red cup on the tray and ..."."""
    pairs: list[tuple[str, str]] = []
    for clause in _SPLIT.split(task):
        m = _PUT.search(clause)
        if not m:
            continue
        obj, dest = scene.resolve(m.group(1)), scene.resolve(m.group(2))
        if obj in scene.OBJECTS and dest in scene.RECEPTACLES and (obj, dest) not in pairs:
            pairs.append((obj, dest))
    if not pairs and re.search(r"\b(tidy|clean|clear)\b", task, re.I):
        pairs = list(scene.GOALS.items())
    return pairs


@dataclass
class _View:
    observation_id: str
    detections: dict[str, scene.Detection]
    report: dict[str, dict[str, Any]]


def _newest_part(req: ModelRequest, camera: str) -> ImagePart | None:
    for msg in reversed(req.messages):
        for part in reversed(msg.content):
            if isinstance(part, ImagePart) and part.label == camera:
                return part
    return None


def _newest_image(req: ModelRequest, camera: str) -> Any:
    part = _newest_part(req, camera)
    return None if part is None else im.decode(part.data)


def _newest_view(req: ModelRequest, camera: str) -> _View | None:
    part = _newest_part(req, camera)
    if part is None:
        return None
    dets = scene.detect(im.decode(part.data))
    return _View(part.observation_id, dets, scene.report(dets))


def _last_wake(req: ModelRequest) -> str:
    for msg in reversed(req.messages):
        if msg.role == "user":
            return msg.text()
    return ""


def _readings(text: str) -> dict[str, Any]:
    m = re.search(r"^Readings: (\{.*\})$", text, re.M)
    if not m:
        return {}
    try:
        return dict(json.loads(m.group(1)))
    except json.JSONDecodeError:
        return {}


def _label(name: str) -> str:
    return name.replace("_", " ")


class RulesPlanner:
    """The offline planner.  Stateless between calls: everything it decides comes from the
    request (the task, the newest image, the readings and what happened)."""

    name = "rules"
    reads_images = True
    max_image_side = 1024

    def __init__(self, model: str = "rules-v1", camera: str = "overhead",
                 wrist_camera: str = "wrist", max_attempts_per_object: int = 4) -> None:
        self.model = model
        self.camera = camera
        self.wrist_camera = wrist_camera
        self.max_attempts = max_attempts_per_object
        self.calls = 0

    # -- the provider interface --------------------------------------------------------------
    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply:
        self.calls += 1
        calls = self._decide(request)
        tool_calls = tuple(ToolCall(f"rules_{self.calls}_{i}", n, a)
                           for i, (n, a) in enumerate(calls))
        text = "; ".join(n for n, _ in calls)
        return ModelReply(text=f"[rules planner] {text}", tool_calls=tool_calls,
                          usage=Usage(0, 0), model=self.model, stop_reason="tool_use")

    # -- decisions ---------------------------------------------------------------------------
    def _task(self, req: ModelRequest) -> str:
        """The operator's task: the newest task message's quote from the operator (the
        conversation keeps the earlier runs' tasks until a reset; this run's is the last)."""
        for msg in reversed(req.messages):
            if msg.role == "user" and msg.text().startswith(TASK_PREFIX):
                said = [t for src, t in find_quotes(msg.text()) if src == OPERATOR]
                return said[0].split("\n", 1)[0] if said else ""
        return ""

    def _decide(self, req: ModelRequest) -> list[tuple[str, dict[str, Any]]]:
        task = self._task(req)
        pairs = parse_task(task)
        if not pairs:
            return [("ask_user", {"question": (
                "I can tidy the table when told what goes where, for example: put the red cup "
                "on the tray and the yellow paper in the bin. What should I do?")})]
        wake = _last_wake(req)
        last = req.messages[-1] if req.messages else Message("user")
        view = _newest_view(req, self.camera)
        if view is None:
            if last.role == "tool" and "fresh images" in last.text():
                return [("finish_task", {"summary": "no overhead image arrives",
                                         "success": False})]
            return [("observe", {"cameras": [self.camera]})]
        if last.role == "tool" and ("observe again" in last.text()
                                    or "taken before the robot last moved" in last.text()):
            return [("observe", {"cameras": [self.camera]})]
        wrist = _newest_image(req, self.wrist_camera)
        holding = wrist is not None and scene.held_in_wrist(wrist)[0] is not None
        if last.role == "tool" and "nothing is held" in last.text():
            holding = False
        aperture = _readings(wake).get("gripper", {}).get("aperture_mm")
        if isinstance(aperture, int | float) and not (
                CLOSED_APERTURE_MM <= aperture < OPEN_APERTURE_MM):
            # open fingers, or fingers closed on nothing, hold nothing, whatever the wrist
            # camera sees beyond them
            holding = False
        remaining = [(o, d) for o, d in pairs if view.report[o]["location"] != d]
        picks = sum(1 for m in req.messages for c in m.tool_calls if c.name == "pick_object")
        if picks > self.max_attempts * len(pairs):
            return [("finish_task", {"summary": f"gave up after {picks} pick attempts; "
                                                f"state: {json.dumps(view.report)}",
                                     "success": False})]
        plan = self._plan(pairs, remaining, holding)
        if not remaining:
            if holding:
                return [("update_plan", {"steps": plan}), ("set_gripper", {"aperture_mm": 55})]
            at_home = self._at_home(wake)
            if not at_home:
                return [("update_plan", {"steps": plan}), ("home", {})]
            summary = "; ".join(f"{_label(o)} in the {d}" for o, d in pairs)
            # the plan as it ends: home and the final check done, so no step stays pending
            return [("update_plan", {"steps": self._plan(pairs, remaining, holding,
                                                         finished=True)}),
                    ("finish_task", {"summary": f"done, checked in {view.observation_id}: "
                                                f"{summary}", "success": True})]
        obj, dest = remaining[0]
        if holding:
            target = view.detections.get(dest)
            if target is None:
                return [("home_holding", {})] if "home_holding" not in wake else [
                    ("ask_user", {"question": f"I cannot see the {dest}; where is it?"})]
            return [("update_plan", {"steps": plan}),
                    ("place_at", {"point": _pt(target.inner),
                                  "observation_id": view.observation_id})]
        d = view.detections.get(obj)
        if d is None:
            return [("update_plan", {"steps": plan}), ("home", {})] if not self._at_home(
                wake) else [("finish_task", {"summary": f"I cannot see the {_label(obj)}",
                                             "success": False})]
        failed_pick = "(pick_object) failed" in wake
        goal = view.detections.get(dest)
        over_goal = goal is not None and _overlap(d.box, goal.box)
        if ((failed_pick or over_goal or (last.role == "tool" and "point again" in last.text()))
                and not self._at_home(wake)):
            # (an object over its goal that is not judged in it may be in it, seen past an
            # arm that hides part of the receptacle)
            # the arm may hide the object from the overhead camera: clear the view first
            return [("update_plan", {"steps": plan}), ("home", {})]
        return [("update_plan", {"steps": plan}),
                ("pick_object", {"point": _pt(d.inner),
                                 "observation_id": view.observation_id})]

    @staticmethod
    def _at_home(wake: str) -> bool:
        r = _readings(wake)
        arm = r.get("arm", {})
        if not arm:
            return False
        # home puts the tip near (105, 0, 89) mm
        return abs(arm.get("x", 0) - 105) < 15 and abs(arm.get("y", 0)) < 15 and abs(
            arm.get("z", 0) - 89) < 15

    @staticmethod
    def _plan(pairs: list[tuple[str, str]], remaining: list[tuple[str, str]], holding: bool,
              finished: bool = False) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = []
        for o, d in pairs:
            done = (o, d) not in remaining
            st = {"status": "done"} if done else {}
            picked = done or (holding and remaining and remaining[0] == (o, d))
            steps.append({"description": f"pick the {_label(o)}", "tool": "pick_object",
                          **({"status": "done"} if picked else {})})
            steps.append({"description": f"place it {'on' if d == 'tray' else 'in'} the {d}",
                          "tool": "place_at", **st})
            steps.append({"description": f"check the {_label(o)} is in the {d}",
                          "tool": "verify_state", "args": {}, **st})
        end = {"status": "done"} if finished else {}
        steps.append({"description": "go home", "tool": "home", "args": {}, **end})
        steps.append({"description": "check the table in a fresh image and finish", **end})
        return steps


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _pt(c: tuple[float, float]) -> list[int]:
    return [int(round(c[0])), int(round(c[1]))]


__all__ = ["RulesPlanner", "parse_task", "TextPart"]
