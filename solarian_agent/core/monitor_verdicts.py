"""The monitor's verdicts: the answers of a tick fed through each question's rules
(:class:`~.monitor_rules.RuleState`), and the ``check_agent_action`` tripwires, published as
:class:`~.messages.MonitorVerdict` on ``monitor/verdicts``: one per answered question per tick
(``decision`` empty unless a rule fired), escalations, then at most one finish / fail, which
concludes the action (nothing more is judged for it).

What a tick's answers or a tripwire's result decide is worked out by pure functions
(:func:`decide`, :func:`read_tripwire`); :class:`MonitorVerdicts` keeps each action's rule
states and applies the decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import event_types as et
from . import names
from .clock import Clock
from .messages import MonitorVerdict
from .monitor_log import MonitorLog
from .monitor_rules import DECISIONS, TRIPWIRE_QUESTION, QuestionSpec, Rule, RuleState
from .monitor_watch import WatchedAction
from .transport import Bus, QoS
from .vision import MonitorAnswer

# (action_id, tool, elapsed_s) -> None or (decision, reason) or (decision, reason, then_tool)
Tripwire = Callable[[str, str, float], "tuple[str, ...] | None"]

# one asked question on one tick: its spec, its answer (None: not answered) and the rules that
# fired, with their run lengths
Fed = tuple[QuestionSpec, "MonitorAnswer | None", "list[tuple[Rule, int]]"]


@dataclass(frozen=True)
class Judgement:
    """What one tick's answers decide: the verdicts in publishing order (plain answers,
    escalations, then the one finish / fail) and the action's conclusion ("" if none)."""

    verdicts: tuple[MonitorVerdict, ...]
    concluded: str


def reason(spec: QuestionSpec, rule: Rule, ans: MonitorAnswer, run: int) -> str:
    """Why a rule fired, in the planner's words."""
    what = (f"watch_for condition {spec.watch_for!r} holds" if spec.watch_for
            else f"{spec.name} = {ans.value}")
    ticks = f" on {run} ticks in a row" if rule.consecutive > 1 else ""
    text = f"{what} (p={ans.probability:.2f}){ticks}"
    return f"{text}: {ans.reason}" if ans.reason else text


def decide(act: WatchedAction, fed: Sequence[Fed], now: float) -> Judgement:
    """The verdicts of one tick.  An answered question with no rule fired is a plain verdict;
    every escalation is published; only the first finish / fail counts, since an action is
    concluded once (a later one on the same tick would contradict it)."""
    plain: list[MonitorVerdict] = []
    escalations: list[MonitorVerdict] = []
    terminal: MonitorVerdict | None = None
    for spec, ans, fired in fed:
        if ans is None:
            continue
        decided = False
        for rule, run in fired:
            v = MonitorVerdict(act.action_id, act.tool, spec.name, ans.value, ans.probability,
                               rule.do, reason(spec, rule, ans, run), now, rule.then,
                               "monitor", act.generation)
            if rule.do == "escalate":
                escalations.append(v)
                decided = True
            elif terminal is None:
                terminal = v
                decided = True
        if not decided:
            plain.append(MonitorVerdict(act.action_id, act.tool, spec.name, ans.value,
                                        ans.probability, "", ans.reason, now, "", "monitor",
                                        act.generation))
    out = (*plain, *escalations, *([terminal] if terminal else []))
    return Judgement(out, terminal.decision if terminal else "")


def verdict_record(v: MonitorVerdict) -> dict[str, Any]:
    """What the ``monitor_tick`` event records of one verdict."""
    return {"question": v.question, "value": v.value, "probability": round(v.probability, 4),
            "decision": v.decision, "then": v.then, "reason": v.reason}


@dataclass(frozen=True)
class TripwireCall:
    """What a tripwire's result means.  ``error``: the result is malformed (nothing is
    published); ``dropped``: why its follow-up tool was dropped (the verdict still stands)."""

    decision: str = ""
    reason: str = ""
    then: str = ""
    error: str = ""
    dropped: str = ""


