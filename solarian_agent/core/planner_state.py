"""The planner's state, each piece with one owner:

* :class:`RunState`: the run (status, task, generation, budgets used) and its plan queue.  It is
  the only writer of a plan step: every part reads the plan through :class:`PlanReader`, so a
  step's status cannot change behind the queue's rules (retries, monitor failures, follow-ups);
* :class:`ActionBook`: the actions in flight, what the monitor decided about them, how they
  ended;
* :class:`MonitorNotes`: monitor answers without rules, shown to the planner, never acted on;
* :class:`Wakes`: what wakes the planner (reasons, news, held additions) and when (the plan
  hold, the heartbeat, an interrupt's urgency);
* :class:`Refusals`: the planner's refused calls in a row (a budget);
* :class:`ModelRetries`: the backoff and silence of a failing planner model;
* :class:`TurnSlot`: the turn in flight, its attention episode and the events deferred until
  its calls are answered;
* :class:`Transcript`: the model's messages and the conversation shown to people.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from .attention import AttentionEpisode
from .clock import Clock
from .events import Event
from .messages import MonitorVerdict
from .model_api import Message
from .observations import MotionTracker
from .plan import NextStep, PlanQueue, PlanStep
from .planner_tools import ACTIVE_STATUSES, SETTLE_S, ActionInfo, Turn
from .statuses import Outcome, RunStatus


class PlanReader(Protocol):
    """The plan queue as every part but :class:`RunState` sees it: read only."""

    @property
    def steps(self) -> list[PlanStep]: ...

    def step_of(self, action_id: str) -> PlanStep | None: ...

    def failed_for(self, tool: str) -> PlanStep | None: ...

    def next_step(self, needs_point: set[str], known_tools: set[str]) -> NextStep: ...

    def as_list(self) -> list[dict[str, Any]]: ...

    def render(self) -> str: ...


class RunState:
    """The run: its status, task, generation, turns and usage, the tools' failures in a row,
    what the operator did while it was paused, and its plan queue."""

    def __init__(self) -> None:
        self.status: str = RunStatus.IDLE  # a RunStatus (its string form on the wire)
        self.task = ""
        self.run_id = ""
        self.started_at = 0.0
        self.generation = 1
        self.turns = 0
        self.usage: dict[str, int] = {}
        self.summary = ""
        self.tool_failures: dict[str, int] = {}
        self.operator_actions: list[str] = []
        self._plan = PlanQueue()

    @property
    def plan(self) -> PlanReader:
        return self._plan

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def begin(self, task: str, now: float) -> None:
        """A new run of ``task``: a fresh plan, budgets and failure counts."""
        self.task = task
        self.status = RunStatus.RUNNING
        self.turns = 0
        self.usage = {}
        self.started_at = now
        self._plan = PlanQueue()
        self.tool_failures = {}
        self.operator_actions.clear()

    def forget(self) -> None:
        """``/reset``: the task and its plan are gone."""
        self._plan = PlanQueue()
        self.task = ""

    def add_usage(self, usage: Mapping[str, int]) -> None:
        for k, v in usage.items():
            self.usage[k] = self.usage.get(k, 0) + v

    def adopt(self, generation: int) -> None:
        """The executor's generation, when it is newer: nothing decided before is sent."""
        if generation > self.generation:
            self.generation = generation

    def count_outcome(self, tool: str, outcome: str) -> None:
        """A success clears ``tool``'s failures in a row; a stop or a timeout is no failure."""
        if outcome == Outcome.SUCCEEDED:
            self.tool_failures[tool] = 0
        elif outcome not in (Outcome.STOPPED, Outcome.TIMED_OUT):
            self.tool_failures[tool] = self.tool_failures.get(tool, 0) + 1

    # the plan: every change of a step goes through here ------------------------------------
    def replace_plan(self, steps: list[dict[str, Any]]) -> None:
        self._plan.replace(steps)
        for st in self._plan.steps:  # a new plan: the tools it names start afresh
            if st.tool and st.failures == 0:
                self.tool_failures.pop(st.tool, None)

    def claim_step(self, tool: str, action_id: str) -> PlanStep | None:
        return self._plan.claim(tool, action_id)

    def start_step(self, index: int, action_id: str) -> None:
        self._plan.start(index, action_id)

    def step_ended(self, action_id: str, outcome: str, retries: int,
                   by_monitor: bool) -> PlanStep | None:
        return self._plan.action_ended(action_id, outcome, retries, by_monitor=by_monitor)

    def follow_up(self, action_id: str, tool: str, new_action_id: str) -> PlanStep | None:
        return self._plan.follow_up(action_id, tool, new_action_id)


