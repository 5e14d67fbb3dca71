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

:class:`MonitorEngine` coordinates its parts, each the one owner of its piece of the state and
handed only what it needs: :mod:`.monitor_watch` (the catalogue, the skill events queued, the
actions watched, the schedule), :mod:`.monitor_framing` (the frames kept per action and their
shots), :mod:`.monitor_calls` (the model calls in flight and their deadlines),
:mod:`.monitor_verdicts` (the rule states, tripwires, finish / fail, publishing) and
:mod:`.monitor_log` (events, images, the error count).  The vision backend is an
implementation (see :mod:`.vision`), passed in where the system is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import event_types as et
from . import names
from .clock import Clock
from .config import AgentConfig, MonitorConfig
from .episode_log import EpisodeLog, Recorder
from .event_record import TypedEvent
from .messages import AgentEvent, Image
from .model_caller import InlineCaller, ModelCaller, ThreadCaller
from .monitor_calls import CallDone, TickCalls
from .monitor_frames import (
    MARK_COLOR,
    MARK_MARGIN,
    Box,
    ImageEncoding,
    Shot,
    TargetBoxFn,
    Viewing,
    box_to_sent,
    draw_mark,
    history_labels,
    image_record,
    mask_bounds,
    select_view,
    tracker_target_box,
)
from .monitor_framing import FramingRules, MonitorFraming
from .monitor_log import EventHook, LogSource, MonitorLog, log_source
from .monitor_request import JointReadings, Readings, tick_request
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
from .monitor_verdicts import MonitorVerdicts, Tripwire, VerdictPublisher
from .monitor_watch import (
    SKILL_ENDED,
    SKILL_STARTED,
    SkillEvent,
    SkillEventInbox,
    TickSchedule,
    ToolCatalogue,
    WatchedAction,
    WatchList,
    active_questions,
    watched_action,
)
from .transport import Bus, QoS, Subscription
from .vision import VisionBackend


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
        log: EpisodeLog | Recorder | LogSource | None = None,
        check_agent_action: Tripwire | None = None,
        target_box: TargetBoxFn | None = None,
        readings: Readings | None = None,
        state_fields: Mapping[str, Sequence[str]] | None = None,
        watch_operator: bool = False,
        image_format: str = "jpeg",
        jpeg_quality: int = 90,
        on_event: EventHook | None = None,
        node: str = "monitor",
    ) -> None:
        self.clock = clock
        self.config = config
        self.backend = backend
        self.cameras = list(cameras)
        if caller is None:
            # an offline backend answers in microseconds; a model is called off the tick thread
            inline = backend is None or bool(getattr(backend, "inline", False))
            caller = InlineCaller() if inline else ThreadCaller(workers=2)
        self.log = MonitorLog(clock, log_source(log), on_event)
        self.catalogue = ToolCatalogue(
            lambda: bus.call(names.TOOL_CATALOGUE, {}, timeout_s=5.0))
        self.inbox = SkillEventInbox()
        self.watching = WatchList(watch_operator)
        self.schedule = TickSchedule(config.period_s)
        # the verdicts' publisher is created before the subscriptions, as it always was (the
        # node's endpoints are listed in that order)
        self.verdicts = MonitorVerdicts(VerdictPublisher(bus, node), clock, self.log,
                                        tripwire=check_agent_action,
                                        has_tool=self.catalogue.has_tool)
        self.tick_calls = TickCalls(backend, caller, config.timeout_s, self.log)
        self.frames: dict[str, Subscription[Any]] = {
            c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1), node=node)
            for c in self.cameras}
        joints = bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE, qos=QoS(depth=1),
                               node=node)
        self.readings = JointReadings(joints, readings, state_fields)
        self.framing = MonitorFraming(
            self.frames, self.cameras,
            Viewing(config.close_ups, config.image_max_side,
                    ImageEncoding(image_format, jpeg_quality)),
            FramingRules(config.history, config.mark_target, config.reference),
            target_box=target_box, tool_spec=self.catalogue.spec, log=self.log)
        bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=self._on_skill_event,
                      qos=QoS(depth=200), node=node)
        if catalogue is not None:
            self.catalogue.load(catalogue)

    # what the runtime, the tests and the tools read ------------------------------------------
    @property
    def actions(self) -> dict[str, WatchedAction]:
        """The actions being watched, by action id."""
        return self.watching.actions

    @property
    def recent(self) -> Sequence[dict[str, Any]]:
        """The latest events logged, oldest first."""
        return self.log.recent

    @property
    def tools(self) -> frozenset[str]:
        """The tools of the catalogue (a ``then`` must name one of them)."""
        return self.catalogue.tools

    @property
    def calls(self) -> int:
        return self.tick_calls.calls

    @property
    def skipped(self) -> int:
        return self.tick_calls.skipped

    @property
    def errors(self) -> int:
        return self.log.errors

    @property
    def verdicts_published(self) -> int:
        return self.verdicts.published

    @property
    def target_box(self) -> TargetBoxFn | None:
        return self.framing.target_box

    # start-up --------------------------------------------------------------------------------
    def start(self) -> None:
        """Fetch the tool catalogue and validate every question (raises on a bad one)."""
        self.catalogue.fetch()

    # inputs (any thread): only queue -----------------------------------------------------------
    def _on_skill_event(self, ev: AgentEvent) -> None:
        if ev.kind not in (SKILL_STARTED, SKILL_ENDED):
            return
        typed = ev.typed()
        if not isinstance(typed, (et.SkillStarted, et.SkillEnded)):
            # a start or an end that does not fit its type: logged, never watched
            self.log.error(et.MonitorError(action_id=str(ev.data.get("action_id", "")),
                                           error=f"{ev.kind}: malformed event {ev.data!r}"))
            return
        frames: dict[str, Image] = {}
        if isinstance(typed, et.SkillStarted):
            for cam, sub in self.frames.items():
                f = sub.latest()
                if isinstance(f, Image):
                    frames[cam] = f
        self.inbox.put(SkillEvent(typed, self.clock.now(), frames))

    # the tick: scheduling --------------------------------------------------------------------
    def tick(self) -> None:
        """Handle what arrived, poll the calls in flight and, when due, run a monitor tick.
        Never raises."""
        try:
            self._tick()
        except Exception as e:  # nothing escapes into the spin loop
            self.log.error(et.MonitorError(error=f"{type(e).__name__}: {e}"))

    def _tick(self) -> None:
        for ev in self.inbox.take():
            # one bad event must not drop the others taken with it (a lost skill_ended would
            # keep its action, and its frames, for the life of the process)
            try:
                if isinstance(ev.event, et.SkillStarted):
                    self._action_started(ev.event, ev)
                else:
                    self._action_ended(ev.event.action_id)
            except Exception as e:
                self.log.error(et.MonitorError(action_id=ev.event.action_id,
                               error=f"{ev.event.kind}: {type(e).__name__}: {e}"))
        self._poll()
        now = self.clock.now()
        if not self.schedule.due(now, bool(self.watching.actions)):
            return
        for act in list(self.watching.actions.values()):
            if self.verdicts.concluded(act.action_id):
                continue
            try:  # one action's failure must not stop the others' ticks
                self._tick_action(act, now)
            except Exception as e:
                self.log.error(et.MonitorError(action_id=act.action_id,
                               error=f"{type(e).__name__}: {e}"))

    def _action_started(self, started: et.SkillStarted, ev: SkillEvent) -> None:
        if not self.watching.watches(started.by or "agent"):
            return
        if not self.catalogue.loaded:
            try:
                self.catalogue.fetch()
            except Exception as e:
                self.log.error(et.MonitorError(error=f"could not read the tool catalogue: {e}"))
                self.catalogue.give_up()
        act = watched_action(started, ev.t, ev.frames, self.catalogue.questions)
        # an action started again under its id starts afresh: its earlier call is not awaited
        self.tick_calls.drop(act.action_id)
        self.watching.add(act)
        self.framing.watch(act.action_id)
        self.verdicts.watch(act)

    def _action_ended(self, action_id: str) -> None:
        if self.watching.remove(action_id) is None:
            return
        self.tick_calls.orphan(action_id)
        self.framing.forget(action_id)
        self.verdicts.forget(action_id)

    def _tick_action(self, act: WatchedAction, now: float) -> None:
        elapsed = now - act.started_at
        tick = self.watching.next_tick(act.action_id)
        self.verdicts.tripwire(act, elapsed)
        if self.verdicts.concluded(act.action_id) or self.backend is None or not act.questions:
            return
        if self.tick_calls.busy(act, tick, now):
            return
        taken = self.framing.take(act)
        if not taken:
            return
        if self.framing.keep(act.action_id, taken):
            self.log.save_images([(s.file_name, s.data) for _, s, _ in taken])
            self.log.event(et.MonitorFrame(action_id=act.action_id, tool=act.tool, tick=tick,
                           images=[image_record(s, m, "kept", 0.0) for _, s, m in taken],
                           elapsed_s=round(elapsed, 3)))
            return
        active = active_questions(act.questions, elapsed)
        if not active:
            return
        images = self.framing.tick_images(act, now)
        request = tick_request(act, active, elapsed, images, self.readings.read(),
                               self.config.instructions)
        self.tick_calls.submit(act, tick, request, images.records, images.files, elapsed, now)
        self._poll()  # an inline caller has answered already

    def _poll(self) -> None:
        for done in self.tick_calls.poll(self.watching.ids()):
            self._answered(done)

    def _answered(self, done: CallDone) -> None:
        # an answer is judged only while its action runs: one that ended, or was concluded
        # meanwhile, is logged as discarded
        aid = done.act.action_id
        live = not done.orphan and not self.verdicts.concluded(aid)
        verdicts: list[dict[str, Any]] = []
        if done.reply is not None and live:
            asked = {q.name for q in done.call.request.questions}
            verdicts = self.verdicts.judge(done.act, asked, done.call.elapsed_s,
                                           done.reply.answers)
        self.log.event(done.event(verdicts, live))

    # output ----------------------------------------------------------------------------------
    def log_event(self, ev: TypedEvent) -> None:
        self.log.event(ev)

    def shutdown(self) -> None:
        self.tick_calls.shutdown()


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
