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

import contextlib
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from ..core.clock import Clock
from .link import AgentLink, BusLike, BusLink
from .panel_clients import Intake
from .panel_door import DoorPolicy, PanelDoor
from .panel_hub import PanelHub

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------
# HTTP
# ----------------------------------------------------------------------------------------
def build_app(hub: PanelHub, policy: DoorPolicy | None = None) -> Any:
    """The panel's ASGI app: its routes (:mod:`.panel_routes`) behind the door (``policy``:
    loopback names only, no access token, when not given)."""
    from starlette.applications import Starlette

    from .panel_routes import panel_routes

    door_policy = policy if policy is not None else DoorPolicy.for_bind("127.0.0.1")
    door: PanelDoor | None = None  # set once built, for the state endpoint's counts

    def refused() -> dict[str, int]:
        return dict(door.refused) if door is not None else {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        await hub.start()
        try:
            yield
        finally:
            await hub.stop()

    door = PanelDoor(Starlette(routes=panel_routes(hub, refused), lifespan=lifespan),
                     door_policy)
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


__all__ = ["Intake", "PanelHandle", "PanelHub", "build_app", "serve_panel"]
