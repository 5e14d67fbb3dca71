"""The planner's turn cycle: when a woken planner is called, what it is sent (the wake
message, the context with older images stubbed, the views), the model call on the worker, the
reply polled from the tick, and the turn file written to the episode log.  A reply that arrives
after the run's generation changed is discarded unexecuted.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import event_types as et
from .arm_status import derating_line
from .attention import AttentionEpisode
from .clock import Clock
from .config import AgentConfig
from .episode_log import EpisodeLog
from .errors import ToolCallRejected
from .messages import Image, JointState
from .model_api import (
    ImagePart,
    Message,
    ModelError,
    ModelReply,
    ModelRequest,
    TextPart,
    ToolCall,
)
from .observations import MotionTracker
from .planner_calls import ToolCalls
from .planner_journal import Journal, StatePublisher
from .planner_runs import RunControl
from .planner_state import (
    ActionBook,
    ModelRetries,
    Refusals,
    RunState,
    Transcript,
    TurnSlot,
    Wakes,
)
from .planner_tools import (
    FIRST_FRAME_WAIT_S,
    FRESH_FRAME_WAIT_S,
    SETTLE_S,
    PlannerModel,
    ToolCatalogue,
    Turn,
    system_prompt,
    tool_msg,
)
from .routing import render_news
from .statuses import RunStatus
from .text import clean_reply, one_line, quote, quote_prefix
from .timers import Timers
from .transport import Subscription
from .views import PreparedViews, ViewManager

Readings = Callable[[JointState | None], dict[str, dict[str, float]]]


@dataclasses.dataclass(frozen=True)
class Senses:
    """What the planner is shown of the robot besides its views: the cameras' latest
    frames, the joint states (and how they become readings), the arm's health, its motion."""

    frames: Mapping[str, Subscription[Image]]
    joints: Subscription[JointState]
    readings: Readings | None
    arm_diagnostics: Subscription[Any]
    motion: MotionTracker


