"""One deadline per model call, and no call outlives the run that wanted it: a server's
Retry-After past the call's timeout ends the call at once, a non-streamed body trickled a few
bytes at a time is cut at the timeout (each read alone would be in time), a cancelled call
sends no retry, and shutting the model-call worker down never waits on a request in flight.

Against the local fake server over real HTTP; real time is used only where HTTP timing is
the point, and every wait is bounded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from solarian_agent.core.config import ModelEndpointConfig
from solarian_agent.core.model_api import Message, ModelError, ModelRequest
from solarian_agent.core.model_caller import ThreadCaller
from solarian_agent.models.factory import build_provider
from solarian_agent.testing.fake_model_server import FakeModelServer, HTTPError, Reply
from solarian_agent.testing.harness import make_harness

KEY = "sk-test-deadline-0123456789"
KEY_VAR = "SOLARIAN_TEST_DEADLINE_KEY"
REQUEST = ModelRequest("You are a test.", (Message.user("hello"),), max_tokens=64)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    monkeypatch.setenv(KEY_VAR, KEY)
    with FakeModelServer(api_key=KEY) as s:
        yield s


def provider(server: FakeModelServer, name: str, timeout_s: float, **kw: Any) -> Any:
    base = server.anthropic_base_url if name == "anthropic" else server.openai_base_url
    return build_provider(ModelEndpointConfig(
        provider=name, model=f"{name}-test", api_key_env=KEY_VAR, base_url=base,
        timeout_s=timeout_s, max_retries=3), purpose="planner", **kw)


PROVIDERS = ["anthropic", "openai", "openai_responses"]


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_retry_after_past_the_deadline_ends_the_call_at_once(server, name):
    waits: list[float] = []
    server.add(HTTPError(429, "slow down", retry_after=20), Reply("never sent"))
    with pytest.raises(ModelError) as e:
        provider(server, name, 5.0, sleep=waits.append).complete(REQUEST)
    assert e.value.kind == "rate_limited" and e.value.attempts == 1
    assert "past the call's deadline" in e.value.message, e.value.message
    assert waits == [] and len(server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_the_deadline_counts_the_waits_between_attempts(server, name):
    # a fake clock the waits advance: three 2 s waits do not fit in a 5 s call
    now = [0.0]

    def wait(s: float) -> None:
        now[0] += s

    server.add(*[HTTPError(503, "busy", retry_after=2) for _ in range(4)])
    with pytest.raises(ModelError) as e:
        provider(server, name, 5.0, sleep=wait, clock=lambda: now[0]).complete(REQUEST)
    assert e.value.kind == "server" and e.value.attempts == 3, e.value
    assert now[0] == 4.0 and len(server.requests) == 3


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("name", PROVIDERS)
def test_a_trickled_body_is_cut_at_the_deadline(server, name, stream):
    # 8 bytes every 0.1 s: every read is quick, the body (or its first event) takes > 4 s
    server.add(Reply("x" * 400, trickle_s=0.1))
    p = provider(server, name, 1.0, stream=stream)  # built (the SDK imported) before timing
    t0 = time.monotonic()
    with pytest.raises(ModelError) as e:
        p.complete(REQUEST)
    took = time.monotonic() - t0
    assert e.value.kind == "timeout", e.value
    assert took < 2.5, took


def test_a_cancelled_call_sends_no_retry_and_stops_waiting(server):
    server.add(HTTPError(429, "slow down", retry_after=20), Reply("never sent"))
    caller = ThreadCaller(workers=1)
    try:
        p = provider(server, "anthropic", 60.0)  # the real wait: only a cancel ends it early
        fut = caller.submit(lambda: p.complete(REQUEST))
        assert server.wait_for_requests(1, 5.0)
        t0 = time.monotonic()
        fut.cancel()
        err = fut.exception(timeout=5.0)
        assert isinstance(err, ModelError) and err.kind == "cancelled", err
        assert time.monotonic() - t0 < 2.0
        assert len(server.requests) == 1 and server.remaining == 1
    finally:
        caller.shutdown()


def test_shutdown_never_waits_on_a_call_in_flight(server):
    server.add(Reply("late", delay_s=3.0), Reply("never sent"))
    caller = ThreadCaller(workers=2)
    p = provider(server, "openai", 30.0)
    fut = caller.submit(lambda: p.complete(REQUEST))
    assert server.wait_for_requests(1, 5.0)
    t0 = time.monotonic()
    caller.shutdown()
    assert time.monotonic() - t0 < 0.5
    # the worker is a daemon: the process may exit with the request unanswered
    workers = [t for t in caller._threads if t.is_alive()]
    assert workers and all(t.daemon for t in workers)
    assert isinstance(caller.submit(lambda: 1).exception(timeout=1.0), RuntimeError)
    fut.exception(timeout=10.0)  # its own deadline ends it; no retry goes out after
    assert len(server.requests) == 1


def test_no_retry_goes_out_after_the_run_ended(server, tmp_path):
    server.add(*[HTTPError(429, "slow down", retry_after=1) for _ in range(4)])
    h = make_harness([], log_root=tmp_path, caller=ThreadCaller(workers=1))
    h.planner.provider = provider(server, "anthropic", 30.0)
    try:
        h.say("tidy the table")
        h.runtime.run_for(0.1)
        assert server.wait_for_requests(1, 5.0)
        h.planner.cancel()
        h.runtime.run_for(0.1)
        assert h.planner.status == "cancelled", h.planner.status
        # the 1 s retry wait would have ended by now: nothing more was sent
        assert not server.wait_for_requests(2, 1.5)
        assert len(server.requests) == 1
    finally:
        h.planner.shutdown()
