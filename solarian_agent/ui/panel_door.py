"""The operator panel's door: which requests reach a handler at all.

The panel drives a robot, and anything that can make a browser send a request can knock:
a page on another site (cross-site requests), a page whose DNS name is rebound to this machine
(DNS rebinding), another machine on the network when the panel listens beyond loopback.
:class:`PanelDoor` is an ASGI middleware that every request passes before routing:

1. **Host allow-list.**  Only the names the panel is bound to are served: ``127.0.0.1``,
   ``localhost``, ``::1``, the ``--host`` it listens on and any ``--allow-host``.  Bound to a
   wildcard address (``0.0.0.0``, ``::``) it also answers this machine's host names and any
   IP-address Host (a rebinding attack always arrives with the attacker's DNS name in
   ``Host``; an address is never rebound).  Anything else: 421, nothing served.
2. **Access token.**  Bound beyond loopback, every request must carry the panel's access
   token: the ``solarian_panel`` cookie (HttpOnly, SameSite=Strict), which ``GET /?token=...``
   sets once and redirects away from, or ``Authorization: Bearer <token>``.  Missing or wrong:
   401.  Compared in constant time.
3. **Same-origin JSON for every state-changing request.**  A POST must say
   ``content-type: application/json`` (415 otherwise: a cross-site form or a ``text/plain``
   fetch cannot send that without a CORS preflight, which this server never grants); its
   ``Origin``, when the browser sends one, must be this panel's own origin, and its
   ``Sec-Fetch-Site``, when sent, ``same-origin`` (403 otherwise).  A client that sends
   neither header is not a browser (a browser always sends ``Origin`` on a POST), so no other
   site is speaking through it.

The control lock's own credential (a secret per open page) is checked by the hub with
:func:`same_secret`; this module only makes and compares secrets.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
COOKIE = "solarian_panel"
SAFE_METHODS = ("GET", "HEAD")


def new_secret() -> str:
    """A fresh random credential (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def same_secret(given: object, expected: str | None) -> bool:
    """``given`` equals ``expected`` (compared in constant time); never for empty values."""
    if not isinstance(given, str) or not given or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"),
                               expected.encode("utf-8", "replace"))


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None] | None:
    """``Host`` header value -> (lower-case host without brackets, port or None); None when
    it is not a host[:port] at all."""
    value = value.strip()
    if not value or any(c in value for c in "/@?#\\ ") or len(value) > 300:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else ""
    elif value.count(":") > 1:
        return None  # a bare IPv6 address must be bracketed in Host
    else:
        host, _, port_text = value.partition(":")
    port: int | None = None
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    host = host.lower().rstrip(".")
    return (host, port) if host else None


@dataclass(frozen=True)
class DoorPolicy:
    """What the door lets in.  ``allowed_hosts``: lower-case host names / addresses (IPv6
    without brackets); ``ip_hosts``: any IP-address Host too (wildcard binds);
    ``access_token``: required on every request when set."""

    allowed_hosts: frozenset[str]
    ip_hosts: bool = False
    access_token: str | None = None

    @classmethod
    def for_bind(cls, host: str, allow_hosts: Iterable[str] = (),
                 access_token: str | None = None) -> DoorPolicy:
        """The policy of a panel listening on ``host``.  Raises ``ValueError`` for a
        non-loopback ``host`` without an access token, and for an ``allow_hosts`` entry
        that is not a host name."""
        if not is_loopback(host) and not access_token:
            raise ValueError(
                f"the panel listens beyond loopback ({host!r}) only with an access token "
                "(--token, or let the CLI generate one); on this machine alone use "
                "127.0.0.1, or reach it through an SSH tunnel (ssh -L 8765:127.0.0.1:8765 robot)")
        names = set(LOOPBACK_HOSTS)
        wildcard = host in WILDCARDS
        if not wildcard:
            names.add(host.strip("[]").lower())
        for extra in allow_hosts:
            parsed = split_host(str(extra))
            if parsed is None or parsed[1] is not None:
                raise ValueError(f"--allow-host {extra!r}: expected a host name or address "
                                 "without a port")
            names.add(parsed[0])
        if wildcard:
            for name in (socket.gethostname(), socket.getfqdn()):
                if name:
                    names.add(name.lower().rstrip("."))
        return cls(frozenset(names), ip_hosts=wildcard, access_token=access_token or None)

    def host_allowed(self, host_header: str) -> bool:
        parsed = split_host(host_header)
        if parsed is None:
            return False
        host = parsed[0]
        return host in self.allowed_hosts or (self.ip_hosts and _is_ip(host))


