"""Failures over real HTTP: retries and backoff, timeouts, bad replies, refusals, images, keys."""

from __future__ import annotations

import base64
import logging
import random
import time
from typing import Any

import pytest
from model_helpers import KEY, KEY_VAR, PROVIDERS, png, turn

from solarian_agent.core.config import ModelEndpointConfig
from solarian_agent.core.model_api import Message, ModelError, ModelRequest
from solarian_agent.core.scrubbing import scrub
from solarian_agent.models.factory import build_provider
from solarian_agent.models.retry import RetryPolicy, parse_retry_after
from solarian_agent.testing.fake_model_server import (
    Drop,
    Empty,
    HTTPError,
    Malformed,
    Refusal,
    Reply,
)

ALL = (*PROVIDERS, "openai_decisions")
KEY_B64 = base64.b64encode(KEY.encode()).decode()  # as a Basic auth header carries it
# every provider with a plain JSON reply and, where the API streams, with server-sent events
WIRE = [pytest.param(p, s, id=f"{p}-{'sse' if s else 'json'}") for p in ALL
        for s in (False, True) if not (s and p == "openai_decisions")]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rate_limited_then_success_honours_retry_after(make: Any, server: Any, sleeps: Any,
                                                       provider: str) -> None:
    server.add(HTTPError(429, "slow down", retry_after=7), Reply("ok"))
    # the wait counts against the call's one deadline: 7 s of 10
    reply = make(provider).complete(turn(), timeout_s=10)
    assert reply.text == "ok"
    assert sleeps.calls == [7.0]
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same request, resent


@pytest.mark.parametrize("provider", ALL)
def test_server_errors_until_the_retry_budget_is_spent(make: Any, server: Any, sleeps: Any,
                                                       provider: str) -> None:
    server.add(*[HTTPError(500, "boom") for _ in range(4)])
    p = make(provider, max_retries=3, purpose="monitor" if provider == "openai_decisions"
             else "planner")
    req = turn() if provider != "openai_decisions" else ModelRequest(
        "judge", (Message.user("x"),), response_schema={
            "type": "object", "properties": {"ok": {"type": "boolean"}}})
    with pytest.raises(ModelError) as e:
        p.complete(req, timeout_s=5)
    assert e.value.kind == "server" and e.value.attempts == 4
    assert e.value.retryable
    assert "HTTP 500" in e.value.message and "boom" in e.value.message
    assert "gave up after 4 attempts" in e.value.message
    assert len(server.requests) == 4 and server.remaining == 0
    # exponential backoff with jitter: base 0.5 s doubling, each scaled into [0.5, 1]
    assert len(sleeps.calls) == 3
    for i, s in enumerate(sleeps.calls):
        assert 0.5 * 0.5 * 2**i <= s <= 0.5 * 2**i


def test_overloaded_529_and_dropped_connections_are_retried(make: Any, server: Any,
                                                            sleeps: Any) -> None:
    server.add(HTTPError(529, "overloaded"), Drop(), Reply("ok"))
    reply = make("anthropic").complete(turn(), timeout_s=5)
    assert reply.text == "ok" and len(sleeps.calls) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_error_event_mid_stream_is_retried(make: Any, server: Any, sleeps: Any,
                                              provider: str) -> None:
    server.add(Reply("never finished", stream_error=HTTPError(529, "overloaded")),
               Reply("ok"))
    assert make(provider, stream=True).complete(turn(), timeout_s=5).text == "ok"
    assert len(sleeps.calls) == 1
    server.add(Reply("x", stream_error=HTTPError(400, "bad image")))
    with pytest.raises(ModelError) as e:
        make(provider, stream=True).complete(turn(), timeout_s=5)
    assert e.value.kind == "bad_request" and "bad image" in e.value.message


def test_a_dropped_connection_is_a_connection_error(make: Any, server: Any) -> None:
    server.add(Drop())
    with pytest.raises(ModelError) as e:
        make("openai", max_retries=0).complete(turn(), timeout_s=5)
    assert e.value.kind == "connection" and e.value.attempts == 1


def test_a_retry_after_beyond_the_cap_gives_up_at_once(make: Any, server: Any,
                                                       sleeps: Any) -> None:
    server.add(HTTPError(429, "daily quota", retry_after=3600), Reply("never"))
    with pytest.raises(ModelError) as e:
        make("openai").complete(turn(), timeout_s=5)
    assert e.value.kind == "rate_limited" and e.value.attempts == 1
    assert "3600" in e.value.message
    assert sleeps.calls == [] and len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_slower_than_the_timeout(make: Any, server: Any, provider: str,
                                         stream: bool) -> None:
    if stream:  # headers come at once, then the stream stalls
        server.add(Reply("late " * 4, chunk_delay_s=2.0))
    else:
        server.add(Reply("late", delay_s=2.0))
    p = make(provider, max_retries=0, stream=stream)
    t0 = time.monotonic()
    with pytest.raises(ModelError) as e:
        p.complete(turn(), timeout_s=0.3)
    assert e.value.kind == "timeout" and e.value.attempts == 1
    assert time.monotonic() - t0 < 1.8


