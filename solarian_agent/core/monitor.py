"""The monitor engine (seed 003, "Monitor questions"): watches each running action through the
cameras and finishes it, fails it or wakes the planner.

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
Model calls run on a :class:`~.planner.ModelCaller` worker (default: a ``ThreadCaller`` for a
model backend, inline for an offline one that sets ``inline = True``); the tick only polls them,
so it never waits on a model.  A call that fails or runs past ``timeout_s`` answers nothing for
its tick (a ``monitor_tick`` event with the error); it is never replaced by a made-up answer.

What the monitor sees each tick, per camera, oldest first: the action's last ``history`` frames
labelled by age (``N.N s ago`` ... ``previous``, ``current``).  With ``history > 1`` an action's
first frame is only kept (a ``monitor_frame`` event), not judged.  A camera listed in
``close_ups`` is seen only as that region at capture resolution; the others whole at
``image_max_side``.  Frames never carry overlays.  With ``mark_target`` a 1 px cyan box is drawn
3 px outside the target's bounds (from the ``target_box`` port); with ``reference`` (default) the
frames from the action's start come first, with the planner's point drawn on the tool's camera.

Rules (``when``: one rule or a list): ``do`` finish | fail | escalate; ``value`` (a choice's
value; ``true``/``false`` for a predicate, default ``true``); ``threshold`` (a confidence floor:
an answer less sure does nothing — it neither counts nor breaks a run); ``consecutive`` (ticks in
a row the condition must hold, default 1); ``after_s`` (ticks before it do not count); ``then`` (a
tool started without arguments once the action stopped; a finish / fail rule only, and a
``then`` naming no tool is a :class:`MonitorConfigError` when the engine is built with the
catalogue).  ``escalate`` fires once per question and action.  A question without ``when`` is
only shown to the planner (its verdicts carry no decision).

``watch_for``: each condition the planner adds to a call becomes a predicate question asked from
6 s into the action (never before), with the rule :data:`WATCH_FOR_RULE`: escalate when it holds
with p >= 0.8 on two ticks in a row.  The seed calls it "like a failure rule with after_s: 6";
the failure rule it shows is an escalate with ``consecutive: 2``, and a condition the planner
wrote is judged best by the planner, which is told a monitor flag can be wrong.

Logging: every kept frame (``monitor_frame``), every tick (``monitor_tick``: question names, the
images sent with their labels, ages and file names, the readings, the answers, latency, usage,
model, errors and the verdicts it produced) and every skipped tick.  Images are saved unmarked
(the mark box is logged beside them), so a tick can be replayed with or without the mark.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import cv2
import numpy as np

from ..models.base import ModelReply
from ..perception import images as im
from ..perception.vision import (
    MonitorAnswer,
    MonitorImage,
    MonitorQuestion,
    MonitorTickRequest,
    TickReply,
    VisionBackend,
    question_from_dict,
)
from . import names
from .clock import Clock
from .config import AgentConfig, MonitorConfig
from .episode_log import EpisodeLog, Recorder
from .errors import ConfigError
from .messages import AgentEvent, Image, JointState, MonitorVerdict
from .planner import InlineCaller, ModelCaller, ThreadCaller
from .transport import Bus, QoS, Subscription

DECISIONS = ("finish", "fail", "escalate")
WATCH_FOR_AFTER_S = 6.0
TRIPWIRE_QUESTION = "check_agent_action"
MARK_MARGIN = 3
MARK_COLOR = (255, 255, 0)  # BGR cyan

Box = tuple[int, int, int, int]
# (action_id, tracker fields of the action, camera, frame) -> the target's bounds in capture
# pixels (x0, y0, x1, y1 inclusive), or None when the target is not known in that frame
TargetBoxFn = Callable[[str, Sequence[str], str, Image], "Box | None"]
# (action_id, tool, elapsed_s) -> None or (decision, reason) or (decision, reason, then_tool)
Tripwire = Callable[[str, str, float], "tuple[str, ...] | None"]
Readings = Callable[["JointState | None"], dict[str, dict[str, float]]]


class MonitorConfigError(ConfigError):
    """An invalid monitor question or rule, named by its path (``skills.pick.monitor[0]...``)."""


# -------------------------------------------------------------------------------------------
# rules
# -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    do: str
    value: str
    threshold: float | None = None
    consecutive: int = 1
    after_s: float = 0.0
    then: str = ""

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"do": self.do, "value": self.value}
        if self.threshold is not None:
            d["threshold"] = self.threshold
        if self.consecutive != 1:
            d["consecutive"] = self.consecutive
        if self.after_s:
            d["after_s"] = self.after_s
        if self.then:
            d["then"] = self.then
        return d


WATCH_FOR_RULE = Rule("escalate", "true", threshold=0.8, consecutive=2,
                      after_s=WATCH_FOR_AFTER_S)


@dataclass(frozen=True)
class QuestionSpec:
    question: MonitorQuestion
    rules: tuple[Rule, ...] = ()
    watch_for: str = ""  # the planner's condition, for watch_for questions

    @property
    def name(self) -> str:
        return self.question.name


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_rule(raw: Any, q: MonitorQuestion, path: str, tools: set[str] | None) -> Rule:
    if not isinstance(raw, Mapping):
        raise MonitorConfigError(path, f"a rule must be a mapping, got {type(raw).__name__}")
    allowed = {"do", "value", "threshold", "consecutive", "after_s", "then"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise MonitorConfigError(f"{path}.{unknown[0]}",
                                 f"unknown key; allowed: {', '.join(sorted(allowed))}")
    do = raw.get("do")
    if do not in DECISIONS:
        raise MonitorConfigError(f"{path}.do", f"must be one of {', '.join(DECISIONS)}, "
                                               f"got {do!r}")
    value = raw.get("value")
    if q.type == "predicate":
        if value is None:
            value = "true"
        if isinstance(value, bool):
            value = "true" if value else "false"
        if value not in ("true", "false"):
            raise MonitorConfigError(f"{path}.value", f"a predicate's value is true or false, "
                                                      f"got {value!r}")
    elif value not in q.values:
        raise MonitorConfigError(f"{path}.value", f"must be one of {', '.join(q.values)}, "
                                                  f"got {value!r}")
    thr = raw.get("threshold")
    if thr is not None and not (_num(thr) and 0.0 <= float(thr) <= 1.0):
        raise MonitorConfigError(f"{path}.threshold", f"must be a number from 0 to 1, got {thr!r}")
    cons = raw.get("consecutive", 1)
    if isinstance(cons, bool) or not isinstance(cons, int) or cons < 1:
        raise MonitorConfigError(f"{path}.consecutive", f"must be an integer >= 1, got {cons!r}")
    after = raw.get("after_s", 0.0)
    if not (_num(after) and float(after) >= 0):
        raise MonitorConfigError(f"{path}.after_s", f"must be a number >= 0, got {after!r}")
    then = raw.get("then") or ""
    if then:
        if not isinstance(then, str):
            raise MonitorConfigError(f"{path}.then", f"must name a tool, got {then!r}")
        if do == "escalate":
            raise MonitorConfigError(f"{path}.then", "only a finish or fail rule starts a tool "
                                                     "(escalate leaves the action running)")
        if tools is not None and then not in tools:
            raise MonitorConfigError(f"{path}.then", f"names no tool: {then!r}; tools: "
                                                     f"{', '.join(sorted(tools)) or 'none'}")
    return Rule(str(do), str(value), None if thr is None else float(thr), int(cons),
                float(after), str(then))


def parse_questions(tool: str, raw: Sequence[Any], tools: set[str] | None = None
                    ) -> tuple[QuestionSpec, ...]:
    """A tool's ``monitor`` list as question specs; raises :class:`MonitorConfigError`."""
    out: list[QuestionSpec] = []
    seen: set[str] = set()
    for i, qd in enumerate(raw):
        path = f"skills.{tool}.monitor[{i}]"
        if not isinstance(qd, Mapping):
            raise MonitorConfigError(path, f"a question must be a mapping, got "
                                           f"{type(qd).__name__}")
        unknown = sorted(set(qd) - {"name", "type", "instructions", "choices", "when",
                                    "camera"})
        if unknown:
            raise MonitorConfigError(f"{path}.{unknown[0]}", "unknown key; allowed: camera, "
                                     "choices, instructions, name, type, when")
        try:
            q = question_from_dict(qd)
        except ValueError as e:
            raise MonitorConfigError(path, str(e)) from None
        if q.name in seen:
            raise MonitorConfigError(f"{path}.name", f"question {q.name!r} appears twice")
        if q.name.startswith("watch_for_") or q.name == TRIPWIRE_QUESTION:
            raise MonitorConfigError(f"{path}.name", f"{q.name!r} is reserved")
        seen.add(q.name)
        when = qd.get("when")
        rules_raw: list[Any] = [] if when is None else (
            list(when) if isinstance(when, (list, tuple)) else [when])
        rules = tuple(parse_rule(r, q, f"{path}.when[{j}]" if isinstance(when, (list, tuple))
                                 else f"{path}.when", tools)
                      for j, r in enumerate(rules_raw))
        out.append(QuestionSpec(q, rules))
    return tuple(out)


