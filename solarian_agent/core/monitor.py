"""The monitor engine: watches each running action through the cameras, asking the questions
its skill declares, and finishes it, fails it or wakes the planner.

The engine is a component that can run as its own ROS node.  It subscribes the cameras'
``<cam>/image_raw``, ``joint_states`` and ``skills/events`` (``skill_started`` /
``skill_ended``), reads each tool's monitor questions from the ``skills/catalogue`` service and
publishes :class:`~.messages.MonitorVerdict` on ``monitor/verdicts``: one per answered question
per tick (``decision`` empty unless a rule fired), plus the ``check_agent_action`` tripwires'
flags with ``source="controller"``.  The planner concludes an action on a ``finish`` / ``fail``
verdict through ``skills/conclude`` and starts the rule's ``then`` after it stopped.

Timing.  :meth:`MonitorEngine.tick` is called by the runtime as often as it likes (every control
step in the embedded run, a timer in ROS); the engine acts every ``monitor.period_s`` while
actions run.  Per action, a tick waits for the previous call: while that action's model call is
in flight the tick is skipped for it (no frame taken, counted and logged as ``monitor_skip``).
Model calls run on a :class:`~.model_caller.ModelCaller` worker (default: a ``ThreadCaller`` for
a model backend, inline for an offline one that sets ``inline = True``); the tick only polls
them, so it never waits on a model.  A call that fails or runs past ``timeout_s`` answers
nothing for its tick (a ``monitor_tick`` event with the error); it is never replaced by a
made-up answer.

What the monitor sees each tick, per camera, oldest first: the action's last ``history`` frames
labelled by age (``N.N s ago`` ... ``previous``, ``current``).  With ``history > 1`` an action's
first frame is only kept (a ``monitor_frame`` event), not judged.  Close-ups, marks and
reference frames: :mod:`.monitor_frames`.

Rules: :mod:`.monitor_rules` (a ``then`` naming no tool is a :class:`MonitorConfigError` when
the engine is built with the catalogue).  A question without ``when`` is only shown to the
planner (its verdicts carry no decision).

``watch_for``: each condition the planner adds to a call becomes a predicate question asked from
6 s into the action (never before), with the rule :data:`WATCH_FOR_RULE`: escalate when it holds
with p >= 0.8 on two ticks in a row.  It is treated as a failure rule: the 6 s let the action
get going before a condition that must stay false while it goes well is judged, two ticks in a
row because one frame pair can look like a miss while a real one lasts; and it escalates rather
than fails, since a condition the planner wrote is judged best by the planner, which is told a
monitor flag can be wrong.

Logging: every kept frame (``monitor_frame``), every tick (``monitor_tick``: question names, the
images sent with their labels, ages and file names, the readings, the answers, latency, usage,
model, errors and the verdicts it produced) and every skipped tick.

:class:`MonitorEngine` schedules the ticks and keeps the watched actions; the work is in its
parts: :mod:`.monitor_frames` (``framing``), :mod:`.monitor_calls` (``tick_calls``: the model
call) and :mod:`.monitor_verdicts` (``verdicts``: rules applied, tripwires, publishing).  The
vision backend is an implementation (see :mod:`.vision`), passed in where the system is built.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import names
from .clock import Clock
from .config import AgentConfig, MonitorConfig
from .episode_log import EpisodeLog, Recorder
from .messages import AgentEvent, Image
from .model_caller import InlineCaller, ModelCaller, ThreadCaller
from .monitor_calls import Readings, TickCall, TickCalls
from .monitor_frames import (
    MARK_COLOR,
    MARK_MARGIN,
    Box,
    Entry,
    MonitorFraming,
    Shot,
    TargetBoxFn,
    box_to_sent,
    draw_mark,
    history_labels,
    mask_bounds,
    select_view,
    tracker_target_box,
)
from .monitor_rules import (
    BELOW_FLOOR,
    DECISIONS,
    EARLY,
    MET,
    NO_ANSWER,
    TRIPWIRE_QUESTION,
    UNMET,
    WATCH_FOR_AFTER_S,
    WATCH_FOR_RULE,
    MonitorConfigError,
    QuestionSpec,
    Rule,
    RuleState,
    check_catalogue,
    condition,
    parse_questions,
    parse_rule,
    watch_for_questions,
)
from .monitor_verdicts import Tripwire, VerdictPublisher
from .transport import Bus, QoS, Subscription
from .vision import MonitorImage, VisionBackend


@dataclass
class WatchedAction:
    action_id: str
    tool: str
    generation: int
    started_at: float
    params: dict[str, Any]
    trackers: list[str]
    watch_for: tuple[str, ...]
    by: str
    questions: tuple[QuestionSpec, ...]
    start_frames: dict[str, Image]
    history: dict[str, collections.deque[Entry]] = field(default_factory=dict)
    states: dict[str, RuleState] = field(default_factory=dict)
    tripwire_escalated: bool = False
    concluded: str = ""
    ticks: int = 0
    frames_taken: int = 0
    call: TickCall | None = None
    reference: list[MonitorImage] | None = None


class MonitorEngine:
    """See the module docstring.

    ``backend`` None: no monitor model; only the tripwires run, so a policy that never ends by
    itself is then ended only by its time limit or a tripwire.  ``catalogue`` given: questions
    are validated now (raises :class:`MonitorConfigError`); otherwise :meth:`start` fetches it
    from the ``skills/catalogue`` service — call it at start-up so a bad ``then`` stops the
    start.
    """

    def __init__(
        self,
        bus: Bus,
        clock: Clock,
        config: MonitorConfig,
        backend: VisionBackend | None,
        *,
        cameras: Sequence[str],
        catalogue: Sequence[Mapping[str, Any]] | None = None,
        caller: ModelCaller | None = None,
        log: EpisodeLog | Recorder | Callable[[], EpisodeLog | None] | None = None,
        check_agent_action: Tripwire | None = None,
        target_box: TargetBoxFn | None = None,
        readings: Readings | None = None,
        state_fields: Mapping[str, Sequence[str]] | None = None,
        watch_operator: bool = False,
        image_format: str = "jpeg",
        jpeg_quality: int = 90,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        node: str = "monitor",
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.config = config
        self.backend = backend
        self.cameras = list(cameras)
        if caller is None:
            # an offline backend answers in microseconds; a model is called off the tick thread
            inline = backend is None or bool(getattr(backend, "inline", False))
            caller = InlineCaller() if inline else ThreadCaller(workers=2)
        self.caller = caller
        if isinstance(log, Recorder):
            rec = log
            self.log_fn: Callable[[], EpisodeLog | None] = lambda: rec.current
        elif isinstance(log, EpisodeLog):
            fixed = log
            self.log_fn = lambda: fixed
        elif log is None:
            self.log_fn = lambda: None
        else:
            self.log_fn = log
        self.check_agent_action = check_agent_action
        self.target_box = target_box
        self.readings_fn = readings
        self.state_fields = {k: list(v) for k, v in (state_fields or {}).items()}
        self.watch_operator = watch_operator
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.on_event = on_event
        self._lock = threading.Lock()
        self._inbox: list[tuple[str, dict[str, Any], float, dict[str, Image]]] = []
        self.actions: dict[str, WatchedAction] = {}
        self._next_due: float | None = None
        self.questions: dict[str, tuple[QuestionSpec, ...]] | None = None
        self.tools: set[str] = set()
        self.catalogue: dict[str, Mapping[str, Any]] = {}
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=1000)
        self.calls = 0
        self.skipped = 0
        self.errors = 0
        self.verdicts_published = 0

        # the parts that do the work (the verdicts publisher is created first, as ever)
        self.verdicts = VerdictPublisher(self, node)
        self.framing = MonitorFraming(self)
        self.tick_calls = TickCalls(self)
        self.frames: dict[str, Subscription[Any]] = {
            c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1), node=node)
            for c in self.cameras}
        self.joints = bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE, qos=QoS(depth=1),
                                    node=node)
        bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=self._on_skill_event,
                      qos=QoS(depth=200), node=node)
        if catalogue is not None:
            self._load(catalogue)

    # start-up --------------------------------------------------------------------------------
    def _load(self, catalogue: Sequence[Mapping[str, Any]]) -> None:
        self.questions = check_catalogue(catalogue)
        self.tools = set(self.questions)
        self.catalogue = {str(d["name"]): d for d in catalogue}

    def start(self) -> None:
        """Fetch the tool catalogue and validate every question (raises on a bad one)."""
        if self.questions is None:
            self._load(self.bus.call(names.TOOL_CATALOGUE, {}, timeout_s=5.0))

    # inputs (any thread): only queue -----------------------------------------------------------
    def _on_skill_event(self, ev: AgentEvent) -> None:
        if ev.kind not in ("skill_started", "skill_ended"):
            return
        frames: dict[str, Image] = {}
        if ev.kind == "skill_started":
            for cam, sub in self.frames.items():
                f = sub.latest()
                if isinstance(f, Image):
                    frames[cam] = f
        with self._lock:
            self._inbox.append((ev.kind, dict(ev.data), self.clock.now(), frames))

    # the tick: scheduling --------------------------------------------------------------------
    def tick(self) -> None:
        """Handle what arrived, poll the calls in flight and, when due, run a monitor tick.
        Never raises."""
        try:
            self._tick()
        except Exception as e:  # nothing escapes into the spin loop
            self.errors += 1
            self.log_event("monitor_error", error=f"{type(e).__name__}: {e}")

    def _tick(self) -> None:
        with self._lock:
            inbox, self._inbox = self._inbox, []
        for kind, data, t, frames in inbox:
            # one bad event must not drop the others swapped out with it (a lost skill_ended
            # would keep its action, and its frames, for the life of the process)
            try:
                if kind == "skill_started":
                    self._action_started(data, t, frames)
                else:
                    self._action_ended(data)
            except Exception as e:
                self.errors += 1
                self.log_event("monitor_error", action_id=str(data.get("action_id", "")),
                               error=f"{kind}: {type(e).__name__}: {e}")
        self.tick_calls.poll()
        now = self.clock.now()
        if not self.actions:
            self._next_due = None
            return
        if self._next_due is not None and now + 1e-9 < self._next_due:
            return
        self._next_due = now + self.config.period_s
        for act in list(self.actions.values()):
            if act.concluded:
                continue
            try:  # one action's failure must not stop the others' ticks
                self._tick_action(act, now)
            except Exception as e:
                self.errors += 1
                self.log_event("monitor_error", action_id=act.action_id,
                               error=f"{type(e).__name__}: {e}")

    def _action_started(self, data: Mapping[str, Any], t: float, frames: dict[str, Image]
                        ) -> None:
        by = str(data.get("by", "agent"))
        if by != "agent" and not self.watch_operator:
            return
        if self.questions is None:
            try:
                self.start()
            except Exception as e:
                self.errors += 1
                self.log_event("monitor_error", error=f"could not read the tool catalogue: {e}")
                self.questions = {}
        assert self.questions is not None
        tool = str(data.get("skill", ""))
        aid = str(data.get("action_id", ""))
        watch = tuple(str(w) for w in data.get("watch_for") or () if str(w).strip())
        qs = self.questions.get(tool, ()) + watch_for_questions(watch)
        act = WatchedAction(aid, tool, int(data.get("generation", 0)), t,
                            dict(data.get("params") or {}), list(data.get("trackers") or []),
                            watch, by, qs, frames)
        act.states = {q.name: RuleState(q) for q in qs}
        self.actions[aid] = act

    def _action_ended(self, data: Mapping[str, Any]) -> None:
        act = self.actions.pop(str(data.get("action_id", "")), None)
        if act is not None and act.call is not None:
            self.tick_calls.orphans.append((act, act.call))
            act.call = None

    def _tick_action(self, act: WatchedAction, now: float) -> None:
        elapsed = now - act.started_at
        act.ticks += 1
        self.verdicts.tripwire(act, elapsed)
        if act.concluded or self.backend is None or not act.questions:
            return
        if act.call is not None:
            if now - act.call.sent_at > self.config.timeout_s + 1.0:
                call, act.call = act.call, None
                self.tick_calls.orphans.append((act, call))
                self.errors += 1
                self.log_event("monitor_tick", action_id=act.action_id, tool=act.tool,
                               tick=call.tick, questions=[q.name for q in call.request.questions],
                               images=call.images, answers={}, verdicts=[],
                               error={"kind": "timeout", "message": f"no answer within "
                                      f"{self.config.timeout_s:g} s; the tick answers nothing"},
                               elapsed_s=round(call.elapsed_s, 3))
            else:
                self.skipped += 1
                self.log_event("monitor_skip", action_id=act.action_id, tool=act.tool,
                               tick=act.ticks, reason="the previous call is still in flight")
                return
        shots = self.framing.take_frames(act)
        if not shots:
            return
        act.frames_taken += 1
        hist = max(1, self.config.history)
        for cam, shot, mark in shots:
            dq = act.history.setdefault(cam, collections.deque(maxlen=hist))
            dq.append(self.framing.entry(shot, mark))
        if hist > 1 and act.frames_taken == 1:
            files = [self.framing.image_record(s, m, "kept", 0.0) for _, s, m in shots]
            self.framing.save_shots([s for _, s, _ in shots])
            self.log_event("monitor_frame", action_id=act.action_id, tool=act.tool,
                           tick=act.ticks, images=files, elapsed_s=round(elapsed, 3))
            return
        active = tuple(q for q in act.questions
                       if not q.watch_for or elapsed + 1e-9 >= WATCH_FOR_AFTER_S)
        if not active:
            return
        self.tick_calls.submit(act, active, elapsed, now)

    # output ----------------------------------------------------------------------------------
    def log_event(self, kind: str, **data: Any) -> None:
        log = self.log_fn()
        if log is not None:
            try:
                rec = log.event(kind, **data)
            except Exception:
                rec = {"t": self.clock.wall(), "kind": kind, **data}
        else:
            rec = {"t": self.clock.wall(), "kind": kind, **data}
        self.recent.append(rec)
        if self.on_event is not None:
            try:
                self.on_event(kind, rec)
            except Exception:
                pass

    def shutdown(self) -> None:
        self.caller.shutdown()


def build_monitor(
    *,
    bus: Bus,
    clock: Clock,
    config: AgentConfig,
    tripwire: Tripwire | None = None,
    trackers: Any = None,
    log_provider: Callable[[], EpisodeLog | None] | None = None,
    backend: VisionBackend | None = None,
    caller: ModelCaller | None = None,
    readings: Readings | None = None,
    catalogue: Sequence[Mapping[str, Any]] | None = None,
    cameras: Sequence[str] | None = None,
) -> MonitorEngine | None:
    """The monitor as the runtime builds it from ``agent:`` (None when ``monitor`` is null).

    ``backend``: the vision backend that answers the questions, built where the system is
    wired from ``monitor.provider`` (:func:`solarian_agent.system.build_monitor`); None: no
    monitor model, only the tripwires run.

    ``trackers``: anything with ``result(field) -> TrackerResult`` (the executor's tracker
    port) for ``mark_target``; ``readings``: the planner's readings function, so both see the
    same ``state_fields``.  The catalogue is read and every question validated here, so a
    ``then`` naming no tool stops the start with :class:`MonitorConfigError`.
    """
    mcfg = config.monitor
    if mcfg is None:
        return None
    if catalogue is None:
        catalogue = list(bus.call(names.TOOL_CATALOGUE, {}, timeout_s=5.0))
    cams = list(cameras if cameras is not None else config.cameras)
    if not cams:  # "empty: all": every camera the tools and questions name
        found: list[str] = list(mcfg.close_ups)
        for d in catalogue:
            for c in [d.get("camera"), *(q.get("camera") for q in d.get("monitor") or ()
                                         if isinstance(q, Mapping))]:
                if isinstance(c, str) and c and c not in found:
                    found.append(c)
        cams = found
    result = getattr(trackers, "result", None)
    target = tracker_target_box(result) if callable(result) else None
    return MonitorEngine(bus, clock, mcfg, backend, cameras=cams, catalogue=catalogue,
                         caller=caller, log=log_provider, check_agent_action=tripwire,
                         target_box=target, readings=readings,
                         state_fields=config.state_fields)


__all__ = [
    "BELOW_FLOOR", "Box", "DECISIONS", "EARLY", "MARK_COLOR", "MARK_MARGIN", "MET",
    "NO_ANSWER", "TRIPWIRE_QUESTION", "UNMET", "WATCH_FOR_AFTER_S", "WATCH_FOR_RULE",
    "MonitorConfigError", "MonitorEngine", "QuestionSpec", "Readings", "Rule", "RuleState",
    "Shot", "TargetBoxFn", "Tripwire", "WatchedAction", "box_to_sent", "build_monitor",
    "check_catalogue", "condition", "draw_mark", "history_labels", "mask_bounds",
    "parse_questions", "parse_rule", "select_view", "tracker_target_box", "watch_for_questions",
]