class TurnCycle:
    """Starts, polls and records the planner's model calls."""

    def __init__(self, clock: Clock, config: AgentConfig, run: RunState, book: ActionBook,
                 wakes: Wakes, slot: TurnSlot, transcript: Transcript, journal: Journal,
                 state: StatePublisher, *, retries: ModelRetries, refusals: Refusals,
                 calls: ToolCalls, runs: RunControl, catalogue: ToolCatalogue,
                 views: ViewManager, timers: Timers, senses: Senses, model: PlannerModel,
                 rng: random.Random) -> None:
        self._clock = clock
        self._config = config
        self._run = run
        self._book = book
        self._wakes = wakes
        self._slot = slot
        self._transcript = transcript
        self._journal = journal
        self._state = state
        self.retries = retries
        self._refusals = refusals
        self._calls = calls
        self._runs = runs
        self._catalogue = catalogue
        self._views = views
        self._timers = timers
        self._senses = senses
        self.model = model
        self._rng = rng
        self.text_only_replies = 0
        self.settle_since: float | None = None
        self.pending_wake: tuple[Message, cf.Future[list[Any]]] | None = None
        self.prepared_wake: PreparedViews = PreparedViews(views)

    def held_back(self, now: float) -> bool:
        """A due call waits: a wake, or a turn after a refused call (a stale point while the
        arm still moved), waits for still frames unless an interrupt made it urgent, so a
        planner never spins on instant refusals; a failed call's retry waits its backoff."""
        if (self._wakes.reasons or self._refusals.last_turn) and not self._wakes.urgent \
                and self.frames_settling(now):
            return True
        return self.retries.backing_off(now)

    def frames_settling(self, now: float) -> bool:
        """Hold a wake back (at most ``FRESH_FRAME_WAIT_S``) until every camera has a frame
        captured after the robot last moved, so the planner is not shown, and does not point
        in, an image the harness would refuse as stale; and (at most ``FIRST_FRAME_WAIT_S``)
        until every camera has delivered at all."""
        if self.settle_since is None:
            self.settle_since = now
        waited = now - self.settle_since
        if waited < FIRST_FRAME_WAIT_S and any(
                sub.latest() is None for sub in self._senses.frames.values()):
            return True  # a camera that has not delivered yet: a graph still coming up
        if waited >= FRESH_FRAME_WAIT_S:
            self.settle_since = None
            return False
        moved = self._senses.motion.last_moved
        if now - moved < SETTLE_S:
            return True  # still moving, or just stopped: the next frame would be stale
        for sub in self._senses.frames.values():
            f = sub.latest()
            if f is not None and f.stamp < moved:
                return True
        self.settle_since = None
        return False

    def readings(self) -> dict[str, dict[str, float]]:
        js = self._senses.joints.latest()
        if self._senses.readings is not None:
            out = self._senses.readings(js)
        elif js is not None:
            out = {"joints": {n: round(p, 4) for n, p in zip(js.name, js.position,
                                                              strict=False)}}
        else:
            out = {}
        want = self._config.state_fields
        if want:
            out = {m: {f: v for f, v in fields.items() if f in want.get(m, [])}
                   for m, fields in out.items() if m in want}
        return out

    def wake_message(self) -> Message:
        reasons = ", ".join(dict.fromkeys(self._wakes.reasons)) or "continue"
        lines = [f"[woken: {reasons}]"]
        if self._wakes.news:
            lines.append(render_news(self._wakes.news))
        lines.append("Plan:\n" + self._run.plan.render())
        now = self._clock.now()
        running = [f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                   for a in self._book.running.values()]
        lines.append("Running: " + (", ".join(running) if running else "nothing"))
        notes = self._book.notes.for_actions(self._book.running)
        if notes:
            lines.append("Monitor (may be wrong; check the newest image): " + "; ".join(
                f"{v.action_id} {v.tool}: {one_line(v.question, 300)}="
                f"{quote('monitor', v.value, 200)} (p={v.probability:.2f})" for v in notes))
        readings = self.readings()
        if readings:
            lines.append("Readings: " + json.dumps(readings, separators=(",", ":")))
        slowed = derating_line(self._senses.arm_diagnostics.latest())
        if slowed:
            lines.append(slowed)
        # a fresh attention episode (and acquisition budget) per wake: autonomous unless a
        # user asked
        self._slot.attention = AttentionEpisode(autonomous="message" not in self._wakes.reasons)
        self.prepared_wake = self._views.capture_for_turn()
        self._wakes.news.clear()
        self._wakes.reasons.clear()
        return Message("user", (TextPart("\n".join(lines)),))

    def context(self) -> tuple[Message, ...]:
        """Messages for the request: older images beyond max_images_in_context become stubs."""
        keep = self._config.max_images_in_context
        out: list[Message] = []
        seen = 0
        for msg in reversed(self._transcript.messages):
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
        self._transcript.messages[:] = out
        return tuple(out)

    def poll_wake(self) -> bool:
        """True while a wake message waits for its views to be described (a model call)."""
        if self.pending_wake is None:
            return False
        msg, fut = self.pending_wake
        if not fut.done():
            return True
        self.pending_wake = None
        try:
            parts = list(fut.result())
        except Exception as e:
            parts = [TextPart("[views could not be described: "
                              f"{quote('error', f'{type(e).__name__}: {e}')}]")]
        self._transcript.messages.append(Message("user", (*msg.content, *parts)))
        self._wakes.continue_turn = True
        return False

    def start_model_call(self) -> None:
        if self._wakes.reasons or self._wakes.news:
            msg = self.wake_message()
            prepared = self.prepared_wake
            if prepared.views and self.model.describes_views:
                # a text-only planner: the views are described by the vision model, off the
                # control path; the call starts when the descriptions are in
                self.pending_wake = (msg, self.model.caller.submit(prepared.render))
                return
            self._transcript.messages.append(Message("user", (*msg.content, *prepared.render())))
        self._wakes.continue_turn = False
        request = ModelRequest(system_prompt(self._config.system_prompt), self.context(),
                               tuple(self._catalogue.tool_defs()), self._config.planner.max_tokens)
        self._run.turns += 1
        turn = Turn(self._run.generation, started_at=self._clock.now(),
                    wall_start=time.monotonic(), request=request)
        log = self._journal.log
        turn.turn_file = log.next_turn_name() if log is not None else ""
        timeout = self._config.planner.timeout_s
        provider = self.model.provider
        self._slot.current = turn
        turn.future = self.model.caller.submit(
            lambda: clean_reply(provider.complete(request, timeout_s=timeout)))

    def poll_turn(self) -> None:
        turn = self._slot.current
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
            if turn.generation != self._run.generation or self._run.status != RunStatus.RUNNING:
                self._journal.event(
                    et.PlannerReplyDiscarded(turn=turn.turn_file,
                    reason="the run's generation changed while the model was thinking"))
                self._slot.current = None
                return
            self.record_turn(turn, reply, error, latency)
            if error is not None:
                self.model_failed(error)
                return
            assert reply is not None
            recovered = self.retries.answered()
            if recovered is not None:
                self._journal.event(et.PlannerModelOk(after_failures=recovered))
            self.handle_reply(turn, reply)
            if self._slot.current is not turn:
                return  # a text-only reply closed the turn itself (and chose to continue or not)
        self._calls.poll_pending(turn)

    # a failing planner model (HTTP 503 ...): a few calls per wake, backing off ------------
    def model_failed(self, error: ModelError) -> None:
        """A failed call is retried after an exponential backoff with jitter (the planner's
        clock and RNG), at most ``budgets.model_retries_per_wake`` times; then the planner
        stays silent until the next event wakes it, and says so (``planner_silent``)."""
        self._slot.current = None
        note = (f"Your previous call failed ({error.kind}): "
                f"{quote('model error', error.message, 600)}. Continue.")
        self._wakes.news[:] = [n for n in self._wakes.news if not (
            isinstance(n, str) and n.startswith("Your previous call failed ("))]
        self._wakes.news.append(note)
        if error.kind in ("auth", "config"):
            self._runs.end_run(RunStatus.FAILED, f"planner model unusable: {error}")
            return
        n, limit = self.retries.failed(), self._config.budgets.model_retries_per_wake
        why = f"{error.kind}: {one_line(error.message, 200)}"
        if n <= limit:
            delay = backoff_delay(n - 1, self._rng)
            self.retries.retry(self._clock.now() + delay)
            self._journal.event(et.PlannerModelRetry(attempt=n + 1, attempts=limit + 1,
                                error=why, retry_in_s=round(delay, 3)))
            self._wakes.wake("model_error")
        else:
            self.retries.give_up()
            self._journal.event(
                et.PlannerSilent(failures=n, error=why,
                reason=f"the planner model failed {n} times in a row; it is called again "
                       "when the next event wakes it (a message, an action's end, a monitor "
                       "flag); /cancel ends the run"))
        self._state.publish()

    def record_turn(self, turn: Turn, reply: ModelReply | None, error: ModelError | None,
                    latency: float) -> None:
        if reply is not None:
            self._run.add_usage(reply.usage.as_dict())
        log = self._journal.log
        if log is None or turn.request is None:
            return
        payload = {
            "turn": turn.turn_file, "generation": turn.generation,
            "input": request_json(turn.request, log, self._journal.turn_cursor or 0),
            "output": None if reply is None else {
                "text": reply.text, "model": reply.model, "stop_reason": reply.stop_reason,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                                "parse_error": c.parse_error} for c in reply.tool_calls],
                "usage": reply.usage.as_dict()},
            "error": None if error is None else error.as_dict(),
        }
        log.write_turn(turn.turn_file, payload)
        if self._journal.turn_cursor is not None:
            self._journal.turn_cursor = len(turn.request.messages)
        self._journal.event(et.PlannerTurn(turn=turn.turn_file, latency_s=round(latency, 4),
                         usage=None if reply is None else reply.usage.as_dict(),
                         model=(reply.model if reply else self.model.provider.model),
                         text=(reply.text if reply else ""),
                         tools=[c.name for c in reply.tool_calls] if reply else [],
                         error=None if error is None else error.as_dict()))

    def handle_reply(self, turn: Turn, reply: ModelReply) -> None:
        self._wakes.hold = False  # the planner has answered since the user's stop
        reply, oversized = bounded_reply(reply)
        kept = Message("assistant", (TextPart(reply.text),) if reply.text else (),
                       reply.tool_calls)
        self._transcript.messages.append(kept)
        if reply.text:
            self._transcript.say("agent", reply.text)
        if not reply.tool_calls:
            self.text_only_replies += 1
            if self._book.running or len(self._timers):  # it waits for a task's end or a timer
                self._slot.current = None
                return
            if self.text_only_replies >= 2:
                self._run.status = RunStatus.WAITING_USER
                self._journal.event(et.WaitingUser(question=reply.text))
                self._slot.current = None
                self._state.publish()
                return
            self._transcript.messages.append(Message.user(
                "Nothing is running. Call a tool, ask_user, or finish_task."))
            self._wakes.continue_turn = True
            self._slot.current = None
            return
        self.text_only_replies = 0
        refused: set[str] = set()
        for call in reply.tool_calls:
            turn.call_order.append(call.id)
            if turn.ended:
                turn.results[call.id] = tool_msg(call, "not executed: an earlier call in this "
                                                 "reply ended the turn", error=True)
                continue
            if call.id in oversized:
                turn.results[call.id] = tool_msg(call, f"refused: {oversized[call.id]}",
                                                 error=True)
                self._journal.event(et.ToolRefused(tool=call.name, reason=oversized[call.id]))
                continue
            try:
                self._calls.do_call(turn, call)
            except ToolCallRejected as e:
                turn.results[call.id] = tool_msg(call, self._refusals.refuse(call.name, e.reason),
                                                 error=True)
                self._journal.event(et.ToolRefused(tool=call.name, reason=e.reason))
                refused.add(call.id)
        # a refused call's long arguments are not resent every turn: its refusal quotes them
        slim = tuple(dataclasses.replace(c, arguments={}) if c.id in refused
                     and len(json.dumps(c.arguments, default=str)) > REFUSED_ARGUMENT_CHARS
                     else c for c in kept.tool_calls)
        if slim != kept.tool_calls:
            for i in range(len(self._transcript.messages) - 1, -1, -1):
                if self._transcript.messages[i] is kept:
                    self._transcript.messages[i] = dataclasses.replace(kept, tool_calls=slim)
                    break


