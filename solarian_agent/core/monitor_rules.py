"""The monitor's rule engine: a tool's ``monitor`` list parsed
into questions and ``when`` rules (validated at start-up, an invalid one named by its path),
``watch_for`` conditions as escalate questions, and the run of one question's rules over an
action's ticks (:class:`RuleState`, shared with the evaluation's per-pick replay).

Rules (``when``: one rule or a list): ``do`` finish | fail | escalate; ``value`` (a choice's
value; ``true``/``false`` for a predicate, default ``true``); ``threshold`` (a confidence floor:
an answer less sure does nothing — it neither counts nor breaks a run); ``consecutive`` (ticks in
a row the condition must hold, default 1); ``after_s`` (ticks before it do not count); ``then`` (a
tool started without arguments once the action stopped; a finish / fail rule only).
``escalate`` fires once per question and action.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .vision import MonitorAnswer, MonitorQuestion, question_from_dict

DECISIONS = ("finish", "fail", "escalate")
WATCH_FOR_AFTER_S = 6.0
TRIPWIRE_QUESTION = "check_agent_action"


class MonitorConfigError(ConfigError):
    """An invalid monitor question or rule, named by its path (``skills.pick.monitor[0]...``)."""


# -------------------------------------------------------------------------------------------
# rules
# -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    do: str
    value: str
    threshold: float | None = None
    consecutive: int = 1
    after_s: float = 0.0
    then: str = ""

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"do": self.do, "value": self.value}
        if self.threshold is not None:
            d["threshold"] = self.threshold
        if self.consecutive != 1:
            d["consecutive"] = self.consecutive
        if self.after_s:
            d["after_s"] = self.after_s
        if self.then:
            d["then"] = self.then
        return d


def floor(rules: Sequence[Rule], value: str) -> float | None:
    """The confidence floor an answer ``value`` must reach to be a finding: the threshold of
    the rules on that value (the lowest, where several), else the lowest of the question's
    rules; None where no rule sets one (a question only shown to the planner)."""
    mine = [r.threshold for r in rules if r.value == value and r.threshold is not None]
    alls = [r.threshold for r in rules if r.threshold is not None]
    return min(mine) if mine else (min(alls) if alls else None)


WATCH_FOR_RULE = Rule("escalate", "true", threshold=0.8, consecutive=2,
                      after_s=WATCH_FOR_AFTER_S)


@dataclass(frozen=True)
class QuestionSpec:
    question: MonitorQuestion
    rules: tuple[Rule, ...] = ()
    watch_for: str = ""  # the planner's condition, for watch_for questions

    @property
    def name(self) -> str:
        return self.question.name


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_rule(raw: Any, q: MonitorQuestion, path: str, tools: set[str] | None) -> Rule:
    if not isinstance(raw, Mapping):
        raise MonitorConfigError(path, f"a rule must be a mapping, got {type(raw).__name__}")
    allowed = {"do", "value", "threshold", "consecutive", "after_s", "then"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise MonitorConfigError(f"{path}.{unknown[0]}",
                                 f"unknown key; allowed: {', '.join(sorted(allowed))}")
    do = raw.get("do")
    if do not in DECISIONS:
        raise MonitorConfigError(f"{path}.do", f"must be one of {', '.join(DECISIONS)}, "
                                               f"got {do!r}")
    value = raw.get("value")
    if q.type == "predicate":
        if value is None:
            value = "true"
        if isinstance(value, bool):
            value = "true" if value else "false"
        if value not in ("true", "false"):
            raise MonitorConfigError(f"{path}.value", f"a predicate's value is true or false, "
                                                      f"got {value!r}")
    elif value not in q.values:
        raise MonitorConfigError(f"{path}.value", f"must be one of {', '.join(q.values)}, "
                                                  f"got {value!r}")
    thr = raw.get("threshold")
    if thr is not None and not (is_number(thr) and 0.0 <= float(thr) <= 1.0):
        raise MonitorConfigError(f"{path}.threshold", f"must be a number from 0 to 1, got {thr!r}")
    cons = raw.get("consecutive", 1)
    if isinstance(cons, bool) or not isinstance(cons, int) or cons < 1:
        raise MonitorConfigError(f"{path}.consecutive", f"must be an integer >= 1, got {cons!r}")
    after = raw.get("after_s", 0.0)
    if not (is_number(after) and float(after) >= 0):
        raise MonitorConfigError(f"{path}.after_s", f"must be a number >= 0, got {after!r}")
    then = raw.get("then") or ""
    if then:
        if not isinstance(then, str):
            raise MonitorConfigError(f"{path}.then", f"must name a tool, got {then!r}")
        if do == "escalate":
            raise MonitorConfigError(f"{path}.then", "only a finish or fail rule starts a tool "
                                                     "(escalate leaves the action running)")
        if tools is not None and then not in tools:
            raise MonitorConfigError(f"{path}.then", f"names no tool: {then!r}; tools: "
                                                     f"{', '.join(sorted(tools)) or 'none'}")
    return Rule(str(do), str(value), None if thr is None else float(thr), int(cons),
                float(after), str(then))


def parse_questions(tool: str, raw: Sequence[Any], tools: set[str] | None = None
                    ) -> tuple[QuestionSpec, ...]:
    """A tool's ``monitor`` list as question specs; raises :class:`MonitorConfigError`."""
    out: list[QuestionSpec] = []
    seen: set[str] = set()
    for i, qd in enumerate(raw):
        path = f"skills.{tool}.monitor[{i}]"
        if not isinstance(qd, Mapping):
            raise MonitorConfigError(path, f"a question must be a mapping, got "
                                           f"{type(qd).__name__}")
        unknown = sorted(set(qd) - {"name", "type", "instructions", "choices", "when",
                                    "camera"})
        if unknown:
            raise MonitorConfigError(f"{path}.{unknown[0]}", "unknown key; allowed: camera, "
                                     "choices, instructions, name, type, when")
        try:
            q = question_from_dict(qd)
        except ValueError as e:
            raise MonitorConfigError(path, str(e)) from None
        if q.name in seen:
            raise MonitorConfigError(f"{path}.name", f"question {q.name!r} appears twice")
        if q.name.startswith("watch_for_") or q.name == TRIPWIRE_QUESTION:
            raise MonitorConfigError(f"{path}.name", f"{q.name!r} is reserved")
        seen.add(q.name)
        when = qd.get("when")
        rules_raw: list[Any] = [] if when is None else (
            list(when) if isinstance(when, (list, tuple)) else [when])
        rules = tuple(parse_rule(r, q, f"{path}.when[{j}]" if isinstance(when, (list, tuple))
                                 else f"{path}.when", tools)
                      for j, r in enumerate(rules_raw))
        out.append(QuestionSpec(q, rules))
    return tuple(out)


