"""The operator panel: a page served on localhost (starlette + uvicorn, no front-end build).

It shows the plan with each step's state, the running actions with elapsed time and monitor
verdicts, the conversation, an input box, Cancel and Reset, an always-visible E-STOP (and a
banner while the arm's e-stop is latched), the live camera views and ``agent/view`` (the image
the planner last saw, its chosen points marked), and the operator's takeover when it happens.
It sends the same commands as any front end.

Updates are pushed to the page with server-sent events (``GET /events``), never polled:

* bus callbacks (any thread, often the control loop) only append to a bounded intake and wake
  the *update pump*;
* the pump (one asyncio task in the server's loop) turns messages into JSON, keeps the
  snapshot a new page starts from, and fans out to every client's bounded queue (drop-oldest,
  counted; a client that lost messages is sent the snapshot again);
* camera frames are announced at most ``fps`` times a second per topic (``frame`` messages);
  the page then fetches ``GET /frame?topic=...`` once per announcement, so the JPEG encoding
  happens only for frames someone looks at, off the control path.

Control lock: one client (an open page) holds it at a time; sending a message, Reset and
releasing the e-stop need it.  Each page's event stream opens with a ``hello`` that gives it
its public ``client`` id (shown to everyone: who holds the lock, who pressed E-STOP) and its
``token``, a secret sent to that page alone, once: a command acts for a page only when it
carries that page's token (compared in constant time).  Nothing any other viewer can read (the
stream, ``GET /api/state``, a refused command's answer) holds a token.  Cancel and E-STOP are
safety commands: they are accepted from any viewer, with or without the lock.  The lock is
released when its page disconnects.

E-stop: ``POST /api/estop`` calls the arm driver's (or the simulator's) latched ``estop``
service with a reason naming the viewer; ``POST /api/estop_reset`` (lock) calls
``estop_reset``.  The latch is followed from the ``estop`` / ``estop_reset`` operator events
and pushed to every page (``estop`` messages), which shows a banner until the reset.  When
nothing serves ``estop`` the endpoint answers 503 with ``unavailable: true`` and the page's
button says so (availability is re-checked about once a second).

Every request passes the door first (``panel_door.py``): only the Host names the panel is
bound to, every POST same-origin JSON (Cancel and E-STOP included: a stop button on another
site never drives this robot), and beyond loopback the access token on every request.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import math
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass, field, is_dataclass
from importlib import resources
from typing import Any

import numpy as np

from ..core import names
from ..core.clock import Clock
from ..core.messages import AgentEvent, AgentState, Image, MonitorVerdict, OperatorEvent
from ..core.text import clean
from .link import AgentLink, BusLike, BusLink, Reply, describe_event, estop_unavailable
from .panel_door import DoorPolicy, PanelDoor, new_secret, same_secret

log = logging.getLogger(__name__)

STATIC_FILES = {"index.html": "text/html; charset=utf-8",
                "panel.js": "text/javascript; charset=utf-8",
                "panel.css": "text/css; charset=utf-8"}


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return f"<array {o.shape}>"
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return f"<{len(o)} bytes>"
    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    return repr(o)


def dumps(obj: Any) -> str:
    """JSON for the page; a lone surrogate (a model's ``"\ud83d"``) becomes U+FFFD, so a
    stream never fails to encode."""
    return clean(json.dumps(obj, default=_jsonable, ensure_ascii=False, allow_nan=False))


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _clean(obj: Any, depth: int = 0) -> Any:
    """Make a message JSON-safe (NaN -> None, numpy -> python, tuples -> lists, lone
    surrogates -> U+FFFD)."""
    if isinstance(obj, str):
        return clean(obj)
    if depth > 20:
        return clean(repr(obj))
    if isinstance(obj, dict):
        return {clean(str(k)): _clean(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v, depth + 1) for v in obj]
    if isinstance(obj, np.generic):
        return _finite(obj.item())
    return _finite(obj)


# ----------------------------------------------------------------------------------------
# control lock and clients
# ----------------------------------------------------------------------------------------
class ControlLock:
    """Which client holds control.  Only touched from the server's event loop."""

    def __init__(self) -> None:
        self.holder: str | None = None

    def acquire(self, client: str, connected: Iterable[str]) -> bool:
        if self.holder is not None and self.holder not in set(connected):
            self.holder = None  # its page is gone
        if self.holder in (None, client):
            self.holder = client
            return True
        return False

    def release(self, client: str) -> bool:
        if self.holder == client:
            self.holder = None
            return True
        return False

    def held_by(self, client: str | None) -> bool:
        return client is not None and self.holder == client


@dataclass
class Client:
    """An open page: ``id`` is public (shown to every viewer), ``token`` its secret."""

    id: str
    token: str = field(repr=False)
    queue: collections.deque[str] = field(default_factory=collections.deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: int = 0
    resync: bool = False
    sent: int = 0

    def push(self, payload: str) -> None:
        if len(self.queue) == self.queue.maxlen:
            self.dropped += 1
            self.resync = True
        self.queue.append(payload)
        self.wake.set()


@dataclass
class _Intake:
    """Messages from bus threads to the pump: bounded, drop-oldest, counted."""

    maxlen: int = 2000
    items: collections.deque[tuple[str, Any]] = field(default_factory=collections.deque)
    dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    notify: Callable[[], None] | None = None

    def put(self, kind: str, msg: Any) -> None:
        with self.lock:
            if len(self.items) >= self.maxlen:
                self.items.popleft()
                self.dropped += 1
            self.items.append((kind, msg))
            notify = self.notify
        if notify is not None:
            notify()

    def drain(self) -> list[tuple[str, Any]]:
        with self.lock:
            out = list(self.items)
            self.items.clear()
            return out


# ----------------------------------------------------------------------------------------
# the hub: snapshot, fan-out and commands (no HTTP here, so tests drive it directly)
# ----------------------------------------------------------------------------------------
class PanelHub:
    def __init__(self, link: AgentLink, clock: Clock, *, fps: float = 5.0,
                 client_queue: int = 256, history: int = 200,
                 command_timeout_s: float = 3.0) -> None:
        self.link = link
        self.clock = clock
        self.fps = fps
        self.client_queue = client_queue
        self.command_timeout_s = command_timeout_s
        self.intake = _Intake()
        self.lock = ControlLock()
        self.clients: dict[str, Client] = {}
        self.state: dict[str, Any] = {"status": "unknown", "task": "", "generation": 0,
                                      "plan": [], "actions": [], "conversation": []}
        self._state_stamp = 0.0
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=history)
        self.verdicts: collections.OrderedDict[str, dict[str, dict[str, Any]]] = \
            collections.OrderedDict()
        self.operator: dict[str, Any] | None = None
        # how recent actions ended (action id -> the plan status shown): authoritative for a
        # plan step the planner still lists as running (a paused run keeps its plan as is)
        self._ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        # the arm's e-stop as this panel knows it: from the operator events since it started
        self.estop: dict[str, Any] = {"available": self._estop_available(), "latched": False,
                                      "reason": "", "t": None}
        self._estop_checked_at = time.monotonic()
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
        self._seq = 0
        link.on_state(lambda m: self.intake.put("state", m))
        link.on_event(lambda m: self.intake.put("event", m))
        link.on_verdict(lambda m: self.intake.put("verdict", m))
        link.on_operator(lambda m: self.intake.put("operator", m))

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
        actions = []
        for a in st.actions:
            a = dict(a)
            a["verdicts"] = list(self.verdicts.get(str(a.get("action_id")), {}).values())
            actions.append(a)
        self._state_stamp = float(st.stamp)
        prev = self.state.get("status")
        if st.status == "running" or (prev == "paused" and st.status != "paused"):
            self.operator = None  # the takeover is over: the run resumed or ended
        running = {str(a.get("action_id")) for a in actions}
        plan = [self._ended_step(s, running) for s in st.plan]
        self.state = _clean({"status": st.status, "task": st.task, "generation": st.generation,
                             "plan": plan, "actions": actions,
                             "conversation": list(st.conversation), "stamp": st.stamp})
        self.broadcast({"type": "state", "state": self.state, "operator": self.operator})

    def _ended_step(self, step: Any, running: set[str]) -> Any:
        """A step still listed as running whose action has ended (and is not running) shows
        how it ended."""
        if not isinstance(step, dict) or step.get("status") != "running":
            return step
        aid = str(step.get("action_id"))
        if aid in self._ended and aid not in running:
            return {**step, "status": self._ended[aid]}
        return step

    def _on_event(self, ev: AgentEvent) -> None:
        data = dict(ev.data)
        rec = _clean({"t": ev.t, "kind": ev.kind, "by": data.get("by"),
                      "text": describe_event(ev.kind, data)})
        self.events.append(rec)
        if ev.kind == "operator_takeover":
            self.operator = _clean({"t": ev.t, "action": data.get("action"),
                                    "detail": data.get("detail")})
        self.broadcast({"type": "event", "event": rec})
        if ev.kind in ("action_ended", "action_refused"):
            # the planner does not republish its state for an action that ends after the run
            # did (a cancel): the end event is authoritative for the running list
            aid = data.get("action_id")
            acts = self.state.get("actions") or []
            plan = self.state.get("plan") or []
            outcome = str(data.get("outcome", ""))
            shown = {"succeeded": "done", "failed": "failed", "timed_out": "failed"}.get(
                outcome, "stopped")
            if aid is not None:
                self._ended[str(aid)] = shown
                while len(self._ended) > 200:
                    self._ended.popitem(last=False)
            stale = [s for s in plan if s.get("action_id") == aid and s.get("status") == "running"]
            if stale or any(a.get("action_id") == aid for a in acts):
                self.state = {**self.state,
                              "actions": [a for a in acts if a.get("action_id") != aid],
                              "plan": [{**s, "status": shown} if s in stale else s
                                       for s in plan]}
                self.broadcast({"type": "state", "state": self.state,
                                "operator": self.operator})

    def _on_verdict(self, v: MonitorVerdict) -> None:
        d = _clean(asdict(v))
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
        self.operator = _clean({"t": ev.stamp, "action": ev.kind, "detail": dict(ev.detail)})
        self.broadcast({"type": "operator", "operator": self.operator})
        if ev.kind == "estop":
            reason = str(dict(ev.detail).get("reason", "") or "e-stop pressed")
            self._set_estop(latched=True, reason=reason, t=_finite(float(ev.stamp)),
                            available=True)
        elif ev.kind == "estop_reset":
            self._set_estop(latched=False, reason="", t=_finite(float(ev.stamp)),
                            available=True)

    # e-stop ------------------------------------------------------------------------------
    def _estop_available(self) -> bool:
        fn = getattr(self.link, "estop_available", None)
        if fn is None:  # a link without the e-stop methods
            return False
        try:
            return bool(fn())
        except Exception:
            log.debug("estop_available failed", exc_info=True)
            return False

    def _set_estop(self, **change: Any) -> None:
        new = {**self.estop, **change}
        if new != self.estop:
            self.estop = new
            self.broadcast({"type": "estop", "estop": self.estop})

    def _refresh_estop_available(self, every_s: float = 1.0) -> None:
        now = time.monotonic()
        if now - self._estop_checked_at >= every_s:
            self._estop_checked_at = now
            self._set_estop(available=self._estop_available())

    def estop_reason(self, token: object, note: str = "") -> str:
        """The reason sent with a viewer's e-stop: it names the viewer its token shows (and
        whether it held the control lock), then the viewer's own words if any."""
        c = self.client_for(token)
        who = f"viewer {c.id}" if c is not None else "a viewer"
        held = c is not None and self.lock.held_by(c.id)
        lock = "holds control" if held else "without the control lock"
        reason = f"operator e-stop from the panel ({who}, {lock})"
        note = " ".join(note.split())[:200]
        return f"{reason}: {note}" if note else reason

    def estop_command(self, reason: str) -> Reply:
        """Latch the e-stop (blocking: run it off the loop)."""
        fn = getattr(self.link, "estop", None)
        return estop_unavailable() if fn is None else dict(fn(reason))

    def estop_reset_command(self) -> Reply:
        """Release the e-stop (blocking: run it off the loop)."""
        fn = getattr(self.link, "estop_reset", None)
        return estop_unavailable(names.ESTOP_RESET) if fn is None else dict(fn())

    def estop_answered(self, r: Reply) -> None:
        """After an e-stop command (in the loop): an unavailable answer updates the button."""
        if r.get("unavailable"):
            self._set_estop(available=False)

    def _tick(self) -> None:
        self._refresh_estop_available()
        actions = self.state.get("actions") or []
        if not actions:
            return
        now = self.clock.now()
        elapsed = {str(a.get("action_id")): round(float(a.get("elapsed_s") or 0.0)
                                                  + max(0.0, now - self._state_stamp), 1)
                   for a in actions}
        self.broadcast({"type": "tick", "elapsed": elapsed})

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

    # commands ----------------------------------------------------------------------------
    def client_for(self, token: object) -> Client | None:
        """The open page whose secret ``token`` is (every page compared, in constant time)."""
        found = None
        for c in list(self.clients.values()):
            if same_secret(token, c.token):
                found = c
        return found

    def holds_lock(self, token: object) -> bool:
        c = self.client_for(token)
        return c is not None and self.lock.held_by(c.id)

    def acquire(self, token: object) -> dict[str, Any]:
        c = self.client_for(token)
        if c is None:
            return {"ok": False, "reason": "taking control needs your page's token (from its "
                    "event stream's hello)"}
        client = c.id
        before = self.lock.holder
        if self.lock.acquire(client, self.clients):
            if before != client:
                self.broadcast({"type": "lock", "holder": client})
            return {"ok": True, "reason": "", "holder": client}
        return {"ok": False, "reason": "another viewer holds the control lock",
                "holder": self.lock.holder}

    def release(self, token: object) -> dict[str, Any]:
        c = self.client_for(token)
        if c is not None and self.lock.release(c.id):
            self.broadcast({"type": "lock", "holder": None})
            return {"ok": True, "reason": ""}
        return {"ok": False, "reason": "you do not hold the control lock"}

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


def encode_jpeg(img: Image, max_side: int = 640, quality: int = 80) -> bytes:
    from ..perception.images import jpeg_preview

    enc = jpeg_preview(np.asarray(img.data), img.encoding, max_side, quality)
    if enc is None:
        h, w = np.asarray(img.data).shape[:2]
        raise ValueError(f"could not encode a {img.encoding} frame of {w}x{h} as JPEG")
    return enc[0]


# ----------------------------------------------------------------------------------------
# HTTP
# ----------------------------------------------------------------------------------------
def _static(name: str) -> bytes:
    return resources.files("solarian_agent").joinpath("data", "panel", name).read_bytes()


def build_app(hub: PanelHub, policy: DoorPolicy | None = None) -> Any:
    """The panel's ASGI app: its routes behind the door (``policy``: loopback names only,
    no access token, when not given)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    Handler = Callable[[Request], Awaitable[Response]]
    door_policy = policy if policy is not None else DoorPolicy.for_bind("127.0.0.1")
    door: PanelDoor | None = None  # set once built, for the state endpoint's counts

    def safe(fn: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            try:
                return await fn(request)
            except Exception as e:  # nothing escapes a request handler
                log.exception("panel request %s failed", request.url.path)
                return JSONResponse({"ok": False, "reason": f"server error: {type(e).__name__}"},
                                    status_code=500)
        return wrapped

    async def body(request: Request) -> dict[str, Any] | Response:
        """A command's body: a JSON object (the door has already refused anything that is
        not a same-origin JSON POST)."""
        ctype = request.headers.get("content-type", "")
        if not ctype.startswith("application/json"):
            return JSONResponse({"ok": False, "reason": "commands are JSON POSTs "
                                 "(content-type: application/json)"}, status_code=415)
        raw = await request.body()
        if len(raw) > 64_000:
            return JSONResponse({"ok": False, "reason": "request too large"}, status_code=413)
        try:
            data = json.loads(raw or b"{}")
        except ValueError as e:
            return JSONResponse({"ok": False, "reason": f"invalid JSON: {e}"}, status_code=400)
        if not isinstance(data, dict):
            return JSONResponse({"ok": False, "reason": "the body must be a JSON object"},
                                status_code=400)
        return data

    async def run_command(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        import anyio

        try:
            with anyio.fail_after(hub.command_timeout_s + 1.0):
                return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except TimeoutError:
            return {"ok": False, "reason": "the agent did not answer in time"}

    def reply(r: dict[str, Any], denied: bool = False) -> Response:
        if r.get("unavailable"):
            code = 503
        else:
            code = 403 if denied else (200 if r.get("ok") else 409)
        return JSONResponse(r, status_code=code)

    def needs_lock(what: str) -> Response:
        return reply({"ok": False, "reason": f"{what} needs the control lock (and your page's "
                      "token)"}, denied=True)

    async def do_estop(token: Any, note: Any = "") -> Response:
        reason = hub.estop_reason(token, note if isinstance(note, str) else "")
        r = await run_command(lambda: hub.estop_command(reason))
        hub.estop_answered(r)
        if r.get("ok"):
            log.warning("panel: e-stop latched: %s", reason)
        return reply(r)

    async def do_estop_reset() -> Response:
        r = await run_command(hub.estop_reset_command)
        hub.estop_answered(r)
        return reply(r)

    @safe
    async def index(request: Request) -> Response:
        return Response(_static("index.html"), media_type=STATIC_FILES["index.html"],
                        headers={"cache-control": "no-store"})

    @safe
    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return JSONResponse({"ok": False, "reason": "not found"}, status_code=404)
        return Response(_static(name), media_type=STATIC_FILES[name],
                        headers={"cache-control": "no-store"})

    @safe
    async def state(request: Request) -> Response:
        # everything here is for any viewer: the holder's public id, never a token
        return JSONResponse({"state": hub.state, "operator": hub.operator,
                             "lock": hub.lock.holder, "estop": hub.estop,
                             "events": list(hub.events),
                             "clients": len(hub.clients), "pump_errors": hub.pump_errors,
                             "intake_dropped": hub.intake.dropped,
                             "refused": dict(door.refused) if door is not None else {},
                             "cameras": hub.link.image_topics()})

    @safe
    async def frame(request: Request) -> Response:
        topic = request.query_params.get("topic", "")
        if topic not in hub.link.image_topics():
            return JSONResponse({"ok": False, "reason": f"unknown image topic {topic!r}"},
                                status_code=404)
        import anyio

        with anyio.fail_after(5.0):
            data = await anyio.to_thread.run_sync(hub.frame_jpeg, topic)
        if data is None:
            return Response(status_code=204)
        return Response(data, media_type="image/jpeg", headers={"cache-control": "no-store"})

    async def events(request: Request) -> Response:
        try:
            client = hub.connect()
        except Exception:
            log.exception("panel: could not open an event stream")
            return JSONResponse({"ok": False, "reason": "server error"}, status_code=500)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n"
                while not hub.closing:
                    for payload in hub.take(client):
                        yield f"data: {payload}\n\n"
                    if hub.closing:
                        break
                    try:
                        await asyncio.wait_for(client.wake.wait(), timeout=10.0)
                    except asyncio.TimeoutError:
                        yield ": keepalive\n\n"
                    client.wake.clear()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("panel event stream")
            finally:
                hub.disconnect(client)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})

    @safe
    async def cmd_message(request: Request) -> Response:
        data = await body(request)
        if isinstance(data, Response):
            return data
        text = str(data.get("text", "")).strip()
        token = data.get("token")
        word = text.split(" ")[0]
        if word == "/cancel":
            return reply(await run_command(lambda: hub.link.cancel("operator")))
        if word == "/estop":  # a safety command too
            return await do_estop(token, text[len(word):].strip())
        if not hub.holds_lock(token):
            return needs_lock("sending a message")
        if not text:
            return reply({"ok": False, "reason": "empty message"})
        if len(text) > 8000:
            return reply({"ok": False, "reason": "message longer than 8000 characters"})
        if word == "/reset":
            return reply(await run_command(lambda: hub.link.reset("operator")))
        if word == "/estop-reset":
            return await do_estop_reset()
        return reply(await run_command(lambda: hub.link.message(text)))

    @safe
    async def cmd_cancel(request: Request) -> Response:
        # a safety command: accepted from any viewer, lock or not (same-origin JSON only)
        data = await body(request)
        if isinstance(data, Response):
            return data
        return reply(await run_command(lambda: hub.link.cancel("operator")))

    @safe
    async def cmd_reset(request: Request) -> Response:
        data = await body(request)
        if isinstance(data, Response):
            return data
        if not hub.holds_lock(data.get("token")):
            return needs_lock("reset")
        return reply(await run_command(lambda: hub.link.reset("operator")))

    @safe
    async def cmd_estop(request: Request) -> Response:
        # a safety command: accepted from any viewer, lock or not (same-origin JSON only);
        # the token (and optional reason) only name who pressed it
        data = await body(request)
        if isinstance(data, Response):
            return data
        return await do_estop(data.get("token"), data.get("reason", ""))

    @safe
    async def cmd_estop_reset(request: Request) -> Response:
        data = await body(request)
        if isinstance(data, Response):
            return data
        if not hub.holds_lock(data.get("token")):
            return needs_lock("releasing the e-stop")
        return await do_estop_reset()

    @safe
    async def cmd_lock(request: Request) -> Response:
        data = await body(request)
        if isinstance(data, Response):
            return data
        r = hub.acquire(data.get("token"))
        return reply(r, denied=not r["ok"])

    @safe
    async def cmd_unlock(request: Request) -> Response:
        data = await body(request)
        if isinstance(data, Response):
            return data
        return reply(hub.release(data.get("token")))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        await hub.start()
        try:
            yield
        finally:
            await hub.stop()

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/events", events),
        Route("/frame", frame),
        Route("/api/state", state),
        Route("/api/message", cmd_message, methods=["POST"]),
        Route("/api/cancel", cmd_cancel, methods=["POST"]),
        Route("/api/reset", cmd_reset, methods=["POST"]),
        Route("/api/estop", cmd_estop, methods=["POST"]),
        Route("/api/estop_reset", cmd_estop_reset, methods=["POST"]),
        Route("/api/lock", cmd_lock, methods=["POST"]),
        Route("/api/unlock", cmd_unlock, methods=["POST"]),
    ]
    door = PanelDoor(Starlette(routes=routes, lifespan=lifespan), door_policy)
    return door


class PanelHandle:
    """A running panel: ``url``, ``port``, ``hub``; ``stop()`` ends it (bounded)."""

    def __init__(self, hub: PanelHub, server: Any, thread: threading.Thread, host: str,
                 port: int, owns_link: bool, access_token: str | None = None) -> None:
        self.hub = hub
        self.access_token = access_token
        self.server = server
        self.thread = thread
        self.host = host
        self.port = port
        self._owns_link = owns_link

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def entry_url(self) -> str:
        """The address to open in a browser: with ``?token=`` when an access token is set
        (the page then holds it in a cookie and drops it from the address bar)."""
        return self.url + (f"?token={self.access_token}" if self.access_token else "")

    def stop(self, timeout_s: float = 5.0) -> None:
        self.hub.close_from_thread()
        self.server.should_exit = True
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout_s)
        if self._owns_link:
            self.hub.link.close()

    def __enter__(self) -> PanelHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_panel(bus: BusLike | None, clock: Clock, host: str = "127.0.0.1", port: int = 8765,
                *, link: AgentLink | None = None, cameras: Iterable[str] | None = None,
                fps: float = 5.0, start_timeout_s: float = 10.0,
                access_token: str | None = None, allow_hosts: Iterable[str] = ()
                ) -> PanelHandle:
    """Serve the panel on ``host:port`` (port 0 picks a free one) in a background thread and
    return once it accepts connections.  ``link`` defaults to a :class:`BusLink` on ``bus``;
    ``cameras`` as in :class:`BusLink`.

    Beyond loopback ``access_token`` is required (``ValueError`` without it) and every
    request must carry it; ``allow_hosts``: more Host names to answer to (see
    :class:`~.panel_door.DoorPolicy`)."""
    import uvicorn

    policy = DoorPolicy.for_bind(host, allow_hosts, access_token)
    if link is None:
        if bus is None:
            raise ValueError("serve_panel needs a bus or a link")
        link = BusLink(bus, cameras)
        owns = True
    else:
        owns = False
    hub = PanelHub(link, clock, fps=fps)
    app = build_app(hub, policy)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if owns:
            link.close()
        raise OSError(f"the panel cannot listen on {host}:{port}: {e}") from e
    bound_port = int(sock.getsockname()[1])
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                            timeout_graceful_shutdown=2, timeout_keep_alive=5)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name="panel-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(2.0)
            sock.close()
            if owns:
                link.close()
            raise RuntimeError(f"the panel did not start on {host}:{bound_port} within "
                               f"{start_timeout_s:g} s")
        time.sleep(0.01)
    return PanelHandle(hub, server, thread, host, bound_port, owns, policy.access_token)
