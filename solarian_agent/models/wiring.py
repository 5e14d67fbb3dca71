"""What the configuration names, built over the model providers: the planner's vision backend
and its ``observe_scene`` observer, the monitor's vision backend, the event router.

These choose implementations (the offline classical-CV backend, or an HTTP provider from
:func:`.factory.build_provider` wrapped in the model-backed vision backend), so they live above
both ``perception/`` (the backends themselves) and the provider factory: perception never
imports a model provider, and the test harness builds a planner without importing the
composition root (``system.py``, which pulls in the simulator).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..core.clock import Clock
from ..core.config import AgentConfig, EventsConfig, ModelEndpointConfig, MonitorConfig
from ..core.errors import ConfigError
from ..core.routing import Router
from ..core.transport import Bus
from ..core.vision import VisionBackend
from ..perception.cv_monitor import CvVisionBackend
from ..perception.observe_scene import SceneObserver, effective_vision
from ..perception.vision import ModelVisionBackend
from .factory import build_provider

# ``runtime.vision`` names an HTTP provider by its command-line spelling
_VISION_PROVIDERS = {"openai-responses": "openai_responses"}


def build_vision_backend(vision: str, cfg: AgentConfig | None = None,
                         env: Mapping[str, str] | None = None) -> VisionBackend | None:
    """The backend for ``vision`` (``none`` → None).  HTTP backends are built with purpose
    ``vision`` (no retries); the key stays in the environment."""
    if vision == "none":
        return None
    if vision == "cv":
        return CvVisionBackend()
    if vision == "scripted":
        raise ConfigError("agent.runtime.vision", "the scripted vision backend is built by "
                                                  "tests, not from configuration")
    environ = os.environ if env is None else env
    provider = _VISION_PROVIDERS.get(vision, vision)
    # None would read the same: it is only tested with ``not model`` or replaced, and
    # build_provider reads ``cfg.model or ""`` (the same "needs a model name" refusal)
    model = ""
    if provider.startswith("openai"):
        model = environ.get("OPENAI_VISION_MODEL") or environ.get("OPENAI_MODEL") or ""
    if not model and cfg is not None and cfg.monitor is not None:
        model = cfg.monitor.model
    if not model and cfg is not None:
        model = cfg.planner.model
    endpoint = ModelEndpointConfig(provider=provider, model=model,
                                   base_url=(cfg.planner.base_url if cfg and
                                             cfg.planner.provider == provider else None))
    return ModelVisionBackend(build_provider(endpoint, purpose="vision", env=environ))


def planner_vision(bus: Bus, clock: Clock, cfg: AgentConfig, *, vision: str | None = None,
                   backend: VisionBackend | None = None
                   ) -> tuple[VisionBackend | None, SceneObserver | None]:
    """The planner's vision parts, wired where the system is built: the backend (``backend``,
    else the one ``runtime.vision`` / ``vision`` names) and, when a vision is configured, the
    ``observe_scene`` observer on its camera.  A non-none vision needs a camera and a planner:
    :class:`ConfigError` at start-up otherwise (:func:`effective_vision`)."""
    name, camera = effective_vision(cfg, vision)
    if backend is None and name != "none":
        backend = build_vision_backend(name, cfg)
    observer = None
    if backend is not None and camera:
        observer = SceneObserver.on_bus(bus, clock, backend, camera)
    return backend, observer


def build_monitor_backend(config: MonitorConfig) -> VisionBackend:
    """The vision backend ``monitor.provider`` names: ``cv`` (offline), or an HTTP provider
    (typed answers over :class:`ModelVisionBackend`).  ``scripted`` is built by tests.  Raises
    ConfigError / ModelConfigError."""
    if config.provider == "cv":
        return CvVisionBackend()
    if config.provider == "scripted":
        raise ConfigError("agent.monitor.provider", "the scripted monitor is built by tests; "
                                                    "pass backend=")
    return ModelVisionBackend(build_provider(config, purpose="monitor"),
                              max_tokens=config.max_tokens)


def build_router(events: EventsConfig) -> Router:
    """The planner's event router from ``agent.events``: rules only, or rules plus the
    configured router model (built through the model factory; needs the provider's key in the
    environment)."""
    endpoint = events.router
    if endpoint is None:
        return Router()
    return Router(model=build_provider(endpoint, purpose="router"),
                  timeout_s=float(endpoint.timeout_s), max_tokens=min(endpoint.max_tokens, 400))


__all__ = ["build_monitor_backend", "build_router", "build_vision_backend", "planner_vision"]