def watch_for_questions(conditions: Sequence[str]) -> tuple[QuestionSpec, ...]:
    out = []
    for i, cond in enumerate(conditions, start=1):
        q = MonitorQuestion(f"watch_for_{i}", "predicate",
                            f"True when this holds: {cond.strip()}  (The planner added this "
                            "condition; it must stay false while the action goes as it "
                            "should.)")
        out.append(QuestionSpec(q, (WATCH_FOR_RULE,), cond.strip()))
    return tuple(out)


def check_catalogue(catalogue: Sequence[Mapping[str, Any]]
                    ) -> dict[str, tuple[QuestionSpec, ...]]:
    """Every tool's questions, validated against the catalogue's tool names (start-up)."""
    tools = {str(d.get("name")) for d in catalogue}
    return {str(d["name"]): parse_questions(str(d["name"]), list(d.get("monitor") or ()), tools)
            for d in catalogue}


# condition of one rule on one answer
MET, UNMET, BELOW_FLOOR, EARLY, NO_ANSWER = "met", "unmet", "below_floor", "early", "none"


def condition(rule: Rule, answer: MonitorAnswer | None, elapsed_s: float) -> str:
    # `<` or `<=` differ only when elapsed_s + 1e-9 equals after_s exactly, inside the
    # tolerance the 1e-9 is there for: an equivalent mutant (listed in pyproject.toml)
    if elapsed_s + 1e-9 < rule.after_s:
        return EARLY
    if answer is None:
        return NO_ANSWER
    if rule.threshold is not None and answer.probability < rule.threshold:
        return BELOW_FLOOR
    return MET if answer.value == rule.value else UNMET


@dataclass
class RuleState:
    """The run of one question's rules over an action's ticks (shared with the evaluation's
    per-pick replay, so both fire on the same tick)."""

    spec: QuestionSpec
    streaks: list[int] = field(default_factory=list)
    escalated: bool = False

    def __post_init__(self) -> None:
        self.streaks = [0] * len(self.spec.rules)

    def feed(self, answer: MonitorAnswer | None, elapsed_s: float) -> list[tuple[Rule, int]]:
        """Advance every rule by one tick; the rules that fire now, with their run length."""
        fired: list[tuple[Rule, int]] = []
        for i, rule in enumerate(self.spec.rules):
            c = condition(rule, answer, elapsed_s)
            if c == MET:
                self.streaks[i] += 1
            elif c in (UNMET, EARLY):
                self.streaks[i] = 0
            # below the floor, or no answer: does nothing; the next tick decides
            if self.streaks[i] >= rule.consecutive:
                if rule.do == "escalate":
                    if self.escalated:
                        continue
                    self.escalated = True
                fired.append((rule, self.streaks[i]))
        return fired