# the planner's own retry of a failed call (an HTTP provider has retried its attempts
# already): 1 s, 2 s, 4 s ... (at most 30 s), each scaled by a random factor in [0.5, 1]
BACKOFF_BASE_S, BACKOFF_MAX_S, BACKOFF_JITTER = 1.0, 30.0, 0.5


def backoff_delay(retry_index: int, rng: random.Random) -> float:
    """Seconds before retry ``retry_index`` (0-based) of a failed planner call."""
    d = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** min(retry_index, 30))
    return d * (1.0 - BACKOFF_JITTER * rng.random())
MAX_REPLY_CHARS = 20_000  # a reply's text kept in the conversation
MAX_ARGUMENT_CHARS = 20_000  # a call's arguments (as JSON) kept and executed
REFUSED_ARGUMENT_CHARS = 1000  # a refused call's arguments kept in the conversation
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def bounded_reply(reply: ModelReply) -> tuple[ModelReply, dict[str, str]]:
    """The reply as it is kept in the conversation (and resent every turn): its text capped,
    a call's arguments longer than ``MAX_ARGUMENT_CHARS`` dropped (the call is refused with
    the returned reason), a tool name that is not one a provider accepts replaced (the
    refusal quotes the original).  Returns the reply and {call id: refusal}."""
    text = reply.text
    if len(text) > MAX_REPLY_CHARS:
        text = text[:MAX_REPLY_CHARS] + f"… [reply cut: {len(reply.text)} characters in all]"
    oversized: dict[str, str] = {}
    calls = []
    for i, c in enumerate(reply.tool_calls):
        cid = c.id if _TOOL_NAME.fullmatch(c.id) else f"call_{i}"
        name = c.name if _TOOL_NAME.fullmatch(c.name) else "invalid_tool_name"
        args = c.arguments
        size = len(json.dumps(args, default=str))
        if size > MAX_ARGUMENT_CHARS:
            oversized[cid] = (f"the arguments of {quote_prefix(c.name, 64)} are {size} "
                              f"characters of JSON, more than {MAX_ARGUMENT_CHARS}; they were "
                              "not kept")
            args = {}
        elif name != c.name:
            oversized[cid] = (f"unknown tool {quote_prefix(c.name)}: tool names are 1-64 "
                              "letters, digits, _ or -")
        calls.append(ToolCall(cid, name, args, c.parse_error))
    return dataclasses.replace(reply, text=text, tool_calls=tuple(calls)), oversized


def request_json(req: ModelRequest, log: EpisodeLog, start: int = 0) -> dict[str, Any]:
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
