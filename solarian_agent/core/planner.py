"""The planner harness (seed 003, "How a run goes").

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
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..models.base import (
    ImagePart,
    Message,
    ModelError,
    ModelProvider,
    ModelReply,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolDef,
)
from ..perception.observe_scene import (
    AttentionEpisode,
    SceneObserver,
    build_vision_backend,
    effective_vision,
)
from ..perception.vision import VisionBackend
from . import names
from .clock import Clock
from .config import AgentConfig
from .episode_log import EpisodeLog, Recorder, slug
from .errors import ToolCallRejected
from .events import Event, EventQueue
from .executor import new_action_id, schema_error, tool_schema, validate_params
from .messages import (
    AgentEvent,
    AgentState,
    Generation,
    Image,
    JointState,
    MonitorVerdict,
    OperatorEvent,
    SkillFeedback,
    SkillGoal,
    SkillResult,
)
from .observations import ObservationStore, Overlay
from .plan import PLAN_SCHEMA, PlanQueue
from .routing import (
    PARALLEL_SYSTEM,
    TASK_INSTRUCTIONS,
    TASK_TOOLS,
    NewsItem,
    RouteContext,
    RouteDecision,
    Router,
    build_router,
    describe_async,
    label_for,
    parallel_note,
    pct,
    placeholder_cancelled,
    placeholder_running,
    render_news,
    replace_progress,
)
from .skill import ToolSpec
from .timers import TimerError, Timers
from .transport import LATCHED, Bus, GoalHandle, GoalStatus, QoS
from .views import PreparedViews, ViewManager

HARNESS_INSTRUCTIONS = """\
You are the planner of a robot.  You act only through tools.
- A skill tool returns as soon as the skill has started and ends your turn; you are woken when
  it ends, fails, times out or the monitor flags something.  Refused calls and observe are
  answered at once.
- update_plan: keep a plan.  Steps may carry the tool and args that carry them out; when an
  action succeeds and nothing else runs, the harness starts the next complete step without you.
  Steps whose tool takes image points need you to point in a fresh image.
- Points are [x, y] pixels in an image you were shown; pass its observation_id.  A point on an
  image taken before the robot last moved is refused: observe first.
- A monitor flag can be wrong: check it against the newest image before stopping an action.
  A controller check is reliable.
- A timeout is not a failure: look at the newest image before undoing anything.
- When the task is done and checked in a fresh image, call finish_task.
"""

PLANNER_TOOLS: dict[str, ToolDef] = {
    "update_plan": ToolDef("update_plan",
                           "Replace the plan: a list of steps, each with a description and "
                           "optionally the tool and args that carry it out.", PLAN_SCHEMA),
    "observe": ToolDef("observe",
                       "Take fresh images now (all agent cameras, or the ones named). Answered "
                       "at once with new observation ids.",
                       {"type": "object", "properties": {"cameras": {
                           "type": "array", "items": {"type": "string"}}},
                        "additionalProperties": False}),
    "stop_action": ToolDef("stop_action", "Stop a running action by its id.",
                           {"type": "object", "properties": {
                               "action_id": {"type": "string"},
                               "reason": {"type": "string", "maxLength": 300}},
                            "required": ["action_id"], "additionalProperties": False}),
    "ask_user": ToolDef("ask_user", "Ask the operator a question; the run waits for the answer.",
                        {"type": "object", "properties": {
                            "question": {"type": "string", "minLength": 1, "maxLength": 2000}},
                         "required": ["question"], "additionalProperties": False}),
    "finish_task": ToolDef("finish_task",
                           "End the run: the task is done (checked in a fresh image) or cannot "
                           "be done.",
                           {"type": "object", "properties": {
                               "summary": {"type": "string", "maxLength": 2000},
                               "success": {"type": "boolean"}},
                            "required": ["summary", "success"], "additionalProperties": False}),
}

PLANNER_TOOLS.update(TASK_TOOLS)  # seed 004: task_status, cancel_task, set_timer, cancel_timer
HARNESS_INSTRUCTIONS += TASK_INSTRUCTIONS

FRESH_FRAME_WAIT_S = 0.5  # the longest a wake waits for a frame newer than the last motion
FIRST_FRAME_WAIT_S = 5.0  # ... and for a camera's first frame (a ROS graph still starting)
STOP_WAIT_S = 1.0  # after a user stop, the re-plan call waits this long for the stops to land
ACTIVE_STATUSES = ("running", "paused", "waiting_user")
SETTLE_S = 0.1  # the robot counts as still after this long without movement

RUN_STATUSES = ("idle", "running", "paused", "waiting_user", "succeeded", "failed",
                "cancelled", "budget_exhausted")


R = TypeVar("R")


class ModelCaller:
    """Runs model calls (and anything that waits on a model) off the control path.
    ``submit`` never blocks."""

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        raise NotImplementedError

    def shutdown(self) -> None:
        pass


class ThreadCaller(ModelCaller):
    def __init__(self, workers: int = 4) -> None:
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="model")

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        return self._pool.submit(fn)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class InlineCaller(ModelCaller):
    """Completes the call at once (offline providers, deterministic tests); the result is still
    only handled at the next ``tick``, exactly as a threaded call's would be."""

    def submit(self, fn: Callable[[], R]) -> cf.Future[R]:
        fut: cf.Future[R] = cf.Future()
        try:
            fut.set_result(fn())
        except BaseException as e:  # handed over to tick(), which turns it into an error
            fut.set_exception(e)
        return fut


@dataclass
class _PendingStart:
    call: ToolCall
    handle: GoalHandle
    action_id: str
    tool: str
    sent_at: float


@dataclass
class _Turn:
    """The planner call in flight and the reply's calls awaiting their skill to start."""

    generation: int
    future: cf.Future[ModelReply] | None = None
    turn_file: str = ""
    started_at: float = 0.0
    wall_start: float = 0.0
    request: ModelRequest | None = None
    pending: list[_PendingStart] = field(default_factory=list)
    results: dict[str, Message] = field(default_factory=dict)
    call_order: list[str] = field(default_factory=list)
    started_any: bool = False
    ended: bool = False
    waits: bool = False  # a call in the reply waits for an event (cancel_task, set_timer)
    # calls answered by work that may wait on a model (a view description, observe_scene)
    futures: list[tuple[ToolCall, cf.Future[Message]]] = field(default_factory=list)


@dataclass
class ActionInfo:
    action_id: str
    tool: str
    params: dict[str, Any]
    started_at: float
    handle: GoalHandle
    watched: bool
    step: int | None = None


@dataclass
class _SideCall:
    """A model call beside the main one: the router model or a parallel answer (seed 004)."""

    kind: str  # router | parallel
    event: Event
    future: cf.Future[ModelReply]
    started_at: float
    wall_start: float
    entry: dict[str, Any] | None = None  # the conversation entry of a parallel question


