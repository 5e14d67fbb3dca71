"""Build a model provider from its configuration.

:func:`build_provider` turns a :class:`~solarian_agent.core.config.ModelEndpointConfig` (or a
``MonitorConfig``) into a :class:`~solarian_agent.core.model_api.ModelProvider` that talks to a
model service over HTTP:

============================  ===========================================  ==================
``provider``                  class                                        key variable
============================  ===========================================  ==================
``anthropic``                 :class:`.anthropic_provider.AnthropicProvider`  ANTHROPIC_API_KEY
``openai``                    :class:`.openai_chat.OpenAIChatProvider`        OPENAI_API_KEY
``openai_responses``          :class:`.openai_responses.OpenAIResponsesProvider`  OPENAI_API_KEY
``openai_decisions``          :class:`.openai_decisions.OpenAIDecisionsProvider`  OPENAI_API_KEY
============================  ===========================================  ==================

Keys come only from the environment variable named by ``api_key_env`` (default in the table),
never from YAML; a missing or empty variable raises :class:`ModelConfigError` naming it.  One
exception: ``provider: openai`` with a ``base_url`` and no ``api_key_env`` of its own talks to a
local compatible server (vLLM, Ollama, llama.cpp), which needs no key; a placeholder is sent
when ``OPENAI_API_KEY`` is unset.

The offline providers (``rules``, ``cv``, ``scripted``) need no HTTP and are built by the
harness; asking this factory for one raises :class:`ModelConfigError` saying so.

``purpose`` is ``planner``, ``monitor``, ``vision`` or ``router``: a ``vision`` provider never
retries (a perception call is one capture read once); a ``planner`` provider also caches the
conversation prefix on Anthropic.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core.config import ModelEndpointConfig
from ..core.model_api import ModelConfigError, ModelProvider
from ..core.scrubbing import scrub
from .common import PURPOSES

log = logging.getLogger(__name__)

DEFAULT_KEY_ENV: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai_responses": "OPENAI_API_KEY",
    "openai_decisions": "OPENAI_API_KEY",
}
HTTP_PROVIDERS = tuple(DEFAULT_KEY_ENV)
OFFLINE_PROVIDERS = ("rules", "cv", "scripted")
LOCAL_SERVER_KEY = "not-needed"  # what a keyless compatible server is sent


def build_provider(
    cfg: ModelEndpointConfig,
    *,
    purpose: str,
    env: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] | None = None,
    rng: random.Random | None = None,
    stream: bool = False,
    clock: Callable[[], float] | None = None,
) -> ModelProvider:
    """The provider ``cfg`` names, ready to call; raises :class:`ModelConfigError` otherwise.

    ``cfg`` is a ``ModelEndpointConfig`` or ``MonitorConfig`` (anything with their fields).
    ``timeout_s`` is each call's default timeout, retries and the waits between them included
    (``complete(timeout_s=...)`` overrides it), ``max_retries`` the retries for planner,
    monitor and router calls.  ``env`` replaces ``os.environ`` for the key lookup; ``sleep`` /
    ``rng`` are the retry backoff's and ``clock`` the one the call's deadline is kept on
    (tests pass a recorder and a fake clock); ``stream`` asks for server-sent-event replies.
    """
    provider = str(cfg.provider or "")
    if purpose not in PURPOSES:
        raise ModelConfigError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")
    where = f"{purpose} provider {provider!r}"
    if provider in OFFLINE_PROVIDERS:
        raise ModelConfigError(
            f"{where} is an offline provider: the harness builds it (rules planner, cv monitor, "
            "scripted test double); build_provider only builds HTTP providers "
            f"({', '.join(HTTP_PROVIDERS)})")
    if provider not in HTTP_PROVIDERS:
        raise ModelConfigError(
            f"unknown {purpose} provider {provider!r}; HTTP providers are "
            f"{', '.join(HTTP_PROVIDERS)}, offline ones {', '.join(OFFLINE_PROVIDERS)}")
    model = str(cfg.model or "")
    if not model:
        raise ModelConfigError(f"{where} needs a model name (model: ...)")

    key_env = cfg.api_key_env
    base_url = cfg.base_url or None
    var = key_env or DEFAULT_KEY_ENV[provider]
    environ = os.environ if env is None else env
    key = environ.get(var, "") or ""
    if not key.strip():
        if provider == "openai" and base_url and not key_env:
            key = LOCAL_SERVER_KEY
        else:
            raise ModelConfigError(
                f"{where}: the environment variable {var} is not set; export the API key "
                f"there (keys are read from the environment only, never from the config)")
    key = key.strip()

    common: dict[str, Any] = {
        "model": model,
        "api_key": key,
        "base_url": base_url,
        "purpose": purpose,
        "max_retries": int(cfg.max_retries),
        "max_tokens": int(cfg.max_tokens),
        "timeout_s": float(cfg.timeout_s),
        "stream": stream,
        "sleep": sleep or time.sleep,
        "rng": rng,
        "clock": clock or time.monotonic,
    }
    thinking = cfg.thinking_budget
    effort = cfg.reasoning_effort
    try:
        if provider == "anthropic":
            from .anthropic_provider import MIN_THINKING_BUDGET, AnthropicProvider

            if thinking is not None and int(thinking) < MIN_THINKING_BUDGET:
                raise ModelConfigError(
                    f"{where}: thinking_budget must be at least {MIN_THINKING_BUDGET} tokens, "
                    f"not {thinking}")
            return AnthropicProvider(thinking_budget=thinking, reasoning_effort=effort,
                                     **common)
        if thinking is not None:
            log.warning("%s: thinking_budget is Anthropic's and is ignored here; use "
                        "reasoning_effort", where)
        if provider == "openai":
            from .openai_chat import OpenAIChatProvider

            return OpenAIChatProvider(reasoning_effort=effort,
                                      parallel_tool_calls=cfg.parallel_tool_calls, **common)
        if provider == "openai_responses":
            from .openai_responses import OpenAIResponsesProvider

            return OpenAIResponsesProvider(reasoning_effort=effort, **common)
        from .openai_decisions import OpenAIDecisionsProvider

        if effort is not None:
            log.warning("%s: the Decisions API takes no reasoning_effort; ignored", where)
        return OpenAIDecisionsProvider(**common)
    except ImportError as e:
        pkg = "anthropic" if provider == "anthropic" else "openai"
        raise ModelConfigError(
            f"{where} needs the {pkg} SDK: pip install 'solarian_agent[agent]' ({e.name})"
        ) from None
    except ValueError as e:
        raise ModelConfigError(scrub(f"{where}: {e}", [key])) from None
