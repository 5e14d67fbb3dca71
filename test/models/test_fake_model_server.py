"""The fake model server itself, over plain HTTP (urllib): records, auth, scripts, SSE."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from model_helpers import KEY

from solarian_agent.testing.fake_model_server import (
    Drop,
    FakeModelServer,
    HTTPError,
    Reply,
    ToolUse,
)


def post(server: FakeModelServer, path: str, body: dict[str, Any], key: str = KEY,
         timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json",
                                          "authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_records_requests_and_redacts_credentials(server: FakeModelServer) -> None:
    server.add(Reply("hi"))
    status, _, data = post(server, "/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 200
    assert json.loads(data)["choices"][0]["message"]["content"] == "hi"
    (rec,) = server.requests
    assert rec.path == "/v1/chat/completions" and rec.body == {"model": "m", "messages": []}
    assert rec.headers["authorization"] == "<redacted>" and rec.auth_ok is True
    assert KEY not in repr(server.requests)


def test_wrong_key_unscripted_and_unknown_paths(server: FakeModelServer) -> None:
    server.add(Reply("kept"))
    status, _, data = post(server, "/v1/messages", {}, key="sk-wrong")
    assert status == 401 and json.loads(data)["error"]["type"] == "authentication_error"
    assert server.remaining == 1  # a refused request does not use up the script
    status, _, _ = post(server, "/v1/nothing", {})
    assert status == 404
    post(server, "/v1/messages", {})
    status, _, data = post(server, "/v1/messages", {})
    assert status == 400 and b"no scripted reply left" in data
    assert server.unscripted == 1


def test_errors_carry_retry_after_in_each_wire_format(server: FakeModelServer) -> None:
    server.add(HTTPError(429, "slow", retry_after=2.5), HTTPError(529))
    status, headers, data = post(server, "/v1/messages", {})
    assert status == 429 and headers["retry-after"] == "2.5"
    assert json.loads(data) == {"type": "error", "error": {"type": "rate_limit_error",
                                                          "message": "slow"}}
    status, _, data = post(server, "/v1/responses", {})
    assert status == 529 and json.loads(data)["error"]["type"] == "overloaded_error"


def test_streams_are_server_sent_events(server: FakeModelServer) -> None:
    server.add(Reply("hello", tool_calls=[ToolUse("pick", {"x": 1})]))
    status, headers, data = post(server, "/v1/messages", {"stream": True})
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = [blk for blk in data.decode().split("\n\n") if blk.strip()]
    names = [e.split("\n")[0].removeprefix("event: ") for e in events]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    assert "content_block_delta" in names
    server.add(Reply("hi"))
    _, _, data = post(server, "/v1/chat/completions", {"stream": True})
    assert data.decode().rstrip().endswith("data: [DONE]")


def test_delays_and_drops() -> None:
    with FakeModelServer() as server:
        server.add(Reply("late", delay_s=1.0), Drop())
        with pytest.raises(OSError):  # the client's timeout
            post(server, "/v1/responses", {}, timeout=0.2)
        with pytest.raises(OSError):  # closed without a response
            post(server, "/v1/responses", {})
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2.0  # stopping does not wait for sleeping handlers