def test_a_timeout_that_used_the_whole_call_is_not_retried(make: Any, server: Any,
                                                           sleeps: Any) -> None:
    # timeout_s bounds the whole call, retries included: an attempt that timed out left no
    # time for another
    server.add(Reply("late", delay_s=2.0), Reply("never sent"))
    with pytest.raises(ModelError) as e:
        make("anthropic", max_retries=1).complete(turn(), timeout_s=0.3)
    assert e.value.kind == "timeout" and e.value.attempts == 1, e.value
    assert "past the call's deadline" in e.value.message
    assert sleeps.calls == [] and len(server.requests) == 1


@pytest.mark.parametrize("provider", ALL)
def test_vision_calls_never_retry(make: Any, server: Any, sleeps: Any, provider: str) -> None:
    server.add(HTTPError(503, "unavailable"), Reply("never sent"))
    p = make(provider, purpose="vision", max_retries=5)
    req = ModelRequest("describe", (Message.user("what is on the table?", png(32, 24)),),
                       purpose="vision",
                       response_schema=None if provider != "openai_decisions" else {
                           "type": "object", "properties": {"cup": {"type": "boolean"}}})
    with pytest.raises(ModelError) as e:
        p.complete(req, timeout_s=5)
    assert e.value.kind == "server" and e.value.attempts == 1
    assert sleeps.calls == [] and len(server.requests) == 1


def test_a_vision_request_on_a_planner_provider_does_not_retry(make: Any, server: Any) -> None:
    server.add(HTTPError(500, "x"), Reply("never sent"))
    with pytest.raises(ModelError) as e:
        make("anthropic", max_retries=3).complete(
            ModelRequest("d", (Message.user("look"),), purpose="vision"), timeout_s=5)
    assert e.value.attempts == 1 and len(server.requests) == 1


@pytest.mark.parametrize(("provider", "stream"), WIRE)
def test_malformed_json_is_a_model_error_not_retried(make: Any, server: Any, provider: str,
                                                     stream: bool) -> None:
    if stream:
        body = b'event: message_start\ndata: {"type": "message_start", "mess\n\n'
        server.add(Malformed(body=body, content_type="text/event-stream"))
    else:
        server.add(Malformed())
    req = turn() if provider != "openai_decisions" else ModelRequest(
        "judge", (Message.user("x"),), response_schema={
            "type": "object", "properties": {"ok": {"type": "boolean"}}})
    with pytest.raises(ModelError) as e:
        make(provider, stream=stream).complete(req, timeout_s=5)
    assert e.value.kind == "malformed", e.value
    assert e.value.attempts == 1 and len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_json_reply_of_the_wrong_shape_is_malformed(make: Any, server: Any,
                                                      provider: str) -> None:
    server.add(Malformed(body=b'{"unexpected": true}'))
    with pytest.raises(ModelError) as e:
        make(provider).complete(turn(), timeout_s=5)
    assert e.value.kind == "malformed"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal(make: Any, server: Any, provider: str, stream: bool) -> None:
    server.add(Refusal("I won't move the knife."))
    with pytest.raises(ModelError) as e:
        make(provider, stream=stream).complete(turn(), timeout_s=5)
    assert e.value.kind == "refusal" and not e.value.retryable
    assert "I won't move the knife." in e.value.message


@pytest.mark.parametrize(("provider", "stream"), WIRE)
def test_an_empty_reply(make: Any, server: Any, provider: str, stream: bool) -> None:
    server.add(Empty())
    req = turn() if provider != "openai_decisions" else ModelRequest(
        "judge", (Message.user("x"),), response_schema={
            "type": "object", "properties": {"ok": {"type": "boolean"}}})
    with pytest.raises(ModelError) as e:
        make(provider, stream=stream).complete(req, timeout_s=5)
    assert e.value.kind == "empty" and e.value.attempts == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_bad_request_and_auth_errors_are_not_retried(make: Any, server: Any,
                                                     provider: str) -> None:
    server.add(HTTPError(400, "messages: text content blocks must be non-empty"),
               HTTPError(403, "no access to this model"))
    p = make(provider)
    with pytest.raises(ModelError) as e:
        p.complete(turn(), timeout_s=5)
    assert e.value.kind == "bad_request" and "non-empty" in e.value.message
    with pytest.raises(ModelError) as e:
        p.complete(turn(), timeout_s=5)
    assert e.value.kind == "auth" and e.value.attempts == 1
    assert len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_too_many_images_are_refused_before_any_request(make: Any, server: Any,
                                                        provider: str) -> None:
    p = make(provider)
    many = Message.user("look", *[png(8, 8, i) for i in range(p.max_images + 1)])
    with pytest.raises(ModelError) as e:
        p.complete(ModelRequest("s", (many,)), timeout_s=5)
    assert e.value.kind == "bad_request"
    assert f"at most {p.max_images}" in e.value.message
    assert server.requests == []