class Planner:
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
        vision: str | None = None,
        vision_backend: VisionBackend | None = None,
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.config = config
        self.provider = provider
        self.recorder = recorder
        self.caller = caller or ThreadCaller()
        self.cameras = list(cameras if cameras is not None else config.cameras)
        self._readings_fn = readings
        self.on_agent_idle = on_agent_idle
        side = min(config.image_max_side, int(getattr(provider, "max_image_side", 10_000)))
        self.observations = ObservationStore(clock, side, config.max_point_age_s,
                                             grid=config.image_grid)
        self.events = EventQueue(config.events.queue_size, config.events.overflow)
        self._lock = threading.Lock()

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
        self.turn: _Turn | None = None
        self.continue_turn = False
        self.text_only_replies = 0
        self.last_activity = clock.now()
        self.log: EpisodeLog | None = None
        self.log_errors = 0  # episode log writes that failed (the run goes on without them)
        self.summary = ""
        self.tool_failures: dict[str, int] = {}
        self._deferred: list[Event] = []
        self._settle_since: float | None = None
        self._turn_cursor: int | None = None  # after run_continued: log only newer messages
        # seed 004: urgency routing, parallel answers, task progress, timers
        # rules only, or rules plus the router model agent.events.router names
        self.router = router if router is not None else build_router(config.events)
        self.timers = Timers(clock, config.events.max_timers)
        self._side: list[_SideCall] = []  # router / parallel calls in flight
        self._held: list[NewsItem] = []  # queued user additions waiting for a tool result
        self._held_since = 0.0
        self._boundary = False  # a tool result arrived this tick
        self._urgent = False  # the next call is an interrupt's: no waiting for fresh frames
        self._stopping: dict[str, float] = {}  # action_id -> when a user stop was sent
        # a wake that holds the plan queue (see _wake): no plan step starts until the next reply
        self._plan_hold = False
        self._background: list[_PendingStart] = []  # starts answered with a placeholder
        self._progress_seen: dict[str, int] = {}  # action_id -> progress steps reported
        self._ended_tasks: dict[str, str] = {}  # action_id -> how it ended

        # graph endpoints ----------------------------------------------------------------
        self._state_pub = bus.publisher(names.AGENT_STATE, names.T_AGENT_STATE, LATCHED,
                                        node=node)
        self._event_pub = bus.publisher(names.AGENT_EVENTS, names.T_AGENT_EVENT, QoS(depth=200),
                                        node=node)
        self._view_pub = bus.publisher(names.AGENT_VIEW, names.T_IMAGE, QoS(depth=1), node=node)
        self._frames = {c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1),
                                         node=node) for c in self.cameras}
        self._joints = bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE,
                                     callback=self.observations.motion.update, qos=QoS(depth=1),
                                     node=node)
        bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=self._on_skill_event,
                      qos=QoS(depth=200), node=node)
        bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                      callback=self._on_verdict, qos=QoS(depth=100), node=node)
        bus.subscribe(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT,
                      callback=self._on_operator, qos=QoS(depth=100), node=node)
        self._gen_sub = bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION,
                                      qos=LATCHED, node=node)
        bus.create_service(names.AGENT_MESSAGE, names.T_AGENT_COMMAND,
                           lambda req: self.message(str(req.get("text", ""))), node=node)
        bus.create_service(names.AGENT_CANCEL, names.T_AGENT_COMMAND,
                           lambda req: self.cancel(str(req.get("by", "operator"))), node=node)
        bus.create_service(names.AGENT_RESET, names.T_AGENT_COMMAND,
                           lambda req: self.reset(str(req.get("by", "operator"))), node=node)
        self._specs: dict[str, ToolSpec] | None = None

        # seed 000 views and seed 001 observe_scene -----------------------------------------
        # (a non-none vision needs a camera and a planner: ConfigError at start-up otherwise)
        vision_name, vision_camera = effective_vision(config, vision)
        self.vision_backend = vision_backend if vision_backend is not None else (
            build_vision_backend(vision_name, config) if vision_name != "none" else None)
        self.views = ViewManager(clock, self.observations, self._latest_frame, self.cameras,
                                 reads_images=bool(provider.reads_images),
                                 describer=self.vision_backend,
                                 fixed=list(config.runtime.cameras),
                                 on_event=lambda k, d: self._log(k, **d),
                                 # the controller's overlays (tracker masks) on planner images;
                                 # the monitor never gets them, whatever this says
                                 overlays=list(image_overlays or [])
                                 if config.image_overlays else [])
        self.scene_observer: SceneObserver | None = None
        if self.vision_backend is not None and vision_camera:
            self.scene_observer = SceneObserver.on_bus(
                bus, clock, self.vision_backend, vision_camera,
                on_event=lambda k, d: self._log(k, **d))
        if self.scene_observer is not None and not bus.has_service(names.OBSERVE_SCENE):
            bus.create_service(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE,
                               self._srv_observe_scene, node=node)
        self.attention = AttentionEpisode(autonomous=True)
        self._pending_wake: tuple[Message, cf.Future[list[Any]]] | None = None
        self._prepared_wake: PreparedViews = PreparedViews(self.views)
        # monitor answers to questions without rules: shown to the planner, never acted on
        self.monitor_notes: dict[tuple[str, str], MonitorVerdict] = {}
        self._publish_state()  # a late viewer sees the idle planner

    def _srv_observe_scene(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """``agent/observe_scene`` for an operator (any front end): its own operator attention
        episode per request.  Runs on the caller's thread (a model call), never on the tick."""
        focus = req.get("focus") if isinstance(req, Mapping) else None
        observer = self.scene_observer
        if observer is None:
            return {"ok": False, "error": "no vision backend is configured", "focus": ""}
        try:
            res = observer.handle({"focus": focus}, AttentionEpisode(autonomous=False))
        except ToolCallRejected as e:
            return {"ok": False, "error": e.reason, "focus": str(focus or "").strip()}
        except Exception as e:  # a service never raises into its caller
            return {"ok": False, "error": f"{type(e).__name__}: {e}",
                    "focus": str(focus or "").strip()}
        return {"ok": True, "error": "", "focus": res.focus, "description": res.description,
                "truncated": res.truncated, "observed_at": res.observed_at}

    def _latest_frame(self, camera: str) -> Image | None:
        sub = self._frames.get(camera)
        return sub.latest() if sub is not None else None

    # ------------------------------------------------------------------------------------
    # tools
    # ------------------------------------------------------------------------------------
    @property
    def specs(self) -> dict[str, ToolSpec]:
        if self._specs is None:
            raw = self.bus.call(names.TOOL_CATALOGUE, {}, timeout_s=5.0)
            self._specs = {d["name"]: _spec_from_dict(d) for d in raw}
        return self._specs

    def tool_defs(self) -> list[ToolDef]:
        defs = list(PLANNER_TOOLS.values())
        defs += self.views.tool_defs()
        if self.scene_observer is not None:
            defs += self.scene_observer.tool_defs()  # offered only while it can run
        for spec in self.specs.values():
            defs.append(ToolDef(spec.name, _describe(spec), tool_schema(spec)))
        return defs

    # ------------------------------------------------------------------------------------
    # inputs (any thread): only queue, never act
    # ------------------------------------------------------------------------------------
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

    def _on_operator(self, ev: OperatorEvent) -> None:
        self.events.put(Event("operator", "teleop", ev.kind, dict(ev.detail), "interrupt",
                              "operator", self.clock.now()))

    def _on_verdict(self, v: MonitorVerdict) -> None:
        self._log("monitor_answer", action_id=v.action_id, tool=v.tool, question=v.question,
                  value=v.value, probability=v.probability, decision=v.decision,
                  source=v.source, reason=v.reason)
        if not v.decision and v.source == "monitor":
            with self._lock:
                self.monitor_notes[(v.action_id, v.question)] = v
        if v.decision:
            self.events.put(Event(v.source, "verdict", v.reason or v.value, {"verdict": v},
                                  "interrupt" if v.decision == "fail" else "queue",
                                  "monitor_flag", self.clock.now()))

    def _on_skill_event(self, ev: AgentEvent) -> None:
        data = dict(ev.data)
        by = data.pop("by", None)
        self._log(ev.kind, by=by, **data)

    def _on_goal_done(self, handle: GoalHandle) -> None:
        res = handle.result
        if isinstance(res, SkillResult):
            self.events.put(Event("skills", "action", res.outcome, {"result": res,
                                                                     "goal": handle.goal},
                                  "queue", "action_ended", self.clock.now()))

    # ------------------------------------------------------------------------------------
    # the loop
    # ------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Handle what arrived, poll the model call, start the next call if woken.  Never
        raises: an internal error is logged and ends the run cleanly."""
        try:
            self._tick()
        except Exception as e:  # nothing escapes into the spin loop
            self._log("harness_error", error=f"{type(e).__name__}: {e}")
            if self.status in ("running", "waiting_user", "paused"):
                self._end_run("failed", f"harness error: {e}")

    def _tick(self) -> None:
        now = self.clock.now()
        for ev in self.events.drain():
            self._route(ev)
        self._poll_side(now)
        if self.turn is not None:
            self._poll_turn()
        if self._deferred and (self.turn is None or not self.turn.pending):
            for ev in self._deferred:
                self.events.put(ev)
            self._deferred.clear()
        if self.status != "running":
            return
        self._check_budgets(now)
        if self.status != "running" or self.turn is not None or self._poll_wake():
            return
        hb = self.config.planner_heartbeat_s
        if (hb is not None and self.actions and not self.wake_reasons
                and now - self.last_activity >= hb):
            # the next heartbeat is due hb after this one, not at every tick from now on
            self.last_activity = now
            self._wake("heartbeat")
        if self.wake_reasons or self.continue_turn:
            if self._waiting_for_stop(now):
                return
            if self.wake_reasons and not self._urgent and self._frames_settling(now):
                return
            self._urgent = False
            self._start_model_call()

    def _frames_settling(self, now: float) -> bool:
        """Hold a wake back (at most ``FRESH_FRAME_WAIT_S``) until every camera has a frame
        captured after the robot last moved, so the planner is not shown, and does not point
        in, an image the harness would refuse as stale; and (at most ``FIRST_FRAME_WAIT_S``)
        until every camera has delivered at all."""
        if self._settle_since is None:
            self._settle_since = now
        waited = now - self._settle_since
        if waited < FIRST_FRAME_WAIT_S and any(
                sub.latest() is None for sub in self._frames.values()):
            return True  # a camera that has not delivered yet: a graph still coming up
        if waited >= FRESH_FRAME_WAIT_S:
            self._settle_since = None
            return False
        moved = self.observations.motion.last_moved
        if now - moved < SETTLE_S:
            return True  # still moving, or just stopped: the next frame would be stale
        for sub in self._frames.values():
            f = sub.latest()
            if f is not None and f.stamp < moved:
                return True
        self._settle_since = None
        return False

    # events ------------------------------------------------------------------------------
    def _handle_event(self, ev: Event) -> None:
        self.last_activity = self.clock.now()
        if ev.kind == "message":
            self._handle_message(ev)
        elif ev.kind == "cancel":
            self._handle_cancel(ev, forget=False)
        elif ev.kind == "reset":
            self._handle_cancel(ev, forget=True)
        elif ev.kind == "operator":
            self._handle_operator(ev)
        elif ev.kind == "action_ended":
            self._handle_action_ended(ev.context["result"], ev.context["goal"])
        elif ev.kind == "monitor_flag":
            self._handle_verdict(ev.context["verdict"])
        else:
            self.news.append(f"{ev.source}: {ev.content}")
            self._wake(ev.kind or ev.source)

    def _handle_message(self, ev: Event, wake: bool = True) -> None:
        text = ev.content
        self.conversation.append({"role": "user", "text": text, "by": ev.context.get("by")})
        if self.status in ("idle", "succeeded", "failed", "cancelled", "budget_exhausted"):
            self._start_run(text)
            return
        if self.status == "paused":
            self._adopt_generation()
            did = "; ".join(self.operator_actions) or "took over"
            self.news.append(f"While the run was paused the operator: {did}.")
            self.operator_actions.clear()
            self.status = "running"
            self._log("run_resumed", by="operator", generation=self.generation)
        elif self.status == "waiting_user":
            self.status = "running"
        self.news.append(f"User: {text}")
        if wake:  # a queued addition held for the next tool result is woken for later
            self._wake("message", hold=True)

    def _handle_cancel(self, ev: Event, forget: bool) -> None:
        by = str(ev.context.get("by", "operator"))
        active = self.status in ("running", "paused", "waiting_user")
        if active or self.actions:
            self._advance_generation("reset" if forget else "cancel", by)
        if active:
            self._end_run("cancelled", "reset by the operator" if forget
                          else "cancelled by the operator")
        if forget:
            self.messages.clear()
            self.conversation.clear()
            self.plan = PlanQueue()
            self.task = ""
            self.views.pins.clear()
            self.views.keep = 0
            self._log("conversation_reset", by=by)
        self._publish_state()

    def _handle_operator(self, ev: Event) -> None:
        desc = ev.content + (f" {json.dumps(ev.context, default=str)}" if ev.context else "")
        self._log("operator_takeover", by="operator", action=ev.content, detail=ev.context)
        self.operator_actions.append(desc)
        # the executor advanced the generation itself when the event was published; the
        # planner only stops listening to its old decisions and adopts the new generation
        self._adopt_generation()
        if self.status in ("running", "waiting_user"):
            self.status = "paused"
            self._log("run_paused", by="operator", reason=desc)
            self.turn = None  # a reply in flight belongs to the old generation: discarded
            self.continue_turn = False
            self.wake_reasons.clear()
            self._publish_state()

    def _advance_generation(self, reason: str, by: str) -> None:
        try:
            gen = self.bus.call(names.EXECUTOR_ADVANCE, {"reason": reason, "by": by},
                                timeout_s=2.0)
            self.generation = int(gen)
        except Exception as e:
            # the executor is unreachable: we still never send with the old generation
            self.generation += 1
            self._log("harness_error", error=f"could not advance generation: {e}")

    def _adopt_generation(self) -> None:
        g = self._gen_sub.latest()
        if isinstance(g, Generation) and g.value > self.generation:
            self.generation = g.value

    def _handle_action_ended(self, res: SkillResult, goal: SkillGoal) -> None:
        if self.turn is not None and any(ps.action_id == res.action_id
                                         for ps in self.turn.pending):
            # the tool call that started it is still being answered: handle the end after it
            self._deferred.append(Event("skills", "action", res.outcome,
                                        {"result": res, "goal": goal}, "queue", "action_ended",
                                        self.clock.now()))
            return
        info = self.actions.pop(res.action_id, None)
        if info is None and res.outcome == "refused":
            # refused before it started: the planner already got that as its tool result
            self._log("action_refused", action_id=res.action_id, tool=goal.tool,
                      reason=res.reason)
            return
        tool = info.tool if info else goal.tool
        self._log("action_ended", action_id=res.action_id, tool=tool, outcome=res.outcome,
                  reason=res.reason, data=res.data)
        with self._lock:
            for key in [k for k in self.monitor_notes if k[0] == res.action_id]:
                del self.monitor_notes[key]
        # per-action bookkeeping ends with the action, whatever the run's status is now (a
        # paused or ended run must not keep it for the life of the process)
        followup = self.followups.pop(res.action_id, None)
        woken_for_fail = res.action_id in self.woken_for_fail
        self.woken_for_fail.discard(res.action_id)
        self.escalated = {k for k in self.escalated if k[0] != res.action_id}
        if self.status not in ("running", "waiting_user"):
            self._publish_state()  # the action is gone from any viewer's screen too
            return
        step = self.plan.action_ended(res.action_id, res.outcome)
        if res.outcome == "succeeded":
            self.tool_failures[tool] = 0
        elif res.outcome not in ("stopped", "timed_out"):  # a timeout is not a failure
            self.tool_failures[tool] = self.tool_failures.get(tool, 0) + 1
        if followup is not None:
            ftool, decision = followup
            new_id = self._send_goal(ftool, {}, by_harness=True)
            if not new_id:
                # _send_goal told why; the queue waits for the planner instead of going on
                # as if the step that always follows had run
                self._wake(f"follow-up {ftool} could not start", hold=True)
            if new_id and decision == "finish":
                taken = self.plan.follow_up(res.action_id, ftool, new_id)
                if taken is not None and new_id in self.actions:
                    self.actions[new_id].step = taken.index
                self.news.append(f"Action {res.action_id} ({tool}) finished by the monitor "
                                 f"({res.reason}); {ftool} started as its follow-up "
                                 f"({new_id}).")
                return
            if new_id:
                self.news.append(f"{ftool} started ({new_id}) after {res.action_id} failed.")
        if woken_for_fail:
            self.news.append(f"Action {res.action_id} ({tool}) has now stopped.")
            return
        if res.outcome == "succeeded":
            extra = {k: v for k, v in res.data.items() if k != "reason"}
            self.news.append(f"Action {res.action_id} ({tool}) succeeded"
                             + (f": {res.reason}" if res.reason else ".")
                             + (f" Result: {json.dumps(extra, default=str)[:1500]}"
                                if extra else ""))
            if self.actions:
                if step is None:  # a task the planner started itself: its result is news now
                    self._wake("task_done")
                return
            nxt = self.plan.next_step(self._needs_point(), set(self.specs))
            if nxt.step is not None and (self._held or self._plan_hold):
                # queued user additions, or the planner was woken (a failure, a timeout, a
                # stop, a monitor flag, the user) and has not replied: it decides the next step
                self._wake("queued events before the next plan step")
                return
            if nxt.step is not None:
                args = dict(nxt.step.args or {})
                new_id = self._send_goal(nxt.step.tool or "", args, by_harness=True,
                                         step_index=nxt.step.index)
                if new_id:
                    self._log("plan_step", step=nxt.step.index, tool=nxt.step.tool,
                              args=args, action_id=new_id)
                    return
                self._wake(f"plan step {nxt.step.index} could not start")
                return
            self._wake(nxt.wake_reason)
            return
        self._wake_for_end(res, tool, info)

    def _wake_for_end(self, res: SkillResult, tool: str, info: ActionInfo | None) -> None:
        if res.outcome == "timed_out":
            if info is not None and info.watched:
                msg = (f"Action {res.action_id} ({tool}) ran its limit without the monitor "
                       "confirming success. Look at the newest image before undoing anything.")
            else:
                msg = (f"Action {res.action_id} ({tool}) ran its limit; judge from the newest "
                       "image whether it succeeded. Look before undoing anything.")
        elif res.outcome == "refused":
            msg = f"Action {res.action_id} ({tool}) was refused: {res.reason}"
        elif res.outcome == "stopped":
            msg = f"Action {res.action_id} ({tool}) was stopped: {res.reason}"
        else:
            msg = f"Action {res.action_id} ({tool}) failed: {res.reason}"
            extra = res.data.get("skill_reasons")
            if extra:
                msg += f" (the skill also reported: {'; '.join(extra)})"
        n = self.tool_failures.get(tool, 0)
        if n >= self.config.budgets.retries_per_step:
            msg += (f" {tool} has failed {n} times in a row: change your approach instead of "
                    "retrying it the same way.")
        self.news.append(msg)
        self._wake(f"action_{res.outcome}", hold=True)

    def _handle_verdict(self, v: MonitorVerdict) -> None:
        # while the planner waits for the user its actions still run: the monitor still ends
        # them (the planner hears of it with the user's answer)
        if v.action_id not in self.actions or self.status not in ("running", "waiting_user"):
            return
        who = "controller check" if v.source == "controller" else "monitor"
        if v.decision in ("finish", "fail"):
            outcome = "succeeded" if v.decision == "finish" else "failed"
            try:
                r = self.bus.call(names.SKILL_CONCLUDE, {
                    "action_id": v.action_id, "outcome": outcome, "generation": self.generation,
                    "reason": f"{who}: {v.reason or v.question + '=' + v.value}"},
                    timeout_s=2.0)
            except Exception as e:
                r = {"ok": False, "reason": str(e)}
            self._log("monitor_decision", action_id=v.action_id, decision=v.decision,
                      source=v.source, then=v.then, accepted=bool(r.get("ok")),
                      reason=r.get("reason", ""))
            if not r.get("ok"):
                return
            if v.then:
                self.followups[v.action_id] = (v.then, v.decision)
            if v.decision == "fail":
                self.woken_for_fail.add(v.action_id)
                self.news.append(f"The {who} failed action {v.action_id} ({v.tool}): "
                                 f"{v.reason or v.value}. A monitor flag can be wrong: check "
                                 "the newest image.")
                self._wake("monitor_flag", hold=True)
        elif v.decision == "escalate":
            key = (v.action_id, v.question)
            if key in self.escalated:
                return
            self.escalated.add(key)
            self.news.append(f"The {who} flags action {v.action_id} ({v.tool}): {v.question} = "
                             f"{v.value} (p={v.probability:.2f}). {v.reason} The action is still "
                             "running. A monitor flag can be wrong: check the newest image "
                             "before stopping it.")
            self._wake("monitor_flag", hold=True)

    # seed 004: urgency routing ---------------------------------------------------------------
    def _route_ctx(self) -> RouteContext:
        now = self.clock.now()
        return RouteContext(
            active=self.status in ACTIVE_STATUSES,
            busy=self.status == "running" and (self.turn is not None or bool(self.actions)),
            task=self.task,
            running=tuple(f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                          for a in self.actions.values()))

    def _route(self, ev: Event) -> None:
        """Route one event: the rule table decides at once; an event no rule covers goes to the
        router model (off the control path, polled like every model call)."""
        ctx = self._route_ctx()
        decision = self.router.route(ev, ctx)
        if decision is not None:
            self._apply_route(ev, decision)
            return
        model, req = self.router.model, self.router.request(ev, ctx)
        timeout = self.router.timeout_s
        fut = self.caller.submit(lambda: model.complete(req, timeout_s=timeout))
        self._side.append(_SideCall("router", ev, fut, self.clock.now(), time.monotonic()))

    def _apply_route(self, ev: Event, d: RouteDecision) -> None:
        self._log("route", by=d.by, event=ev.kind, source=ev.source, channel=ev.channel,
                  content=ev.content[:200], urgency=d.urgency, reason=d.reason, rule=d.rule,
                  stop=d.stop, seq=ev.seq)
        if (d.urgency == "parallel" and ev.kind == "message" and self.config.events.parallel
                and self.status == "running"):
            self._ask_parallel(ev)
            return
        if d.urgency == "interrupt":
            self._interrupt(ev, d)
        self._dispatch(ev, d)

    def _dispatch(self, ev: Event, d: RouteDecision) -> None:
        """Handle a routed event and tag what it told the planner for batch markers."""
        self.last_activity = self.clock.now()
        n0 = len(self.news)
        label, source, task_id = label_for(ev, d.urgency), ev.source, ""
        hold = False
        if ev.kind == "message":
            if self.status not in ACTIVE_STATUSES:
                self._reset_event_state()
            hold = (d.urgency == "queue" and self.status == "running" and bool(self.actions)
                    and self.turn is None)
            if d.urgency == "interrupt" and self.status in ("running", "waiting_user"):
                self._wake("interrupt", hold=True)
            self._handle_message(ev, wake=not hold)
            source = str(ev.context.get("by") or "user")
        elif ev.kind == "timer":
            self._handle_timer(ev)
            source = f"timer {ev.context.get('timer_id', '')}"
        elif ev.kind == "task_progress":
            self._handle_progress(ev)
            return
        else:
            if ev.kind == "action_ended":
                res, goal = ev.context["result"], ev.context["goal"]
                task_id = res.action_id
                source = f"{goal.tool} {task_id}"
                self._boundary = True
                self._ended_tasks[task_id] = res.outcome + (f": {res.reason}" if res.reason
                                                            else "")
                # an undelivered progress report of a task that has ended is no news
                self.news[:] = [n for n in self.news if not (
                    isinstance(n, NewsItem) and n.label == "progress report"
                    and n.task_id == task_id)]
                n0 = len(self.news)
                if len(self._ended_tasks) > 200:
                    del self._ended_tasks[next(iter(self._ended_tasks))]
            elif ev.kind == "monitor_flag":
                v = ev.context.get("verdict")
                if isinstance(v, MonitorVerdict):
                    source, task_id = f"{v.source} on {v.tool} {v.action_id}", v.action_id
            self._handle_event(ev)
        added: list[NewsItem] = []
        for i in range(min(n0, len(self.news)), len(self.news)):
            item = self.news[i]
            if not isinstance(item, NewsItem):
                item = NewsItem(item, label, source, task_id)
                self.news[i] = item
            added.append(item)
        if hold and added:
            if not self._held:
                self._held_since = self.clock.now()
            self._held.extend(added)
            self._log("event_held", event=ev.kind, content=ev.content[:200],
                      reason="queued until the next tool result")

    def _interrupt(self, ev: Event, d: RouteDecision) -> None:
        """Force an early boundary: cut the model call in flight, answer tool calls still
        starting with a placeholder, stop running actions when asked, deliver everything
        pending with the urgent event and call the model at once."""
        if self.status not in ACTIVE_STATUSES:
            return
        if ev.kind == "monitor_flag":
            v = ev.context.get("verdict")
            if not (isinstance(v, MonitorVerdict) and v.decision == "fail"
                    and v.action_id in self.actions and v.action_id not in self.woken_for_fail
                    and self.status == "running"):
                return  # a repeated or stale flag is no reason to cut anything
        what = f"{ev.source} {ev.kind}" + (f" {ev.content[:80]!r}" if ev.content else "")
        if ev.kind == "operator":
            who = "by the operator's takeover"
        elif ev.kind in ("cancel", "reset"):
            who = f"by the operator's {ev.kind}"
        else:
            who = f"by the user ({ev.content[:80]!r})"
        cut = self._cut_turn(what, d.stop, who)
        stopped: list[str] = []
        if d.stop and ev.kind == "message":
            now = self.clock.now()
            for aid, info in list(self.actions.items()):
                # a call cancelled before it started has already ended: wait for its end too
                if info.handle.status.terminal or self._stop_task(aid, info, f"cancelled {who}",
                                                                  by="user"):
                    stopped.append(aid)
                    self._stopping[aid] = now
            self._plan_hold = True
        released = self._release_held()
        self._urgent = True
        self._log("interrupt", event=ev.kind, source=ev.source, content=ev.content[:200],
                  cut=cut, stopped=stopped, released_events=released, reason=d.reason)

    def _cut_turn(self, what: str, cancel: bool, who: str) -> str:
        """End the turn in flight now.  Returns what was cut: '' (nothing), 'model_call' (the
        reply is discarded: the turn token is dropped, so a reply still being computed on a
        worker thread is never read) or 'pending_calls' (placeholders were given)."""
        turn = self.turn
        if turn is None:
            return ""
        if turn.future is not None:
            turn.future.cancel()  # a call not yet running never runs
            self.turn = None
            self._log("planner_reply_discarded", turn=turn.turn_file,
                      reason=f"interrupted by {what}")
            return "model_call"
        self._poll_pending(turn)  # skills that did start get their real result
        if self.turn is not turn:
            return ""
        for ps in turn.pending:
            if cancel:
                ps.handle.cancel()
                text = placeholder_cancelled(ps.tool, ps.action_id, who)
            else:
                self._background.append(ps)
                text = placeholder_running(ps.tool, ps.action_id, what)
            turn.results[ps.call.id] = _tool_msg(ps.call, text, error=cancel)
            self._log("tool_placeholder", tool=ps.tool, action_id=ps.action_id, text=text)
        turn.pending.clear()
        self._poll_pending(turn)
        return "pending_calls"

    def _stop_task(self, aid: str, info: ActionInfo, reason: str, by: str) -> bool:
        """Stop a running task with a reason the planner will read in its end event."""
        try:
            r = self.bus.call(names.SKILL_CONCLUDE, {
                "action_id": aid, "outcome": "stopped", "generation": self.generation,
                "reason": reason}, timeout_s=2.0)
            ok = bool(r.get("ok"))
        except Exception:
            ok = False
        if not ok:  # not started yet, or the conclude service is unreachable
            ok = info.handle.cancel()
        self._log("stop_action", by=by, action_id=aid, tool=info.tool, reason=reason,
                  accepted=ok)
        return ok

    def _release_held(self) -> int:
        n = len(self._held)
        if n:
            self._held.clear()
            self._wake("message", hold=True)
        return n

    def _waiting_for_stop(self, now: float) -> bool:
        """After a user stop, the re-plan call waits (at most ``STOP_WAIT_S``) for the stopped
        actions to end, so it sees their ends instead of being woken again for them."""
        for aid, t in list(self._stopping.items()):
            if aid not in self.actions or now - t >= STOP_WAIT_S:
                del self._stopping[aid]
        return bool(self._stopping)

    def _reset_event_state(self) -> None:
        self._held.clear()
        self._stopping.clear()
        self._background.clear()
        self._progress_seen.clear()
        self._plan_hold = False
        self._urgent = False
        self._boundary = False
        gone = self.timers.clear()
        if gone:
            self._log("timers_cleared", timers=[t.timer_id for t in gone],
                      reason="the run is over")

    def _poll_side(self, now: float) -> None:
        """Everything routing adds to a tick: side calls, timers, task progress, starts that
        were answered with a placeholder, and the release of held events."""
        for sc in list(self._side):
            limit = (self.router.timeout_s if sc.kind == "router"
                     else self.config.planner.timeout_s) + 5.0
            if not sc.future.done():
                if now - sc.started_at <= limit:
                    continue
                sc.future.cancel()
                self._side.remove(sc)
                self._side_done(sc, None, ModelError("timeout", f"no answer in {limit:g} s"))
                continue
            self._side.remove(sc)
            try:
                reply: ModelReply | None = sc.future.result()
                error: BaseException | None = None
            except BaseException as e:
                reply, error = None, e
            self._side_done(sc, reply, error)
        if self.status not in ACTIVE_STATUSES:
            if self._held or len(self.timers) or self._background:
                self._reset_event_state()
            return
        for t in self.timers.pop_due():
            self._route(Event("timer", "timer", t.note, {
                "timer_id": t.timer_id, "repeat": t.repeat, "fired": t.fired,
                "seconds": t.seconds}, "queue", "timer", now))
        self._poll_progress(now)
        self._poll_background(now)
        self._held = [h for h in self._held if any(n is h for n in self.news)]
        if self._held and (self._boundary or not self.actions or self.status != "running"
                           or self.wake_reasons
                           or now - self._held_since >= self.config.events.max_hold_s):
            self._release_held()
        self._boundary = False

    def _side_done(self, sc: _SideCall, reply: ModelReply | None,
                   error: BaseException | None) -> None:
        if sc.kind == "router":
            self._apply_route(sc.event, self.router.parse(reply, error, self._route_ctx()))
            return
        question = sc.event.content
        answer = reply.text.strip()[:2000] if reply is not None else ""
        if reply is not None:
            for k, v in reply.usage.as_dict().items():
                self.usage_total[k] = self.usage_total.get(k, 0) + v
        if not answer:
            why = (f"{error.kind}: {error.message}" if isinstance(error, ModelError)
                   else f"{type(error).__name__}: {error}" if error is not None
                   else "empty answer")
            self._log("parallel_failed", question=question, error=why)
            if sc.entry is not None and sc.entry in self.conversation:
                self.conversation.remove(sc.entry)  # the main task answers it instead
            self._dispatch(sc.event, RouteDecision(
                "queue", f"the parallel answer failed ({why})", "fallback"))
            return
        self.conversation.append({"role": "agent", "text": answer, "parallel": True})
        self._log("parallel_answer", question=question, answer=answer,
                  latency_s=round(time.monotonic() - sc.wall_start, 4),
                  usage=None if reply is None else reply.usage.as_dict())
        if self.status in ACTIVE_STATUSES:
            # joins the main trajectory with the next delivery; it wakes nothing
            self.news.append(NewsItem(parallel_note(question, answer), "parallel answer",
                                      str(sc.event.context.get("by") or "user")))
        self._publish_state()

    def _ask_parallel(self, ev: Event) -> None:
        """Answer an independent quick question in its own model call (same provider, a short
        prompt, no tools) while the main task carries on undisturbed."""
        entry = {"role": "user", "text": ev.content, "by": ev.context.get("by")}
        self.conversation.append(entry)
        now = self.clock.now()
        running = ", ".join(f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                            for a in self.actions.values()) or "nothing"
        text = (f"Now: {self.clock.wall()} (UTC)\nMain task: {self.task or '-'}\n"
                f"Running: {running}\n\nQuestion: {ev.content}")
        req = ModelRequest(PARALLEL_SYSTEM, (Message.user(text),), (),
                           min(512, self.config.planner.max_tokens), purpose="planner")
        provider, timeout = self.provider, self.config.planner.timeout_s
        self._log("parallel_question", question=ev.content)
        fut = self.caller.submit(lambda: provider.complete(req, timeout_s=timeout))
        self._side.append(_SideCall("parallel", ev, fut, now, time.monotonic(), entry))
        self._publish_state()

    def _handle_timer(self, ev: Event) -> None:
        c = ev.context
        every = (f" (#{c.get('fired')}, repeats every {float(c.get('seconds') or 0):g} s)"
                 if c.get("repeat") else "")
        self._log("timer_fired", timer_id=c.get("timer_id"), note=ev.content,
                  fired=c.get("fired"))
        if self.status not in ACTIVE_STATUSES:
            return
        self.news.append(f"Timer {c.get('timer_id')} fired{every}"
                         + (f": {ev.content}" if ev.content else "."))
        self._wake("timer")

    def _poll_progress(self, now: float) -> None:
        """Progress from goal feedback, as a queue event each time a task crosses another
        ``progress_step`` (rate-limited; it never wakes the planner by itself)."""
        step = self.config.events.progress_step
        for aid in [a for a in self._progress_seen if a not in self.actions]:
            del self._progress_seen[aid]
        for aid, info in list(self.actions.items()):
            fb = info.handle.feedback
            if not isinstance(fb, SkillFeedback) or not 0.0 <= fb.progress < 1.0:
                continue
            bucket = int(fb.progress / step + 1e-9)
            if bucket <= self._progress_seen.get(aid, 0):
                continue
            self._progress_seen[aid] = bucket
            self._route(Event("skills", "task", f"{pct(fb.progress)} ({fb.phase})", {
                "action_id": aid, "tool": info.tool, "progress": fb.progress,
                "phase": fb.phase, "elapsed_s": round(now - info.started_at, 2)},
                "queue", "task_progress", now))

    def _handle_progress(self, ev: Event) -> None:
        c = ev.context
        aid, tool = str(c.get("action_id", "")), str(c.get("tool", ""))
        self._log("task_progress", action_id=aid, tool=tool, progress=c.get("progress"),
                  phase=c.get("phase"))
        if self.status not in ACTIVE_STATUSES or aid not in self.actions:
            return
        replace_progress(self.news, NewsItem(
            f"Task {aid} ({tool}) is {pct(float(c.get('progress', 0.0)))} done "
            f"(phase {c.get('phase')}, {float(c.get('elapsed_s', 0.0)):.1f} s in); still "
            "running, no result yet.", "progress report", f"{tool} {aid}", aid))

    def _poll_background(self, now: float) -> None:
        """Skill starts whose tool call an interrupt answered with a placeholder."""
        for ps in list(self._background):
            st = ps.handle.status
            if st.terminal:  # refused or already ended: its end event reports it
                self._background.remove(ps)
            elif st == GoalStatus.EXECUTING or ps.handle.feedback is not None:
                self._background.remove(ps)
                step = self.plan.claim(ps.tool, ps.action_id)
                info = self.actions.get(ps.action_id)
                if info is not None and step is not None:
                    info.step = step.index
                self._log("action_started", action_id=ps.action_id, tool=ps.tool,
                          params=info.params if info else {},
                          step=step.index if step else None, after_placeholder=True)
                self.news.append(NewsItem(
                    f"Task {ps.action_id} ({ps.tool}) has now started (its call was answered "
                    "with a placeholder); its result arrives as its own event.",
                    "tool result", f"{ps.tool} {ps.action_id}", ps.action_id))
            elif now - ps.sent_at > 5.0:
                self._background.remove(ps)
                ps.handle.cancel()  # its end ("cancelled before it started") is reported

    # seed 004: task and timer tools ----------------------------------------------------------
    def _task_tool(self, turn: _Turn, call: ToolCall, name: str, args: dict[str, Any]) -> None:
        if name == "task_status":
            turn.results[call.id] = _tool_msg(call, self._task_status(str(args["task_id"])))
        elif name == "cancel_task":
            aid = str(args["task_id"])
            info = self.actions.get(aid)
            if info is None:
                ended = self._ended_tasks.get(aid)
                raise ToolCallRejected(
                    f"task {aid} already ended ({ended})" if ended else
                    f"no running task {aid} (running: {', '.join(self.actions) or 'none'})")
            fb = info.handle.feedback
            at = (f", at {pct(fb.progress)}" if isinstance(fb, SkillFeedback)
                  and fb.progress >= 0 else "")
            reason = "cancelled by the planner" + (f": {args['reason']}"
                                                   if args.get("reason") else "")
            if not self._stop_task(aid, info, reason, by="agent"):
                raise ToolCallRejected(f"task {aid} could not be cancelled (it may be ending)")
            turn.results[call.id] = _tool_msg(
                call, f"cancelling task {aid} ({info.tool}{at}): it stops at the next control "
                      "tick; its end arrives as its own event and you will be woken then")
            turn.waits = True
        elif name == "set_timer":
            try:
                t = self.timers.set(float(args["seconds"]), str(args.get("note", "")),
                                    bool(args.get("repeat", False)))
            except TimerError as e:
                raise ToolCallRejected(str(e)) from e
            self._log("timer_set", timer_id=t.timer_id, seconds=t.seconds, note=t.note,
                      repeat=t.repeat)
            turn.results[call.id] = _tool_msg(
                call, f"timer {t.timer_id} set: {t.describe(self.clock.now())}. It arrives as "
                      "its own event.")
            turn.waits = True
        elif name == "cancel_timer":
            tid = str(args["timer_id"])
            gone = self.timers.cancel(tid)
            if gone is None:
                ids = ", ".join(t.timer_id for t in self.timers.active) or "none"
                raise ToolCallRejected(f"no timer {tid} (set: {ids})")
            self._log("timer_cancelled", timer_id=tid)
            turn.results[call.id] = _tool_msg(call, f"timer {tid} cancelled")

    def _task_status(self, aid: str) -> str:
        info = self.actions.get(aid)
        if info is None:
            ended = self._ended_tasks.get(aid)
            if ended is not None:
                return f"task {aid}: ended ({ended}); its result was delivered as an event."
            raise ToolCallRejected(f"no task {aid} (running: "
                                   f"{', '.join(self.actions) or 'none'})")
        st, fb = info.handle.status, info.handle.feedback
        if aid in self._stopping or st == GoalStatus.CANCELING:
            state = "stopping"
        elif st == GoalStatus.ACCEPTED and fb is None:
            state = "starting"
        else:
            state = "running"
        phase = fb.phase if isinstance(fb, SkillFeedback) else "starting"
        progress = (pct(fb.progress) if isinstance(fb, SkillFeedback) and fb.progress >= 0
                    else "unknown")
        elapsed = self.clock.now() - info.started_at
        return (f"task {aid} ({info.tool}): state {state}, phase {phase}, progress {progress}, "
                f"{elapsed:.1f} s elapsed. No result yet: it arrives as its own event when the "
                "task ends.")

    def _wake(self, reason: str, hold: bool = False) -> None:
        """Wake the planner.  ``hold``: a failure, timeout, stop, monitor flag, the user or the
        operator woke it, so the plan queue waits for its reply (seed 003) and no step starts
        by itself until then."""
        self.wake_reasons.append(reason)
        if hold:
            self._plan_hold = True

    # runs --------------------------------------------------------------------------------
    def _start_run(self, task: str) -> None:
        self._adopt_generation()
        # the agent's cameras come with every turn until the planner unwatch()es them
        self.views.watched = list(self.cameras)
        self.task = task
        self.status = "running"
        self.turns = 0
        self.usage_total = {}
        self.run_started_at = self.clock.now()
        self.plan = PlanQueue()
        self.tool_failures = {}
        self.news = []
        self.wake_reasons = []
        if self.recorder is not None:
            if self.recorder.current is None or self.log is None:
                self.recorder.session = self.recorder.session or slug(task)
                self.log = self.recorder.open_episode()
            self.run_id = self.log.run_id
        else:
            self.run_id = f"run-{int(time.time())}"
        self._log("run_started", run_id=self.run_id, task=task,
                  models={"planner": {"provider": self.provider.name,
                                      "model": self.provider.model}},
                  system_prompt=self._system_prompt(),
                  tools=[d.__dict__ for d in self.tool_defs()], generation=self.generation,
                  config={"dry_run": self.config.dry_run,
                          "budgets": self.config.budgets.__dict__})
        self.messages.append(Message.user(f"Task: {task}"))
        self._wake("message")
        self._publish_state()

    def continue_in(self, log: EpisodeLog) -> None:
        """Carry a run on in the next episode's log (seed 003, run_continued)."""
        old = self.log
        self.log = log
        self._log("run_continued", run_id=self.run_id, status=self.status, task=self.task,
                  plan=self.plan.as_list(), continues_from=old.run_id if old else "",
                  config={"dry_run": self.config.dry_run,
                          "budgets": self.config.budgets.__dict__})
        self._turn_cursor = len(self.messages)

    def _end_run(self, status: str, summary: str) -> None:
        self.status = status
        self.summary = summary
        self.turn = None
        self.continue_turn = False
        self.wake_reasons.clear()
        self._log("run_ended", status=status, summary=summary, usage=self.usage_total,
                  turns=self.turns, duration_s=round(self.clock.now() - self.run_started_at, 3))
        self.conversation.append({"role": "agent", "text": summary})
        self._publish_state()
        if self.on_agent_idle is not None:
            try:
                self.on_agent_idle()
            except Exception as e:
                self._log("harness_error", error=f"on_agent_idle raised {e!r}")

    def _check_budgets(self, now: float) -> None:
        b = self.config.budgets
        if self.turns >= b.max_turns and (self.wake_reasons or self.continue_turn):
            self._stop_everything("budget")
            self._end_run("budget_exhausted", f"used all {b.max_turns} planner turns")
        elif now - self.run_started_at > b.max_minutes * 60:
            self._stop_everything("budget")
            self._end_run("budget_exhausted", f"ran past max_minutes={b.max_minutes:g}")

    def _stop_everything(self, reason: str) -> None:
        if self.actions:
            self._advance_generation(reason, "agent")

    # the model call ----------------------------------------------------------------------
    def _system_prompt(self) -> str:
        return (self.config.system_prompt.strip() + "\n\n" + HARNESS_INSTRUCTIONS).strip()

    def _readings(self) -> dict[str, dict[str, float]]:
        js = self._joints.latest()
        if self._readings_fn is not None:
            out = self._readings_fn(js)
        elif js is not None:
            out = {"joints": {n: round(p, 4) for n, p in zip(js.name, js.position,
                                                              strict=False)}}
        else:
            out = {}
        want = self.config.state_fields
        if want:
            out = {m: {f: v for f, v in fields.items() if f in want.get(m, [])}
                   for m, fields in out.items() if m in want}
        return out

    def _wake_message(self) -> Message:
        reasons = ", ".join(dict.fromkeys(self.wake_reasons)) or "continue"
        lines = [f"[woken: {reasons}]"]
        if self.news:
            lines.append(render_news(self.news))
        lines.append("Plan:\n" + self.plan.render())
        now = self.clock.now()
        running = [f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                   for a in self.actions.values()]
        lines.append("Running: " + (", ".join(running) if running else "nothing"))
        with self._lock:
            # notes for actions this planner does not track (operator actions, late verdicts)
            # are dropped here, so the dict never outgrows the running actions
            for key in [k for k in self.monitor_notes if k[0] not in self.actions]:
                del self.monitor_notes[key]
            notes = list(self.monitor_notes.values())
        if notes:
            lines.append("Monitor (may be wrong; check the newest image): " + "; ".join(
                f"{v.action_id} {v.tool}: {v.question}={v.value} (p={v.probability:.2f})"
                for v in notes))
        readings = self._readings()
        if readings:
            lines.append("Readings: " + json.dumps(readings))
        # a fresh attention episode per wake (seed 001): autonomous unless a user asked
        self.attention = AttentionEpisode(autonomous="message" not in self.wake_reasons)
        self._prepared_wake = self.views.capture_for_turn()
        self.news.clear()
        self.wake_reasons.clear()
        return Message("user", (TextPart("\n".join(lines)),))

    def _context(self) -> tuple[Message, ...]:
        """Messages for the request: older images beyond max_images_in_context become stubs."""
        keep = self.config.max_images_in_context
        out: list[Message] = []
        seen = 0
        for msg in reversed(self.messages):
            parts: list[Any] = []
            for p in reversed(msg.content):
                if isinstance(p, ImagePart):
                    seen += 1
                    if seen > keep:
                        parts.append(TextPart(f"[image {p.observation_id} ({p.label}) no longer "
                                              "shown: older than the newest images]"))
                        continue
                parts.append(p)
            parts.reverse()
            out.append(Message(msg.role, tuple(parts), msg.tool_calls, msg.tool_call_id,
                               msg.is_error))
        out.reverse()
        # an image past the window is never sent again: the stub replaces it in the kept
        # conversation too, so its bytes are not held for the life of the process (the
        # conversation outlives runs until /reset)
        self.messages[:] = out
        return tuple(out)

    def _needs_describer(self, prepared: PreparedViews) -> bool:
        return bool(prepared.views) and not self.provider.reads_images \
            and self.vision_backend is not None

    def _poll_wake(self) -> bool:
        """True while a wake message waits for its views to be described (a model call)."""
        if self._pending_wake is None:
            return False
        msg, fut = self._pending_wake
        if not fut.done():
            return True
        self._pending_wake = None
        try:
            parts = list(fut.result())
        except Exception as e:
            parts = [TextPart(f"[views could not be described: {type(e).__name__}: {e}]")]
        self.messages.append(Message("user", (*msg.content, *parts)))
        self.continue_turn = True
        return False

    def _start_model_call(self) -> None:
        if self.wake_reasons or self.news:
            msg = self._wake_message()
            prepared = self._prepared_wake
            if self._needs_describer(prepared):
                # a text-only planner: the views are described by the vision model, off the
                # control path; the call starts when the descriptions are in
                self._pending_wake = (msg, self.caller.submit(prepared.render))
                return
            self.messages.append(Message("user", (*msg.content, *prepared.render())))
        self.continue_turn = False
        request = ModelRequest(self._system_prompt(), self._context(),
                               tuple(self.tool_defs()), self.config.planner.max_tokens)
        self.turns += 1
        turn = _Turn(self.generation, started_at=self.clock.now(),
                     wall_start=time.monotonic(), request=request)
        turn.turn_file = self.log.next_turn_name() if self.log is not None else ""
        timeout = self.config.planner.timeout_s
        provider = self.provider
        self.turn = turn
        turn.future = self.caller.submit(lambda: provider.complete(request, timeout_s=timeout))

    def _poll_turn(self) -> None:
        turn = self.turn
        assert turn is not None
        if turn.future is not None:
            if not turn.future.done():
                return
            fut, turn.future = turn.future, None
            latency = time.monotonic() - turn.wall_start
            try:
                reply = fut.result()
                error: ModelError | None = None
            except ModelError as e:
                reply, error = None, e
            except Exception as e:
                reply, error = None, ModelError("server", f"{type(e).__name__}: {e}")
            if turn.generation != self.generation or self.status != "running":
                self._log("planner_reply_discarded", turn=turn.turn_file,
                          reason="the run's generation changed while the model was thinking")
                self.turn = None
                return
            self._record_turn(turn, reply, error, latency)
            if error is not None:
                self.news.append(f"Your previous call failed ({error.kind}): {error.message}. "
                                 "Continue.")
                self.turn = None
                if error.kind in ("auth", "config"):
                    self._end_run("failed", f"planner model unusable: {error}")
                    return
                self._wake("model_error")
                return
            assert reply is not None
            self._handle_reply(turn, reply)
            if self.turn is not turn:
                return  # a text-only reply closed the turn itself (and chose to continue or not)
        self._poll_pending(turn)

    def _record_turn(self, turn: _Turn, reply: ModelReply | None, error: ModelError | None,
                     latency: float) -> None:
        if reply is not None:
            for k, v in reply.usage.as_dict().items():
                self.usage_total[k] = self.usage_total.get(k, 0) + v
        if self.log is None or turn.request is None:
            return
        payload = {
            "turn": turn.turn_file, "generation": turn.generation,
            "input": _request_json(turn.request, self.log, self._turn_cursor or 0),
            "output": None if reply is None else {
                "text": reply.text, "model": reply.model, "stop_reason": reply.stop_reason,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                                "parse_error": c.parse_error} for c in reply.tool_calls],
                "usage": reply.usage.as_dict()},
            "error": None if error is None else error.as_dict(),
        }
        self.log.write_turn(turn.turn_file, payload)
        if self._turn_cursor is not None:
            self._turn_cursor = len(turn.request.messages)
        self._log("planner_turn", turn=turn.turn_file, latency_s=round(latency, 4),
                  usage=None if reply is None else reply.usage.as_dict(),
                  model=(reply.model if reply else self.provider.model),
                  text=(reply.text if reply else ""),
                  tools=[c.name for c in reply.tool_calls] if reply else [],
                  error=None if error is None else error.as_dict())

    def _handle_reply(self, turn: _Turn, reply: ModelReply) -> None:
        self._plan_hold = False  # the planner has answered since the user's stop
        self.messages.append(Message("assistant", (TextPart(reply.text),) if reply.text else (),
                                     reply.tool_calls))
        if reply.text:
            self.conversation.append({"role": "agent", "text": reply.text})
        if not reply.tool_calls:
            self.text_only_replies += 1
            if self.actions or len(self.timers):  # it waits for a task's end or a timer
                self.turn = None
                return
            if self.text_only_replies >= 2:
                self.status = "waiting_user"
                self._log("waiting_user", question=reply.text)
                self.turn = None
                self._publish_state()
                return
            self.messages.append(Message.user(
                "Nothing is running. Call a tool, ask_user, or finish_task."))
            self.continue_turn = True
            self.turn = None
            return
        self.text_only_replies = 0
        for call in reply.tool_calls:
            turn.call_order.append(call.id)
            if turn.ended:
                turn.results[call.id] = _tool_msg(call, "not executed: an earlier call in this "
                                                  "reply ended the turn", error=True)
                continue
            try:
                self._do_call(turn, call)
            except ToolCallRejected as e:
                turn.results[call.id] = _tool_msg(call, f"refused: {e.reason}", error=True)
                self._log("tool_refused", tool=call.name, reason=e.reason)

    def _do_call(self, turn: _Turn, call: ToolCall) -> None:
        if call.parse_error:
            raise ToolCallRejected(f"the arguments of {call.name} were not a JSON object: "
                                   f"{call.parse_error}")
        name, args = call.name, dict(call.arguments)
        if name in PLANNER_TOOLS:
            err = schema_error(PLANNER_TOOLS[name].parameters, args, name)
            if err:
                raise ToolCallRejected(err)
        if name == "update_plan":
            for i, st in enumerate(args["steps"], start=1):
                tool = st.get("tool")
                if tool is not None and tool not in self.specs:
                    raise ToolCallRejected(f"steps[{i}].tool: unknown tool {tool!r}; tools: "
                                           f"{', '.join(sorted(self.specs))}")
                if tool is not None and st.get("args") is not None:
                    spec = self.specs[tool]
                    if not spec.image_points:
                        e = validate_params(spec, st["args"])
                        if e:
                            raise ToolCallRejected(f"steps[{i}]: {e}")
            self.plan.replace(args["steps"])
            self._log("plan_changed", plan=self.plan.as_list())
            turn.results[call.id] = _tool_msg(call, "plan updated:\n" + self.plan.render())
            self.continue_turn = True
        elif name == "observe":
            prepared = self.views.observe(args.get("cameras") or None)
            obs = [v.observation for v in prepared.views]
            if self.log is not None:
                for o in obs:
                    self.log.save_image(o.file_name, o.data)
            self._log("observe", observations=[o.id for o in obs],
                      images=[f"images/{o.file_name}" for o in obs])
            self._answer_views(turn, call, prepared)
        elif name == "stop_action":
            aid = args["action_id"]
            info = self.actions.get(aid)
            if info is None:
                raise ToolCallRejected(f"action {aid} is not running (running: "
                                       f"{', '.join(self.actions) or 'none'})")
            info.handle.cancel()
            self.attention.record_effect()
            self._log("stop_action", by="agent", action_id=aid, reason=args.get("reason", ""))
            turn.results[call.id] = _tool_msg(call, f"stopping {aid}; you will be woken when it "
                                              "has stopped")
            turn.ended = True
        elif name == "ask_user":
            self.status = "waiting_user"
            self.conversation.append({"role": "agent", "text": args["question"]})
            self._log("ask_user", question=args["question"])
            turn.results[call.id] = _tool_msg(call, "asked; the run waits for the answer")
            turn.ended = True
        elif name == "finish_task":
            self.attention.record_effect()
            turn.results[call.id] = _tool_msg(call, "run ended")
            turn.ended = True
            self._finish_after_turn = (bool(args["success"]), str(args["summary"]))
        elif name in TASK_TOOLS:
            self._task_tool(turn, call, name, args)
        elif name in ViewManager.TOOL_NAMES:
            self._answer_views(turn, call, self.views.prepare(name, args))
        elif name == "observe_scene" and self.scene_observer is not None:
            observer, episode = self.scene_observer, self.attention
            # the slot is claimed here, in call order, before any effect of this reply; the
            # interpretation (a model call) runs on the worker
            try:
                slot = observer.claim(args, episode)
            except ToolCallRejected as e:
                raise ToolCallRejected(e.reason) from None
            turn.futures.append((call, self.caller.submit(
                lambda: _observe_scene_msg(observer, episode, call, args, slot))))
            self.continue_turn = True
        elif name in self.specs:
            self._call_skill(turn, call)
        else:
            raise ToolCallRejected(f"unknown tool {name!r}; tools: "
                                   f"{', '.join(sorted(t.name for t in self.tool_defs()))}")

    _finish_after_turn: tuple[bool, str] | None = None

    def _answer_views(self, turn: _Turn, call: ToolCall, prepared: PreparedViews) -> None:
        """Views answer at once; for a text-only planner their descriptions (model calls) are
        made on the worker and the turn waits for them."""
        if self._needs_describer(prepared):
            turn.futures.append((call, self.caller.submit(
                lambda: Message("tool", tuple(prepared.render()), (), call.id))))
        else:
            turn.results[call.id] = Message("tool", tuple(prepared.render()), (), call.id)
        self.continue_turn = True

    def _call_skill(self, turn: _Turn, call: ToolCall) -> None:
        spec = self.specs[call.name]
        args = dict(call.arguments)
        err = validate_params(spec, args, model_facing=True)
        if err:
            raise ToolCallRejected(err)
        obs_id = str(args.pop("observation_id", ""))
        watch_for = tuple(args.pop("watch_for", ()) or ())
        points_view: list[tuple[float, float]] = []
        for p in spec.image_points:
            if p in args:
                points_view.append((float(args[p][0]), float(args[p][1])))
                cx, cy = self.observations.map_point(obs_id, args[p], spec.camera, p)
                args[p] = [round(cx, 2), round(cy, 2)]
        if points_view:
            self._publish_view(obs_id, points_view)
        if self.config.dry_run:
            self._log("dry_run_call", tool=call.name, params=args, observation_id=obs_id)
            turn.results[call.id] = _tool_msg(call, f"dry run: {call.name} would start with "
                                              f"{json.dumps(args)}; nothing was started")
            self.continue_turn = True
            return
        action_id = new_action_id()
        goal = SkillGoal(call.name, args, self.generation, action_id, obs_id, watch_for)
        try:
            handle = self.bus.send_goal(names.skill_action(call.name), goal,
                                        done_cb=self._on_goal_done)
        except Exception as e:
            raise ToolCallRejected(f"{call.name} is unavailable: {e}") from e
        self.actions[action_id] = ActionInfo(action_id, call.name, args, self.clock.now(),
                                             handle, bool(spec.monitor or watch_for))
        # an effect of this attention episode (seed 001): no acquisition after it
        self.attention.record_effect()
        turn.pending.append(_PendingStart(call, handle, action_id, call.name,
                                          self.clock.now()))

    def _send_goal(self, tool: str, args: dict[str, Any], *, by_harness: bool,
                   step_index: int | None = None) -> str:
        """Start a tool without the planner (plan step or ``then``).  '' if it was refused."""
        spec = self.specs.get(tool)
        if spec is None:
            self.news.append(f"Could not start {tool!r}: no such tool.")
            return ""
        action_id = new_action_id()
        goal = SkillGoal(tool, args, self.generation, action_id)
        try:
            handle = self.bus.send_goal(names.skill_action(tool), goal,
                                        done_cb=self._on_goal_done)
        except Exception as e:
            self.news.append(f"Could not start {tool}: {e}")
            return ""
        if handle.status == GoalStatus.ABORTED:
            self.news.append(f"Could not start {tool}: {getattr(handle.result, 'reason', '')}")
            return ""
        info = ActionInfo(action_id, tool, args, self.clock.now(), handle,
                          bool(spec.monitor), step_index)
        self.actions[action_id] = info
        if step_index is not None:
            for s in self.plan.steps:
                if s.index == step_index:
                    s.status, s.action_id = "running", action_id
        self._log("action_started", action_id=action_id, tool=tool, params=args,
                  by_harness=by_harness)
        self._publish_state()
        return action_id

    def _poll_pending(self, turn: _Turn) -> None:
        now = self.clock.now()
        for ps in list(turn.pending):
            st = ps.handle.status
            # the executor sends a "started" feedback when the skill starts: a skill that
            # started and already ended counts as started; its end is handled as an event
            if st == GoalStatus.EXECUTING or ps.handle.feedback is not None:
                turn.pending.remove(ps)
                turn.started_any = True
                step = self.plan.claim(ps.tool, ps.action_id)
                if step is not None and ps.action_id in self.actions:
                    self.actions[ps.action_id].step = step.index
                self._log("action_started", action_id=ps.action_id, tool=ps.tool,
                          params=self.actions[ps.action_id].params if ps.action_id in
                          self.actions else {}, step=step.index if step else None)
                turn.results[ps.call.id] = _tool_msg(
                    ps.call, f"started action {ps.action_id} ({ps.tool}): task id "
                             f"{ps.action_id}, running in the background with no result yet; "
                             "its result arrives as its own event. You will be woken when it "
                             "ends or something needs you")
            elif st.terminal:
                turn.pending.remove(ps)
                self.actions.pop(ps.action_id, None)
                res = ps.handle.result
                reason = getattr(res, "reason", "") or st.name.lower()
                turn.results[ps.call.id] = _tool_msg(ps.call, reason if reason.startswith(
                    "refused") else f"refused: {reason}", error=True)
                self._log("tool_refused", tool=ps.tool, action_id=ps.action_id, reason=reason)
            elif now - ps.sent_at > 5.0:
                turn.pending.remove(ps)
                ps.handle.cancel()
                turn.results[ps.call.id] = _tool_msg(ps.call, "refused: the skill did not "
                                                     "start within 5 s", error=True)
        for call, fut in list(turn.futures):
            if fut.done():
                turn.futures.remove((call, fut))
                try:
                    turn.results[call.id] = fut.result()
                except Exception as e:
                    turn.results[call.id] = _tool_msg(call, f"failed: {type(e).__name__}: {e}",
                                                      error=True)
        if turn.pending or turn.futures:
            return
        # every call of the reply is answered: close the turn
        for cid in turn.call_order:
            msg = turn.results.get(cid)
            if msg is not None:
                self.messages.append(msg)
        self.turn = None
        finish = self._finish_after_turn
        self._finish_after_turn = None
        if finish is not None:
            ok, summary = finish
            if self.actions:
                self._advance_generation("finish_task", "agent")
            self._end_run("succeeded" if ok else "failed", summary)
            return
        if turn.started_any or turn.ended or turn.waits:
            self.continue_turn = False
        else:
            self.continue_turn = True
        self._publish_state()

    def _needs_point(self) -> set[str]:
        return {n for n, s in self.specs.items() if s.image_points}

    def _publish_view(self, obs_id: str, points: list[tuple[float, float]]) -> None:
        from ..perception import images as im

        obs = self.observations.get(obs_id)
        if obs is None:
            return
        view = im.draw_points(im.decode(obs.data), points, obs_id)
        view.setflags(write=False)
        self._view_pub.publish(Image(view, self.clock.now(), obs.camera, 0))

    # logging & state ---------------------------------------------------------------------
    def _log(self, kind: str, by: str | None = None, **data: Any) -> None:
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

    def _publish_state(self) -> None:
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
            self._stop_everything("shutdown")
            self._end_run("cancelled", "shut down")
        self.caller.shutdown()


