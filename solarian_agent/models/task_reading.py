"""Reading a tidy-up task the way the offline planner understands it (and the demo judges it).

:func:`read_task` turns the operator's whole text (every line, every clause) into a
:class:`TaskReading`:

* ``goals`` — (object, receptacle) in the order given: "put the red cup on the tray and the
  yellow paper in the bin", "bin the paper", "throw the paper away", "put away the cup" (its
  usual place), "tidy the table" (every object to its usual place).  A clause without a verb
  takes the previous clause's verb, and its negation ("don't put the cup on the tray or the
  paper in the bin" declines both).
* ``keep`` — objects that must stay as they are ("leave the cup alone", "leave everything as
  it is", "don't touch anything"; ``keep_all``: every object no goal names).
* ``declined`` — what the task asks *not* to do, answered, never acted on.
* ``questions`` — things named that are not on this table ("the blue cup" where the cup is
  red, "the bottle"): a question for the user, never a substitute.
* ``impossible`` — requests that cannot be done here (pick up the tray, put the cup in the
  sink, on the paper).

Objects are matched by their colours and kinds (:data:`OBJECTS`); the table holds a red cup, a
yellow paper ball, a tray and a bin (the tidy-up task's tabletop).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# scene name -> (colour, kinds: the longest phrases first)
OBJECTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "red_cup": ("red", ("cup", "mug")),
    "yellow_paper": ("yellow", ("crumpled paper", "paper ball", "paper wad", "paper", "ball",
                                "wad")),
}
RECEPTACLES: dict[str, tuple[str, ...]] = {
    "tray": ("tray",),
    "bin": ("rubbish bin", "waste bin", "trash can", "garbage can", "wastebasket",
            "waste basket", "dustbin", "bin", "trash", "garbage", "rubbish", "basket"),
}
GOALS: dict[str, str] = {"red_cup": "tray", "yellow_paper": "bin"}
COLOURS = ("red", "yellow", "blue", "green", "black", "white", "orange", "purple", "pink",
           "grey", "gray", "brown")
# things a task may name that this table does not have
OTHER_KINDS = ("bottle", "can", "box", "spoon", "fork", "knife", "plate", "book", "pen",
               "pencil", "phone", "apple", "banana", "glass", "bowl", "toy", "block", "cube",
               "sponge", "towel", "key", "keys", "lid", "napkin", "bag", "jar", "bucket")
OTHER_PLACES = ("sink", "shelf", "floor", "window", "drawer", "cupboard", "fridge", "ceiling",
                "chair", "counter", "box", "bag", "pocket", "bucket", "cup", "mug", "paper")
EVERYTHING = ("everything", "every thing", "all of it", "all things", "things", "stuff",
              "the table", "table", "all", "anything", "the desk", "desk", "objects")

_PUT_VERBS = ("put", "place", "move", "drop", "throw", "bring", "toss", "set", "carry",
              "take", "stick", "get", "lay")
_NEG = re.compile(r"^(?:please\s+)?(?:(?:do\s+not|don'?t|never|no\s+need\s+to|not)\s+)",
                  re.I)
_SENTENCES = re.compile(r"[\n;.!?]+")
_CLAUSES = re.compile(r"\s*(,|\band then\b|\bthen\b|\band\b|\bbut\b|\bor\b|\bnor\b)\s*", re.I)
_ORDER_WORDS = re.compile(r"\b(?:then|first|finally|after that|afterwards|next)\b", re.I)
_PREP = re.compile(r"^(?P<obj>.+?)\s+(?:on top of|onto|into|inside|in|on|to|at|over)\s+"
                   r"(?P<dest>.+)$", re.I)
_FILLER = re.compile(r"^(?:please|now|first|finally|also|next|afterwards|and|then|just|"
                     r"kindly|could you|can you|would you)\s+", re.I)


@dataclass(frozen=True)
class TaskReading:
    goals: tuple[tuple[str, str], ...] = ()
    keep: tuple[str, ...] = ()
    keep_all: bool = False
    declined: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()
    impossible: tuple[str, ...] = ()
    # the goals' order was asked for ("then", "first", another sentence or line): a planner
    # keeps it; otherwise it may choose the order
    ordered: bool = False

    @property
    def understood(self) -> bool:
        return bool(self.goals or self.keep or self.keep_all or self.declined
                    or self.questions or self.impossible)

    def kept(self) -> tuple[str, ...]:
        """Objects that must stay where they are."""
        if self.keep_all:
            moved = {o for o, _ in self.goals}
            return tuple(o for o in OBJECTS if o not in moved)
        return self.keep

    def as_dict(self) -> dict[str, Any]:
        return {"goals": [list(g) for g in self.goals], "keep": list(self.kept()),
                "declined": list(self.declined), "questions": list(self.questions),
                "impossible": list(self.impossible)}


def label(name: str) -> str:
    return name.replace("_", " ")


def _words(phrase: str) -> str:
    return " " + " ".join(re.findall(r"[a-z']+", phrase.lower())) + " "


def _has(text: str, phrase: str) -> bool:
    return f" {phrase} " in text


@dataclass(frozen=True)
class Thing:
    """What a noun phrase names: an object or receptacle of this table (``name``), every
    object (``kind == "all"``), or something this table does not have (``missing``)."""

    kind: str  # object | receptacle | all | missing | none
    name: str = ""
    missing: str = ""


def resolve(phrase: str) -> Thing:
    """The thing a phrase names, by colour and kind."""
    w = _words(phrase)
    colour = next((c for c in COLOURS if _has(w, c)), None)
    for name, words in RECEPTACLES.items():
        if any(_has(w, k) for k in words):
            return Thing("receptacle", name)
    kinds = {name: next((k for k in ks if _has(w, k)), None)
             for name, (_, ks) in OBJECTS.items()}
    named = [n for n, k in kinds.items() if k is not None]
    if named:
        if colour is None:
            return Thing("object", named[0])
        same = [n for n in named if OBJECTS[n][0] == colour]
        if same:
            return Thing("object", same[0])
        n = named[0]
        return Thing("missing", missing=f"There is no {colour} {kinds[n]} on the table (I see "
                                        f"a {label(n)}).")
    other = next((k for k in OTHER_KINDS if _has(w, k)), None)
    if other is not None:
        what = f"{colour} {other}" if colour else other
        return Thing("missing", missing=f"There is no {what} on the table (I see a red cup, "
                                        "a yellow paper ball, a tray and a bin).")
    if colour is not None:
        same = [n for n, (c, _) in OBJECTS.items() if c == colour]
        if same:
            return Thing("object", same[0])
        return Thing("missing", missing=f"There is nothing {colour} on the table to move.")
    if any(_has(w, e) for e in EVERYTHING):
        return Thing("all")
    return Thing("none")


def _place_word(dest: str) -> str:
    return "on the tray" if dest == "tray" else f"in the {dest}"


class _Reader:
    def __init__(self) -> None:
        self.goals: list[tuple[str, str]] = []
        self.keep: list[str] = []
        self.keep_all = False
        self.declined: list[str] = []
        self.questions: list[str] = []
        self.impossible: list[str] = []

    def add(self, lst: list[str], text: str) -> None:
        if text not in lst:
            lst.append(text)

    def objects_of(self, phrase: str) -> list[str] | None:
        """The objects a phrase names (None: nothing recognised, or a question noted)."""
        t = resolve(phrase)
        if t.kind == "object":
            return [t.name]
        if t.kind == "all":
            return list(OBJECTS)
        if t.kind == "missing":
            self.add(self.questions, t.missing)
        elif t.kind == "receptacle":
            self.add(self.impossible, f"I cannot pick up the {t.name}: only the red cup and the "
                                      "yellow paper can be moved.")
        return None

    def goal(self, obj_phrase: str, dest: str | None, negated: bool, clause: str) -> None:
        objs = self.objects_of(obj_phrase)
        if objs is None:
            return
        for o in objs:
            d = dest or GOALS[o]
            if negated:
                self.add(self.declined, f"you asked me not to put the {label(o)} "
                                        f"{_place_word(d)}")
                self.goals = [g for g in self.goals if g != (o, d)]
                self.add(self.keep, o)
                continue
            if any(g[0] == o and g[1] != d for g in self.goals):
                self.add(self.impossible, f"The {label(o)} cannot go both "
                         f"{_place_word(next(g[1] for g in self.goals if g[0] == o))} and "
                         f"{_place_word(d)}.")
                continue
            if (o, d) not in self.goals and o not in self.keep:
                self.goals.append((o, d))

    def destination(self, phrase: str) -> str | None:
        """A receptacle; None after noting why the place is not one (``""``: the table)."""
        t = resolve(phrase)
        if t.kind == "receptacle":
            return t.name
        w = _words(phrase)
        if _has(w, "table") or _has(w, "desk"):
            return ""
        if t.kind == "object":
            self.add(self.impossible, f"I can only put things on the tray or in the bin, not "
                                      f"on the {label(t.name)}.")
            return None
        place = next((p for p in OTHER_PLACES if _has(w, p)), None)
        shown = place or phrase.strip()
        self.add(self.impossible, f"There is no {shown} here: I can put things on the tray or "
                                  "in the bin.")
        return None

    def clause(self, text: str, verb: tuple[str, bool] | None) -> tuple[str, bool] | None:
        """Read one clause; returns the verb (and negation) a following verbless clause
        inherits."""
        c = text.strip()
        while True:
            m = _FILLER.match(c)
            if not m:
                break
            c = c[m.end():]
        neg_m = _NEG.match(c)
        negated = bool(neg_m)
        if neg_m:
            c = c[neg_m.end():]
        low = c.lower()
        if not c:
            return verb
        # leave / keep: the object (or everything) stays as it is
        m = re.match(r"^(?:leave|keep)\s+(?P<what>.+?)(?:\s+(?:as (?:it is|they are)|alone|"
                     r"where (?:it is|they are)|untouched|in place|be|on the table))?$", low)
        if m or re.match(r"^(?:touch|move|change)\s+", low) and negated:
            what = m.group("what") if m else re.sub(r"^\w+\s+", "", low)
            t = resolve(what)
            if t.kind == "all" or _has(_words(what), "everything") or not what.strip():
                self.keep_all = True
            elif t.kind == "object":
                self.add(self.keep, t.name)
                self.goals = [g for g in self.goals if g[0] != t.name]
            elif t.kind == "missing":
                self.add(self.questions, t.missing)
            else:
                self.keep_all = True
            if negated and not m:
                self.add(self.declined, "you asked me not to touch anything")
            return None
        # "bin the paper", "throw the paper away", "get rid of the paper", "trash it"
        m = re.match(r"^(?:bin|trash|discard|dispose of|get rid of|throw away|throw out|toss "
                     r"out|chuck)\s+(?P<obj>.+)$", low) or \
            re.match(r"^(?:throw|toss|chuck)\s+(?P<obj>.+?)\s+(?:away|out)$", low)
        if m:
            self.goal(m.group("obj"), "bin", negated, c)
            return ("bin", negated)
        # "put away the cup", "tidy up the cup", "tidy the table", "clean up"
        m = re.match(r"^(?:put away|clear away|tidy up|tidy|clean up|clean|clear up|clear|"
                     r"sort out|sort)\s*(?P<obj>.*)$", low) or \
            re.match(r"^(?:put)\s+(?P<obj>.+?)\s+away$", low)
        if m:
            self.goal(m.group("obj") or "everything", None, negated, c)
            return ("away", negated)
        # check / look / verify: the planner checks at the end anyway
        if re.match(r"^(?:check|look|verify|inspect|make sure|see)\b", low):
            return None
        verb_m = re.match(rf"^(?:{'|'.join(_PUT_VERBS)})\s+", low)
        body = c[verb_m.end():] if verb_m else c
        if verb_m is None and verb is not None:
            kind, vneg = verb
            negated = negated or vneg
            if kind in ("bin", "away") and resolve(body).kind in ("object", "all", "missing"):
                self.goal(body, "bin" if kind == "bin" else None, negated, c)
                return verb
        m = _PREP.match(body)
        if m and (verb_m is not None or verb is not None):
            dest = self.destination(m.group("dest"))
            if dest == "":
                objs = self.objects_of(m.group("obj"))
                for o in objs or []:
                    self.add(self.keep, o)
            elif dest is not None:
                self.goal(m.group("obj"), dest, negated, c)
            return ("put", negated)
        if verb_m is not None or verb is not None:
            t = resolve(body)
            if t.kind == "missing":
                self.add(self.questions, t.missing)
        return verb if verb_m is None else ("put", negated)

    def reading(self) -> TaskReading:
        return TaskReading(tuple(self.goals), tuple(self.keep), self.keep_all,
                           tuple(self.declined), tuple(self.questions), tuple(self.impossible))


def read_task(text: str) -> TaskReading:
    """Read every line and clause of a task (see the module docstring)."""
    r = _Reader()
    ordered = False
    for sentence in _SENTENCES.split(text):
        verb: tuple[str, bool] | None = None
        parts = _CLAUSES.split(sentence)
        sep = "."  # a new sentence or line
        for i, clause in enumerate(parts):
            if i % 2:  # a separator
                sep = clause
                continue
            if not clause or not clause.strip():
                continue
            before = len(r.goals)
            verb = r.clause(clause, verb)
            if len(r.goals) > before and before and (
                    sep == "." or _ORDER_WORDS.search(f"{sep} {clause}")):
                ordered = True
    reading = r.reading()
    return TaskReading(reading.goals, reading.keep, reading.keep_all, reading.declined,
                       reading.questions, reading.impossible, ordered)


def goal_holds(reading: TaskReading, locations: Mapping[str, str],
               start: Mapping[str, str] | None = None) -> tuple[bool, list[str]]:
    """Whether ``reading``'s goal holds for objects at ``locations`` (name -> table | tray |
    bin | held | floor | not_seen); kept objects must be where they were (``start``).  A task
    with questions or requests that cannot be done never holds.  Returns the verdict and one
    line per thing checked."""
    lines: list[str] = []
    ok = True
    for o, d in reading.goals:
        where = locations.get(o, "not_seen")
        good = where == d
        ok &= good
        lines.append(f"{label(o)} {_place_word(d)}: {'yes' if good else f'no ({where})'}")
    for o in reading.kept():
        before = (start or {}).get(o, "table")
        where = locations.get(o, "not_seen")
        good = where == before
        ok &= good
        lines.append(f"{label(o)} left as it was ({before}): "
                     f"{'yes' if good else f'no ({where})'}")
    for q in (*reading.questions, *reading.impossible):
        ok = False
        lines.append(f"not done: {q}")
    if not reading.understood:
        ok = False
        lines.append("the task was not understood")
    return ok, lines


__all__ = ["GOALS", "OBJECTS", "RECEPTACLES", "TaskReading", "Thing", "goal_holds", "label",
           "read_task", "resolve"]