def test_oversized_images_are_resized_to_the_provider_limits(make: Any, server: Any,
                                                             caplog: Any) -> None:
    import base64

    import cv2
    import numpy as np

    server.add(Reply("ok"))
    p = make("anthropic")
    big = png(2400, 1800, 5)
    with caplog.at_level(logging.WARNING):
        p.complete(ModelRequest("s", (Message.user("look", big),)), timeout_s=5)
    assert "exceeds this provider's limits" in caplog.text
    block = server.requests[0].body["messages"][0]["content"][-1]
    data = base64.b64decode(block["source"]["data"])
    h, w = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape[:2]
    assert max(w, h) <= p.max_image_side and w * h <= p.max_image_pixels
    assert abs(w / h - 4 / 3) < 0.01


def test_images_within_limits_are_sent_byte_for_byte(make: Any, server: Any) -> None:
    import base64

    img = png(1568, 700, 9)  # at the side limit, under the pixel cap
    server.add(Reply("ok"))
    make("anthropic").complete(ModelRequest("s", (Message.user("look", img),)), timeout_s=5)
    block = server.requests[0].body["messages"][0]["content"][-1]
    assert base64.b64decode(block["source"]["data"]) == img.data


# ---------------------------------------------------------------- keys


def _chain(e: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def test_the_key_never_appears_in_errors_records_or_logs(make: Any, server: Any,
                                                         caplog: Any) -> None:
    """Every failure path, with SDK debug logging on: the key shows up nowhere."""
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    replies = []
    scripts = [
        [HTTPError(429, f"key {KEY} is rate limited", retry_after=0), Reply("ok")],
        [HTTPError(500), HTTPError(502, f"upstream said {KEY}")],
        [Malformed()], [Refusal()], [Empty()], [Drop(), Drop()],
        [HTTPError(401, f"bad key {KEY}")], [HTTPError(400, f"echo {KEY}")],
        # a proxy echoing the Basic auth header it got: the key in its base64 form
        [HTTPError(400, f"bad header Basic {KEY_B64}")],
    ]
    for provider in PROVIDERS:
        for stream in (False, True):
            p = make(provider, stream=stream, max_retries=1)
            for entries in scripts:
                server.add(*entries)
                try:
                    replies.append(p.complete(turn(), timeout_s=5))
                except ModelError as e:
                    errors.append(e)
                assert server.remaining == 0
            assert KEY not in repr(p)
    # a wrong key: the server answers 401 and the message must not echo what was sent
    cfg = ModelEndpointConfig(provider="openai", model="m", api_key_env=KEY_VAR,
                              base_url=server.openai_base_url, max_retries=0)
    wrong = build_provider(cfg, purpose="planner", env={KEY_VAR: KEY + "-wrong"})
    with pytest.raises(ModelError) as e:
        wrong.complete(turn(), timeout_s=5)
    assert e.value.kind == "auth"
    errors.append(e.value)

    assert len(errors) > 20 and replies
    assert sum("bad header Basic ***" in str(e) for e in errors) == 2 * len(PROVIDERS)
    for err in errors:
        for link in _chain(err):
            assert KEY not in str(link) and KEY not in repr(link)
            assert KEY not in repr(vars(link))
            assert KEY_B64 not in str(link) and KEY_B64 not in repr(vars(link))
        assert err.__cause__ is None and err.__context__ is None
    for r in replies:
        assert KEY not in repr(r)
    for rec in server.requests:
        assert KEY not in repr(rec.headers)
        assert KEY.encode() not in rec.raw
    assert KEY not in caplog.text


def test_scrub_replaces_a_key_and_its_base64_form_and_nothing_shorter() -> None:
    b64 = base64.b64encode(b"abcd").decode()
    assert scrub(f"k=abcd b={b64}.", ["abcd"]) == "k=*** b=***."
    assert scrub("k=abc", ["abc"]) == "k=abc"  # under 4 characters: no key, left alone
    assert scrub("k=abcd", ["", "zzzz", "abcd"]) == "k=***"  # every secret, empties skipped


# ---------------------------------------------------------------- retry policy units


def test_retry_policy_backoff_is_bounded_and_jittered() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0, jitter=0.5)
    rng = random.Random(1)
    delays = [policy.delay(i, None, rng) for i in range(8)]
    assert all(d is not None for d in delays)
    for i, d in enumerate(delays):
        cap = min(4.0, 0.5 * 2**i)
        assert d is not None and cap * 0.5 <= d <= cap
    assert policy.delay(0, 2.5, rng) == 2.5
    assert policy.delay(0, 61.0, rng) is None


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    got = parse_retry_after({"retry-after": future})
    assert got is not None and 25 <= got <= 31


def test_max_retries_comes_from_the_config(make: Any) -> None:
    assert make("anthropic", max_retries=4).retry_policy.max_retries == 4
    assert make("anthropic", purpose="vision", max_retries=4).retry_policy.max_retries == 0
    # the SDK clients never retry by themselves
    for provider in ALL:
        assert make(provider)._client.max_retries == 0
