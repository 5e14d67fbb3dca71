"""The planner harness: the coordinator.

The planner wakes on a message, an action failing / stopping / timing out, a monitor flag, an
operator event, a plan step that needs it, or the optional heartbeat.  It sees the task, what
happened, the plan, the newest camera images (with ids) and the readings, and calls
``update_plan, observe, <skill tools>, stop_action, ask_user, finish_task``.

A skill tool returns as soon as the skill has started, and a reply that starts one ends the
turn.  A call the harness refuses, or an ``observe``, is answered at once, so the planner can
retry or look.  The plan is a queue the harness runs (see :mod:`.plan`).

Concurrency: :meth:`Planner.tick` runs on the runtime's loop (in ROS: a timer in the planner
node).  Model calls run on a :class:`ModelCaller` worker and are only *polled* from ``tick``, so
the control path never waits on a model.  Goal results arrive on whatever thread ends the goal
and are only *queued* here (a bounded :class:`EventQueue`); they are handled in ``tick``.  A
reply that arrives after the run's generation changed (cancel, reset, takeover) is discarded
unexecuted, and any goal it had sent is refused by the executor for the same reason.

:class:`Planner` is the coordinator: it builds the state (each piece with one owner) and
the parts, hands each part only the collaborators it needs, and runs the tick.  See
``docs/architecture.md``.

State (:mod:`.planner_state`, :mod:`.planner_journal`, :mod:`.planner_tools`):

* :class:`RunState` (``run``): status, task, generation, budgets used, and the plan queue: the
  only writer of a plan step;
* :class:`ActionBook` (``book``): the actions in flight, the monitor's follow-ups and
  failures, stops sent, recent ends; its :class:`MonitorNotes`;
* :class:`Wakes` (``wakes``): what wakes the planner (reasons, news, held additions) and when;
* :class:`TurnSlot` (``slot``): the turn in flight, its attention episode, deferred ends;
* :class:`Transcript` (``transcript``): the model's messages and the conversation;
* :class:`Journal` (``journal``) and :class:`StatePublisher` (``state``): the episode log and
  ``agent/events``, ``agent/state``; :class:`Inbox` (``inbox``): every input, queued;
* :class:`ToolCatalogue` (``catalogue``): the skills' specs and the model's tool set.

Parts: :class:`GoalSender` (:mod:`.planner_goals`: goals stamped with the generation, stops);
:class:`RunControl` (:mod:`.planner_runs`: run start / resume / end, takeover, cancel, reset,
budgets, generations); :class:`EventHandlers` (:mod:`.planner_events`: action ends, decided by
the pure :func:`.planner_decide.after_action`, and monitor verdicts); :class:`ToolCalls` and
:class:`TaskTools` (:mod:`.planner_calls`, :mod:`.planner_tasks`: the reply's calls);
:class:`SideAnswers` (:mod:`.planner_side`: parallel answers); :class:`EventRouting`
(:mod:`.planner_routing`: every event through the router, interrupts, held events, timers,
progress); :class:`TurnCycle` (:mod:`.planner_turns`: the model call).

The vision backend and the ``observe_scene`` observer are implementations: they are built where
the system is wired (``system.py``, the ROS components) and passed in.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from . import event_types as et
from . import names
from .attention import SceneObserverPort
from .clock import Clock
from .config import AgentConfig
from .episode_log import EpisodeLog, Recorder
from .event_record import parse
from .events import EventQueue
from .liveness import NodeWatch
from .messages import JointState
from .model_api import Message, ModelProvider, ToolDef
from .model_caller import InlineCaller, ModelCaller, ThreadCaller
from .observations import ObservationStore, Overlay
from .planner_calls import ToolCalls
from .planner_events import EventHandlers
from .planner_goals import GoalSender
from .planner_journal import Inbox, Journal, StatePublisher
from .planner_nodes import NodeReactions
from .planner_routing import EventRouting
from .planner_runs import RunControl
from .planner_side import SideAnswers
from .planner_state import (
    ActionBook,
    ModelRetries,
    PlanReader,
    Refusals,
    RunState,
    Transcript,
    TurnSlot,
    Wakes,
)
from .planner_tasks import TaskTools
from .planner_tools import (
    ACTIVE_STATUSES,
    HARNESS_INSTRUCTIONS,
    PLANNER_TOOLS,
    RUN_STATUSES,
    STOP_WAIT_S,
    ActionInfo,
    PlannerModel,
    ToolCatalogue,
    Turn,
)
from .planner_turns import Senses, TurnCycle
from .routing import Router
from .skill import ToolSpec
from .statuses import RunStatus
from .timers import Timers
from .transport import LATCHED, Bus, GoalHandle, QoS
from .views import ViewManager
from .vision import VisionBackend


class Planner:
    """The coordinator: builds the run's state and the parts, wires the graph endpoints and
    runs the tick.  Inputs from any thread are only queued (:class:`Inbox`); everything is
    handled in :meth:`tick`.  ``vision_backend`` describes views for a planner that reads no
    images; ``scene_observer`` serves ``observe_scene``; ``router`` routes events (rules only
    when None); ``rng`` jitters the backoff of a failed model call."""

    def __init__(
        self,
        bus: Bus,
        clock: Clock,
        config: AgentConfig,
        provider: ModelProvider,
        *,
        recorder: Recorder | None = None,
        caller: ModelCaller | None = None,
        cameras: list[str] | None = None,
        readings: Callable[[JointState | None], dict[str, dict[str, float]]] | None = None,
        on_agent_idle: Callable[[], None] | None = None,
        image_overlays: list[Overlay] | None = None,
        node: str = "planner",
        router: Router | None = None,
        vision_backend: VisionBackend | None = None,
        scene_observer: SceneObserverPort | None = None,
        rng: random.Random | None = None,
    ) -> None:
        cams = list(cameras if cameras is not None else config.cameras)
        self.clock = clock
        self.model = PlannerModel(provider, caller or ThreadCaller(),
                                  has_describer=vision_backend is not None)

        # state, each piece with one owner ---------------------------------------------------
        self.run = RunState()
        self.book = ActionBook()
        retries = ModelRetries()
        self.wakes = Wakes(retries, clock.now(), config.planner_heartbeat_s)
        self.slot = TurnSlot()
        self.transcript = Transcript()
        self.journal = Journal(clock, bus.publisher(names.AGENT_EVENTS, names.T_AGENT_EVENT,
                                                    QoS(depth=200), node=node))
        self.state = StatePublisher(clock, bus.publisher(names.AGENT_STATE, names.T_AGENT_STATE,
                                                         LATCHED, node=node),
                                    self.run, self.book, self.transcript,
                                    arm_gate=bus.subscribe(names.ARM_GATE, names.T_STRING,
                                                           qos=LATCHED, node=node))
        timers = Timers(clock, config.events.max_timers)

        # views and the tool set (the backend and the observer are wired where the system is
        # built) ---------------------------------------------------------------------------
        side = min(config.image_max_side, int(getattr(provider, "max_image_side", 10_000)))
        store = ObservationStore(clock, side, config.max_point_age_s, grid=config.image_grid)
        frames = {c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1),
                                   node=node) for c in cams}
        self.views = ViewManager(clock, store, lambda c: _latest(frames, c), cams,
                                 # read at every render: see ViewManager
                                 reads_images=lambda: bool(self.model.provider.reads_images),
                                 describer=vision_backend,
                                 fixed=list(config.runtime.cameras),
                                 on_event=lambda k, d: self.journal.event(parse(k, d)),
                                 # the controller's overlays (tracker masks) on planner images;
                                 # the monitor never gets them, whatever this says
                                 overlays=list(image_overlays or [])
                                 if config.image_overlays else [])
        if scene_observer is not None and scene_observer.on_event is None:
            # the observer names its events by kind (it sits above the core): typed here
            scene_observer.on_event = lambda k, d: self.journal.event(parse(k, d))
        self.catalogue = ToolCatalogue(bus, self.views, scene_observer)
        self.inbox = Inbox(clock, EventQueue(config.events.queue_size, config.events.overflow),
                           self.journal, self.book.notes, self.catalogue)

        # the parts that do the work, each with only what it needs --------------------------
        shared = (self.run, self.book, self.wakes, self.slot, self.transcript, self.journal,
                  self.state)
        goals = GoalSender(bus, clock, self.run, self.book, self.catalogue, self.wakes,
                           self.journal, self.state, self.inbox.goal_done)
        refusals = Refusals(clock, store.motion, config.budgets.max_refused_in_row)
        self.runs = RunControl(
            bus, clock, config, *shared, views=self.views, cameras=cams,
            generations=bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION,
                                      qos=LATCHED, node=node),
            recorder=recorder, model=self.model, catalogue=self.catalogue, refusals=refusals,
            retries=retries, on_idle=on_agent_idle)
        task_tools = TaskTools(clock, self.book, goals, timers, self.journal)
        calls = ToolCalls(clock, config, *shared, refusals=refusals, runs=self.runs, goals=goals,
                          task_tools=task_tools, catalogue=self.catalogue, views=self.views,
                          model=self.model,
                          view_pub=bus.publisher(names.AGENT_VIEW, names.T_IMAGE,
                                                 QoS(depth=1), node=node))
        handlers = EventHandlers(clock, config, self.run, self.book, self.wakes, self.slot,
                                 self.journal, self.state, self.runs, goals, self.catalogue)
        side_answers = SideAnswers(clock, config, self.run, self.book, self.transcript,
                                   self.journal, self.model, self.views, self.catalogue,
                                   task_tools)
        # rules only, or rules plus the router model agent.events.router names (built where
        # the system is wired: solarian_agent.system.build_router)
        self.routing = EventRouting(
            clock, config, *shared, router=router if router is not None else Router(),
            timers=timers, model=self.model, handlers=handlers, runs=self.runs, calls=calls,
            goals=goals, side_answers=side_answers)
        senses = Senses(
            frames=frames,
            joints=bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE,
                                 callback=store.motion.update, qos=QoS(depth=1), node=node),
            readings=readings,
            # the arm's health (a real arm's node publishes it): a slowed arm is said in each
            # wake
            arm_diagnostics=bus.subscribe(names.DIAGNOSTICS, names.T_DIAGNOSTICS,
                                          qos=QoS(depth=1), node=node),
            motion=store.motion)
        self.cycle = TurnCycle(
            clock, config, *shared, retries=retries, refusals=refusals, calls=calls,
            runs=self.runs, catalogue=self.catalogue, views=self.views, timers=timers,
            senses=senses, model=self.model,
            rng=rng or random.Random())  # the jitter of a failed call's backoff

        # graph endpoints: inputs are only queued -------------------------------------------
        inbox = self.inbox
        bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=inbox.skill_event,
                      qos=QoS(depth=200), node=node)
        bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT, callback=inbox.verdict,
                      qos=QoS(depth=100), node=node)
        bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, callback=inbox.operator,
                      qos=QoS(depth=100), node=node)
        bus.create_service(names.AGENT_MESSAGE, names.T_AGENT_COMMAND,
                           lambda req: inbox.message(str(req.get("text", ""))), node=node)
        bus.create_service(names.AGENT_CANCEL, names.T_AGENT_COMMAND,
                           lambda req: inbox.cancel(str(req.get("by", "operator"))), node=node)
        bus.create_service(names.AGENT_RESET, names.T_AGENT_COMMAND,
                           lambda req: inbox.reset(str(req.get("by", "operator"))), node=node)
        if scene_observer is not None and not bus.has_service(names.OBSERVE_SCENE):
            bus.create_service(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE,
                               calls.srv_observe_scene, node=node)
        # the graph's nodes, from their beats (none in one process: nothing changes)
        watch = NodeWatch(bus, clock, config.node_lost_after_s, node=node)
        self.state.nodes = watch.statuses
        self.nodes = NodeReactions(clock, watch, self.run, self.book, goals, self.catalogue,
                                   self.wakes, self.journal, self.runs, self.state,
                                   config.node_wait_s)
        self.state.publish()  # a late viewer sees the idle planner

    # the run as callers read it ------------------------------------------------------------
    @property
    def status(self) -> str:
        return self.run.status

    @property
    def task(self) -> str:
        return self.run.task

    @property
    def generation(self) -> int:
        return self.run.generation

    @property
    def turns(self) -> int:
        return self.run.turns

    @property
    def summary(self) -> str:
        return self.run.summary

    @property
    def plan(self) -> PlanReader:
        return self.run.plan

    @property
    def actions(self) -> dict[str, ActionInfo]:
        return self.book.running

    @property
    def turn(self) -> Turn | None:
        return self.slot.current

    @property
    def messages(self) -> list[Message]:
        return self.transcript.messages

    @property
    def conversation(self) -> list[dict[str, Any]]:
        return self.transcript.conversation

    @property
    def observations(self) -> ObservationStore:
        return self.views.store

    @property
    def timers(self) -> Timers:
        return self.routing.timers

    @property
    def router(self) -> Router:
        return self.routing.router

    @router.setter
    def router(self, router: Router) -> None:
        self.routing.router = router

    @property
    def provider(self) -> ModelProvider:
        return self.model.provider

    @provider.setter
    def provider(self, provider: ModelProvider) -> None:
        self.model.provider = provider  # read at every call: the next call uses it

    @property
    def log(self) -> EpisodeLog | None:
        return self.journal.log

    @log.setter
    def log(self, log: EpisodeLog | None) -> None:
        self.journal.log = log

    @property
    def specs(self) -> dict[str, ToolSpec]:
        return self.catalogue.specs

    def tool_defs(self) -> list[ToolDef]:
        return self.catalogue.tool_defs()

    # inputs (any thread): only queue, never act -------------------------------------------
    def message(self, text: str, by: str = "user") -> dict[str, Any]:
        return self.inbox.message(text, by)

    def cancel(self, by: str = "operator") -> dict[str, Any]:
        return self.inbox.cancel(by)

    def reset(self, by: str = "operator") -> dict[str, Any]:
        return self.inbox.reset(by)

    def on_goal_done(self, handle: GoalHandle) -> None:
        self.inbox.goal_done(handle)

    def continue_in(self, log: EpisodeLog) -> None:
        """Carry a run on in the next episode's log, opening it with a ``run_continued`` event
        (the run's config, status, plan so far and the episode it continues from) so each log
        reads on its own."""
        self.runs.continue_in(log)

    # the loop -----------------------------------------------------------------------------
    def tick(self) -> None:
        """Handle what arrived, poll the model call, start the next call if woken.  Never
        raises: an internal error is logged and ends the run cleanly."""
        try:
            self._tick()
        except Exception as e:  # nothing escapes into the spin loop
            self.journal.event(et.HarnessError(error=f"{type(e).__name__}: {e}"))
            if self.run.active:
                self.runs.end_run(RunStatus.FAILED, f"harness error: {e}")

    def _tick(self) -> None:
        now = self.clock.now()
        queue = self.inbox.queue
        self.nodes.tick()
        for ev in queue.drain():
            self.routing.route(ev)
        self.routing.poll_side(now)
        if self.slot.current is not None:
            self.cycle.poll_turn()
        for ev in self.slot.release():
            queue.put(ev)
        if self.run.status != RunStatus.RUNNING:
            return
        self.runs.check_budgets(now)
        if self.run.status != RunStatus.RUNNING or self.slot.current is not None \
                or self.cycle.poll_wake():
            return
        self.wakes.heartbeat(now, bool(self.book.running))
        if not self.wakes.due:
            return
        # after a user stop, the re-plan call waits (at most STOP_WAIT_S) for the stopped
        # actions to end, so it sees their ends instead of being woken again for them
        if self.book.waiting_for_stop(now, STOP_WAIT_S) or self.cycle.held_back(now):
            return
        if self.nodes.hold_call():
            return
        self.wakes.urgent = False
        self.nodes.call_started()
        self.cycle.start_model_call()

    def publish_state(self) -> None:
        self.state.publish()

    def shutdown(self) -> None:
        if self.run.active:
            self.runs.stop_everything("shutdown")
            self.runs.end_run(RunStatus.CANCELLED, "shut down")
        self.model.caller.shutdown()


def _latest(frames: dict[str, Any], camera: str) -> Any:
    sub = frames.get(camera)
    return sub.latest() if sub is not None else None


__all__ = ["ACTIVE_STATUSES", "HARNESS_INSTRUCTIONS", "PLANNER_TOOLS", "RUN_STATUSES",
           "ActionInfo", "InlineCaller", "ModelCaller", "Planner", "ThreadCaller"]
