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

:class:`Planner` holds the run's state and the graph endpoints, queues inputs and runs the
tick; the work is in its parts (see ``docs/architecture.md``):

* :mod:`.planner_routing` (``routing``): every event through the router; interrupts, held
  events, parallel answers, timers, task progress;
* :mod:`.planner_events` (``handlers``): action ends and monitor verdicts into news, wakes,
  plan steps and follow-ups;
* :mod:`.planner_runs` (``runs``): run start / resume / end, operator takeover, cancel and
  reset, budgets, generations;
* :mod:`.planner_turns` (``cycle``): the model call: wake message, context, images, turn files;
* :mod:`.planner_calls` (``calls``): tool-call dispatch and validation, skill goals;
* :mod:`.planner_tasks` (``task_tools``): the task and timer tools;
* :mod:`.planner_tools`: the tool set, the instructions and the call records.

The vision backend and the ``observe_scene`` observer are implementations: they are built where
the system is wired (``system.py``, the ROS components) and passed in.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

from . import names
from .attention import AttentionEpisode, SceneObserverPort
from .clock import Clock
from .config import AgentConfig
from .episode_log import EpisodeLog, Recorder
from .errors import ConfigError
from .events import Event, EventQueue
from .messages import (
    AgentEvent,
    AgentState,
    Image,
    JointState,
    MonitorVerdict,
    OperatorEvent,
    SkillResult,
)
from .model_api import Message, ModelProvider, ToolDef
from .model_caller import InlineCaller, ModelCaller, ThreadCaller
from .monitor_rules import WATCH_FOR_RULE, Rule, floor, parse_questions
from .observations import ObservationStore, Overlay
from .plan import PlanQueue
from .planner_calls import ToolCalls
from .planner_events import EventHandlers
from .planner_routing import EventRouting
from .planner_runs import RunControl
from .planner_tasks import TaskTools
from .planner_tools import (
    ACTIVE_STATUSES,
    HARNESS_INSTRUCTIONS,
    PLANNER_TOOLS,
    RUN_STATUSES,
    ActionInfo,
    Turn,
    describe_tool,
    spec_from_dict,
)
from .planner_turns import TurnCycle
from .routing import Router
from .skill import ToolSpec
from .timers import Timers
from .tool_schema import tool_schema
from .transport import LATCHED, Bus, GoalHandle, QoS
from .views import ViewManager
from .vision import VisionBackend


