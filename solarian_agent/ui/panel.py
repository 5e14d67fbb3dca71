"""The operator panel: a page served on localhost (starlette + uvicorn, no front-end build).

It shows the plan with each step's state, the running actions with elapsed time and monitor
verdicts, the conversation (with refused tool calls and the messages the agent has not yet
taken in), an input box, Pause / Resume, Take over, Cancel and Reset, an always-visible E-STOP
(and a banner while the arm's e-stop is latched: the message box is disabled until the reset),
the live camera views and ``agent/view`` (the image the planner last saw, its chosen points
marked), and the operator's takeover when it happens.  It sends the same commands as any front
end, through an :class:`~.link.AgentLink`: the embedded run's Bus, or a running ROS graph
(``solarian-agent panel --ros``, ``solarian_agent.ros.ui_link``).

Updates are pushed to the page with server-sent events (``GET /events``), never polled (the
hub: :mod:`.panel_hub`).  Each page's event stream opens with a ``hello`` that gives it its
public ``client`` id (shown to everyone: who holds the lock, who pressed E-STOP) and its
``token``, a secret sent to that page alone, once: a command acts for a page only when it
carries that page's token.  Nothing any other viewer can read (the stream, ``GET /api/state``,
a refused command's answer) holds a token.  What needs the control lock and what any viewer
may press: :mod:`.panel_controls`.

Every request passes the door first (``panel_door.py``): only the Host names the panel is
bound to, every POST same-origin JSON (Cancel and E-STOP included: a stop button on another
site never drives this robot), and beyond loopback the access token on every request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from importlib import resources
from typing import Any

from ..core.clock import Clock
from .link import AgentLink, BusLike, BusLink
from .panel_clients import Intake
from .panel_controls import RESUME_TEXT
from .panel_door import DoorPolicy, PanelDoor
from .panel_hub import PanelHub

log = logging.getLogger(__name__)

STATIC_FILES = {"index.html": "text/html; charset=utf-8",
                "panel.js": "text/javascript; charset=utf-8",
                "panel.css": "text/css; charset=utf-8"}


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

    controls = hub.controls

    async def do_estop(token: Any, note: Any = "") -> Response:
        reason = controls.estop_reason(token, note if isinstance(note, str) else "")
        r = await run_command(lambda: controls.estop_command(reason))
        controls.estop_answered(r)
        if r.get("ok"):
            log.warning("panel: e-stop latched: %s", reason)
        return reply(r)

    async def do_estop_reset() -> Response:
        r = await run_command(controls.estop_reset_command)
        controls.estop_answered(r)
        return reply(r)

    async def do_message(text: str, what: str = "message") -> Response:
        refused = controls.refusal(what)
        if refused is not None:
            return reply(refused)
        r = await run_command(lambda: hub.link.message(text))
        if r.get("ok"):
            hub.message_sent(text)
        return reply(r)

    async def do_operator(kind: str, token: Any, note: Any = "") -> Response:
        detail: dict[str, Any] = {"by": f"panel ({controls.who(token)})"}
        if isinstance(note, str) and note.strip():
            detail["note"] = " ".join(note.split())[:500]
        return reply(await run_command(lambda: controls.operator_command(kind, detail)))

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
                             "cameras": hub.link.image_topics(), "robot": hub.robot})

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
        word, _, rest = text.partition(" ")
        if word == "/cancel":
            return reply(await run_command(lambda: hub.link.cancel("operator")))
        if word == "/estop":  # safety commands too
            return await do_estop(token, rest.strip())
        if word == "/pause":
            return await do_operator("pause", token)
        if not controls.holds_lock(token):
            return needs_lock("sending a message")
        if not text:
            return reply({"ok": False, "reason": "empty message"})
        if len(text) > 8000:
            return reply({"ok": False, "reason": "message longer than 8000 characters"})
        if word == "/reset":
            return reply(await run_command(lambda: hub.link.reset("operator")))
        if word == "/estop-reset":
            return await do_estop_reset()
        if word == "/takeover":
            return await do_operator("takeover", token, rest)
        if word == "/resume":
            return await do_message(RESUME_TEXT, "resume")
        if word.startswith("/") and len(word) > 1:
            return reply({"ok": False, "reason": f"unknown command {word[:40]}; commands: "
                          "/cancel /reset /pause /resume /takeover /estop /estop-reset"})
        return await do_message(text)

    async def command(request: Request, what: str) -> Response:
        """The buttons: ``what`` is cancel, pause, estop (any viewer) or reset, resume,
        takeover, estop_reset, lock, unlock (the page's token; the lock for most)."""
        data = await body(request)
        if isinstance(data, Response):
            return data
        token = data.get("token")
        if what == "lock":
            r = controls.acquire(token)
            return reply(r, denied=not r["ok"])
        if what == "unlock":
            return reply(controls.release(token))
        if what == "cancel":
            return reply(await run_command(lambda: hub.link.cancel("operator")))
        if what == "pause":
            return await do_operator("pause", token)
        if what == "estop":  # the token (and optional reason) only name who pressed it
            return await do_estop(token, data.get("reason", ""))
        if not controls.holds_lock(token):
            return needs_lock({"estop_reset": "releasing the e-stop",
                               "takeover": "taking over"}.get(what, what))
        if what == "reset":
            return reply(await run_command(lambda: hub.link.reset("operator")))
        if what == "resume":
            return await do_message(RESUME_TEXT, "resume")
        if what == "takeover":
            return await do_operator("takeover", token, data.get("note", ""))
        return await do_estop_reset()

    def button(what: str) -> Handler:
        @safe
        async def handle(request: Request) -> Response:
            return await command(request, what)
        return handle

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
        *(Route(f"/api/{what}", button(what), methods=["POST"])
          for what in ("cancel", "reset", "pause", "resume", "takeover", "estop",
                       "estop_reset", "lock", "unlock")),
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
                access_token: str | None = None, allow_hosts: Iterable[str] = (),
                command_timeout_s: float = 3.0,
                robot: Mapping[str, Any] | None = None) -> PanelHandle:
    """Serve the panel on ``host:port`` (port 0 picks a free one) in a background thread and
    return once it accepts connections.  ``link`` defaults to a :class:`BusLink` on ``bus``;
    ``cameras`` as in :class:`BusLink`; ``robot``: the robot profile's summary to show
    (:meth:`~solarian_agent.bringup.profile.RobotProfile.summary`; default: the simulator).

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
    hub = PanelHub(link, clock, fps=fps, command_timeout_s=command_timeout_s, robot=robot)
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


__all__ = ["STATIC_FILES", "Intake", "PanelHandle", "PanelHub", "build_app", "serve_panel"]
