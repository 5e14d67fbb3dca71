"""build_provider: keys from the environment only, clear errors for everything it cannot build."""

from __future__ import annotations

from typing import Any

import pytest
from model_helpers import KEY, KEY_VAR, turn

from solarian_agent.core.config import ModelEndpointConfig, MonitorConfig, load_agent_config
from solarian_agent.core.model_api import ModelConfigError, ModelProvider
from solarian_agent.models.anthropic_provider import AnthropicProvider
from solarian_agent.models.factory import DEFAULT_KEY_ENV, LOCAL_SERVER_KEY, build_provider
from solarian_agent.models.openai_chat import OpenAIChatProvider
from solarian_agent.models.openai_decisions import OpenAIDecisionsProvider
from solarian_agent.models.openai_responses import OpenAIResponsesProvider
from solarian_agent.testing.fake_model_server import Reply

CLASSES = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIChatProvider,
    "openai_responses": OpenAIResponsesProvider,
    "openai_decisions": OpenAIDecisionsProvider,
}


@pytest.mark.parametrize("provider", list(CLASSES))
def test_each_http_provider_is_built_with_its_default_key_variable(provider: str) -> None:
    var = DEFAULT_KEY_ENV[provider]
    p = build_provider(MonitorConfig(provider=provider, model="m"), purpose="monitor",
                       env={var: KEY})
    assert type(p) is CLASSES[provider]
    assert isinstance(p, ModelProvider)
    assert p.model == "m" and p.reads_images and p.max_image_side > 0
    assert KEY not in repr(p)


@pytest.mark.parametrize("provider", list(CLASSES))
def test_a_missing_key_variable_is_named(provider: str) -> None:
    var = DEFAULT_KEY_ENV[provider]
    with pytest.raises(ModelConfigError, match=var):
        build_provider(MonitorConfig(provider=provider, model="m"), purpose="monitor", env={})
    with pytest.raises(ModelConfigError, match="MY_ROBOT_KEY"):
        build_provider(MonitorConfig(provider=provider, model="m", api_key_env="MY_ROBOT_KEY"),
                       purpose="monitor", env={var: KEY, "MY_ROBOT_KEY": "  "})


def test_keys_come_from_os_environ_by_default(monkeypatch: Any) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    p = build_provider(ModelEndpointConfig(provider="anthropic", model="m",
                                           api_key_env=KEY_VAR), purpose="planner")
    assert isinstance(p, AnthropicProvider)
    monkeypatch.delenv(KEY_VAR)
    with pytest.raises(ModelConfigError, match=KEY_VAR):
        build_provider(ModelEndpointConfig(provider="anthropic", model="m",
                                           api_key_env=KEY_VAR), purpose="planner")


@pytest.mark.parametrize("provider", ["rules", "cv", "scripted"])
def test_offline_providers_are_built_by_the_harness(provider: str) -> None:
    with pytest.raises(ModelConfigError, match="offline"):
        build_provider(MonitorConfig(provider=provider, model="x"), purpose="monitor", env={})


def test_unknown_provider_purpose_and_missing_model() -> None:
    with pytest.raises(ModelConfigError, match="unknown planner provider 'gemini'"):
        build_provider(ModelEndpointConfig(provider="gemini", model="m"), purpose="planner",
                       env={})
    with pytest.raises(ModelConfigError, match="purpose"):
        build_provider(ModelEndpointConfig(provider="anthropic", model="m"),
                       purpose="dreaming", env={"ANTHROPIC_API_KEY": KEY})
    with pytest.raises(ModelConfigError, match="model name"):
        build_provider(ModelEndpointConfig(provider="anthropic", model=""), purpose="planner",
                       env={"ANTHROPIC_API_KEY": KEY})


def test_thinking_budget_below_the_api_minimum_is_refused() -> None:
    with pytest.raises(ModelConfigError, match="at least 1024"):
        build_provider(ModelEndpointConfig(provider="anthropic", model="m",
                                           thinking_budget=500),
                       purpose="planner", env={"ANTHROPIC_API_KEY": KEY})


def test_a_keyless_local_server_needs_no_key_variable(server: Any) -> None:
    """provider: openai + base_url (vLLM, Ollama, llama.cpp) without api_key_env."""
    server.api_key = None  # a local server takes any key
    p = build_provider(ModelEndpointConfig(provider="openai", model="qwen2.5-vl",
                                           base_url=server.openai_base_url),
                       purpose="planner", env={})
    server.add(Reply("hello"))
    assert p.complete(turn(), timeout_s=5).text == "hello"
    assert server.requests[0].headers["authorization"] == "<redacted>"
    assert LOCAL_SERVER_KEY == "not-needed"
    # an explicitly named variable is still required
    with pytest.raises(ModelConfigError, match="LOCAL_KEY"):
        build_provider(ModelEndpointConfig(provider="openai", model="m", api_key_env="LOCAL_KEY",
                                           base_url=server.openai_base_url),
                       purpose="planner", env={})


def test_the_seed_configuration_builds(tmp_path: Any) -> None:
    """A full model-backed agent: block (planner anthropic + thinking, monitor
    openai_responses)."""
    cfg = load_agent_config({"agent": {
        "planner": {"provider": "anthropic", "model": "claude-opus-5",
                    "api_key_env": "ANTHROPIC_API_KEY", "thinking_budget": 4096},
        "monitor": {"provider": "openai_responses", "model": "gpt-6.1-sol",
                    "reasoning_effort": "low", "api_key_env": "OPENAI_API_KEY",
                    "period_s": 1.5, "history": 2, "image_max_side": 448},
    }})
    env = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY}
    planner = build_provider(cfg.planner, purpose="planner", env=env)
    assert isinstance(planner, AnthropicProvider) and planner.thinking_budget == 4096
    assert cfg.monitor is not None
    monitor = build_provider(cfg.monitor, purpose="monitor", env=env)
    assert isinstance(monitor, OpenAIResponsesProvider)
    assert monitor.reasoning_effort == "low"
    decisions = build_provider(
        MonitorConfig(provider="openai_decisions", model="gpt-6-luna",
                      api_key_env="OPENAI_API_KEY"), purpose="monitor", env=env)
    assert isinstance(decisions, OpenAIDecisionsProvider)


def test_config_fields_reach_the_provider(make: Any) -> None:
    p = make("openai_responses", timeout_s=12.5, max_tokens=777, max_retries=1)
    assert p.timeout_s == 12.5 and p.max_tokens == 777 and p.retry_policy.max_retries == 1
    assert p._build(turn())["max_output_tokens"] == 777
    assert KEY_VAR  # the fixture's variable, never the key, is in the config
