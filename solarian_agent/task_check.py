"""Judging a run against the task it was given (the demo's exit code, the tidy benchmark's
counted successes).

The goal is the task as read by :func:`solarian_agent.models.task_reading.read_task` (the
reading the offline planner acts on).  It is checked twice after the run, by two witnesses that
do not depend on each other:

* a fresh ``verify_state`` through the skill's own action server (:func:`final_check`): what the
  agent's camera shows now, and what the gripper holds (never the planner's word);
* the simulator's truth (read here, after the run, never by the agent).

Either may disagree with the other; a success is counted only when both say the goal holds,
nothing is held, and (when something was to be moved) the arm is back home, as experiment
6-10's acceptance asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .core import names
from .core.messages import Generation, SkillGoal
from .core.transport import LATCHED
from .models.task_reading import TaskReading, goal_holds


def final_check(system: Any, timeout_s: float = 5.0) -> dict[str, Any]:
    """A fresh verify_state through the skill's own action server (not the planner's word):
    ``finished``, the ``report`` (object -> location), ``held``, ``arm_at_home``."""
    gen = system.bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION, qos=LATCHED)
    g = gen.latest()
    generation = g.value if isinstance(g, Generation) else 1
    h = system.bus.send_goal(names.skill_action("verify_state"),
                             SkillGoal("verify_state", {}, generation, "final_check"))
    system.run_until(lambda: h.done, timeout_s)
    res = h.result
    if res is None or res.outcome != "succeeded":
        return {"finished": False, "report": {}, "held": None, "arm_at_home": False,
                "reason": getattr(res, "reason", "verify_state did not finish")}
    return {"finished": True, "report": dict(res.data.get("report", {})),
            "held": res.data.get("held"), "arm_at_home": bool(res.data.get("arm_at_home")),
            "frame_seq": res.data.get("frame_seq")}


def truth_locations(truth: Mapping[str, Any]) -> dict[str, str]:
    return {n: str(o["location"]) for n, o in truth["objects"].items()}


def check_locations(check: Mapping[str, Any]) -> dict[str, str]:
    rep = check.get("report", {})
    return {n: str(v.get("location", "not_seen")) for n, v in rep.items()
            if isinstance(v, Mapping)}


@dataclass(frozen=True)
class Judgement:
    """The goal checked by both witnesses."""

    verified: bool  # the fresh verify_state says the goal holds
    truth: bool  # the simulator's truth says so
    verify_lines: list[str] = field(default_factory=list)
    truth_lines: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return self.verified and self.truth

    @property
    def disagree(self) -> bool:
        return self.verified != self.truth


def judge(reading: TaskReading, start: Mapping[str, Any], end: Mapping[str, Any],
          check: Mapping[str, Any]) -> Judgement:
    """``reading``'s goal against the truth before (``start``, for kept objects) and after
    (``end``) the run, and against the fresh ``check`` (:func:`final_check`)."""
    before = truth_locations(start)
    moves = bool(reading.goals)

    def witness(locations: Any, held: Any, at_home: Any, problems: list[str]
                ) -> tuple[bool, list[str]]:
        # one witness (the fresh check or the truth): the goal holds, nothing held, arm home
        ok, lines = goal_holds(reading, locations, before)
        if held:
            problems.append(f"still held: {held}")
        if moves and not at_home:
            problems.append("the arm is not home")
        return ok and not problems, lines + problems

    v_ok, v_lines = witness(check_locations(check), check.get("held"), check.get("arm_at_home"),
                            [] if check.get("finished") else
                            [f"verify_state: {check.get('reason', 'did not finish')}"])
    t_ok, t_lines = witness(truth_locations(end), end.get("held"), end.get("at_home"), [])
    return Judgement(v_ok, t_ok, v_lines, t_lines)


__all__ = ["Judgement", "check_locations", "final_check", "judge", "truth_locations"]
