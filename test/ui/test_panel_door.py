"""The panel's door, curl-style (raw HTTP, every header as given): forged Host names (DNS
rebinding), cross-origin form / text/plain / empty / JSON posts, replayed viewer ids, and the
access token beyond loopback; the ``solarian-agent panel`` command's --host / --token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from ui_helpers import SSE, RecordingLink, TriggerServer, post, raw_request, wait_for

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.transport import Bus
from solarian_agent.ui.panel import serve_panel
from solarian_agent.ui.panel_door import DoorPolicy, origin_matches, split_host

COMMANDS = ("api/message", "api/cancel", "api/reset", "api/estop", "api/estop_reset",
            "api/lock", "api/unlock")


@pytest.fixture
def robot() -> Any:
    """A panel over a bus whose e-stop is served (and recorded) and whose agent commands are
    recorded: whatever gets through the door shows up in ``link.sent`` / ``server.requests``."""
    bus = Bus()
    server = TriggerServer(bus)
    server.serve()
    link = RecordingLink(bus)
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        yield panel, link, server
    link.close()


def body_of(raw: bytes) -> dict[str, Any]:
    return json.loads(raw) if raw.startswith(b"{") else {}


def test_forged_host_names_are_refused(robot):
    panel, link, server = robot
    url, port = panel.url, panel.port
    forged = ("attacker.example", f"attacker.example:{port}", f"127.0.0.1.nip.io:{port}",
              f"localhost.attacker.example:{port}", f"evil@127.0.0.1:{port}",
              f"127.0.0.1:{port}, attacker.example", "", f"[::1:{port}", "127.0.0.1:99999")
    for host in forged:
        for method, path, body in (("GET", "/", b""), ("GET", "/api/state", b""),
                                   ("GET", "/static/panel.js", b""),
                                   ("GET", "/frame?topic=cam/image_raw", b""),
                                   ("POST", "/api/estop_reset", b"{}"),
                                   ("POST", "/api/estop", b"{}"),
                                   ("POST", "/api/cancel", b"{}")):
            code, raw, _ = raw_request(url, method, path, body, {
                "Host": host, "content-type": "application/json"})
            assert code == 421, (host, path, code)
            assert "does not answer to that Host" in body_of(raw)["reason"]
            assert b"E-STOP" not in raw and b"panel.js" not in raw
    code, raw, _ = raw_request(url, "GET", "/events", b"", {"Host": "attacker.example"})
    assert code == 421 and b"hello" not in raw
    assert link.sent == [] and server.requests == []
    assert panel.hub.clients == {}
    # the names it is bound to are served
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", "127.0.0.1"):
        code, raw, _ = raw_request(url, "GET", "/api/state", b"", {"Host": host})
        assert code == 200, host
    assert post(url, "api/estop", {})[0] == 200
    assert [k for k, _ in server.requests] == ["estop"]


def test_cross_origin_and_non_json_posts_are_refused(robot):
    panel, link, server = robot
    url, port = panel.url, panel.port
    host = f"127.0.0.1:{port}"
    attempts = [
        # (content type, body, extra headers): what another site can make a browser send
        ("application/x-www-form-urlencoded", b"text=pick+the+cup", {}),
        ("multipart/form-data; boundary=x", b"--x--", {}),
        ("text/plain", b'{"text": "pick the cup"}', {}),
        ("", b"", {}),
        ("application/json", b"{}", {"Origin": "https://evil.example"}),
        ("application/json", b"{}", {"Origin": "null"}),
        ("application/json", b"{}", {"Origin": f"http://127.0.0.1:{port + 1}"}),
        ("application/json", b"{}", {"Origin": f"https://127.0.0.1:{port}"}),
        ("application/json", b"{}", {"Origin": f"http://localhost:{port}"}),
        ("application/json", b"{}", {"Sec-Fetch-Site": "cross-site"}),
        ("application/json", b"{}", {"Sec-Fetch-Site": "same-site"}),
        ("application/json", b"{}", {"Origin": f"http://127.0.0.1:{port}",
                                     "Sec-Fetch-Site": "cross-site"}),
        ("text/plain", b"{}", {"Origin": f"http://127.0.0.1:{port}"}),
    ]
    for path in COMMANDS:
        for ctype, body, extra in attempts:
            headers = {"Host": host, **extra}
            if ctype:
                headers["content-type"] = ctype
            code, raw, _ = raw_request(url, "POST", "/" + path, body, headers)
            assert code in (403, 415), (path, ctype, extra, code)
            reason = body_of(raw)["reason"]
            assert ("cross-" in reason) if code == 403 else ("JSON" in reason), reason
    assert link.sent == [] and server.requests == []
    assert panel.hub.lock.holder is None
    # same-origin JSON (what the panel's own page sends): Cancel and E-STOP without any lock
    same = {"Host": host, "content-type": "application/json",
            "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}
    assert raw_request(url, "POST", "/api/cancel", b"{}", same)[0] == 200
    assert raw_request(url, "POST", "/api/estop", b"{}", same)[0] == 200
    assert link.sent == [("cancel", "operator")] and [k for k, _ in server.requests] == ["estop"]
    code, raw, _ = raw_request(url, "GET", "/api/state", b"", {"Host": host})
    refused = json.loads(raw)["refused"]
    assert refused["origin"] >= 6 * len(COMMANDS) and refused["content_type"] >= 5


def test_replayed_ids_never_act_as_the_holder(robot):
    """Viewer B reads everything a viewer can (its stream, GET /api/state, a refused lock
    request's answer) and replays every string it saw as the credential: nothing acts as
    the holder A."""
    panel, link, server = robot
    url = panel.url
    a = b = None
    try:
        a, b = SSE(url), SSE(url)
        ca, ta = a.client, a.token
        assert post(url, "api/lock", {"token": ta}) == (200, {"ok": True, "reason": "",
                                                              "holder": ca})
        wait_for(lambda: any(m.get("holder") == ca for m in b.of("lock")), 5,
                 "B to see who holds the lock")
        seen: list[Any] = list(b.messages)
        code, raw, _ = raw_request(url, "GET", "/api/state", b"",
                                   {"Host": f"127.0.0.1:{panel.port}"})
        seen.append(json.loads(raw))
        code, r = post(url, "api/lock", {"token": b.token})
        assert code == 403
        seen.append(r)
        strings: set[str] = set()

        def walk(o: Any) -> None:
            if isinstance(o, str):
                strings.add(o)
            elif isinstance(o, dict):
                for k, v in o.items():
                    strings.add(str(k))
                    walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)

        walk(seen)
        assert ca in strings  # B can name the holder ...
        assert ta not in json.dumps(seen)  # ... but never saw its token
        strings.add(b.token)  # B's own credential is not the holder's either
        for s in sorted(strings):
            for body in ({"token": s}, {"client": s}, {"holder": s}, {"token": s, "client": s}):
                for path, text in (("api/message", "pick up the cup"),
                                   ("api/message", "/reset"),
                                   ("api/message", "/estop-reset"),
                                   ("api/reset", ""), ("api/estop_reset", ""),
                                   ("api/lock", "")):
                    code, r = post(url, path, {**body, "text": text})
                    assert code == 403, (path, body, code, r)
                code, _ = post(url, "api/unlock", body)
                assert code == 409
        assert link.sent == [] and server.requests == []
        assert panel.hub.lock.holder == ca
        # the holder's own token still works
        assert post(url, "api/message", {"token": ta, "text": "pick up the cup"})[0] == 200
        assert link.sent == [("message", "pick up the cup")]
    finally:
        for s in (a, b):
            if s is not None:
                s.close()


def test_beyond_loopback_every_request_needs_the_access_token():
    bus = Bus()
    server = TriggerServer(bus)
    server.serve()
    with pytest.raises(ValueError, match="access token"):
        serve_panel(bus, FakeClock(), "0.0.0.0", 0)
    token = "T0k3n-for-the-panel-test-0123456789"
    with serve_panel(bus, FakeClock(), "0.0.0.0", 0, access_token=token) as panel:
        url = f"http://127.0.0.1:{panel.port}/"
        host = f"127.0.0.1:{panel.port}"
        assert panel.entry_url.endswith(f"/?token={token}")
        for headers in ({}, {"Authorization": "Bearer wrong"},
                        {"Cookie": "solarian_panel=wrong"},
                        {"Authorization": f"Bearer {token[:-1]}"}):
            for method, path, body in (("GET", "/", b""), ("GET", "/api/state", b""),
                                       ("GET", "/events", b""), ("GET", "/?token=wrong", b""),
                                       ("GET", f"/api/state?token={token}", b""),
                                       ("POST", "/api/estop", b"{}")):
                code, raw, _ = raw_request(url, method, path, body, {
                    "Host": host, "content-type": "application/json", **headers})
                assert code == 401, (headers, path, code)
                assert "access token" in body_of(raw)["reason"] and token not in raw.decode()
        assert server.requests == []
        # the printed address: sets the cookie (HttpOnly, SameSite=Strict) and redirects
        code, _, resp = raw_request(url, "GET", f"/?token={token}", b"", {"Host": host})
        assert code == 303 and resp["location"] == "/"
        cookie = resp["set-cookie"]
        assert cookie.startswith(f"solarian_panel={token};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        jar = {"Host": host, "Cookie": f"solarian_panel={token}"}
        code, raw, _ = raw_request(url, "GET", "/", b"", jar)
        assert code == 200 and b"panel.js" in raw
        assert raw_request(url, "GET", "/api/state", b"", jar)[0] == 200
        code, _ = post(url, "api/estop", {}, headers={"Authorization": f"Bearer {token}"})
        assert code == 200 and [k for k, _ in server.requests] == ["estop"]
        # the token does not open the door to a forged Host
        code, _, _ = raw_request(url, "GET", "/api/state", b"",
                                 {**jar, "Host": f"attacker.example:{panel.port}"})
        assert code == 421
        # bound to a wildcard: addresses and this machine's names are served
        code, _, _ = raw_request(url, "GET", "/api/state", b"",
                                 {**jar, "Host": f"10.1.2.3:{panel.port}"})
        assert code == 200


def test_door_policy_and_header_parsing():
    assert split_host("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert split_host("[::1]:80") == ("::1", 80)
    assert split_host("Robot.Local.") == ("robot.local", None)
    for bad in ("", "a b", "a/b", "x@y", "::1", "[::1", "h:0", "h:x", "h:65536"):
        assert split_host(bad) is None, bad
    p = DoorPolicy.for_bind("127.0.0.1")
    assert p.host_allowed("localhost:1") and p.host_allowed("[::1]:1")
    assert not p.host_allowed("10.0.0.1:1") and not p.host_allowed("robot.local")
    p = DoorPolicy.for_bind("robot.local", ["arm-7.lab"], access_token="x" * 20)
    assert p.host_allowed("robot.local:8765") and p.host_allowed("ARM-7.lab")
    assert not p.host_allowed("10.0.0.1") and not p.host_allowed("evil.lab")
    with pytest.raises(ValueError, match="access token"):
        DoorPolicy.for_bind("192.168.1.5")
    with pytest.raises(ValueError, match="allow-host"):
        DoorPolicy.for_bind("127.0.0.1", ["evil.example:80"])
    assert origin_matches("http://127.0.0.1:8765", "127.0.0.1:8765")
    assert origin_matches("http://robot", "robot:80")
    for o in ("null", "https://127.0.0.1:8765", "http://127.0.0.1:8766", "http://x/y",
              "http://127.0.0.1:8765, http://evil.example"):
        assert not origin_matches(o, "127.0.0.1:8765"), o


# ----------------------------------------------------------------------------------------
# the command
# ----------------------------------------------------------------------------------------
def _panel_cmd(args: list[str], cwd: Any, env: dict[str, str] | None = None
               ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "solarian_agent.cli", "panel", *args],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def test_panel_command_usage_errors(tmp_path):
    for args in (["--token", "short"], ["--port", "70000"], ["--allow-host", "a b"],
                 ["--host", "0.0.0.0", "--token", "has spaces in it but long"]):
        p = _panel_cmd(args, tmp_path)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2, (args, out, err)
        assert "Traceback" not in err and "solarian-agent panel: error:" in err
        assert err.strip().splitlines()[-1].startswith("solarian-agent panel: error:")


def test_panel_command_beyond_loopback_generates_and_prints_a_token(tmp_path):
    p = _panel_cmd(["--host", "0.0.0.0", "--port", "0"], tmp_path)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("operator panel on http://"), line
        entry = line.split()[3]
        port = int(entry.split(":")[2].split("/")[0])
        token = entry.split("?token=")[1]
        assert len(token) >= 32
        url = f"http://127.0.0.1:{port}/"
        assert raw_request(url, "GET", "/api/state", b"", {"Host": f"127.0.0.1:{port}"}
                           )[0] == 401
        code, raw, _ = raw_request(url, "GET", "/api/state", b"", {
            "Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token}"})
        assert code == 200 and "estop" in json.loads(raw)
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err  # Ctrl-C: 130, as every command
    assert "Traceback" not in err
