"""Bad replies cost nothing but a clear failure: a model that never calls a
tool, one whose every call has bad arguments, a slow one and a dear one each end their episode
with the reason within the budget, never a crash or a hang.  Each model is the local server
process with a bad behaviour."""

from __future__ import annotations

import time

from solarian_agent.benchmarks.agent import AgentRun, agent_episode
from solarian_agent.benchmarks.agent_meter import Budget, load_prices

SEED = 95_000


def _episode(url: str, model: str = "local-test", timeout_s: float = 20.0,
             budget: Budget = Budget(20, 60.0, 0.0)) -> tuple[dict, float]:
    t0 = time.monotonic()
    e = agent_episode(AgentRun(planner="openai", model=model, base_url=url, budget=budget,
                               timeout_s=timeout_s), SEED, load_prices())
    return e, time.monotonic() - t0


def test_a_model_that_never_calls_a_tool_gives_up(local_server) -> None:
    e, took = _episode(local_server(behaviour="silent"))
    assert not e["success"] and e["failure"] == "gave up", e
    assert e["model_calls"] <= 20 and took < 60


def test_a_model_whose_calls_always_have_bad_arguments_is_a_bad_tool_call(local_server):
    e, took = _episode(local_server(behaviour="bad_args"))
    assert not e["success"] and e["failure"] == "bad tool call", e
    assert "not a JSON object" in e["failure_detail"] and "max_refused_in_row" in \
        e["failure_detail"]
    assert took < 60


def test_a_slow_model_times_out_within_the_seconds_budget(local_server) -> None:
    e, took = _episode(local_server(behaviour="slow:3"), timeout_s=0.5,
                       budget=Budget(20, 8.0, 0.0))
    assert not e["success"] and e["failure"] == "timeout", e
    assert set(e["model_errors"]) == {"timeout"}
    assert "(max 8)" in e["failure_detail"]
    assert took < 8 + 3 + 20  # the budget, one call in flight, building and checking


def test_max_usd_stops_a_dear_episode(local_server) -> None:
    # gpt-4.1 prices from the table; the local server reports usage as a provider would
    e, _ = _episode(local_server(), model="gpt-4.1", budget=Budget(20, 60.0, 0.001))
    assert not e["success"] and e["failure"] == "budget", e
    assert e["usd"] >= 0.001 and e["model_calls"] == 1 and "max $0.001" in e["failure_detail"]


def test_max_usd_counts_the_monitor_models_dollars_too() -> None:
    from types import SimpleNamespace

    from solarian_agent.benchmarks.agent_meter import CallRecord, MeteredProvider, Price
    from solarian_agent.core.model_api import Usage

    inner = SimpleNamespace(name="openai", model="m", max_image_side=0, reads_images=True)
    price = Price(input=1.0, cached_input=0.1, output=4.0, cache_write=1.0)  # $ per 1M
    planner = MeteredProvider(inner, "openai", price, Budget(0, 0.0, 0.01), clock=lambda: 0.0)
    monitor = MeteredProvider(inner, "openai", price, clock=lambda: 0.0)
    planner.calls.append(CallRecord(0.1, Usage(input_tokens=6000), False))  # $0.006
    monitor.calls.append(CallRecord(0.1, Usage(input_tokens=6000), False))  # $0.006
    assert not planner.over_budget()  # the planner's own $0.006 is under $0.01
    planner.shares_budget_with.append(monitor)
    assert planner.over_budget() and "$0.0120 (max $0.01)" in planner.stopped_by
    assert round(planner.episode_dollars, 6) == 0.012