def watch_for_questions(conditions: Sequence[str]) -> tuple[QuestionSpec, ...]:
    out = []
    for i, cond in enumerate(conditions, start=1):
        q = MonitorQuestion(f"watch_for_{i}", "predicate",
                            f"True when this holds: {cond.strip()}  (The planner added this "
                            "condition; it must stay false while the action goes as it "
                            "should.)")
        out.append(QuestionSpec(q, (WATCH_FOR_RULE,), cond.strip()))
    return tuple(out)


def check_catalogue(catalogue: Sequence[Mapping[str, Any]]
                    ) -> dict[str, tuple[QuestionSpec, ...]]:
    """Every tool's questions, validated against the catalogue's tool names (start-up)."""
    tools = {str(d.get("name")) for d in catalogue}
    return {str(d["name"]): parse_questions(str(d["name"]), list(d.get("monitor") or ()), tools)
            for d in catalogue}


# condition of one rule on one answer
MET, UNMET, BELOW_FLOOR, EARLY, NO_ANSWER = "met", "unmet", "below_floor", "early", "none"


def condition(rule: Rule, answer: MonitorAnswer | None, elapsed_s: float) -> str:
    if elapsed_s + 1e-9 < rule.after_s:
        return EARLY
    if answer is None:
        return NO_ANSWER
    if rule.threshold is not None and answer.probability < rule.threshold:
        return BELOW_FLOOR
    return MET if answer.value == rule.value else UNMET