class Planner:
    """The coordinator: the run's state (status, task, generation, plan, actions, news,
    conversation, the turn in flight), the graph endpoints and the tick.  Inputs from any
    thread are only queued; everything is handled in :meth:`tick` by the parts built in
    ``__init__`` (``routing``, ``handlers``, ``runs``, ``cycle``, ``calls``, ``task_tools``).
    ``vision_backend`` describes views for a planner that reads no images; ``scene_observer``
    serves ``observe_scene``; ``router`` routes events (rules only when None); ``rng`` jitters
    the backoff of a failed model call."""

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
        self.bus = bus
        self.clock = clock
        self.rng = rng or random.Random()  # the jitter of a failed call's backoff
        self.config = config
        self.provider = provider
        self.recorder = recorder
        self.caller = caller or ThreadCaller()
        self.cameras = list(cameras if cameras is not None else config.cameras)
        self.readings_fn = readings
        self.on_agent_idle = on_agent_idle
        side = min(config.image_max_side, int(getattr(provider, "max_image_side", 10_000)))
        self.observations = ObservationStore(clock, side, config.max_point_age_s,
                                             grid=config.image_grid)
        self.events = EventQueue(config.events.queue_size, config.events.overflow)
        self.notes_lock = threading.Lock()

        self.status = "idle"
        self.task = ""
        self.run_id = ""
        self.run_started_at = 0.0
        self.generation = 1
        self.turns = 0
        self.usage_total: dict[str, int] = {}
        self.messages: list[Message] = []
        self.plan = PlanQueue()
        self.actions: dict[str, ActionInfo] = {}
        self.followups: dict[str, tuple[str, str]] = {}  # action_id -> (tool, decision)
        self.woken_for_fail: set[str] = set()
        self.escalated: set[tuple[str, str]] = set()
        self.news: list[str] = []
        self.wake_reasons: list[str] = []
        self.operator_actions: list[str] = []
        self.conversation: list[dict[str, Any]] = []
        self.turn: Turn | None = None
        self.continue_turn = False
        self.last_activity = clock.now()
        self.log: EpisodeLog | None = None
        self.log_errors = 0  # episode log writes that failed (the run goes on without them)
        self.summary = ""
        self.tool_failures: dict[str, int] = {}
        self.deferred: list[Event] = []
        # event handling: urgency routing, parallel answers, task progress, timers
        # rules only, or rules plus the router model agent.events.router names (built where
        # the system is wired: solarian_agent.models.wiring.build_router)
        self.router = router if router is not None else Router()
        self.timers = Timers(clock, config.events.max_timers)
        # a wake that holds the plan queue (see wake): no plan step starts until the next reply
        self.plan_hold = False

        # graph endpoints ----------------------------------------------------------------
        self._state_pub = bus.publisher(names.AGENT_STATE, names.T_AGENT_STATE, LATCHED,
                                        node=node)
        self._event_pub = bus.publisher(names.AGENT_EVENTS, names.T_AGENT_EVENT, QoS(depth=200),
                                        node=node)
        self.view_pub = bus.publisher(names.AGENT_VIEW, names.T_IMAGE, QoS(depth=1), node=node)
        self.frames = {c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1),
                                        node=node) for c in self.cameras}
        self.joints = bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE,
                                    callback=self.observations.motion.update, qos=QoS(depth=1),
                                    node=node)
        bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=self._on_skill_event,
                      qos=QoS(depth=200), node=node)
        bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                      callback=self._on_verdict, qos=QoS(depth=100), node=node)
        bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT,
                      callback=self._on_operator, qos=QoS(depth=100), node=node)
        self.generation_sub = bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION,
                                            qos=LATCHED, node=node)
        # the arm's health (a real arm's node publishes it): a slowed arm is said in each wake
        self.arm_diagnostics = bus.subscribe(names.DIAGNOSTICS, names.T_DIAGNOSTICS,
                                             qos=QoS(depth=1), node=node)
        bus.create_service(names.AGENT_MESSAGE, names.T_AGENT_COMMAND,
                           lambda req: self.message(str(req.get("text", ""))), node=node)
        bus.create_service(names.AGENT_CANCEL, names.T_AGENT_COMMAND,
                           lambda req: self.cancel(str(req.get("by", "operator"))), node=node)
        bus.create_service(names.AGENT_RESET, names.T_AGENT_COMMAND,
                           lambda req: self.reset(str(req.get("by", "operator"))), node=node)
        self._specs: dict[str, ToolSpec] | None = None
        self._floors: dict[str, dict[str, tuple[Rule, ...]]] = {}

        # views and observe_scene -----------------------------------------------------------
        # (the backend and the observer are wired where the system is built)
        self.vision_backend = vision_backend
        self.views = ViewManager(clock, self.observations, self._latest_frame, self.cameras,
                                 reads_images=bool(provider.reads_images),
                                 describer=self.vision_backend,
                                 fixed=list(config.runtime.cameras),
                                 on_event=lambda k, d: self.log_event(k, **d),
                                 # the controller's overlays (tracker masks) on planner images;
                                 # the monitor never gets them, whatever this says
                                 overlays=list(image_overlays or [])
                                 if config.image_overlays else [])

        # the parts that do the work ---------------------------------------------------------
        self.runs = RunControl(self)
        self.handlers = EventHandlers(self)
        self.routing = EventRouting(self)
        self.cycle = TurnCycle(self)
        self.calls = ToolCalls(self)
        self.task_tools = TaskTools(self)

        self.scene_observer = scene_observer
        if scene_observer is not None and scene_observer.on_event is None:
            scene_observer.on_event = lambda k, d: self.log_event(k, **d)
        if self.scene_observer is not None and not bus.has_service(names.OBSERVE_SCENE):
            bus.create_service(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE,
                               self.calls.srv_observe_scene, node=node)
        self.attention = AttentionEpisode(autonomous=True)
        # monitor answers to questions without rules: shown to the planner, never acted on
        self.monitor_notes: dict[tuple[str, str], MonitorVerdict] = {}
        self.publish_state()  # a late viewer sees the idle planner

    # tools --------------------------------------------------------------------------------
    def _latest_frame(self, camera: str) -> Image | None:
        sub = self.frames.get(camera)
        return sub.latest() if sub is not None else None

    @property
    def specs(self) -> dict[str, ToolSpec]:
        if self._specs is None:
            raw = self.bus.call(names.TOOL_CATALOGUE, {}, timeout_s=5.0)
            self._specs = {d["name"]: spec_from_dict(d) for d in raw}
        return self._specs

    def tool_defs(self) -> list[ToolDef]:
        defs = list(PLANNER_TOOLS.values())
        defs += self.views.tool_defs()
        if self.scene_observer is not None:
            defs += self.scene_observer.tool_defs()  # offered only while it can run
        for spec in self.specs.values():
            defs.append(ToolDef(spec.name, describe_tool(spec), tool_schema(spec)))
        return defs

    # inputs (any thread): only queue, never act -------------------------------------------
    def message(self, text: str, by: str = "user") -> dict[str, Any]:
        text = text.strip()
        if not text:
            return {"ok": False, "reason": "empty message"}
        if text in ("/cancel", "/reset"):
            return self.cancel(by) if text == "/cancel" else self.reset(by)
        self.events.put(Event("user", "chat", text, {"by": by}, "queue", "message",
                              self.clock.now()))
        return {"ok": True, "reason": ""}

    def cancel(self, by: str = "operator") -> dict[str, Any]:
        self.events.put(Event("user", "ui", "cancel", {"by": by}, "interrupt", "cancel",
                              self.clock.now()))
        return {"ok": True, "reason": ""}

    def reset(self, by: str = "operator") -> dict[str, Any]:
        self.events.put(Event("user", "ui", "reset", {"by": by}, "interrupt", "reset",
                              self.clock.now()))
        return {"ok": True, "reason": ""}

    def continue_in(self, log: EpisodeLog) -> None:
        """Carry a run on in the next episode's log, opening it with a ``run_continued`` event
        (the run's config, status, plan so far and the episode it continues from) so each log
        reads on its own."""
        self.runs.continue_in(log)

    def _on_operator(self, ev: OperatorEvent) -> None:
        self.events.put(Event("operator", "teleop", ev.kind, dict(ev.detail), "interrupt",
                              "operator", self.clock.now()))

    def _on_verdict(self, v: MonitorVerdict) -> None:
        self.log_event("monitor_answer", action_id=v.action_id, tool=v.tool, question=v.question,
                       value=v.value, probability=v.probability, decision=v.decision,
                       source=v.source, reason=v.reason)
        if not v.decision and v.source == "monitor":
            # an answer below its rules' floor is no finding (the rules let it do nothing):
            # it is not shown, and the older answer it replaces is stale
            floor = self.answer_floor(v)
            with self.notes_lock:
                if floor is not None and v.probability < floor:
                    self.monitor_notes.pop((v.action_id, v.question), None)
                else:
                    self.monitor_notes[(v.action_id, v.question)] = v
        if v.decision:
            self.events.put(Event(v.source, "verdict", v.reason or v.value, {"verdict": v},
                                  "interrupt" if v.decision == "fail" else "queue",
                                  "monitor_flag", self.clock.now()))

    def answer_floor(self, v: MonitorVerdict) -> float | None:
        """The confidence floor of the rules that judge ``v`` (:func:`.monitor_rules.floor`),
        from its tool's monitor questions; a question the tool does not declare is the
        planner's watch_for condition."""
        floors = self._floors.get(v.tool)
        if floors is None:
            spec = self.specs.get(v.tool)
            try:
                qs = parse_questions(v.tool, list(getattr(spec, "monitor", ()) or ()))
            except ConfigError:
                qs = ()
            floors = self._floors[v.tool] = {q.name: q.rules for q in qs}
        rules = floors.get(v.question, (WATCH_FOR_RULE,))
        return floor(rules, v.value)

    def _on_skill_event(self, ev: AgentEvent) -> None:
        data = dict(ev.data)
        by = data.pop("by", None)
        self.log_event(ev.kind, by=by, **data)

    def on_goal_done(self, handle: GoalHandle) -> None:
        res = handle.result
        if isinstance(res, SkillResult):
            self.events.put(Event("skills", "action", res.outcome, {"result": res,
                                                                     "goal": handle.goal},
                                  "queue", "action_ended", self.clock.now()))

    # the loop -----------------------------------------------------------------------------
    def tick(self) -> None:
        """Handle what arrived, poll the model call, start the next call if woken.  Never
        raises: an internal error is logged and ends the run cleanly."""
        try:
            self._tick()
        except Exception as e:  # nothing escapes into the spin loop
            self.log_event("harness_error", error=f"{type(e).__name__}: {e}")
            if self.status in ("running", "waiting_user", "paused"):
                self.runs.end_run("failed", f"harness error: {e}")

    def _tick(self) -> None:
        now = self.clock.now()
        for ev in self.events.drain():
            self.routing.route(ev)
        self.routing.poll_side(now)
        if self.turn is not None:
            self.cycle.poll_turn()
        if self.deferred and (self.turn is None or not self.turn.pending):
            for ev in self.deferred:
                self.events.put(ev)
            self.deferred.clear()
        if self.status != "running":
            return
        self.runs.check_budgets(now)
        if self.status != "running" or self.turn is not None or self.cycle.poll_wake():
            return
        hb = self.config.planner_heartbeat_s
        if (hb is not None and self.actions and not self.wake_reasons
                and now - self.last_activity >= hb):
            # the next heartbeat is due hb after this one, not at every tick from now on
            self.last_activity = now
            self.wake("heartbeat")
        if self.wake_reasons or self.continue_turn:
            if self.routing.waiting_for_stop(now):
                return
            # a wake, or a turn after a refused call (a stale point while the arm still
            # moved), waits for still frames: a planner never spins on instant refusals
            if (self.wake_reasons or self.calls.refused_last_turn) and \
                    not self.routing.urgent and self.cycle.frames_settling(now):
                return
            if self.cycle.backing_off(now):
                return  # a failed call's retry waits for its backoff
            self.routing.urgent = False
            self.cycle.start_model_call()

    # what every part uses ------------------------------------------------------------------
    def wake(self, reason: str, hold: bool = False) -> None:
        """Wake the planner.  ``hold``: a failure, timeout, stop, monitor flag, the user or the
        operator woke it, so the plan queue waits for its reply and no step starts by itself
        until then: what woke it may change the plan."""
        self.wake_reasons.append(reason)
        self.cycle.woken(reason)
        if hold:
            self.plan_hold = True

    def log_event(self, kind: str, by: str | None = None, **data: Any) -> None:
        rec: dict[str, Any] | None = None
        if self.log is not None:
            try:
                rec = self.log.event(kind, by=by, **data)
            except Exception as e:
                # a full disk or a closed file must not take the control loop down (tick's own
                # error handler logs too): the event still goes out on the bus, and the first
                # failure is announced there
                self.log_errors += 1
                if self.log_errors == 1:
                    self._event_pub.publish(AgentEvent(self.clock.wall(), "harness_error", {
                        "error": f"episode log write failed: {type(e).__name__}: {e}"}))
        if rec is None:
            rec = {"t": self.clock.wall(), "kind": kind, **({"by": by} if by else {}), **data}
        self._event_pub.publish(AgentEvent(rec["t"], kind, {k: v for k, v in rec.items()
                                                           if k not in ("t", "kind")}))

    def publish_state(self) -> None:
        now = self.clock.now()
        self._state_pub.publish(AgentState(
            generation=self.generation, status=self.status, task=self.task,
            plan=tuple(self.plan.as_list()),
            actions=tuple({"action_id": a.action_id, "tool": a.tool, "params": a.params,
                           "elapsed_s": round(now - a.started_at, 2)}
                          for a in self.actions.values()),
            conversation=tuple(self.conversation[-50:]), stamp=now))

    def shutdown(self) -> None:
        if self.status in ("running", "paused", "waiting_user"):
            self.runs.stop_everything("shutdown")
            self.runs.end_run("cancelled", "shut down")
        self.caller.shutdown()


__all__ = ["ACTIVE_STATUSES", "HARNESS_INSTRUCTIONS", "PLANNER_TOOLS", "RUN_STATUSES",
           "ActionInfo", "InlineCaller", "ModelCaller", "Planner", "ThreadCaller"]
