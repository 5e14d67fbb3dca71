"""The ``openai`` provider against an OpenAI-compatible server process that lacks what small
local servers lack: each quirk is adapted to, or is one clear error naming
what the server lacks and what fixes it.  The server is a real process over HTTP, the provider
speaks to it through the ``openai`` SDK; the model behind it is the rules planner."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from solarian_agent.benchmarks.agent import AgentRun, agent_episode
from solarian_agent.benchmarks.agent_meter import Budget, load_prices
from solarian_agent.core.config import ModelEndpointConfig
from solarian_agent.core.model_api import (
    ImagePart,
    Message,
    ModelError,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolDef,
)
from solarian_agent.models.context_fit import estimate, fit, without_images
from solarian_agent.models.factory import build_provider
from solarian_agent.models.openai_compat import text_tool_calls

SEED = 95_000


def _episode(url: str, **kw: object) -> dict:
    run = AgentRun(planner="openai", model="local-test", base_url=url,
                   budget=Budget(40, 120.0, 0.0), **kw)  # type: ignore[arg-type]
    return agent_episode(run, SEED, load_prices())


def _provider(url: str, **kw: object):
    return build_provider(ModelEndpointConfig(provider="openai", model="local-test",
                                              base_url=url, max_retries=0, timeout_s=20,
                                              **kw),  # type: ignore[arg-type]
                          purpose="planner", env={})


def _image() -> ImagePart:
    ok, buf = cv2.imencode(".jpg", np.full((48, 64, 3), 128, np.uint8))
    assert ok
    return ImagePart(buf.tobytes(), "image/jpeg", 64, 48, "obs-1", "overhead")


TOOLS = (ToolDef("pick_object", "pick a thing", {"type": "object", "properties": {}}),)


def test_a_server_without_tool_choice_or_parallel_tool_calls_still_tidies(local_server):
    # the provider sends neither field, and the server's model writes one call a turn
    e = _episode(local_server("no_tool_choice,no_parallel_tools"))
    assert e["success"], e
    assert e["model_calls"] > 5  # more turns than the 5 a server with parallel calls takes


@pytest.mark.parametrize("parallel", [False, True])
def test_tool_choice_and_parallel_tool_calls_are_sent_when_set_and_dropped_when_refused(
        local_server, parallel):
    plain = _provider(local_server(""), parallel_tool_calls=parallel)
    req = ModelRequest("plan", (Message.user("hello"),), TOOLS)
    sent = plain._build(req)
    assert sent["tool_choice"] == "auto" and sent["parallel_tool_calls"] is parallel
    assert plain.complete(req, timeout_s=20) and plain.dropped == frozenset()  # taken
    assert "tool_choice" not in _provider(local_server(""))._build(req)  # null: not sent
    # a server that lacks both refuses each (a 400 apiece): each is left out and the request
    # sent again, and later requests go without them
    p = _provider(local_server("no_tool_choice,no_parallel_tools"), parallel_tool_calls=parallel)
    assert p.complete(req, timeout_s=20)
    assert p.dropped == {"tool_choice", "parallel_tool_calls"}
    assert not {"tool_choice", "parallel_tool_calls"} & set(p._build(req))
    assert p.complete(req, timeout_s=20)


def test_tool_calls_written_as_json_in_the_text_are_read_as_tool_calls(local_server):
    e = _episode(local_server("text_tools"))
    assert e["success"], e
    assert e["failure"] == "" and e["model_errors"] == []


def test_a_server_without_usage_fields_gets_estimated_tokens_labelled_so(local_server):
    e = _episode(local_server("no_usage"))
    assert e["success"] and e["tokens_estimated"]
    assert e["input_tokens"] > 1000 and e["output_tokens"] > 0
    reported = _episode(local_server(""))
    assert not reported["tokens_estimated"] and reported["input_tokens"] > 1000


def test_a_server_without_image_input_gets_text_instead_with_one_warning(local_server, caplog):
    p = _provider(local_server("no_images"))
    req = ModelRequest("plan", (Message.user("look", _image()),), TOOLS)
    with caplog.at_level("WARNING", logger="solarian_agent.models.openai_chat"):
        assert p.complete(req, timeout_s=20)  # the server refuses images: sent as text
        assert p.complete(req, timeout_s=20)  # and from then on without a refusal
    warned = [r.getMessage() for r in caplog.records if "no image input" in r.getMessage()]
    assert len(warned) == 1, warned
    assert p.images_dropped and not p.reads_images  # a vision backend describes views now
    sent = without_images(p._build(req), "http://x")
    assert "image_url" not in json.dumps(sent)
    assert "[image left out: the server at http://x takes no image input; serve a vision " \
        "model, or give the planner a vision model that describes views " \
        "(agent.runtime.vision)]" in json.dumps(sent)


def _turns(n: int, text: int = 2000) -> tuple[Message, ...]:
    """A task and ``n`` turns, each a call, its result and a wake with an image."""
    msgs = [Message.user("Task from the operator: tidy")]
    for k in range(n):
        call = ToolCall(f"c{k}", "pick_object", {})
        msgs += [Message("assistant", (), (call,)),
                 Message("tool", (TextPart("started"),), tool_call_id=f"c{k}"),
                 Message.user(f"wake {k} " + "w" * text, _image())]
    return tuple(msgs)


def test_an_8k_server_gets_requests_trimmed_to_its_window(local_server, caplog):
    p = _provider(local_server("ctx8k"))
    req = ModelRequest("plan", _turns(20), TOOLS)  # about 12k tokens
    assert estimate(p._build(req)) > 10_000
    with caplog.at_level("WARNING", logger="solarian_agent.models.openai_chat"):
        assert p.complete(req, timeout_s=20)  # refused once, trimmed, answered
        assert p.complete(req, timeout_s=20)  # trimmed before it is sent
    assert p.window is not None and p.window.tokens == 8192
    assert sum("context window of 8192" in r.getMessage() for r in caplog.records) == 1
    # what was sent: the system prompt, the tools, the task and the newest turn whole; older
    # images as text, the oldest messages left out and counted
    sent = fit(p._build(req), p.window)
    assert sent is not None and estimate(sent) <= 8192
    msgs = sent["messages"]
    assert msgs[0] == {"role": "system", "content": "plan"} and sent["tools"]
    assert msgs[1]["content"].startswith("[") and "earlier messages left out" in \
        msgs[1]["content"]
    assert any("Task from the operator" in json.dumps(m) for m in msgs)
    assert "wake 19 " in json.dumps(msgs[-1]) and "image_url" in json.dumps(msgs[-1])
    assert json.dumps(msgs[:-1]).count("image_url") < 19
    assert all(m["role"] != "tool" or msgs[i - 1]["role"] in ("assistant", "tool")
               for i, m in enumerate(msgs))  # no tool result without its call


def test_an_8k_server_too_small_even_trimmed_is_one_clear_error_naming_the_fix(local_server):
    p = _provider(local_server("ctx8k"))
    big = ModelRequest("x" * 40_000, (Message.user("hello"),), TOOLS)
    with pytest.raises(ModelError) as err:
        p.complete(big, timeout_s=20)
    msg = err.value.message
    assert "too small a context window" in msg and "8192 tokens" in msg
    assert "max_images_in_context" in msg and "-c 16384" in msg and "fewer tools" in msg
    assert p.complete(ModelRequest("short", (Message.user("hello"),), TOOLS), timeout_s=20)
    # the newest turn alone over the window, once the window is known: the same clear error
    p.complete(ModelRequest("plan", _turns(20), TOOLS), timeout_s=20)
    huge = ModelRequest("plan", (*_turns(1), Message.user("w" * 40_000)), TOOLS)
    with pytest.raises(ModelError) as err:
        p.complete(huge, timeout_s=20)
    assert "its window is 8192 tokens" in err.value.message
    assert "-c 16384" in err.value.message


def test_the_whole_tidy_task_on_an_8k_server_succeeds(local_server):
    e = _episode(local_server("ctx8k"))
    assert e["success"], e  # the shipped defaults' requests fit 8k; longer ones are trimmed
    assert e["failure"] == "" and e["model_errors"] == []


def test_text_tool_calls_forms() -> None:
    tools = {"pick_object", "place_at"}
    text, calls = text_tool_calls('Sure.\n{"name": "pick_object", "arguments": {"a": 1}}\n'
                                  '{"name": "nope", "arguments": {}}', tools)
    assert [c.name for c in calls] == ["pick_object"] and calls[0].arguments == {"a": 1}
    assert text == "Sure."
    _, calls = text_tool_calls('```json\n[{"function": {"name": "place_at", "arguments": '
                               '"{\\"b\\": 2}"}}]\n```', tools)
    assert calls[0].name == "place_at" and calls[0].arguments == {"b": 2}
    _, calls = text_tool_calls('{"name": "pick_object", "arguments": "{broken"}', tools)
    assert calls[0].parse_error
    assert text_tool_calls("no json here", tools) == ("no json here", [])


def test_on_a_server_without_images_the_views_are_described_in_text(local_server):
    """The product on a server that takes no images, with a vision backend configured
    (``runtime.vision: cv``): the first request's image is refused and sent as text, and
    from then on each view comes described by the vision backend, never as an image."""
    from dataclasses import replace

    from solarian_agent.benchmarks.tokens import TASK
    from solarian_agent.core.config import load_agent_config
    from solarian_agent.system import build_sim_system, default_config_path

    cfg = load_agent_config(default_config_path())
    cfg = replace(cfg, runtime=replace(cfg.runtime, vision="cv"))
    inner = _provider(local_server("no_images"))
    sent: list[ModelRequest] = []

    class Capture:  # the provider as the harness sees it, each request kept
        name, model, max_image_side = inner.name, inner.model, inner.max_image_side

        @property
        def reads_images(self) -> bool:
            return bool(inner.reads_images)

        def complete(self, request: ModelRequest, *, timeout_s: float):
            sent.append(request)
            return inner.complete(request, timeout_s=timeout_s)

    system = build_sim_system(config=cfg, seed=SEED, planner=Capture())
    try:
        system.planner.message(TASK)
        assert system.run_until(lambda: len(sent) >= 3
                                or system.planner.status not in ("idle", "running"), 120.0)
    finally:
        system.shutdown()
    assert len(sent) >= 2, [system.planner.status]
    first = [p for m in sent[0].messages for p in m.content if isinstance(p, ImagePart)]
    assert first and inner.images_dropped  # refused, then sent as text
    later = sent[1].messages[-1]
    assert not [p for p in later.content if isinstance(p, ImagePart)]
    assert "Described by the vision model" in later.text(), later.text()


def test_which_refusals_read_as_a_server_without_images() -> None:
    from solarian_agent.models.openai_compat import refuses_images

    assert refuses_images("image input is not supported - hint: if this is unexpected, you "
                          "may need to provide the mmproj")  # llama.cpp
    assert refuses_images("this model does not support images")
    assert refuses_images("Qwen2 is not a multimodal model")
    assert not refuses_images("bad image") and not refuses_images("image too large: 30 MB")
    # one bad image's errors: the next image may be fine, images stay on
    for one_image in ("cannot identify image file <_io.BytesIO object at 0x7f>",
                      "Unable to load image from URL", "unable to decode image data"):
        assert not refuses_images(one_image), one_image


def test_a_bad_image_is_not_read_as_a_server_without_image_input() -> None:
    from solarian_agent.models.openai_compat import clear_error

    params = {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]}]}
    assert clear_error("image too large: 30 MB", params, "http://x", "m") is None
    assert clear_error("cannot identify image file", params, "http://x", "m") is None
    err = clear_error("this model does not support image input", params, "http://x", "m")
    assert err is not None and "takes no image input" in err.message


def test_monitor_model_asks_the_runs_model_and_meters_it(local_server):
    e = _episode(local_server(""), monitor="model")
    assert e["monitor_model_calls"] > 0 and e["monitor_input_tokens"] > 0, e
    assert e["monitor_errors"] == [] and not e["tokens_estimated"]
    assert e["success"], e  # answers of "cannot tell" change nothing: the skills end on
    # their own


def test_a_stated_size_with_its_completion_budget_scales_by_the_messages_alone() -> None:
    from solarian_agent.models.context_fit import stated, window_from
    from solarian_agent.models.openai_compat import clear_error

    vllm = ("This model's maximum context length is 8192 tokens. However, you requested 9096 "
            "tokens (5000 in the messages, 4096 in the completion). Please reduce the length "
            "of the messages or completion.")
    assert stated(vllm) == (8192, 5000)
    assert stated("context length is 8192; you requested 9096 tokens, 4096 in the "
                  "completion") == (8192, 5000)
    assert stated("n_ctx is 4096, the prompt has 5000 tokens") == (4096, 5000)
    params = {"messages": [{"role": "user", "content": "x" * 20_000}], "max_tokens": 4096}
    w = window_from(vllm, params)
    assert w is not None and w.tokens == 8192
    assert w.scale == pytest.approx(5000 / estimate(params))  # not 9096 / estimate
    # the two "too small a window" errors name the same fix
    err = clear_error(vllm, params, "http://x", "m")
    assert err is not None and "needs about 5000" in err.message
    assert "-c 16384" in err.message and "fewer tools" in err.message \
        and "max_images_in_context" in err.message


def test_trimming_never_leaves_out_an_operators_mid_run_message() -> None:
    from solarian_agent.core.text import OPERATOR_PREFIX
    from solarian_agent.models.context_fit import Window

    msgs: list[dict] = [{"role": "system", "content": "plan"},
                        {"role": "user", "content": "Task from the operator: tidy"}]
    for k in range(20):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{k}", "type": "function",
                      "function": {"name": "pick_object", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": "started"},
                 {"role": "user", "content": f"wake {k} " + "w" * 2000
                  + (f"\n{OPERATOR_PREFIX}<operator>not the blue cup</operator>"
                     if k == 2 else "")}]
    params = {"messages": msgs, "max_tokens": 1024}
    sent = fit(params, Window(4096))
    assert sent is not None and estimate(sent) <= 4096
    text = json.dumps(sent["messages"])
    assert "earlier messages left out" in text and "wake 3 " not in text  # trimmed hard
    assert "not the blue cup" in text and "Task from the operator" in text
    assert "wake 19 " in text