def origin_matches(origin: str, host_header: str) -> bool:
    """``Origin`` names this panel: ``http://`` + the request's own (allowed) Host."""
    if origin == "null":
        return False
    try:
        u = urllib.parse.urlsplit(origin)
    except ValueError:
        return False
    if u.scheme != "http" or u.path not in ("", "/") or u.query or u.fragment:
        return False
    mine, theirs = split_host(host_header), split_host(u.netloc)
    if mine is None or theirs is None:
        return False
    return mine[0] == theirs[0] and (mine[1] or 80) == (theirs[1] or 80)


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == name:
            return urllib.parse.unquote(v)
    return ""


def _headers(scope: Scope) -> dict[str, str]:
    """Lower-case header names -> values; a repeated header is joined (cookies with "; ",
    others with ", "), so a second Host or Origin cannot hide behind the first."""
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        name, value = k.decode("latin-1").lower(), v.decode("latin-1")
        if name in out:
            value = out[name] + ("; " if name == "cookie" else ", ") + value
        out[name] = value
    return out


class PanelDoor:
    """The ASGI middleware in front of the panel's routes (see the module docstring)."""

    def __init__(self, app: ASGIApp, policy: DoorPolicy) -> None:
        self.app = app
        self.policy = policy
        self.refused: dict[str, int] = {}  # why -> count (for the state endpoint and tests)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        h = _headers(scope)
        method = str(scope.get("method", "GET")).upper()
        host = h.get("host", "")
        if not self.policy.host_allowed(host):
            await self._refuse(send, "host", 421,
                               "this panel does not answer to that Host name (only to the "
                               "names it is bound to)")
            return
        token = self.policy.access_token
        if token:
            given = _cookie(h.get("cookie", ""), COOKIE)
            auth = h.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = auth[7:].strip()
            if not same_secret(given, token):
                query = urllib.parse.parse_qs(
                    (scope.get("query_string") or b"").decode("latin-1"))
                offered = query.get("token", [""])[0]
                if method == "GET" and scope.get("path") == "/" and same_secret(offered, token):
                    await self._enter(send, token)
                    return
                await self._refuse(send, "token", 401,
                                   "this panel needs its access token: open the URL with "
                                   "?token=... that the panel printed when it started")
                return
        if method not in SAFE_METHODS:
            origin = h.get("origin")
            if origin is not None and not origin_matches(origin, host):
                await self._refuse(send, "origin", 403,
                                   "cross-origin request refused: commands are accepted only "
                                   "from the panel's own page")
                return
            site = h.get("sec-fetch-site")
            if site is not None and site != "same-origin":
                await self._refuse(send, "origin", 403,
                                   f"cross-site request refused (Sec-Fetch-Site: {site[:40]})")
                return
            ctype = h.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                await self._refuse(send, "content_type", 415,
                                   "commands are JSON POSTs (content-type: application/json)")
                return
        await self.app(scope, receive, send)

    async def _enter(self, send: Send, token: str) -> None:
        """``GET /?token=<right token>``: set the cookie and leave the token out of the
        address bar (and the history) with a redirect."""
        cookie = (f"{COOKIE}={urllib.parse.quote(token)}; HttpOnly; SameSite=Strict; Path=/")
        await send({"type": "http.response.start", "status": 303, "headers": [
            (b"location", b"/"), (b"set-cookie", cookie.encode("latin-1")),
            (b"cache-control", b"no-store"), (b"content-length", b"0"),
            (b"referrer-policy", b"no-referrer")]})
        await send({"type": "http.response.body", "body": b""})

    async def _refuse(self, send: Send, why: str, status: int, reason: str) -> None:
        self.refused[why] = self.refused.get(why, 0) + 1
        body = json.dumps({"ok": False, "reason": reason}).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["COOKIE", "DoorPolicy", "PanelDoor", "is_loopback", "new_secret", "origin_matches",
           "same_secret", "split_host"]
