"""The panel's HTTP routes, which :func:`~.panel.build_app` puts behind the door: the page and
its files, the state and camera frames any viewer may read, the event stream, and the commands
(a typed message or slash command, and the buttons).  Imported only when a panel is built: it
needs starlette.

Every handler but the event stream is wrapped by :func:`safe`: nothing escapes a request
handler, a failure is a 500 with the exception's type only.  A command's answer maps onto the
status code by :func:`reply` (503: the service is unavailable, 403: the page lacks the lock or
token, 409: the agent refused).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .link import AgentLink, Reply
from .panel_clients import Client
from .panel_controls import RESUME_TEXT, OperatorControls
from .panel_hub import PanelHub

log = logging.getLogger(__name__)

STATIC_FILES = {"index.html": "text/html; charset=utf-8",
                "panel.js": "text/javascript; charset=utf-8",
                "panel.css": "text/css; charset=utf-8"}
BUTTONS = ("cancel", "reset", "pause", "resume", "takeover", "estop", "estop_reset", "lock",
           "unlock")
SLASH_COMMANDS = ("/cancel /reset /pause /resume /takeover /estop /estop-reset /approve "
                  "/refuse")

Handler = Callable[[Request], Awaitable[Response]]


def static_file(name: str) -> bytes:
    return resources.files("solarian_agent").joinpath("data", "panel", name).read_bytes()


def safe(fn: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except Exception as e:  # nothing escapes a request handler
            log.exception("panel request %s failed", request.url.path)
            return JSONResponse({"ok": False, "reason": f"server error: {type(e).__name__}"},
                                status_code=500)
    return wrapped


async def read_body(request: Request) -> dict[str, Any] | Response:
    """A command's body: a JSON object (the door has already refused anything that is not a
    same-origin JSON POST)."""
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


def reply(r: Reply, denied: bool = False) -> Response:
    if r.get("unavailable"):
        code = 503
    else:
        code = 403 if denied else (200 if r.get("ok") else 409)
    return JSONResponse(r, status_code=code)


def needs_lock(what: str) -> Response:
    return reply({"ok": False, "reason": f"{what} needs the control lock (and your page's "
                  "token)"}, denied=True)


class PanelCommands:
    """What the panel's commands do once their body is read: each blocking call to the agent
    runs off the loop, bounded by ``timeout_s`` (plus a second); ``message_sent`` shows an
    accepted message as pending."""

    def __init__(self, link: AgentLink, controls: OperatorControls,
                 message_sent: Callable[[str], None], timeout_s: float) -> None:
        self.link = link
        self.controls = controls
        self.message_sent = message_sent
        self.timeout_s = timeout_s

    async def run(self, fn: Callable[[], Reply]) -> Reply:
        import anyio

        try:
            with anyio.fail_after(self.timeout_s + 1.0):
                return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except TimeoutError:
            return {"ok": False, "reason": "the agent did not answer in time"}

    async def cancel(self) -> Response:
        return reply(await self.run(lambda: self.link.cancel("operator")))

    async def reset(self) -> Response:
        return reply(await self.run(lambda: self.link.reset("operator")))

    async def estop(self, token: Any, note: Any = "") -> Response:
        controls = self.controls
        reason = controls.estop_reason(token, note if isinstance(note, str) else "")
        r = await self.run(lambda: controls.estop_command(reason))
        controls.estop_answered(r)
        if r.get("ok"):
            log.warning("panel: e-stop latched: %s", reason)
        return reply(r)

    async def estop_reset(self) -> Response:
        r = await self.run(self.controls.estop_reset_command)
        self.controls.estop_answered(r)
        return reply(r)

    async def message(self, text: str, what: str = "message") -> Response:
        refused = self.controls.refusal(what)
        if refused is not None:
            return reply(refused)
        r = await self.run(lambda: self.link.message(text))
        if r.get("ok"):
            self.message_sent(text)
        return reply(r)

    async def operator(self, kind: str, token: Any, note: Any = "") -> Response:
        detail: dict[str, Any] = {"by": f"panel ({self.controls.who(token)})"}
        if isinstance(note, str) and note.strip():
            detail["note"] = " ".join(note.split())[:500]
        return reply(await self.run(lambda: self.controls.operator_command(kind, detail)))

    async def typed(self, data: Mapping[str, Any]) -> Response:
        """A message box entry: text for the agent, or a slash command (``/cancel``,
        ``/estop`` and ``/pause`` for any viewer, the rest with the lock)."""
        text = str(data.get("text", "")).strip()
        token = data.get("token")
        word, _, rest = text.partition(" ")
        if word == "/cancel":
            return await self.cancel()
        if word == "/estop":  # safety commands too
            return await self.estop(token, rest.strip())
        if word == "/pause":
            return await self.operator("pause", token)
        if not self.controls.holds_lock(token):
            return needs_lock("sending a message")
        if not text:
            return reply({"ok": False, "reason": "empty message"})
        if len(text) > 8000:
            return reply({"ok": False, "reason": "message longer than 8000 characters"})
        return await self._locked_typed(word, rest, text, token)

    async def _locked_typed(self, word: str, rest: str, text: str, token: Any) -> Response:
        if word == "/reset":
            return await self.reset()
        if word == "/estop-reset":
            return await self.estop_reset()
        if word == "/takeover":
            return await self.operator("takeover", token, rest)
        if word == "/resume":
            return await self.message(RESUME_TEXT, "resume")
        if word in ("/approve", "/refuse"):  # approve: skills -- the lock holder answers
            answer = f"{word[1:]} {rest}".strip()
            approve = getattr(self.link, "approve", None)
            if approve is None:
                return reply({"ok": False, "reason": "this link cannot answer approvals"})
            return reply(await self.run(lambda: approve(answer, "operator (panel)")))
        if word.startswith("/") and len(word) > 1:
            return reply({"ok": False, "reason": f"unknown command {word[:40]}; commands: "
                          f"{SLASH_COMMANDS}"})
        return await self.message(text)

    async def button(self, what: str, data: Mapping[str, Any]) -> Response:
        """The buttons: ``what`` is cancel, pause, estop (any viewer) or reset, resume,
        takeover, estop_reset, lock, unlock (the page's token; the lock for most)."""
        token = data.get("token")
        if what == "lock":
            r = self.controls.acquire(token)
            return reply(r, denied=not r["ok"])
        if what == "unlock":
            return reply(self.controls.release(token))
        if what == "cancel":
            return await self.cancel()
        if what == "pause":
            return await self.operator("pause", token)
        if what == "estop":  # the token (and optional reason) only name who pressed it
            return await self.estop(token, data.get("reason", ""))
        if not self.controls.holds_lock(token):
            return needs_lock({"estop_reset": "releasing the e-stop",
                               "takeover": "taking over"}.get(what, what))
        if what == "reset":
            return await self.reset()
        if what == "resume":
            return await self.message(RESUME_TEXT, "resume")
        if what == "takeover":
            return await self.operator("takeover", token, data.get("note", ""))
        return await self.estop_reset()


class PanelViews:
    """What any viewer may read: the page, its files, the state, a camera's frame, and the
    event stream.  ``refused``: the door's refusal counts (shown in the state)."""

    def __init__(self, hub: PanelHub, refused: Callable[[], dict[str, int]]) -> None:
        self.hub = hub
        self.refused = refused

    async def index(self, request: Request) -> Response:
        return Response(static_file("index.html"), media_type=STATIC_FILES["index.html"],
                        headers={"cache-control": "no-store"})

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return JSONResponse({"ok": False, "reason": "not found"}, status_code=404)
        return Response(static_file(name), media_type=STATIC_FILES[name],
                        headers={"cache-control": "no-store"})

    async def state(self, request: Request) -> Response:
        # everything here is for any viewer: the holder's public id, never a token
        hub = self.hub
        return JSONResponse({"state": hub.state, "operator": hub.operator,
                             "lock": hub.lock.holder, "estop": hub.estop,
                             "events": list(hub.events),
                             "clients": len(hub.clients), "pump_errors": hub.pump_errors,
                             "intake_dropped": hub.intake.dropped,
                             "refused": self.refused(),
                             "cameras": hub.link.image_topics(), "robot": hub.robot})

    async def frame(self, request: Request) -> Response:
        topic = request.query_params.get("topic", "")
        if topic not in self.hub.link.image_topics():
            return JSONResponse({"ok": False, "reason": f"unknown image topic {topic!r}"},
                                status_code=404)
        import anyio

        with anyio.fail_after(5.0):
            data = await anyio.to_thread.run_sync(self.hub.frame_jpeg, topic)
        if data is None:
            return Response(status_code=204)
        return Response(data, media_type="image/jpeg", headers={"cache-control": "no-store"})

    async def events(self, request: Request) -> Response:
        try:
            client = self.hub.connect()
        except Exception:
            log.exception("panel: could not open an event stream")
            return JSONResponse({"ok": False, "reason": "server error"}, status_code=500)
        return StreamingResponse(event_stream(self.hub, client),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-store",
                                          "x-accel-buffering": "no"})