def read_tripwire(res: Any, is_tool: Callable[[str], bool]) -> TripwireCall | None:
    """A tripwire's result read: None when it flagged nothing.  A follow-up is dropped when
    it names no tool, and after an escalation, which leaves the next step to the planner."""
    if res is None:
        return None
    if (not isinstance(res, tuple) or len(res) not in (2, 3) or res[0] not in DECISIONS
            or not isinstance(res[1], str)):
        return TripwireCall(error="check_agent_action must return None or "
                                  f"(finish|fail|escalate, reason[, tool]), got {res!r}")
    decision, why = str(res[0]), str(res[1])
    then = str(res[2]) if len(res) == 3 and res[2] else ""
    dropped = ""
    if then and (decision == "escalate" or not is_tool(then)):
        dropped = ("escalate starts no tool" if decision == "escalate"
                   else f"{then!r} names no tool")
        then = ""
    return TripwireCall(decision, why, then, dropped=dropped)


class VerdictPublisher:
    """Publishes verdicts on ``monitor/verdicts`` and counts them."""

    def __init__(self, bus: Bus, node: str) -> None:
        self._pub = bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                                  QoS(depth=100), node=node)
        self.published = 0

    def publish(self, v: MonitorVerdict) -> None:
        self.published += 1
        self._pub.publish(v)


@dataclass
class ActionVerdicts:
    """One action's rule states, whether a tripwire escalated it (once per action) and its
    conclusion (finish / fail, "" while it runs)."""

    states: dict[str, RuleState]
    tripwire_escalated: bool = False
    concluded: str = ""


class MonitorVerdicts:
    """Judges each watched action's answers by its rules and runs the tripwires."""

    def __init__(self, publisher: VerdictPublisher, clock: Clock, log: MonitorLog, *,
                 tripwire: Tripwire | None, has_tool: Callable[[str], bool]) -> None:
        self._publisher = publisher
        self._clock = clock
        self._log = log
        self._tripwire = tripwire
        self._has_tool = has_tool
        self._actions: dict[str, ActionVerdicts] = {}

    @property
    def published(self) -> int:
        return self._publisher.published

    def watch(self, act: WatchedAction) -> None:
        self._actions[act.action_id] = ActionVerdicts({q.name: RuleState(q)
                                                       for q in act.questions})

    def forget(self, action_id: str) -> None:
        self._actions.pop(action_id, None)

    def concluded(self, action_id: str) -> str:
        """The action's finish / fail ("" while it runs, and for an action not watched)."""
        a = self._actions.get(action_id)
        return a.concluded if a is not None else ""

    def tripwire(self, act: WatchedAction, elapsed_s: float) -> None:
        """Ask ``check_agent_action`` about the action; publish what it flags."""
        if self._tripwire is None:
            return
        try:
            res = self._tripwire(act.action_id, act.tool, elapsed_s)
        except Exception as e:
            self._log.error(et.MonitorError(action_id=act.action_id,
                            error=f"check_agent_action raised {type(e).__name__}: {e}"))
            return
        call = read_tripwire(res, self._has_tool)
        if call is None:
            return
        if call.error:
            self._log.error(et.MonitorError(action_id=act.action_id, error=call.error))
            return
        if call.dropped:
            self._log.event(et.MonitorError(action_id=act.action_id,
                            error=f"check_agent_action's follow-up dropped: {call.dropped}"))
        state = self._actions[act.action_id]
        if call.decision == "escalate":
            if state.tripwire_escalated:
                return
            state.tripwire_escalated = True
        else:
            state.concluded = call.decision
        self._publisher.publish(MonitorVerdict(
            act.action_id, act.tool, TRIPWIRE_QUESTION, call.decision, 1.0, call.decision,
            call.reason, self._clock.now(), call.then, "controller", act.generation))

    def judge(self, act: WatchedAction, asked: Collection[str], elapsed_s: float,
              answers: Mapping[str, MonitorAnswer]) -> list[dict[str, Any]]:
        """Feed the answers of the questions ``asked`` (at ``elapsed_s``) through their rules,
        publish the verdicts and conclude the action on a finish / fail; the verdicts' log
        records."""
        state = self._actions[act.action_id]
        now = self._clock.now()
        fed: list[Fed] = []
        for spec in act.questions:
            if spec.name in asked:
                ans = answers.get(spec.name)
                fed.append((spec, ans, state.states[spec.name].feed(ans, elapsed_s)))
        judgement = decide(act, fed, now)
        for v in judgement.verdicts:
            self._publisher.publish(v)
        if judgement.concluded:
            state.concluded = judgement.concluded
        return [verdict_record(v) for v in judgement.verdicts]