@dataclass
class RuleState:
    """The run of one question's rules over an action's ticks (shared with the evaluation's
    per-pick replay, so both fire on the same tick)."""

    spec: QuestionSpec
    streaks: list[int] = field(default_factory=list)
    escalated: bool = False

    def __post_init__(self) -> None:
        self.streaks = [0] * len(self.spec.rules)

    def feed(self, answer: MonitorAnswer | None, elapsed_s: float) -> list[tuple[Rule, int]]:
        """Advance every rule by one tick; the rules that fire now, with their run length."""
        fired: list[tuple[Rule, int]] = []
        for i, rule in enumerate(self.spec.rules):
            c = condition(rule, answer, elapsed_s)
            if c == MET:
                self.streaks[i] += 1
            elif c in (UNMET, EARLY):
                self.streaks[i] = 0
            # below the floor, or no answer: does nothing; the next tick decides
            if self.streaks[i] >= rule.consecutive:
                if rule.do == "escalate":
                    if self.escalated:
                        continue
                    self.escalated = True
                fired.append((rule, self.streaks[i]))
        return fired


# -------------------------------------------------------------------------------------------
# images
# -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shot:
    """One camera frame as the monitor sees it, before any mark: the close-up or the resized
    view, its scaling to the capture and its encoding."""

    camera: str
    frame: Image
    pixels: np.ndarray
    scaling: im.Scaling
    close_up: bool
    data: bytes
    media_type: str

    @property
    def file_name(self) -> str:
        ext = "png" if self.media_type == "image/png" else "jpg"
        cam = self.camera.replace("/", "_")
        return f"monitor_{cam}_{self.frame.seq:06d}_{int(round(self.frame.stamp * 1000))}.{ext}"


def select_view(frame: np.ndarray, camera: str, close_ups: Mapping[str, Sequence[float]],
                image_max_side: int) -> tuple[np.ndarray, im.Scaling, bool]:
    """A close-up camera's region at capture resolution, or the whole frame at max side."""
    box = close_ups.get(camera)
    if box is not None:
        crop, scaling = im.crop_fraction(frame, (float(box[0]), float(box[1]), float(box[2]),
                                                 float(box[3])))
        return crop, scaling, True
    out, scaling = im.resize_max_side(frame, image_max_side)
    return out, scaling, False


def box_to_sent(box: Box, scaling: im.Scaling) -> Box | None:
    """Inclusive capture-pixel bounds → inclusive bounds of the sent pixels they touch (None
    when the box lies wholly outside the sent image)."""
    x0, y0, x1, y1 = box
    sx0 = math.floor((x0 - scaling.x0) / scaling.sx)
    sy0 = math.floor((y0 - scaling.y0) / scaling.sy)
    sx1 = math.ceil((x1 + 1 - scaling.x0) / scaling.sx) - 1
    sy1 = math.ceil((y1 + 1 - scaling.y0) / scaling.sy) - 1
    if sx1 < 0 or sy1 < 0 or sx0 >= scaling.sent_w or sy0 >= scaling.sent_h:
        return None
    return sx0, sy0, sx1, sy1


