"""Helpers and fixtures for the model-provider tests: the fake server, a key, images, a turn.

Every provider is exercised through its real SDK over HTTP against
:mod:`solarian_agent.testing.fake_model_server`; nothing in the SDKs is patched.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import pytest

from solarian_agent.core.config import ModelEndpointConfig, MonitorConfig
from solarian_agent.core.model_api import (
    ImagePart,
    Message,
    ModelProvider,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolDef,
)
from solarian_agent.models.factory import build_provider
from solarian_agent.testing.fake_model_server import FakeModelServer

KEY = "sk-test-7Hq2-SECRET-d41d8cd98f00b204"
KEY_VAR = "SOLARIAN_TEST_MODEL_KEY"
PROVIDERS = ("anthropic", "openai", "openai_responses")
PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "openai_decisions": "/v1/decisions",
}


def png(w: int, h: int, seed: int = 0) -> ImagePart:
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 90, np.uint8)
    img[h // 4: h // 2, w // 4: w // 2] = (0, 0, 255)
    img[..., 1] = rng.integers(0, 40, (h, w), dtype=np.uint8)
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return ImagePart(buf.tobytes(), "image/png", w, h, observation_id=f"obs-{seed}",
                     label=f"overhead (observation obs-{seed})")


IMG_A = png(64, 48, 1)
IMG_B = png(40, 30, 2)

TOOLS = (
    ToolDef("pick", "Pick the object at an image point.", {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"},
                       "observation_id": {"type": "string"}},
        "required": ["x", "y", "observation_id"], "additionalProperties": False}),
    ToolDef("finish_task", "End the run with a summary.", {
        "type": "object", "properties": {"summary": {"type": "string"}},
        "required": ["summary"]}),
)
SYSTEM = "You control an SO-101 arm. Point in the newest overhead image."


def turn(*extra: Message, purpose: str = "planner", **kw: Any) -> ModelRequest:
    """A planner turn: the task with two images, then ``extra`` messages."""
    first = Message("user", (TextPart("Put the red cube in the tray."), IMG_A, IMG_B))
    return ModelRequest(SYSTEM, (first, *extra), TOOLS, max_tokens=1024, purpose=purpose, **kw)


def history() -> tuple[Message, ...]:
    """The assistant called two tools; both answered (one with an error); then the user."""
    return (
        Message("assistant", (TextPart("Picking the cube."),), tool_calls=(
            ToolCall("call_pick_1", "pick", {"x": 20, "y": 15, "observation_id": "obs-1"}),
            ToolCall("call_fin_1", "finish_task", {"summary": "done"}))),
        Message("tool", (TextPart("pick started (action a1)"),), tool_call_id="call_pick_1"),
        Message("tool", (TextPart("refused: the pick is still running"),),
                tool_call_id="call_fin_1", is_error=True),
        Message.user("The operator says: hurry up."),
    )


# a monitor question set in the typed-answer schema form (see models/openai_decisions.py)
MONITOR_SCHEMA = {
    "type": "object",
    "properties": {
        "phase": {"oneOf": [
            {"const": "approach", "description": "fingers move toward the target"},
            {"const": "closing", "description": "fingers closing on the target"},
            {"const": "held", "description": "the target is pinched between the fingers"},
            {"const": "failed", "description": "fingers closed with nothing between them"}],
            "description": "Which phase of the pick does the current frame show?"},
        "dropped": {"type": "boolean", "description": "The object fell out of the gripper."},
        "grip": {"type": "integer", "x-levels": ["none", "loose", "firm"],
                 "description": "How firm is the grip?"},
        "note": {"type": "string"},
    },
    "required": ["phase", "dropped"],
}


@dataclass
class Sleeps:
    calls: list[float] = field(default_factory=list)

    def __call__(self, s: float) -> None:
        self.calls.append(s)


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer(api_key=KEY) as s:
        yield s


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def base_url(server: FakeModelServer, provider: str) -> str:
    return server.anthropic_base_url if provider == "anthropic" else server.openai_base_url


@pytest.fixture
def make(server: FakeModelServer, sleeps: Sleeps) -> Callable[..., ModelProvider]:
    """``make(provider, purpose="planner", stream=False, **config fields)``."""

    def _make(provider: str, purpose: str = "planner", stream: bool = False,
              **fields: Any) -> ModelProvider:
        cls = MonitorConfig if purpose == "monitor" else ModelEndpointConfig
        values: dict[str, Any] = {"provider": provider, "model": f"{provider}-test-model",
                                  "api_key_env": KEY_VAR,
                                  "base_url": base_url(server, provider), "timeout_s": 5.0,
                                  "max_retries": 2}
        values.update(fields)
        cfg = cls(**values)
        return build_provider(cfg, purpose=purpose, env={KEY_VAR: KEY}, sleep=sleeps,
                              rng=random.Random(7), stream=stream)

    return _make