# ----------------------------------------------------------------------------------------
def _observe_scene_msg(observer: SceneObserver, episode: AttentionEpisode, call: ToolCall,
                       args: Mapping[str, Any], slot: int) -> Message:
    """Runs on the model worker: one frame, one interpretation, bounded text.  The result is
    model-generated and only ever shown to the planner, never copied into state."""
    try:
        return _tool_msg(call, observer.handle_claimed(args, episode, slot).text())
    except ToolCallRejected as e:
        return _tool_msg(call, f"refused: {e.reason}", error=True)
    except Exception as e:
        return _tool_msg(call, f"observe_scene failed: {type(e).__name__}: {e}", error=True)


def _tool_msg(call: ToolCall, text: str, error: bool = False) -> Message:
    return Message("tool", (TextPart(text),), (), call.id, error)


def _describe(spec: ToolSpec) -> str:
    parts = [spec.description or ""]
    if spec.image_points:
        parts.append(f"Points ({', '.join(spec.image_points)}) are [x, y] pixels in the "
                     f"{spec.camera or 'camera'} image; pass its observation_id.")
    if spec.max_duration_s:
        parts.append(f"Stopped as timed out after {spec.max_duration_s:g} s.")
    if not spec.ends_by_itself:
        parts.append("Runs until the monitor or its time limit ends it.")
    for ex in spec.examples:
        parts.append(f"Example: {json.dumps(ex.get('params', {}))} when {ex.get('when', '')}")
    return describe_async(" ".join(p for p in parts if p))