def draw_mark(img: np.ndarray, box: Box, margin: int = MARK_MARGIN) -> np.ndarray:
    """A 1 px cyan box ``margin`` px outside ``box``; sides outside the image are not drawn,
    so the mark never lands on the target's own pixels at an image edge."""
    out = img.copy()
    x0, y0, x1, y1 = box
    cv2.rectangle(out, (x0 - margin, y0 - margin), (x1 + margin, y1 + margin), MARK_COLOR, 1,
                  cv2.LINE_4)
    return out


def mask_bounds(mask: np.ndarray) -> Box | None:
    """Inclusive bounds of a tracker mask's set pixels (None: empty mask)."""
    ys, xs = np.nonzero(np.asarray(mask))
    if xs.size == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


def tracker_target_box(result: Callable[[str], Any]) -> TargetBoxFn:
    """A ``target_box`` port over trackers: ``result(field)`` returns the tracker's latest
    :class:`~.executor.TrackerResult` (``mask`` and / or ``box`` with exclusive x1, y1).  The
    bounds of the mask when it matches the frame, else the box; fields are
    ``<camera>.<name>``, so only the trackers on the frame's camera count."""

    def target_box(action_id: str, trackers: Sequence[str], camera: str, frame: Image
                   ) -> Box | None:
        for f in trackers:
            if f.split(".", 1)[0] != camera:
                continue
            res = result(f)
            if res is None:
                continue
            mask = getattr(res, "mask", None)
            if mask is not None and np.asarray(mask).shape[:2] == (frame.height, frame.width):
                b = mask_bounds(mask)
                if b is not None:
                    return b
            box = getattr(res, "box", None)
            if box is not None and len(box) == 4:
                x0, y0, x1, y1 = (int(v) for v in box)
                return x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)
        return None

    return target_box


def history_labels(stamps: Sequence[float], now: float) -> list[str]:
    """Oldest first: ``N.N s ago`` ..., ``previous``, ``current``."""
    n = len(stamps)
    out = []
    for i, st in enumerate(stamps):
        if i == n - 1:
            out.append("current")
        elif i == n - 2:
            out.append("previous")
        else:
            out.append(f"{max(0.0, now - st):.1f} s ago")
    return out


# -------------------------------------------------------------------------------------------
# the engine
# -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Entry:
    """One history frame of one action: the shot, its mark and the pixels / encoding as sent
    (marked once, when the frame was taken)."""

    shot: Shot
    mark: Box | None
    pixels: np.ndarray
    data: bytes
    media_type: str


@dataclass
class _Call:
    tick: int
    future: cf.Future[TickReply]
    request: MonitorTickRequest
    elapsed_s: float
    sent_at: float
    wall0: float
    images: list[dict[str, Any]]
    readings: dict[str, Any]


@dataclass
class _Action:
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
    history: dict[str, collections.deque[_Entry]] = field(default_factory=dict)
    states: dict[str, RuleState] = field(default_factory=dict)
    tripwire_escalated: bool = False
    concluded: str = ""
    ticks: int = 0
    frames_taken: int = 0
    call: _Call | None = None
    reference: list[MonitorImage] | None = None


