"""Routing benchmark: operator messages routed by meaning, against a labelled table.

Each row of :data:`TABLE` is an operator message said while :data:`SCENE` runs (a pick of the
paper, a place of the cup, a wait), labelled with its strategy (interrupt: stop what runs
now; queue: wait for the current step; parallel: answer an unrelated quick question on the
side) and the actions a correct router stops.  The rows are in English and Hungarian and hold
the textbook case of each strategy ("Azonnal állj le!", "Milyen idő lesz ma?", "Küldd el a
jelentést kínaiul", "Mégse", "Stop! Rosszul mondtam") and the hard cases a keyword router
gets wrong ("don't stop now, keep going", "cancel the paper pick but keep the cup", "Stop by
the bin after the cup", "Watch out, a person is reaching in!").

Rows, measured in the same run on the same table:

* kind accuracy: the share of rows routed to the labelled strategy, by the product's offline
  router (routing by meaning), against the regular-expression router it replaced (baseline);
* stop-scope accuracy: the share of rows whose set of stopped actions is the labelled one
  (nothing for a message that stops nothing, every running action for "stop", only the paper
  pick for "cancel the paper pick but keep the cup"), the same two routers.

``test/core/test_routing_table.py`` asserts that every row routes right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.events import Event
from ..core.routing import REGEX_RULES, RouteContext, RouteDecision, Router, RunningAction

SCENE = (RunningAction("a1", "pick_object", "Pick up the crumpled paper", '{"point": [210, 140]}'),
         RunningAction("a2", "place_object", "Put the red cup on the tray",
                       '{"point": [420, 300]}'),
         RunningAction("a3", "wait", "Wait for the tray to be clear", '{"seconds": 20}'))
ALL = ("a1", "a2", "a3")
NONE: tuple[str, ...] = ()
CONTEXT = RouteContext(active=True, busy=True, task="tidy the table: paper in the bin, cup on "
                       "the tray", running=tuple(f"{a.action_id} {a.tool} (2.0 s)"
                                                 for a in SCENE), actions=SCENE)


@dataclass(frozen=True)
class Row:
    text: str
    kind: str  # interrupt | queue | parallel
    stops: tuple[str, ...] = NONE  # the action ids a correct router stops
    lang: str = "en"


INT, Q, P = "interrupt", "queue", "parallel"
TABLE: tuple[Row, ...] = (
    # stops of everything
    Row("stop!", INT, ALL), Row("stop", INT, ALL), Row("please stop now", INT, ALL),
    Row("Cancel", INT, ALL), Row("halt, halt!", INT, ALL), Row("enough, that's enough", INT, ALL),
    Row("Stop! I said it wrong", INT, ALL),
    # negated, deferred and errand "stops": nothing stops
    Row("don't stop now, keep going", Q), Row("don't stop believing, put the cup on the tray", Q),
    Row("no need to stop, you're doing fine", Q), Row("Stop by the bin after the cup", Q),
    Row("stop once the cup is on the tray", Q),
    Row("when you're done with the cup, stop", Q),
    # scoped stops
    Row("cancel the paper pick but keep the cup", INT, ("a1",)),
    Row("stop picking the paper", INT, ("a1",)),
    Row("stop the cup, leave the paper alone", INT, ("a2",)),
    Row("stop everything except the cup", INT, ("a1", "a3")),
    Row("cancel the wait", INT, ("a3",)),
    # safety warnings
    Row("Watch out, a person is reaching in!", INT, ALL),
    Row("Careful! There's a hand in there", INT, ALL), Row("look out!", INT, ALL),
    # waits and corrections: interrupt, nothing stops
    Row("wait", INT), Row("Wait, first check tomorrow's weather", INT),
    Row("hold on a second", INT),
    Row("No, the other cup", INT), Row("actually, use the blue bin instead", INT),
    # side questions
    Row("what time is it?", P), Row("how are you today?", P),
    Row("how far along is the pick?", P), Row("where is the cup now?", P),
    # additions and instructions for later
    Row("answer in Japanese", Q), Row("format it as a web page", Q), Row("keep waiting", Q),
    Row("after that, put the paper in the bin too", Q),
    Row("wait for the tray to be empty before placing", Q),
    Row("Can you put the cup on the tray?", Q), Row("Be careful with the cup, it's fragile", Q),
    Row("nobody is reaching in, carry on", Q),
    # Hungarian
    Row("Azonnal állj le!", INT, ALL, "hu"), Row("állj", INT, ALL, "hu"),
    Row("Állj meg!", INT, ALL, "hu"), Row("Mégse", INT, ALL, "hu"),
    Row("Hagyd abba!", INT, ALL, "hu"), Row("Stop! Rosszul mondtam", INT, ALL, "hu"),
    Row("ne állj meg, folytasd", Q, NONE, "hu"), Row("nem kell megállni", Q, NONE, "hu"),
    Row("ha végeztél a pohárral, állj meg", Q, NONE, "hu"),
    Row("állítsd le a papír felvételét, de a poharat hagyd", INT, ("a1",), "hu"),
    Row("Vigyázz, valaki benyúl!", INT, ALL, "hu"),
    Row("várj", INT, NONE, "hu"), Row("Várj egy pillanatot!", INT, NONE, "hu"),
    Row("Nem, a másik poharat", INT, NONE, "hu"),
    Row("Hány óra van?", P, NONE, "hu"), Row("Milyen idő lesz ma?", P, NONE, "hu"),
    Row("Hol tartasz?", P, NONE, "hu"), Row("Mit csinálsz most?", P, NONE, "hu"),
    Row("Küldd el a jelentést kínaiul", Q, NONE, "hu"),
    Row("Utána tedd a poharat a tálcára", Q, NONE, "hu"),
    Row("Várj, amíg a tálca üres lesz", Q, NONE, "hu"),
    Row("vigyázz a pohárral", Q, NONE, "hu"),
)


def message(text: str) -> Event:
    return Event("user", "chat", text, {"by": "user"}, "queue", "message")


def stopped(d: RouteDecision, running: Sequence[str] = ALL) -> tuple[str, ...]:
    """The actions a decision stops, of ``running``."""
    return tuple(a for a in running if d.stops(a))


@dataclass(frozen=True)
class Score:
    rows: int
    kind_right: int
    scope_right: int
    wrong: tuple[str, ...]  # "text: got kind / stops"

    @property
    def kind_accuracy(self) -> float:
        return self.kind_right / self.rows if self.rows else 0.0

    @property
    def scope_accuracy(self) -> float:
        return self.scope_right / self.rows if self.rows else 0.0


def score(router: Router, table: Sequence[Row] = TABLE) -> Score:
    """How ``router`` (rules only: no model call) routes every row."""
    kind = scope = 0
    wrong = []
    for row in table:
        d = router.route(message(row.text), CONTEXT)
        if d is None:
            raise ValueError("score() needs a rules-only router (this one asks a model)")
        got = stopped(d)
        kind += d.urgency == row.kind
        scope += set(got) == set(row.stops)
        if d.urgency != row.kind or set(got) != set(row.stops):
            wrong.append(f"{row.text}: {d.urgency} / stops {', '.join(got) or 'nothing'}")
    return Score(len(table), kind, scope, tuple(wrong))


def regex_router() -> Router:
    """The router before routing by meaning: the baseline."""
    return Router(rules=REGEX_RULES, meaning=False)


def run(quick: bool = False) -> list[dict[str, Any]]:
    del quick  # the table is small: always all of it
    new, old = score(Router()), score(regex_router())
    n = new.rows
    langs = f"{sum(r.lang == 'en' for r in TABLE)} English, {sum(r.lang == 'hu' for r in TABLE)}" \
            " Hungarian"
    return [
        {"name": f"operator messages routed to the right strategy ({n} labelled)",
         "value": 100.0 * new.kind_accuracy, "unit": "%", "baseline": 100.0 * old.kind_accuracy,
         "note": f"baseline: the regular-expression router; {langs}"},
        {"name": f"stop scope right: exactly the named actions stop ({n} labelled)",
         "value": 100.0 * new.scope_accuracy, "unit": "%",
         "baseline": 100.0 * old.scope_accuracy,
         "note": "baseline: the regular-expression router (a stop stops every action)"},
    ]


if __name__ == "__main__":  # pragma: no cover
    from . import format_table

    print(format_table({"suite": "routing", **r} for r in run()))