def _spec_from_dict(d: Mapping[str, Any]) -> ToolSpec:
    return ToolSpec(
        name=d["name"], description=d.get("description"), parameters=d["parameters"],
        image_points=tuple(d.get("image_points", ())), examples=tuple(d.get("examples", ())),
        ends_by_itself=bool(d.get("ends_by_itself", True)),
        max_duration_s=d.get("max_duration_s"), max_target_area=d.get("max_target_area"),
        monitor=tuple(d.get("monitor", ())), camera=d.get("camera"),
        resources=tuple(d.get("resources", ("arm",))))


def _request_json(req: ModelRequest, log: EpisodeLog, start: int = 0) -> dict[str, Any]:
    """A turn file's input: images saved under images/ and named, never inlined.  After a
    ``run_continued`` only the messages since the previous turn are written (``start``)."""
    msgs = []
    for m in req.messages[start:]:
        content: list[dict[str, Any]] = []
        for p in m.content:
            if isinstance(p, ImagePart):
                ext = "png" if p.media_type == "image/png" else "jpg"
                name = f"{p.observation_id or 'img'}_{p.label.replace('/', '_')}.{ext}"
                rel = log.save_image(name, p.data)
                content.append({"type": "image", "file": rel, "observation_id": p.observation_id,
                                "size": [p.width, p.height]})
            else:
                content.append({"type": "text", "text": p.text})
        entry: dict[str, Any] = {"role": m.role, "content": content}
        if m.tool_calls:
            entry["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                   for c in m.tool_calls]
        if m.tool_call_id:
            entry["tool_call_id"] = m.tool_call_id
            entry["is_error"] = m.is_error
        msgs.append(entry)
    return {"system": req.system, "messages": msgs, "messages_from": start,
            "tools": [{"name": t.name, "description": t.description,
                       "parameters": t.parameters} for t in req.tools]}
