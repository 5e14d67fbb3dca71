"""Which vision backend the configuration names (effective_vision) and builds
(build_vision_backend): none by default, the camera and text model it needs, the model's
fallbacks and the key kept in the environment, each configuration error naming its path."""

from __future__ import annotations

from typing import Any

import pytest
from observe_scene_helpers import cfg

from solarian_agent.core.errors import ConfigError
from solarian_agent.core.model_api import ModelConfigError
from solarian_agent.models.wiring import build_vision_backend
from solarian_agent.perception.observe_scene import effective_vision


def test_vision_is_none_by_default_and_needs_a_camera_and_a_text_model():
    assert effective_vision(cfg()) == ("none", "")
    with pytest.raises(ConfigError, match="needs a camera"):
        effective_vision(cfg(runtime={"vision": "openai-responses"}))
    with pytest.raises(ConfigError, match="text cognition"):
        effective_vision(cfg(cameras=["wrist"], planner={"provider": "openai"},
                             runtime={"vision": "openai-responses"}))
    assert effective_vision(cfg(cameras=["wrist", "overhead"], planner={
        "provider": "anthropic", "model": "m"}, runtime={"vision": "anthropic"})) == (
        "anthropic", "wrist")
    assert effective_vision(cfg(runtime={"vision_camera": "overhead"}), "cv") == ("cv",
                                                                                  "overhead")
    with pytest.raises(ConfigError, match="--vision"):
        effective_vision(cfg(), "gpt-eyes")


def test_the_default_vision_is_none_when_the_config_names_none() -> None:
    from dataclasses import replace

    from solarian_agent.core.config import RuntimeConfig

    blank = replace(cfg(), runtime=RuntimeConfig(vision=""))  # built in code, not loaded
    assert effective_vision(blank) == ("none", "")
    assert effective_vision(blank, "") == ("none", "")


def test_vision_configuration_errors_name_their_path() -> None:
    def err(fn: Any) -> tuple[str, str]:
        with pytest.raises(ConfigError) as e:
            fn()
        return e.value.path, str(e.value)

    assert err(lambda: effective_vision(cfg(), "gpt-eyes")) == (
        "--vision", "--vision: 'gpt-eyes' is not allowed; allowed values: none, "
                    "openai-responses, openai, anthropic, cv, scripted")
    assert err(lambda: effective_vision(cfg(runtime={"vision": "cv"}))) == (
        "agent.runtime.vision_camera", "agent.runtime.vision_camera: vision 'cv' needs a "
                                       "camera: set runtime.vision_camera or agent.cameras")
    assert err(lambda: effective_vision(cfg(cameras=["wrist"], planner={"provider": "openai"}),
                                        "cv")) == (
        "agent.planner", "agent.planner: vision 'cv' needs a text cognition backend: "
                         "configure the planner's provider and model")
    # the offline planners need no model name
    for provider in ("rules", "scripted"):
        assert effective_vision(cfg(cameras=["wrist"], planner={"provider": provider}),
                                " cv ") == ("cv", "wrist")


def test_a_bad_configured_vision_names_the_configuration_path() -> None:
    from dataclasses import replace

    from solarian_agent.core.config import RuntimeConfig

    bad = replace(cfg(), runtime=RuntimeConfig(vision="gpt-eyes"))  # built in code, not loaded
    with pytest.raises(ConfigError) as e:
        effective_vision(bad)
    assert e.value.path == "agent.runtime.vision"
    assert str(e.value) == ("agent.runtime.vision: 'gpt-eyes' is not allowed; allowed values: "
                            "none, openai-responses, openai, anthropic, cv, scripted")
    with pytest.raises(ConfigError) as e:
        effective_vision(bad, "  ")  # an override, even a blank one, is the one named
    assert e.value.path == "--vision"


def test_the_scripted_vision_is_never_built_from_configuration() -> None:
    with pytest.raises(ConfigError) as e:
        build_vision_backend("scripted")
    assert e.value.path == "agent.runtime.vision"
    assert str(e.value) == ("agent.runtime.vision: the scripted vision backend is built by "
                            "tests, not from configuration")


def test_openai_vision_model_takes_precedence_and_the_key_stays_in_the_environment():
    from solarian_agent.models.wiring import build_vision_backend

    c = cfg(cameras=["wrist"])
    env = {"OPENAI_API_KEY": "sk-test-0123456789", "OPENAI_VISION_MODEL": "eyes",
           "OPENAI_MODEL": "general"}
    b = build_vision_backend("openai-responses", c, env=env)
    assert (b.name, b.model, b.provider.purpose) == ("openai_responses", "eyes", "vision")
    del env["OPENAI_VISION_MODEL"]
    assert build_vision_backend("openai-responses", c, env=env).model == "general"
    assert "sk-test" not in repr(b) and build_vision_backend("none") is None
    assert build_vision_backend("cv").name == "cv"


ENV = {"OPENAI_API_KEY": "sk-test-0123456789", "ANTHROPIC_API_KEY": "sk-ant-0123456789"}


def test_the_vision_model_falls_back_to_the_monitor_s_then_the_planner_s() -> None:
    both = cfg(planner={"provider": "openai", "model": "pm", "base_url": "http://h:1/v1"},
               monitor={"provider": "openai", "model": "mon"})
    b = build_vision_backend("openai", both, env=ENV)
    assert (b.name, b.model, b.provider.purpose) == ("openai", "mon", "vision")
    b = build_vision_backend("openai", cfg(planner={"provider": "openai", "model": "pm",
                                                    "base_url": "http://h:1/v1"}), env=ENV)
    assert (b.model, b.provider.base_url) == ("pm", "http://h:1/v1")
    # the planner's endpoint only for the planner's own provider
    b = build_vision_backend("anthropic", cfg(planner={"provider": "openai", "model": "pm",
                                                       "base_url": "http://h:1/v1"}), env=ENV)
    assert (b.name, b.model, b.provider.base_url) == ("anthropic", "pm", None)
    with pytest.raises(ModelConfigError, match="vision provider 'openai' needs a model name"):
        build_vision_backend("openai", None, env=ENV)
    assert build_vision_backend("openai", None,
                                env={**ENV, "OPENAI_MODEL": "general"}).model == "general"


def test_without_an_env_mapping_the_vision_model_comes_from_the_process_environment(
        monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("OPENAI_VISION_MODEL", "eyes-from-env")
    b = build_vision_backend("openai", None)
    assert (b.name, b.model, b.provider.purpose) == ("openai", "eyes-from-env", "vision")