class MonitorEngine:
    """See the module docstring.

    ``backend`` None: no monitor model; only the tripwires run (seed: "Without one, only
    timeouts and tripwires end policies").  ``catalogue`` given: questions are validated now
    (raises :class:`MonitorConfigError`); otherwise :meth:`start` fetches it from the
    ``skills/catalogue`` service — call it at start-up so a bad ``then`` stops the start.
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
            self._log_fn: Callable[[], EpisodeLog | None] = lambda: rec.current
        elif isinstance(log, EpisodeLog):
            fixed = log
            self._log_fn = lambda: fixed
        elif log is None:
            self._log_fn = lambda: None
        else:
            self._log_fn = log
        self.check_agent_action = check_agent_action
        self.target_box = target_box
        self._readings_fn = readings
        self.state_fields = {k: list(v) for k, v in (state_fields or {}).items()}
        self.watch_operator = watch_operator
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.on_event = on_event
        self._lock = threading.Lock()
        self._inbox: list[tuple[str, dict[str, Any], float, dict[str, Image]]] = []
        self.actions: dict[str, _Action] = {}
        self._orphans: list[tuple[_Action, _Call]] = []
        self._shots: collections.OrderedDict[tuple[str, int, float], Shot] = \
            collections.OrderedDict()
        self._next_due: float | None = None
        self.questions: dict[str, tuple[QuestionSpec, ...]] | None = None
        self.tools: set[str] = set()
        self._catalogue: dict[str, Mapping[str, Any]] = {}
        self.recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=1000)
        self.calls = 0
        self.skipped = 0
        self.errors = 0
        self.verdicts_published = 0

        self._pub = bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                                  QoS(depth=100), node=node)
        self._frames: dict[str, Subscription[Any]] = {
            c: bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=QoS(depth=1), node=node)
            for c in self.cameras}
        self._joints = bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE, qos=QoS(depth=1),
                                     node=node)
        bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=self._on_skill_event,
                      qos=QoS(depth=200), node=node)
        if catalogue is not None:
            self._load(catalogue)

    # start-up --------------------------------------------------------------------------------
    def _load(self, catalogue: Sequence[Mapping[str, Any]]) -> None:
        self.questions = check_catalogue(catalogue)
        self.tools = set(self.questions)
        self._catalogue = {str(d["name"]): d for d in catalogue}

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
            for cam, sub in self._frames.items():
                f = sub.latest()
                if isinstance(f, Image):
                    frames[cam] = f
        with self._lock:
            self._inbox.append((ev.kind, dict(ev.data), self.clock.now(), frames))

    # the tick ----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Handle what arrived, poll the calls in flight and, when due, run a monitor tick.
        Never raises."""
        try:
            self._tick()
        except Exception as e:  # nothing escapes into the spin loop
            self.errors += 1
            self._event("monitor_error", error=f"{type(e).__name__}: {e}")

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
                self._event("monitor_error", action_id=str(data.get("action_id", "")),
                            error=f"{kind}: {type(e).__name__}: {e}")
        self._poll()
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
                self._event("monitor_error", action_id=act.action_id,
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
                self._event("monitor_error", error=f"could not read the tool catalogue: {e}")
                self.questions = {}
        assert self.questions is not None
        tool = str(data.get("skill", ""))
        aid = str(data.get("action_id", ""))
        watch = tuple(str(w) for w in data.get("watch_for") or () if str(w).strip())
        qs = self.questions.get(tool, ()) + watch_for_questions(watch)
        act = _Action(aid, tool, int(data.get("generation", 0)), t,
                      dict(data.get("params") or {}), list(data.get("trackers") or []),
                      watch, by, qs, frames)
        act.states = {q.name: RuleState(q) for q in qs}
        self.actions[aid] = act

    def _action_ended(self, data: Mapping[str, Any]) -> None:
        act = self.actions.pop(str(data.get("action_id", "")), None)
        if act is not None and act.call is not None:
            self._orphans.append((act, act.call))
            act.call = None

    # per action ------------------------------------------------------------------------------
    def _tick_action(self, act: _Action, now: float) -> None:
        elapsed = now - act.started_at
        act.ticks += 1
        self._tripwire(act, elapsed)
        if act.concluded or self.backend is None or not act.questions:
            return
        if act.call is not None:
            if now - act.call.sent_at > self.config.timeout_s + 1.0:
                call, act.call = act.call, None
                self._orphans.append((act, call))
                self.errors += 1
                self._event("monitor_tick", action_id=act.action_id, tool=act.tool,
                            tick=call.tick, questions=[q.name for q in call.request.questions],
                            images=call.images, answers={}, verdicts=[],
                            error={"kind": "timeout", "message": f"no answer within "
                                   f"{self.config.timeout_s:g} s; the tick answers nothing"},
                            elapsed_s=round(call.elapsed_s, 3))
            else:
                self.skipped += 1
                self._event("monitor_skip", action_id=act.action_id, tool=act.tool,
                            tick=act.ticks, reason="the previous call is still in flight")
                return
        shots = self._take_frames(act)
        if not shots:
            return
        act.frames_taken += 1
        hist = max(1, self.config.history)
        for cam, shot, mark in shots:
            dq = act.history.setdefault(cam, collections.deque(maxlen=hist))
            dq.append(self._entry(shot, mark))
        if hist > 1 and act.frames_taken == 1:
            files = [self._image_record(s, m, "kept", 0.0) for _, s, m in shots]
            self._save_shots([s for _, s, _ in shots])
            self._event("monitor_frame", action_id=act.action_id, tool=act.tool,
                        tick=act.ticks, images=files, elapsed_s=round(elapsed, 3))
            return
        active = tuple(q for q in act.questions
                       if not q.watch_for or elapsed + 1e-9 >= WATCH_FOR_AFTER_S)
        if not active:
            return
        self._submit(act, active, elapsed, now)

    def _tripwire(self, act: _Action, elapsed: float) -> None:
        if self.check_agent_action is None:
            return
        try:
            res = self.check_agent_action(act.action_id, act.tool, elapsed)
        except Exception as e:
            self.errors += 1
            self._event("monitor_error", action_id=act.action_id,
                        error=f"check_agent_action raised {type(e).__name__}: {e}")
            return
        if res is None:
            return
        if (not isinstance(res, tuple) or len(res) not in (2, 3) or res[0] not in DECISIONS
                or not isinstance(res[1], str)):
            self.errors += 1
            self._event("monitor_error", action_id=act.action_id,
                        error=f"check_agent_action must return None or (finish|fail|escalate, "
                              f"reason[, tool]), got {res!r}")
            return
        decision, reason = str(res[0]), str(res[1])
        then = str(res[2]) if len(res) == 3 and res[2] else ""
        if then and (decision == "escalate" or then not in self.tools):
            why = ("escalate starts no tool" if decision == "escalate"
                   else f"{then!r} names no tool")
            self._event("monitor_error", action_id=act.action_id,
                        error=f"check_agent_action's follow-up dropped: {why}")
            then = ""
        if decision == "escalate":
            if act.tripwire_escalated:
                return
            act.tripwire_escalated = True
        else:
            act.concluded = decision
        self._publish(MonitorVerdict(act.action_id, act.tool, TRIPWIRE_QUESTION, decision, 1.0,
                                     decision, reason, self.clock.now(), then, "controller",
                                     act.generation))

    # frames ----------------------------------------------------------------------------------
    def _shot(self, cam: str, frame: Image) -> Shot:
        key = (cam, frame.seq, frame.stamp)
        shot = self._shots.get(key)
        if shot is not None and shot.frame is frame:
            return shot
        px, scaling, close = select_view(frame.data, cam, self.config.close_ups,
                                         self.config.image_max_side)
        px = np.ascontiguousarray(px)
        data, mt = im.encode(px, self.image_format, self.jpeg_quality)
        shot = Shot(cam, frame, px, scaling, close, data, mt)
        self._shots[key] = shot
        while len(self._shots) > 4 * max(1, len(self.cameras)) * max(1, self.config.history):
            self._shots.popitem(last=False)
        return shot

    def _mark_for(self, act: _Action, cam: str, shot: Shot) -> Box | None:
        if not self.config.mark_target or self.target_box is None:
            return None
        try:
            box = self.target_box(act.action_id, act.trackers, cam, shot.frame)
        except Exception as e:
            self._event("monitor_error", action_id=act.action_id,
                        error=f"target_box raised {type(e).__name__}: {e}")
            return None
        return None if box is None else box_to_sent(box, shot.scaling)

    def _take_frames(self, act: _Action) -> list[tuple[str, Shot, Box | None]]:
        out = []
        for cam, sub in self._frames.items():
            frame = sub.latest()
            if not isinstance(frame, Image):
                continue
            shot = self._shot(cam, frame)
            out.append((cam, shot, self._mark_for(act, cam, shot)))
        return out

    def _entry(self, shot: Shot, mark: Box | None) -> _Entry:
        if mark is None:
            return _Entry(shot, None, shot.pixels, shot.data, shot.media_type)
        px = draw_mark(shot.pixels, mark)
        data, mt = im.encode(px, self.image_format, self.jpeg_quality)
        return _Entry(shot, mark, px, data, mt)

    @staticmethod
    def _monitor_image(e: _Entry, label: str, age: float) -> MonitorImage:
        s = e.shot
        return MonitorImage(s.camera, label, round(age, 3), e.data, e.media_type,
                            s.scaling.sent_w, s.scaling.sent_h, e.pixels, s.close_up, False,
                            e.mark, s.file_name, s.frame.seq, s.frame.stamp)

    def _reference(self, act: _Action, now: float) -> list[MonitorImage]:
        if act.reference is not None:
            return [MonitorImage(r.camera, r.label, round(now - r.stamp, 3), r.data,
                                 r.media_type, r.width, r.height, r.pixels, r.close_up, True,
                                 None, r.file, r.seq, r.stamp) for r in act.reference]
        refs: list[MonitorImage] = []
        point_cam = self._point_camera(act)
        points = self._points(act)
        for cam, frame in act.start_frames.items():
            px, scaling, close = select_view(frame.data, cam, self.config.close_ups,
                                             self.config.image_max_side)
            if cam == point_cam and points:
                sent = [scaling.to_sent(x, y) for x, y in points]
                inside = [(x, y) for x, y in sent
                          if 0 <= x < scaling.sent_w and 0 <= y < scaling.sent_h]
                if inside:
                    px = im.draw_points(np.ascontiguousarray(px), inside)
            px = np.ascontiguousarray(px)
            data, mt = im.encode(px, self.image_format, self.jpeg_quality)
            ext = "png" if mt == "image/png" else "jpg"
            name = f"monitor_{act.action_id}_reference_{cam.replace('/', '_')}.{ext}"
            refs.append(MonitorImage(cam, "reference", round(now - frame.stamp, 3), data, mt,
                                     scaling.sent_w, scaling.sent_h, px, close, True, None,
                                     name, frame.seq, frame.stamp))
        act.reference = refs
        return refs

    def _point_camera(self, act: _Action) -> str:
        spec = self._spec(act.tool)
        cam = spec.get("camera") if spec else None
        if isinstance(cam, str) and cam:
            return cam
        return self.cameras[0] if len(self.cameras) == 1 else ""

    def _points(self, act: _Action) -> list[tuple[float, float]]:
        spec = self._spec(act.tool)
        out = []
        for p in (spec.get("image_points") or ()) if spec else ():
            v = act.params.get(p)
            if (isinstance(v, (list, tuple)) and len(v) == 2
                    and all(_num(c) for c in v)):
                out.append((float(v[0]), float(v[1])))
        return out

    def _spec(self, tool: str) -> Mapping[str, Any] | None:
        return self._catalogue.get(tool)

    # the call --------------------------------------------------------------------------------
    def _readings(self) -> dict[str, Any]:
        js = self._joints.latest()
        if self._readings_fn is not None:
            out = self._readings_fn(js if isinstance(js, JointState) else None)
        elif isinstance(js, JointState):
            out = {"joints": {n: round(p, 4) for n, p in zip(js.name, js.position,
                                                              strict=False)}}
        else:
            out = {}
        if self.state_fields:
            out = {m: {f: v for f, v in fields.items() if f in self.state_fields.get(m, [])}
                   for m, fields in out.items() if m in self.state_fields}
        return dict(out)

    def _image_record(self, shot: Shot, mark: Box | None, label: str, age: float
                      ) -> dict[str, Any]:
        return {"camera": shot.camera, "label": label, "age_s": round(age, 3),
                "file": f"images/{shot.file_name}", "close_up": shot.close_up,
                "size": [shot.scaling.sent_w, shot.scaling.sent_h],
                "crop": [shot.scaling.x0, shot.scaling.y0, shot.scaling.cw, shot.scaling.ch],
                "capture_size": [shot.scaling.capture_w, shot.scaling.capture_h],
                "seq": shot.frame.seq, "mark": list(mark) if mark is not None else None}

    def _save_shots(self, shots: Sequence[Shot]) -> None:
        log = self._log_fn()
        if log is None:
            return
        for s in shots:
            if not log.has_image(s.file_name):
                log.save_image(s.file_name, s.data)

    def _submit(self, act: _Action, active: tuple[QuestionSpec, ...], elapsed: float,
                now: float) -> None:
        images: list[MonitorImage] = []
        records: list[dict[str, Any]] = []
        to_save: list[Shot] = []
        if self.config.reference:
            for r in self._reference(act, now):
                images.append(r)
                records.append({"camera": r.camera, "label": "reference", "age_s": r.age_s,
                                "file": f"images/{r.file}", "close_up": r.close_up,
                                "size": [r.width, r.height], "reference": True,
                                "seq": r.seq, "mark": None})
        for cam in self.cameras:
            dq = act.history.get(cam)
            if not dq:
                continue
            labels = history_labels([e.shot.frame.stamp for e in dq], now)
            for e, label in zip(dq, labels, strict=True):
                age = now - e.shot.frame.stamp
                images.append(self._monitor_image(e, label, age))
                records.append(self._image_record(e.shot, e.mark, label, age))
                to_save.append(e.shot)
        req = MonitorTickRequest(act.action_id, act.tool, round(elapsed, 3),
                                 tuple(q.question for q in active), tuple(images),
                                 self._readings(), self.config.instructions,
                                 marked=any(i.mark is not None for i in images),
                                 reference=bool(self.config.reference and act.reference))
        backend = self.backend
        assert backend is not None
        timeout = self.config.timeout_s
        refs = [r for r in images if r.reference]
        log_fn = self._log_fn

        def run() -> TickReply:
            log = log_fn()
            if log is not None:
                for s in to_save:
                    if not log.has_image(s.file_name):
                        log.save_image(s.file_name, s.data)
                for r in refs:
                    if not log.has_image(r.file):
                        log.save_image(r.file, r.data)
            return backend.answer_tick(req, timeout_s=timeout)

        self.calls += 1
        fut = cast("cf.Future[TickReply]",
                   self.caller.submit(cast("Callable[[], ModelReply]", run)))
        act.call = _Call(act.ticks, fut, req, elapsed, now, time.monotonic(), records,
                         dict(req.readings))
        self._poll()

    def _poll(self) -> None:
        for act in list(self.actions.values()):
            call = act.call
            if call is not None and call.future.done():
                act.call = None
                self._handle(act, call, live=not act.concluded)
        for pair in list(self._orphans):
            act, call = pair
            if call.future.done():
                self._orphans.remove(pair)
                self._handle(act, call, live=False)

    def _handle(self, act: _Action, call: _Call, live: bool) -> None:
        latency = time.monotonic() - call.wall0
        reply: TickReply | None = None
        error: dict[str, Any] | None = None
        try:
            reply = call.future.result()
        except Exception as e:
            kind = getattr(e, "kind", "error")
            error = {"kind": str(kind), "message": str(getattr(e, "message", e))[:500]}
            self.errors += 1
        verdicts: list[dict[str, Any]] = []
        answers = reply.answers if reply is not None else {}
        if reply is not None and live:
            verdicts = self._judge(act, call, answers)
        self._event("monitor_tick", action_id=act.action_id, tool=act.tool, tick=call.tick,
                    elapsed_s=round(call.elapsed_s, 3),
                    questions=[q.name for q in call.request.questions],
                    images=call.images, readings=call.readings,
                    answers={k: a.as_dict() for k, a in answers.items()},
                    problems=list(reply.problems) if reply is not None else [],
                    latency_s=round(reply.latency_s if reply is not None and reply.latency_s
                                    else latency, 4),
                    usage=reply.usage.as_dict() if reply is not None else None,
                    model=(reply.model if reply is not None else "") or
                    getattr(self.backend, "model", ""),
                    error=error, verdicts=verdicts,
                    **({} if live else {"discarded": "the action ended or was concluded "
                                                      "before the answer arrived"}))

    def _judge(self, act: _Action, call: _Call, answers: Mapping[str, MonitorAnswer]
               ) -> list[dict[str, Any]]:
        now = self.clock.now()
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
                reason = self._reason(spec, rule, ans, run)
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
            self._publish(v)
            out.append({"question": v.question, "value": v.value,
                        "probability": round(v.probability, 4), "decision": v.decision,
                        "then": v.then, "reason": v.reason})
        if terminal is not None:
            act.concluded = terminal.decision
        return out

    @staticmethod
    def _reason(spec: QuestionSpec, rule: Rule, ans: MonitorAnswer, run: int) -> str:
        what = (f"watch_for condition {spec.watch_for!r} holds" if spec.watch_for
                else f"{spec.name} = {ans.value}")
        ticks = f" on {run} ticks in a row" if rule.consecutive > 1 else ""
        text = f"{what} (p={ans.probability:.2f}){ticks}"
        return f"{text}: {ans.reason}" if ans.reason else text

    # output ----------------------------------------------------------------------------------
    def _publish(self, v: MonitorVerdict) -> None:
        self.verdicts_published += 1
        self._pub.publish(v)

    def _event(self, kind: str, **data: Any) -> None:
        log = self._log_fn()
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


def build_monitor_backend(config: MonitorConfig) -> VisionBackend:
    """The vision backend ``monitor.provider`` names: ``cv`` (offline), or an HTTP provider
    (typed answers over :class:`~..perception.vision.ModelVisionBackend`).  ``scripted`` is
    built by tests.  Raises ConfigError / ModelConfigError."""
    if config.provider == "cv":
        from ..perception.cv_monitor import CvVisionBackend

        return CvVisionBackend()
    if config.provider == "scripted":
        raise ConfigError("agent.monitor.provider", "the scripted monitor is built by tests; "
                                                    "pass backend=")
    from ..models.factory import build_provider
    from ..perception.vision import ModelVisionBackend

    return ModelVisionBackend(build_provider(config, purpose="monitor"),
                              max_tokens=config.max_tokens)


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

    ``trackers``: anything with ``result(field) -> TrackerResult`` (the executor's tracker
    port) for ``mark_target``; ``readings``: the planner's readings function, so both see the
    same ``state_fields``.  The catalogue is read and every question validated here, so a
    ``then`` naming no tool stops the start with :class:`MonitorConfigError`.
    """
    mcfg = config.monitor
    if mcfg is None:
        return None
    if backend is None:
        backend = build_monitor_backend(mcfg)
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
    "MonitorConfigError", "MonitorEngine", "QuestionSpec", "Rule", "RuleState", "Shot",
    "build_monitor", "build_monitor_backend",
    "TargetBoxFn", "Tripwire", "WATCH_FOR_RULE", "box_to_sent", "check_catalogue",
    "condition", "draw_mark", "history_labels", "mask_bounds", "parse_questions",
    "select_view", "tracker_target_box", "watch_for_questions",
]
