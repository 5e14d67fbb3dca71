"""The monitor's verdicts: the answers of a tick fed through each question's rules
(:class:`~.monitor_rules.RuleState`), and the ``check_agent_action`` tripwires, published as
:class:`~.messages.MonitorVerdict` on ``monitor/verdicts``: one per answered question per tick
(``decision`` empty unless a rule fired), escalations, then at most one finish / fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from . import names
from .messages import MonitorVerdict
from .monitor_rules import DECISIONS, TRIPWIRE_QUESTION, QuestionSpec, Rule
from .transport import QoS
from .vision import MonitorAnswer

if TYPE_CHECKING:
    from .monitor import MonitorEngine, WatchedAction
    from .monitor_calls import TickCall

# (action_id, tool, elapsed_s) -> None or (decision, reason) or (decision, reason, then_tool)
Tripwire = Callable[[str, str, float], "tuple[str, ...] | None"]


class VerdictPublisher:
    """Judges answers by the rules, runs the tripwires and publishes the verdicts.
    ``self.e``: the engine."""

    def __init__(self, engine: MonitorEngine, node: str) -> None:
        self.e = engine
        self.pub = engine.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                                        QoS(depth=100), node=node)

    def tripwire(self, act: WatchedAction, elapsed: float) -> None:
        if self.e.check_agent_action is None:
            return
        try:
            res = self.e.check_agent_action(act.action_id, act.tool, elapsed)
        except Exception as e:
            self.e.errors += 1
            self.e.log_event("monitor_error", action_id=act.action_id,
                             error=f"check_agent_action raised {type(e).__name__}: {e}")
            return
        if res is None:
            return
        if (not isinstance(res, tuple) or len(res) not in (2, 3) or res[0] not in DECISIONS
                or not isinstance(res[1], str)):
            self.e.errors += 1
            self.e.log_event("monitor_error", action_id=act.action_id,
                             error="check_agent_action must return None or "
                                   f"(finish|fail|escalate, reason[, tool]), got {res!r}")
            return
        decision, reason = str(res[0]), str(res[1])
        then = str(res[2]) if len(res) == 3 and res[2] else ""
        if then and (decision == "escalate" or then not in self.e.tools):
            why = ("escalate starts no tool" if decision == "escalate"
                   else f"{then!r} names no tool")
            self.e.log_event("monitor_error", action_id=act.action_id,
                             error=f"check_agent_action's follow-up dropped: {why}")
            then = ""
        if decision == "escalate":
            if act.tripwire_escalated:
                return
            act.tripwire_escalated = True
        else:
            act.concluded = decision
        self.publish(MonitorVerdict(act.action_id, act.tool, TRIPWIRE_QUESTION, decision, 1.0,
                                    decision, reason, self.e.clock.now(), then, "controller",
                                    act.generation))

    def judge(self, act: WatchedAction, call: TickCall, answers: Mapping[str, MonitorAnswer]
              ) -> list[dict[str, Any]]:
        now = self.e.clock.now()
        plain: list[MonitorVerdict] = []
        escalations: list[MonitorVerdict] = []
        terminal: MonitorVerdict | None = None
        asked = {q.name for q in call.request.questions}
        for spec in act.questions:
            if spec.name not in asked:
                continue
            ans = answers.get(spec.name)
            state = act.states[spec.name]
            fired = state.feed(ans, call.elapsed_s)
            if ans is None:
                continue
            decided: MonitorVerdict | None = None
            for rule, run in fired:
                reason = self.reason(spec, rule, ans, run)
                v = MonitorVerdict(act.action_id, act.tool, spec.name, ans.value,
                                   ans.probability, rule.do, reason, now, rule.then, "monitor",
                                   act.generation)
                if rule.do == "escalate":
                    escalations.append(v)
                    decided = decided or v
                elif terminal is None:
                    terminal = v
                    decided = v
            if decided is None:
                plain.append(MonitorVerdict(act.action_id, act.tool, spec.name, ans.value,
                                            ans.probability, "", ans.reason, now, "",
                                            "monitor", act.generation))
        out = []
        for v in [*plain, *escalations, *([terminal] if terminal else [])]:
            self.publish(v)
            out.append({"question": v.question, "value": v.value,
                        "probability": round(v.probability, 4), "decision": v.decision,
                        "then": v.then, "reason": v.reason})
        if terminal is not None:
            act.concluded = terminal.decision
        return out

    @staticmethod
    def reason(spec: QuestionSpec, rule: Rule, ans: MonitorAnswer, run: int) -> str:
        what = (f"watch_for condition {spec.watch_for!r} holds" if spec.watch_for
                else f"{spec.name} = {ans.value}")
        ticks = f" on {run} ticks in a row" if rule.consecutive > 1 else ""
        text = f"{what} (p={ans.probability:.2f}){ticks}"
        return f"{text}: {ans.reason}" if ans.reason else text

    def publish(self, v: MonitorVerdict) -> None:
        self.e.verdicts_published += 1
        self.pub.publish(v)