class MonitorNotes:
    """Monitor answers to questions without rules (``(action_id, question)`` -> verdict).
    Written on the bus's thread, read on the tick: every access holds the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notes: dict[tuple[str, str], MonitorVerdict] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._notes)

    def note(self, v: MonitorVerdict, floor: float | None) -> None:
        """Keep ``v``; an answer below its rules' floor is no finding: the older answer it
        replaces is stale, so it is dropped."""
        with self._lock:
            if floor is not None and v.probability < floor:
                self._notes.pop((v.action_id, v.question), None)
            else:
                self._notes[(v.action_id, v.question)] = v

    def drop_action(self, action_id: str) -> None:
        with self._lock:
            for key in [k for k in self._notes if k[0] == action_id]:
                del self._notes[key]

    def for_actions(self, running: Mapping[str, Any]) -> list[MonitorVerdict]:
        """The notes on ``running`` actions.  Notes for actions the planner does not track
        (operator actions, late verdicts) are dropped, so they never outgrow the actions."""
        with self._lock:
            for key in [k for k in self._notes if k[0] not in running]:
                del self._notes[key]
            return list(self._notes.values())


class ActionBook:
    """The actions in flight (id -> :class:`ActionInfo`) and what is known about them: the
    monitor's follow-ups and failures, escalations already told, starts already answered,
    stops sent, and how recent ones ended."""

    MAX_ENDED = 200  # how many ended actions task_status still knows

    def __init__(self) -> None:
        self.running: dict[str, ActionInfo] = {}
        self.followups: dict[str, tuple[str, str]] = {}  # action_id -> (tool, decision)
        self.woken_for_fail: set[str] = set()
        self.escalated: set[tuple[str, str]] = set()
        # actions whose end the planner already got as a refused tool result (they failed or
        # were refused before they started): their action_ended is not delivered again
        self.answered_at_start: set[str] = set()
        self.stopping: dict[str, float] = {}  # action_id -> when a user stop was sent
        self.ended: dict[str, str] = {}  # action_id -> how it ended
        self.notes = MonitorNotes()

    def __contains__(self, action_id: object) -> bool:
        return action_id in self.running

    def __len__(self) -> int:
        return len(self.running)

    def __iter__(self) -> Iterator[str]:
        return iter(self.running)

    def get(self, action_id: str) -> ActionInfo | None:
        return self.running.get(action_id)

    def add(self, info: ActionInfo) -> None:
        self.running[info.action_id] = info

    def pop(self, action_id: str) -> ActionInfo | None:
        return self.running.pop(action_id, None)

    def settle(self, action_id: str) -> tuple[tuple[str, str] | None, bool]:
        """An action ended: its notes, follow-up, monitor failure and escalations end with it
        (whatever the run's status: a paused or ended run must not keep them for the life of
        the process).  Returns its follow-up and whether the monitor had failed it."""
        self.notes.drop_action(action_id)
        followup = self.followups.pop(action_id, None)
        failed = action_id in self.woken_for_fail
        self.woken_for_fail.discard(action_id)
        self.escalated = {k for k in self.escalated if k[0] != action_id}
        return followup, failed

    def record_end(self, action_id: str, how: str) -> None:
        self.ended[action_id] = how
        if len(self.ended) > self.MAX_ENDED:
            del self.ended[next(iter(self.ended))]

    def waiting_for_stop(self, now: float, wait_s: float) -> bool:
        """True while an action a user stop was sent to still runs (at most ``wait_s``)."""
        for aid, t in list(self.stopping.items()):
            if aid not in self.running or now - t >= wait_s:
                del self.stopping[aid]
        return bool(self.stopping)


class Refusals:
    """Refused calls, and turns whose calls were all refused, since an action last started;
    ``budgets.max_refused_in_row`` counts the turns (one reply of many bad calls is one)."""

    def __init__(self, clock: Clock, motion: MotionTracker, limit: int) -> None:
        self._clock = clock
        self._motion = motion
        self.limit = limit
        self.reset()

    def reset(self) -> None:
        self.in_row = 0
        self.turns = 0
        self.last: tuple[str, str] | None = None
        self.this_turn = False
        # the last closed turn had a refused call: the next call waits for still frames
        self.last_turn = False

    def started(self) -> None:
        """An action started: the count starts afresh."""
        self.in_row = self.turns = 0
        self.last = None

    def refuse(self, tool: str, reason: str) -> str:
        """Count a refused call and answer it with what must change: the harness's reason,
        a note when the very same call was refused just before, and how many refusals in a
        row are left before the run fails (``budgets.max_refused_in_row``)."""
        self.in_row += 1
        self.this_turn = True
        text = reason if reason.startswith("refused") else f"refused: {reason}"
        if "before the robot last moved" in reason and \
                self._clock.now() - self._motion.last_moved < SETTLE_S:
            text += (" The robot is still moving: you are called again once it is still, "
                     "with fresh images.")
        if self.last == (tool, reason):
            text += (" This very call was refused just before: calling it again unchanged is "
                     "refused again.")
        self.last = (tool, reason)
        if self.turns:
            text += (f" ({self.turns} turn{'s' if self.turns > 1 else ''} "
                     "before this one with only refused calls and no action started; the "
                     f"run fails at {self.limit}.)")
        return text

    def close_turn(self, started_any: bool) -> bool:
        """A turn closed; True when the refusals in a row used up the budget."""
        if self.this_turn and not started_any and self.in_row:
            self.turns += 1
        self.last_turn, self.this_turn = self.this_turn, False
        return self.turns >= self.limit


class ModelRetries:
    """A failing planner model: failed calls in a row this wake, when the next retry is due,
    and whether the retries are used up (silent until the next event wakes the planner)."""

    def __init__(self) -> None:
        self.failures = 0
        self.retry_at: float | None = None
        self.silent = False

    def woken(self, reason: str) -> None:
        """A new wake (not a retry): the retries start afresh."""
        if reason != "model_error":
            self.failures = 0
            self.silent = False

    def failed(self) -> int:
        """A call failed: its number in a row this wake."""
        self.failures += 1
        return self.failures

    def retry(self, at: float) -> None:
        self.retry_at = at

    def give_up(self) -> None:
        """Retries used up: no call until the next event wakes the planner."""
        self.retry_at = None
        self.silent = True

    def answered(self) -> int | None:
        """The model answered (or the run ended): no backoff, no silence.  Returns the
        failures it recovered from, None when there were none."""
        recovered = self.failures if (self.silent or self.failures) else None
        self.failures, self.retry_at, self.silent = 0, None, False
        return recovered

    def backing_off(self, now: float) -> bool:
        """True while a failed call's retry waits for its backoff."""
        if self.retry_at is None:
            return False
        if now < self.retry_at:
            return True
        self.retry_at = None
        return False


