"""What the monitor watches: the tool catalogue its questions come from, the skill events that
start and end actions (queued from any thread, handled on the tick), the actions watched and
the schedule of its ticks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import event_types as et
from .event_types import SkillEnded, SkillStarted
from .messages import Image
from .monitor_rules import WATCH_FOR_AFTER_S, QuestionSpec, check_catalogue, watch_for_questions

SKILL_STARTED = et.SkillStarted.KIND
SKILL_ENDED = et.SkillEnded.KIND


@dataclass(frozen=True)
class WatchedAction:
    """One running action as the monitor watches it: who started which tool with what, the
    questions asked about it and the camera frames from its start."""

    action_id: str
    tool: str
    generation: int
    started_at: float
    params: Mapping[str, Any]
    trackers: tuple[str, ...]
    watch_for: tuple[str, ...]
    by: str
    questions: tuple[QuestionSpec, ...]
    start_frames: Mapping[str, Image]


def watched_action(started: SkillStarted, t: float, frames: Mapping[str, Image],
                   questions: Mapping[str, tuple[QuestionSpec, ...]]) -> WatchedAction:
    """The action a ``skill_started`` event starts: its tool's questions, then one per
    ``watch_for`` condition (blank ones dropped)."""
    watch = tuple(str(w) for w in started.watch_for or () if str(w).strip())
    return WatchedAction(started.action_id, started.skill, int(started.generation), t,
                         dict(started.params or {}), tuple(started.trackers or ()), watch,
                         started.by or "agent",
                         questions.get(started.skill, ()) + watch_for_questions(watch),
                         dict(frames))


def active_questions(questions: Sequence[QuestionSpec], elapsed_s: float
                     ) -> tuple[QuestionSpec, ...]:
    """The questions asked at ``elapsed_s``: a ``watch_for`` condition only from
    :data:`WATCH_FOR_AFTER_S` into the action, so the action gets going before it is judged."""
    return tuple(q for q in questions
                 if not q.watch_for or elapsed_s + 1e-9 >= WATCH_FOR_AFTER_S)


class ToolCatalogue:
    """The tools and their monitor questions, validated when loaded (a ``then`` naming no tool
    raises :class:`~.monitor_rules.MonitorConfigError`).  ``fetch`` reads the catalogue (the
    ``skills/catalogue`` service) when it was not given."""

    def __init__(self, fetch: Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        self._fetch = fetch
        self._questions: dict[str, tuple[QuestionSpec, ...]] | None = None
        self._tools: set[str] = set()
        self._specs: dict[str, Mapping[str, Any]] = {}

    @property
    def loaded(self) -> bool:
        return self._questions is not None

    @property
    def questions(self) -> Mapping[str, tuple[QuestionSpec, ...]]:
        return self._questions or {}

    def load(self, catalogue: Sequence[Mapping[str, Any]]) -> None:
        questions = check_catalogue(catalogue)
        self._questions = questions
        self._tools = set(questions)
        self._specs = {str(d["name"]): d for d in catalogue}

    def fetch(self) -> None:
        """Read and validate the catalogue unless it is loaded (raises on a bad question)."""
        if self._questions is None:
            self.load(self._fetch())

    def give_up(self) -> None:
        """The catalogue could not be read: watch with no questions rather than retry on every
        action (the tripwires still run)."""
        self._questions = {}

    @property
    def tools(self) -> frozenset[str]:
        """The tools named in the catalogue (none until it is loaded)."""
        return frozenset(self._tools)

    def has_tool(self, name: str) -> bool:
        return name in self._tools

    def spec(self, tool: str) -> Mapping[str, Any] | None:
        return self._specs.get(tool)


@dataclass(frozen=True)
class SkillEvent:
    """A skill event as queued: the executor's start or end, when it arrived and, for a start,
    the cameras' latest frames then (the action's start frames)."""

    event: SkillStarted | SkillEnded
    t: float
    frames: Mapping[str, Image]


class SkillEventInbox:
    """Skill events arrive on any thread; they are only queued there and handled on the tick,
    which owns every other piece of the monitor's state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[SkillEvent] = []

    def put(self, event: SkillEvent) -> None:
        with self._lock:
            self._events.append(event)

    def take(self) -> list[SkillEvent]:
        with self._lock:
            events, self._events = self._events, []
        return events


class WatchList:
    """The actions being watched and how many ticks each has had.  An operator's action is
    watched only with ``watch_operator``."""

    def __init__(self, watch_operator: bool = False) -> None:
        self._watch_operator = watch_operator
        self.actions: dict[str, WatchedAction] = {}
        self._ticks: dict[str, int] = {}

    def watches(self, by: str) -> bool:
        return by == "agent" or self._watch_operator

    def add(self, act: WatchedAction) -> None:
        self.actions[act.action_id] = act
        self._ticks[act.action_id] = 0

    def remove(self, action_id: str) -> WatchedAction | None:
        self._ticks.pop(action_id, None)
        return self.actions.pop(action_id, None)

    def next_tick(self, action_id: str) -> int:
        """Count one more tick of the action; its number (1 for the first)."""
        n = self._ticks.get(action_id, 0) + 1
        self._ticks[action_id] = n
        return n

    def ids(self) -> Iterable[str]:
        return list(self.actions)


class TickSchedule:
    """The engine acts every ``period_s`` while actions run; the first action's tick is due at
    once, and the schedule restarts when nothing is watched."""

    def __init__(self, period_s: float) -> None:
        self._period_s = period_s
        self._next_due: float | None = None

    def due(self, now: float, watching: bool) -> bool:
        if not watching:
            self._next_due = None
            return False
        if self._next_due is not None and now + 1e-9 < self._next_due:
            return False
        self._next_due = now + self._period_s
        return True
