"""Each HTTP provider through its real SDK against the fake server: what is sent and received."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from model_helpers import (
    IMG_A,
    IMG_B,
    KEY,
    MONITOR_SCHEMA,
    PATHS,
    PROVIDERS,
    SYSTEM,
    history,
    turn,
)

from solarian_agent.core.model_api import (
    Message,
    ModelError,
    ModelProvider,
    ModelRequest,
    TextPart,
    ToolCall,
)
from solarian_agent.models.openai_decisions import DecisionReply
from solarian_agent.testing.fake_model_server import Decision, Refusal, Reply, ToolUse

B64_A = base64.b64encode(IMG_A.data).decode()
B64_B = base64.b64encode(IMG_B.data).decode()


def sent_images(provider: str, body: dict[str, Any]) -> list[str]:
    """The base64 payloads of every image in a request body, in order."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "image" and isinstance(node.get("source"), dict):
                out.append(node["source"]["data"])
            elif node.get("type") == "image_url":
                out.append(node["image_url"]["url"].split(",", 1)[1])
            elif node.get("type") == "input_image":
                out.append(node["image_url"].split(",", 1)[1])
            else:
                for v in node.values():
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(body)
    return out


def tool_names(provider: str, body: dict[str, Any]) -> list[str]:
    if provider == "openai":
        return [t["function"]["name"] for t in body["tools"]]
    return [t["name"] for t in body["tools"]]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_turn_with_text_two_images_and_tools(make: Any, server: Any, provider: str,
                                             stream: bool) -> None:
    p: ModelProvider = make(provider, stream=stream)
    assert isinstance(p, ModelProvider)
    server.add(Reply("Picking the red cube.", tool_calls=[
        ToolUse("pick", {"x": 20, "y": 15, "observation_id": "obs-1"}, id="call_a1")],
        input_tokens=1200, output_tokens=40, cache_read_tokens=800, cache_write_tokens=0))
    reply = p.complete(turn(), timeout_s=5)

    assert reply.text == "Picking the red cube."
    assert reply.tool_calls == (ToolCall("call_a1", "pick",
                                         {"x": 20, "y": 15, "observation_id": "obs-1"}),)
    assert reply.model == f"{provider}-test-model"
    assert reply.latency_s > 0
    assert reply.usage.input_tokens == 1200
    assert reply.usage.cache_read_tokens == 800
    assert reply.usage.output_tokens == 40

    (req,) = server.requests
    assert req.path == PATHS[provider] and req.auth_ok is True
    assert req.stream is stream
    body = req.body
    assert body["model"] == f"{provider}-test-model"
    assert sent_images(provider, body) == [B64_A, B64_B]
    assert tool_names(provider, body) == ["pick", "finish_task"]
    assert SYSTEM in json.dumps(body)
    assert "Put the red cube in the tray." in json.dumps(body)
    # the image labels go right before their images
    assert "overhead (observation obs-1)" in json.dumps(body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_call_round_trip(make: Any, server: Any, provider: str) -> None:
    p = make(provider)
    server.add(Reply("Picking.", tool_calls=[ToolUse("pick", {"x": 1, "y": 2,
                                                             "observation_id": "obs-1"})]),
               Reply("Waiting for the pick."))
    first = p.complete(turn(), timeout_s=5)
    (call,) = first.tool_calls
    assistant = Message("assistant", (TextPart(first.text),), tool_calls=first.tool_calls)
    result = Message("tool", (TextPart("pick started"),), tool_call_id=call.id)
    second = p.complete(turn(assistant, result), timeout_s=5)
    assert second.text == "Waiting for the pick." and not second.tool_calls

    body = server.requests[1].body
    if provider == "anthropic":
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
        use = [b for b in msgs[1]["content"] if b["type"] == "tool_use"]
        assert use == [{"type": "tool_use", "id": call.id, "name": "pick",
                        "input": {"x": 1, "y": 2, "observation_id": "obs-1"}}]
        res = msgs[2]["content"][0]
        assert res["type"] == "tool_result" and res["tool_use_id"] == call.id
        assert res["content"][0]["text"] == "pick started"
    elif provider == "openai":
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
        assert msgs[2]["tool_calls"][0]["id"] == call.id
        assert json.loads(msgs[2]["tool_calls"][0]["function"]["arguments"]) == call.arguments
        assert msgs[3] == {"role": "tool", "tool_call_id": call.id, "content": "pick started"}
    else:
        items = body["input"]
        fc = next(i for i in items if i.get("type") == "function_call")
        out = next(i for i in items if i.get("type") == "function_call_output")
        assert fc["call_id"] == call.id and json.loads(fc["arguments"]) == call.arguments
        assert out == {"type": "function_call_output", "call_id": call.id,
                       "output": "pick started"}
        assert items.index(fc) < items.index(out)


def test_anthropic_merges_tool_results_into_one_user_turn(make: Any, server: Any) -> None:
    p = make("anthropic")
    server.add(Reply("ok"))
    p.complete(turn(*history()), timeout_s=5)
    msgs = server.requests[0].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    last = msgs[2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[0]["tool_use_id"] == "call_pick_1" and "is_error" not in last[0]
    assert last[1]["tool_use_id"] == "call_fin_1" and last[1]["is_error"] is True
    assert last[2]["text"] == "The operator says: hurry up."


def test_anthropic_prompt_caching_markers(make: Any, server: Any) -> None:
    server.add(Reply("ok"), Reply("ok"))
    make("anthropic").complete(turn(*history()), timeout_s=5)
    body = server.requests[0].body
    eph = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": eph}]
    assert body["tools"][-1]["cache_control"] == eph
    assert all("cache_control" not in t for t in body["tools"][:-1])
    # a planner call also marks the end of the conversation for the next turn
    assert body["messages"][-1]["content"][-1]["cache_control"] == eph
    marks = json.dumps(body).count('"cache_control"')
    assert marks == 3  # the API allows four

    make("anthropic", purpose="monitor").complete(turn(purpose="monitor"), timeout_s=5)
    body = server.requests[1].body
    assert body["system"][0]["cache_control"] == eph
    assert "cache_control" not in body["messages"][-1]["content"][-1]


def test_anthropic_thinking_blocks_go_back_with_their_tool_use(make: Any, server: Any) -> None:
    p = make("anthropic", thinking_budget=2048, max_tokens=1000)
    server.add(Reply("Picking.", thinking="The cube is at (20, 15).",
                     tool_calls=[ToolUse("pick", {"x": 20, "y": 15, "observation_id": "o"})]),
               Reply("Done."))
    first = p.complete(turn(), timeout_s=5)
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 1000 + 2048
    assistant = Message("assistant", (TextPart(first.text),), tool_calls=first.tool_calls)
    result = Message("tool", (TextPart("started"),), tool_call_id=first.tool_calls[0].id)
    p.complete(turn(assistant, result), timeout_s=5)
    sent = server.requests[1].body["messages"][1]["content"]
    assert sent[0]["type"] == "thinking"
    assert sent[0]["thinking"] == "The cube is at (20, 15)."
    assert sent[0]["signature"].startswith("sig-")
    assert [b["type"] for b in sent] == ["thinking", "text", "tool_use"]

    # a provider that never saw that reply sends the request without thinking instead of
    # failing on the API's "a final assistant message must start with a thinking block"
    fresh = make("anthropic", thinking_budget=2048)
    server.add(Reply("Done."))
    fresh.complete(turn(assistant, result), timeout_s=5)
    assert "thinking" not in server.requests[2].body


def test_anthropic_streamed_thinking_is_kept_too(make: Any, server: Any) -> None:
    p = make("anthropic", stream=True, thinking_budget=1024)
    server.add(Reply(thinking="hmm", tool_calls=[ToolUse("finish_task", {"summary": "x"})]),
               Reply("ok"))
    first = p.complete(turn(), timeout_s=5)
    assistant = Message("assistant", tool_calls=first.tool_calls)
    result = Message("tool", (TextPart("finished"),), tool_call_id=first.tool_calls[0].id)
    p.complete(turn(assistant, result), timeout_s=5)
    sent = server.requests[1].body["messages"][1]["content"]
    assert sent[0]["type"] == "thinking" and sent[0]["thinking"] == "hmm"


def test_anthropic_usage_cache_reads_and_writes(make: Any, server: Any) -> None:
    server.add(Reply("ok", input_tokens=30, output_tokens=5, cache_read_tokens=0,
                     cache_write_tokens=2000),
               Reply("ok", input_tokens=40, output_tokens=6, cache_read_tokens=2000))
    p = make("anthropic")
    a = p.complete(turn(), timeout_s=5).usage
    b = p.complete(turn(), timeout_s=5).usage
    assert (a.input_tokens, a.cache_write_tokens, a.cache_read_tokens) == (30, 2000, 0)
    assert (b.input_tokens, b.cache_write_tokens, b.cache_read_tokens) == (40, 0, 2000)
    assert (a + b).output_tokens == 11


def test_openai_chat_images_in_tool_results_follow_as_a_user_message(make: Any,
                                                                     server: Any) -> None:
    server.add(Reply("ok"))
    msgs = (
        Message("assistant", tool_calls=(ToolCall("c1", "observe", {}),
                                         ToolCall("c2", "observe", {}))),
        Message("tool", (TextPart("the view"), IMG_B), tool_call_id="c1"),
        Message("tool", (TextPart("no camera"),), tool_call_id="c2", is_error=True),
        Message.user("go on"),
    )
    make("openai").complete(turn(*msgs), timeout_s=5)
    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user",
                                        "user"]
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "the view"}
    assert sent[4]["content"] == "ERROR: no camera"
    assert sent[5]["content"][0]["text"] == "Images returned by tool call c1:"
    assert sent[5]["content"][-1]["image_url"]["url"].endswith(B64_B)