class Wakes:
    """What wakes the planner and when: the reasons and news of the next wake, user
    additions held until a tool result, the plan hold (no plan step starts by itself until
    the planner replies), a reply's wish to go on, an interrupt's urgency, the heartbeat."""

    def __init__(self, retries: ModelRetries, now: float, heartbeat_s: float | None) -> None:
        self._retries = retries
        self._heartbeat_s = heartbeat_s
        self.reasons: list[str] = []
        self.news: list[str] = []
        self.held: list[str] = []  # queued user additions waiting for a tool result
        self.held_since = 0.0
        # a wake that holds the plan queue (see wake): no plan step starts until the next reply
        self.hold = False
        self.continue_turn = False
        self.urgent = False  # the next call is an interrupt's: no waiting for fresh frames
        self.last_activity = now

    def wake(self, reason: str, hold: bool = False) -> None:
        """Wake the planner.  ``hold``: a failure, timeout, stop, monitor flag, the user or the
        operator woke it, so the plan queue waits for its reply and no step starts by itself
        until then: what woke it may change the plan."""
        self.reasons.append(reason)
        self._retries.woken(reason)
        if hold:
            self.hold = True

    @property
    def due(self) -> bool:
        """A call is due: a wake, or a reply that goes on."""
        return bool(self.reasons or self.continue_turn)

    def heartbeat(self, now: float, actions_running: bool) -> None:
        """The optional heartbeat while actions run and nothing else woke the planner; the
        next one is due a heartbeat after this one, not at every tick from now on."""
        hb = self._heartbeat_s
        if (hb is not None and actions_running and not self.reasons
                and now - self.last_activity >= hb):
            self.last_activity = now
            self.wake("heartbeat")

    def settle(self) -> None:
        """Nothing is due any more (the run ended or paused, or its turn was dropped)."""
        self.continue_turn = False
        self.reasons.clear()


class TurnSlot:
    """The turn in flight (None between turns), the attention episode of the current wake,
    and action ends deferred until the calls that started them are answered."""

    def __init__(self) -> None:
        self.current: Turn | None = None
        self.attention = AttentionEpisode(autonomous=True)
        self.deferred: list[Event] = []

    def drop(self) -> None:
        """Forget the turn in flight; its model call, if still running, is cancelled: no
        retry and no wait for one goes on for a reply nobody will read."""
        turn = self.current
        if turn is not None and turn.future is not None:
            turn.future.cancel()
        self.current = None

    def starting(self, action_id: str) -> bool:
        """The tool call that started ``action_id`` is still being answered."""
        return self.current is not None and any(ps.action_id == action_id
                                                for ps in self.current.pending)

    def release(self) -> list[Event]:
        """The deferred events, once no call of the turn waits for its skill to start."""
        if not self.deferred or (self.current is not None and self.current.pending):
            return []
        out, self.deferred = self.deferred, []
        return out


class Transcript:
    """The model's messages (its context) and the conversation people see."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.conversation: list[dict[str, Any]] = []

    def say(self, role: str, text: str, **extra: Any) -> dict[str, Any]:
        entry = {"role": role, "text": text, **extra}
        self.conversation.append(entry)
        return entry

    def recent(self, n: int = 50) -> Sequence[dict[str, Any]]:
        return self.conversation[-n:]

    def clear(self) -> None:
        self.messages.clear()
        self.conversation.clear()


__all__ = ["ActionBook", "ModelRetries", "MonitorNotes", "PlanReader", "Refusals", "RunState",
           "Transcript", "TurnSlot", "Wakes"]
