"""The panel's hub: what the pages see (a snapshot, then every change pushed), without HTTP, so
tests drive it directly.

* bus callbacks (any thread, often the control loop) only append to a bounded intake and wake
  the *update pump*;
* the pump (one asyncio task in the server's loop) turns messages into JSON, keeps the
  snapshot a new page starts from, and fans out to every client's bounded queue (drop-oldest,
  counted; a client that lost messages is sent the snapshot again);
* camera frames are announced at most ``fps`` times a second per topic (``frame`` messages);
  the page then fetches the JPEG once per announcement (encoded only for frames someone looks
  at, off the control path).

The agent's status shows ``connecting`` until its first state arrives (never a bare
"unknown"); events carry ``internal`` (routing and bookkeeping lines the page hides unless
asked); the conversation is the planner's with the refused tool calls and the operator's
not-yet-seen messages in it (:mod:`.panel_conversation`).  What the operator may do, and the
e-stop as the panel knows it, is :mod:`.panel_controls`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from ..core.clock import Clock
from ..core.messages import AgentEvent, AgentState, MonitorVerdict, OperatorEvent
from .event_lines import describe_event
from .link import AgentLink, is_internal
from .panel_clients import Client, ControlLock, Intake, dumps, encode_jpeg, json_safe
from .panel_controls import OperatorControls
from .panel_conversation import ConversationView
from .panel_door import new_secret

log = logging.getLogger(__name__)

NO_STATE = {"status": "connecting", "task": "", "generation": 0, "plan": [], "actions": [],
            "conversation": []}


class PanelHub:
    def __init__(self, link: AgentLink, clock: Clock, *, fps: float = 5.0,
                 client_queue: int = 256, history: int = 200,
                 command_timeout_s: float = 3.0,
                 robot: Mapping[str, Any] | None = None) -> None:
        self.link = link
        # the robot profile's summary (bring-up's readiness), fixed for the panel's life
        self.robot: dict[str, Any] = dict(robot) if robot is not None else {"name": "simulator"}
        self.gate: dict[str, Any] = {}  # the arm's command gate: holder, last refusals
        self.clock = clock
        self.fps = fps
        self.client_queue = client_queue
        self.command_timeout_s = command_timeout_s
        self.intake = Intake()
        self.lock = ControlLock()
        self.clients: dict[str, Client] = {}
        self.state: dict[str, Any] = dict(NO_STATE)
        self._state_stamp = 0.0
        self._planner_state: AgentState | None = None
        self.conversation = ConversationView(time.monotonic)
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=history)
        self.verdicts: collections.OrderedDict[str, dict[str, dict[str, Any]]] = \
            collections.OrderedDict()
        self.operator: dict[str, Any] | None = None
        # how recent actions ended (action id -> the plan status shown): authoritative for a
        # plan step the planner still lists as running (a paused run keeps its plan as is)
        self._ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.controls = OperatorControls(link, self.clients, self.lock, self.broadcast,
                                         self._run_status)
        self.frames: dict[str, int] = {}
        self._frame_src: dict[str, Any] = {}
        self._frame_sent_at: dict[str, float] = {}
        self._jpeg_cache: dict[str, tuple[Any, bytes]] = {}
        self._jpeg_lock = threading.Lock()
        self.pump_errors = 0
        self.closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._pump_task: asyncio.Task[None] | None = None
        link.on_state(lambda m: self.intake.put("state", m))
        link.on_event(lambda m: self.intake.put("event", m))
        link.on_verdict(lambda m: self.intake.put("verdict", m))
        link.on_operator(lambda m: self.intake.put("operator", m))

    def _run_status(self) -> object:
        return self.state.get("status")

    @property
    def estop(self) -> dict[str, Any]:
        return self.controls.estop

    # lifecycle (inside the server's loop) ------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        loop, wake = self._loop, self._wake

        def notify() -> None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # loop closed during shutdown
                pass

        self.intake.notify = notify
        self._process(self.intake.drain())
        self._pump_task = asyncio.create_task(self._pump(), name="panel-pump")

    async def stop(self) -> None:
        self.closing = True
        self.intake.notify = None
        for c in list(self.clients.values()):
            c.wake.set()
        if self._pump_task is not None:
            self._pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._pump_task, 2.0)

    def close_from_thread(self) -> None:
        """Tell open streams to end (any thread)."""
        self.closing = True
        loop = self._loop
        if loop is None:
            return

        def wake_all() -> None:
            for c in list(self.clients.values()):
                c.wake.set()
            if self._wake is not None:
                self._wake.set()

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(wake_all)

    # the update pump ---------------------------------------------------------------------
    async def _pump(self) -> None:
        assert self._wake is not None
        period = 0.25
        next_tick = time.monotonic()
        while not self.closing:
            try:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=min(period, 1 / self.fps))
                self._wake.clear()
                self._process(self.intake.drain())
                self._announce_frames()
                if time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + period
                    self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the pump never dies of one bad message
                self.pump_errors += 1
                log.exception("panel update pump")
                await asyncio.sleep(0.05)

    def _process(self, items: list[tuple[str, Any]]) -> None:
        """Handle intake in arrival order; a run of consecutive states collapses to its last."""
        handlers: dict[str, Callable[[Any], None]] = {
            "state": self._on_state, "event": self._on_event, "verdict": self._on_verdict,
            "operator": self._on_operator}
        for i, (kind, msg) in enumerate(items):
            if kind == "state" and i + 1 < len(items) and items[i + 1][0] == "state":
                continue
            handler = handlers.get(kind)
            if handler is None:
                continue
            try:
                handler(msg)
            except Exception:
                self.pump_errors += 1
                log.exception("panel: could not handle a %s message", kind)

    def _on_state(self, st: AgentState) -> None:
        self._planner_state = st
        prev = self.state.get("status")
        if st.status == "running" or (prev == "paused" and st.status != "paused"):
            self.operator = None  # the takeover is over: the run resumed or ended
        self.conversation.on_state([dict(m) for m in st.conversation], str(st.status),
                                   str(st.task))
        self._state_stamp = float(st.stamp)
        self._render_state()

    def _render_state(self) -> None:
        """The page's state from the planner's last one (and what the panel knows beside it),
        broadcast to every page."""
        st = self._planner_state
        if st is None:
            self.state = {**NO_STATE, "conversation": self.conversation.entries()}
        else:
            # an action whose end event came is gone, whatever the planner's last state says
            # (it does not republish its state for an action that ends after the run did)
            actions = []
            for a in st.actions:
                a = dict(a)
                if str(a.get("action_id")) in self._ended:
                    continue
                a["verdicts"] = list(self.verdicts.get(str(a.get("action_id")), {}).values())
                actions.append(a)
            plan = [self._ended_step(s) for s in st.plan]
            self.state = json_safe({
                "status": st.status, "task": st.task, "generation": st.generation,
                "plan": plan, "actions": actions,
                "conversation": self.conversation.entries(), "stamp": st.stamp,
                # the graph's nodes as the planner sees them: up, lost or back
                "nodes": [dict(n) for n in st.nodes]})
        self.broadcast({"type": "state", "state": self.state, "operator": self.operator})

    def _ended_step(self, step: Any) -> Any:
        """A step still listed as running whose action has ended shows how it ended (a paused
        run keeps its plan as it was)."""
        if not isinstance(step, dict) or step.get("status") != "running":
            return step
        aid = str(step.get("action_id"))
        if aid in self._ended:
            return {**step, "status": self._ended[aid]}
        return step

    def _on_event(self, ev: AgentEvent) -> None:
        data = dict(ev.data)
        rec = json_safe({"t": ev.t, "kind": ev.kind, "by": data.get("by"),
                         "internal": is_internal(ev.kind),
                         "text": describe_event(ev.kind, data)})
        self.events.append(rec)
        if ev.kind == "operator_takeover":
            self.operator = json_safe({"t": ev.t, "action": data.get("action"),
                                       "detail": data.get("detail")})
        self.broadcast({"type": "event", "event": rec})
        changed = self.conversation.on_event(ev.kind, data)
        if ev.kind in ("action_ended", "action_refused"):
            aid = str(data.get("action_id"))
            outcome = str(data.get("outcome", ""))
            self._ended[aid] = {"succeeded": "done", "failed": "failed",
                                "timed_out": "failed"}.get(outcome, "stopped")
            while len(self._ended) > 200:
                self._ended.popitem(last=False)
            changed = True
        if changed:
            self._render_state()

    def _on_verdict(self, v: MonitorVerdict) -> None:
        d = json_safe(asdict(v))
        per = self.verdicts.setdefault(v.action_id, {})
        per[v.question] = d
        self.verdicts.move_to_end(v.action_id)
        while len(self.verdicts) > 50:
            self.verdicts.popitem(last=False)
        for a in self.state.get("actions", []):
            if a.get("action_id") == v.action_id:
                a["verdicts"] = list(per.values())
        self.broadcast({"type": "verdict", "verdict": d})

    def _on_operator(self, ev: OperatorEvent) -> None:
        self.operator = json_safe({"t": ev.stamp, "action": ev.kind, "detail": dict(ev.detail)})
        self.broadcast({"type": "operator", "operator": self.operator})
        self.controls.on_operator(ev)

    def message_sent(self, text: str) -> None:
        """The agent accepted the operator's message: shown as pending until it is seen."""
        self.conversation.sent(text)
        self._render_state()

    def _tick(self) -> None:
        self.controls.refresh()
        self._refresh_gate()
        if self.conversation.expire():
            self._render_state()
        actions = self.state.get("actions") or []
        if not actions:
            return
        now = self.clock.now()
        elapsed = {str(a.get("action_id")): round(float(a.get("elapsed_s") or 0.0)
                                                  + max(0.0, now - self._state_stamp), 1)
                   for a in actions}
        self.broadcast({"type": "tick", "elapsed": elapsed})

    def _refresh_gate(self) -> None:
        """The arm's holder and last refusals, sent to the pages when they change (a link
        without the gate's topic shows none)."""
        read = getattr(self.link, "arm_gate", None)
        gate = read() if callable(read) else {}
        shown = {k: gate.get(k) for k in ("holder", "refused_total", "last_refusals")}
        if shown != self.gate:
            self.gate = json_safe(shown)
            self.broadcast({"type": "gate", "gate": self.gate})

    def _announce_frames(self) -> None:
        now = time.monotonic()
        for topic in self.link.image_topics():
            img = self.link.latest_image(topic)
            if img is None or img is self._frame_src.get(topic):
                continue
            if now - self._frame_sent_at.get(topic, 0.0) < 1.0 / self.fps:
                continue
            self._frame_src[topic] = img
            self._frame_sent_at[topic] = now
            self.frames[topic] = self.frames.get(topic, 0) + 1
            self.broadcast({"type": "frame", "topic": topic, "seq": self.frames[topic]})

    # fan-out -----------------------------------------------------------------------------
    def broadcast(self, msg: dict[str, Any]) -> None:
        payload = dumps(msg)
        for c in list(self.clients.values()):
            c.push(payload)

    def snapshot_messages(self, client: Client | None) -> list[str]:
        out = []
        if client is not None:  # the page's own stream, once: its token goes nowhere else
            out.append(dumps({"type": "hello", "client": client.id, "token": client.token}))
        out.append(dumps({"type": "state", "state": self.state, "operator": self.operator}))
        out.append(dumps({"type": "events", "events": list(self.events)}))
        out.append(dumps({"type": "lock", "holder": self.lock.holder}))
        out.append(dumps({"type": "estop", "estop": self.estop}))
        out.append(dumps({"type": "cameras", "topics": self.link.image_topics()}))
        out.append(dumps({"type": "robot", "robot": self.robot}))
        out.append(dumps({"type": "gate", "gate": self.gate}))
        for topic, seq in self.frames.items():
            out.append(dumps({"type": "frame", "topic": topic, "seq": seq}))
        return out

    def connect(self) -> Client:
        cid = secrets.token_urlsafe(6)
        while cid in self.clients:
            cid = secrets.token_urlsafe(6)
        c = Client(cid, new_secret(), collections.deque(maxlen=self.client_queue),
                   asyncio.Event())
        for p in self.snapshot_messages(c):
            c.queue.append(p)
        c.wake.set()
        self.clients[cid] = c
        return c

    def disconnect(self, client: Client) -> None:
        self.clients.pop(client.id, None)
        if self.lock.release(client.id):
            self.broadcast({"type": "lock", "holder": None})

    def take(self, client: Client) -> list[str]:
        out: list[str] = []
        if client.resync:
            client.resync = False
            out.append(dumps({"type": "dropped", "count": client.dropped}))
            client.queue.clear()
            out.extend(self.snapshot_messages(None))
        while client.queue:
            out.append(client.queue.popleft())
        client.sent += len(out)
        return out

    # frames ------------------------------------------------------------------------------
    def frame_jpeg(self, topic: str, max_side: int = 640, quality: int = 80) -> bytes | None:
        """The newest frame of ``topic`` as JPEG (cached per frame; any thread)."""
        img = self.link.latest_image(topic)
        if img is None:
            return None
        with self._jpeg_lock:
            cached = self._jpeg_cache.get(topic)
            if cached is not None and cached[0] is img:
                return cached[1]
        data = encode_jpeg(img, max_side, quality)
        with self._jpeg_lock:
            self._jpeg_cache[topic] = (img, data)
        return data


__all__ = ["NO_STATE", "PanelHub"]