def test_openai_chat_output_budget_name_depends_on_server(make: Any) -> None:
    from solarian_agent.models.openai_chat import OpenAIChatProvider

    local = make("openai")
    assert "max_tokens" in local._build(turn())
    official = OpenAIChatProvider(model="gpt-test", api_key=KEY, max_tokens=512)
    params = official._build(turn())
    assert params["max_completion_tokens"] == 512 and "max_tokens" not in params


def test_openai_chat_typed_answer_and_reasoning_effort(make: Any, server: Any) -> None:
    schema = {"type": "object", "properties": {"held": {"type": "boolean"}},
              "required": ["held"], "additionalProperties": False}
    server.add(Reply('{"held": true}'))
    p = make("openai", purpose="monitor", reasoning_effort="low")
    reply = p.complete(ModelRequest("judge", (Message.user("frame", IMG_A),),
                                    response_schema=schema, response_name="grasp",
                                    purpose="monitor"), timeout_s=5)
    assert reply.json() == {"held": True}
    body = server.requests[0].body
    assert body["reasoning_effort"] == "low"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "grasp", "schema": schema, "strict": True}}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_openai_responses_structured_output(make: Any, server: Any, stream: bool) -> None:
    schema = {"type": "object",
              "properties": {"phase": {"enum": ["approach", "closing", "held", "failed"]},
                             "reason": {"type": "string"}},
              "required": ["phase", "reason"], "additionalProperties": False}
    server.add(Reply('{"phase": "held", "reason": "fingers bend around it"}'))
    p = make("openai_responses", purpose="monitor", stream=stream, reasoning_effort="low")
    req = ModelRequest("You judge grasps.", (Message.user("previous, current", IMG_A, IMG_B),),
                       response_schema=schema, response_name="pick_progress",
                       purpose="monitor")
    reply = p.complete(req, timeout_s=5)
    assert reply.json()["phase"] == "held"
    body = server.requests[0].body
    assert body["instructions"] == "You judge grasps."
    assert body["reasoning"] == {"effort": "low"}
    assert body["store"] is False
    assert body["text"] == {"format": {"type": "json_schema", "name": "pick_progress",
                                       "schema": schema, "strict": True}}
    parts = body["input"][0]["content"]
    images = [x for x in parts if x["type"] == "input_image"]
    assert [x["image_url"] for x in images] == [
        f"data:image/png;base64,{B64_A}", f"data:image/png;base64,{B64_B}"]


