"""The stall tripwire keeps no state for the life of a run, and every key a run's providers
read is scrubbed from what the episode log writes."""

import base64
from dataclasses import replace

from solarian_agent.core.config import (
    AgentConfig,
    EventsConfig,
    ModelEndpointConfig,
    MonitorConfig,
    RuntimeConfig,
)
from solarian_agent.core.episode_log import scrub
from solarian_agent.skills.arm_skills import StallTripwire
from solarian_agent.system import register_run_secrets


class StillArm:
    def fields(self) -> dict[str, float]:
        return {"x": 100.0, "y": 0.0, "z": 50.0, "opening_mm": 20.0}


def test_stall_tripwire_state_is_bounded_over_many_actions():
    trip = StallTripwire(StillArm())  # type: ignore[arg-type]
    for i in range(1000):  # a long run: many picks and places that end by themselves
        assert trip(f"a{i}", "pick_object", 0.5) is None
        assert trip(f"a{i}", "pick_object", 1.0) is None
    assert len(trip._ref) <= trip.max_actions
    # and it still fires for the action it is watching
    assert trip("a999", "pick_object", 5.6) is not None


def test_every_providers_key_is_registered_as_a_secret():
    env = {"ANTHROPIC_API_KEY": "sk-ant-planner-0123456789abcdef",
           "OPENAI_API_KEY": "sk-openai-monitor-0123456789abcdef",
           "ROUTER_KEY": "sk-router-0123456789abcdef"}
    cfg = AgentConfig(
        planner=ModelEndpointConfig(provider="anthropic", model="m"),  # default variable
        monitor=MonitorConfig(provider="openai_responses", model="m"),
        events=EventsConfig(router=ModelEndpointConfig(provider="openai", model="m",
                                                       api_key_env="ROUTER_KEY")),
        runtime=RuntimeConfig(vision="none"))
    names = register_run_secrets(cfg, "anthropic", env)
    assert set(names) == {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ROUTER_KEY"}
    for key in env.values():
        assert scrub(f"error from {key} here") == "error from [REDACTED] here"
        # the base64 form too (an echoed Basic auth header), as the model layer's scrub
        b64 = base64.b64encode(key.encode()).decode()
        assert scrub(f"Authorization: Basic {b64}") == "Authorization: Basic [REDACTED]"
    # an offline planner registers no planner key, but the monitor's still counts
    env2 = {"OPENAI_API_KEY": "sk-openai-only-monitor-0123456789", "ANTHROPIC_API_KEY": "x" * 12}
    assert register_run_secrets(replace(cfg, events=EventsConfig()), None, env2) == \
        ["OPENAI_API_KEY"]
    assert "[REDACTED]" in scrub("sk-openai-only-monitor-0123456789")