async def event_stream(hub: PanelHub, client: Client) -> AsyncIterator[str]:
    """One page's server-sent events until the panel closes (a keepalive every 10 s)."""
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


def _with_body(handle: Callable[[Mapping[str, Any]], Awaitable[Response]]) -> Handler:
    """A command route: its JSON body read (or the reason it is refused), then ``handle``."""
    @safe
    async def route(request: Request) -> Response:
        data = await read_body(request)
        if isinstance(data, Response):
            return data
        return await handle(data)
    return route


def _button(commands: PanelCommands, what: str) -> Handler:
    async def press(data: Mapping[str, Any]) -> Response:
        return await commands.button(what, data)
    return _with_body(press)


def panel_routes(hub: PanelHub, refused: Callable[[], dict[str, int]]) -> list[Route]:
    views = PanelViews(hub, refused)
    commands = PanelCommands(hub.link, hub.controls, hub.message_sent, hub.command_timeout_s)
    return [
        Route("/", safe(views.index)),
        Route("/static/{name}", safe(views.static)),
        Route("/events", views.events),
        Route("/frame", safe(views.frame)),
        Route("/api/state", safe(views.state)),
        Route("/api/message", _with_body(commands.typed), methods=["POST"]),
        *(Route(f"/api/{what}", _button(commands, what), methods=["POST"])
          for what in BUTTONS),
    ]


__all__ = ["BUTTONS", "STATIC_FILES", "PanelCommands", "PanelViews", "panel_routes"]