def test_openai_responses_function_tools_strict_only_when_schema_allows(make: Any,
                                                                        server: Any) -> None:
    server.add(Reply("ok"))
    make("openai_responses").complete(turn(), timeout_s=5)
    tools = server.requests[0].body["tools"]
    assert [(t["type"], t["name"], t["strict"]) for t in tools] == [
        ("function", "pick", True), ("function", "finish_task", False)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_typed_answer_that_is_not_json_is_malformed(make: Any, server: Any,
                                                    provider: str) -> None:
    server.add(Reply("held, I think"))
    req = ModelRequest("judge", (Message.user("frame"),), response_schema={
        "type": "object", "properties": {"held": {"type": "boolean"}}}, purpose="monitor")
    with pytest.raises(ModelError) as e:
        make(provider, purpose="monitor").complete(req, timeout_s=5)
    assert e.value.kind == "malformed" and e.value.attempts == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_tool_names_and_bad_arguments_come_back_as_calls(make: Any, server: Any,
                                                                 provider: str) -> None:
    server.add(Reply(tool_calls=[ToolUse("teleport", {"to": "moon"}),
                                 ToolUse("pick", '{"x": 3, "y": '),
                                 ToolUse("pick", "[1, 2]")]))
    reply = make(provider, stream=provider != "openai").complete(turn(), timeout_s=5)
    unknown, cut, listed = reply.tool_calls
    assert unknown.name == "teleport" and unknown.arguments == {"to": "moon"}
    assert not unknown.parse_error
    assert cut.name == "pick" and cut.arguments == {}
    assert "not valid JSON" in cut.parse_error
    assert "JSON object" in listed.parse_error


# ---------------------------------------------------------------- the Decisions API


def test_openai_decisions_typed_answers(make: Any, server: Any) -> None:
    p = make("openai_decisions", purpose="monitor")
    server.add(Decision(values={"phase": "held", "dropped": False, "grip": 2}))
    req = ModelRequest("You watch a robot pick.",
                       (Message.user("previous | current", IMG_A, IMG_B),),
                       response_schema=MONITOR_SCHEMA, purpose="monitor")
    reply = p.complete(req, timeout_s=5)
    assert isinstance(reply, DecisionReply)
    assert reply.json() == {"phase": "held", "dropped": False, "grip": 2}
    dropped = reply.answer("dropped")
    assert dropped is not None and dropped.probability == pytest.approx(0.1)
    phase = reply.answer("phase")
    assert phase is not None and phase.probabilities["held"] == pytest.approx(0.8)
    assert reply.usage.input_tokens == 300 and reply.latency_s > 0

    body = server.requests[0].body
    assert server.requests[0].path == "/v1/decisions"
    assert [(q["name"], q["type"]) for q in body["questions"]] == [
        ("phase", "choice"), ("dropped", "predicate"), ("grip", "score")]
    assert body["questions"][0]["choices"][2] == {
        "value": "held", "description": "the target is pinched between the fingers"}
    assert body["questions"][2]["levels"] == [{"label": "none"}, {"label": "loose"},
                                             {"label": "firm"}]
    system, user = body["input"]
    assert system["role"] == "system"
    assert system["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert sent_images("openai_decisions", user) == [B64_A, B64_B]


def test_openai_decisions_answers_the_monitors_object_shaped_questions(make: Any,
                                                                        server: Any) -> None:
    """perception.vision's answer_schema: {name: {value?, probability, reason}} per question."""
    from solarian_agent.perception.vision import answer_schema, parse_answers, question_from_dict

    questions = [
        question_from_dict({"name": "progress", "type": "choice",
                            "instructions": "How far is the pick?",
                            "choices": {"approaching": "fingers move toward the target",
                                        "holding": "the target is between the fingers",
                                        "failed": "closed on nothing"}}),
        question_from_dict({"name": "dropped", "type": "predicate",
                            "instructions": "Did the object fall?"}),
    ]
    schema = answer_schema(questions)
    server.add(Decision(answers=[
        {"type": "choice", "name": "progress", "choice": "holding", "confidence": 0.7,
         "probabilities": [{"value": "approaching", "probability": 0.2},
                           {"value": "holding", "probability": 0.7},
                           {"value": "failed", "probability": 0.1}]},
        {"type": "predicate", "name": "dropped", "probability": 0.05}]))
    req = ModelRequest("watch", (Message.user("frames", IMG_A),), response_schema=schema,
                       purpose="monitor")
    reply = make("openai_decisions", purpose="monitor").complete(req, timeout_s=5)
    assert reply.json() == {"progress": {"value": "holding", "probability": 0.7, "reason": ""},
                            "dropped": {"probability": 0.05, "reason": ""}}
    answers, problems = parse_answers(reply.json(), questions)
    assert not problems and answers["progress"].value == "holding"
    sent = server.requests[0].body["questions"]
    assert [(q["name"], q["type"]) for q in sent] == [("progress", "choice"),
                                                      ("dropped", "predicate")]
    assert [c["value"] for c in sent[0]["choices"]] == ["approaching", "holding", "failed"]


def test_openai_decisions_refusal_and_unaskable_schema(make: Any, server: Any) -> None:
    p = make("openai_decisions", purpose="monitor")
    req = ModelRequest("watch", (Message.user("frame", IMG_A),),
                       response_schema=MONITOR_SCHEMA, purpose="monitor")
    # one declined question is left out; the others are answered
    server.add(Decision(answers=[
        {"type": "refusal", "name": "phase"},
        {"type": "predicate", "name": "dropped", "probability": 0.8},
        {"type": "score", "name": "grip", "score": 0.9, "confidence": 0.6,
         "probabilities": []}]))
    assert p.complete(req, timeout_s=5).json() == {"dropped": True, "grip": 1}
    server.add(Refusal())  # every question declined
    with pytest.raises(ModelError) as e:
        p.complete(req, timeout_s=5)
    assert e.value.kind == "refusal" and "phase" in e.value.message

    free_text = {"type": "object", "properties": {"reason": {"type": "string"}},
                 "required": ["reason"]}
    with pytest.raises(ModelError) as e:
        p.complete(ModelRequest("watch", (Message.user("x"),), response_schema=free_text),
                   timeout_s=5)
    assert e.value.kind == "bad_request" and "'reason'" in e.value.message
    with pytest.raises(ModelError) as e:
        p.complete(ModelRequest("watch", (Message.user("x"),)), timeout_s=5)
    assert e.value.kind == "bad_request" and "response_schema" in e.value.message
    assert len(server.requests) == 2  # the last two were refused before sending
