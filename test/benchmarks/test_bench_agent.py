"""``solarian-agent bench agent``: metered product episodes, the table,
the JSON with every field, the results file runs are appended to, the plot, usage errors,
Ctrl-C keeping the finished episodes, and the price table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from solarian_agent.benchmarks import agent_cli
from solarian_agent.benchmarks.agent_meter import estimate_usage, load_prices
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.model_api import Message, ModelReply, ModelRequest, ToolDef

EPISODE_FIELDS = {"model", "seed", "success", "claimed", "verified", "truth", "failure",
                  "failure_detail", "turns", "model_calls", "monitor_calls", "input_tokens",
                  "cached_input_tokens", "cache_write_tokens", "output_tokens",
                  "tokens_estimated", "usd", "wall_s", "latency_p50_s", "latency_p95_s",
                  "latencies_s", "prices_date", "monitor_model_calls", "monitor_input_tokens",
                  "monitor_cached_input_tokens", "monitor_output_tokens", "monitor_usd"}
ROW_FIELDS = {"model", "episodes", "success", "success_pct", "turns", "monitor_calls",
              "input_tokens", "cached_input_tokens", "output_tokens", "tokens_estimated",
              "usd_per_episode", "wall_s", "latency_p50_s", "latency_p95_s", "failures"}


def test_rules_planner_json_results_file_and_plot(tmp_path: Path, capsys) -> None:
    results, plot = tmp_path / "r.jsonl", tmp_path / "p.html"
    args = ["--seeds", "2", "--results", str(results), "--plot", str(plot)]
    assert agent_cli.main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == [95_000, 95_001] and not out["interrupted"]
    for e in out["episodes"]:
        assert set(e) >= EPISODE_FIELDS
        assert e["success"] and e["verified"] and e["truth"]
        assert e["tokens_estimated"] and e["input_tokens"] > 1000
        assert e["cached_input_tokens"] > 0  # the prefix shared with the previous request
        assert e["monitor_calls"] > 0 and e["turns"] >= 3
    (row,) = out["summary"]
    assert set(row) >= ROW_FIELDS and row["success"] == 2
    assert agent_cli.main(args) == 0  # a second run is appended beside the first
    table = capsys.readouterr().out
    assert "rules:rules-v1" in table and "2/2 (100 %)" in table and "~ estimated" in table
    assert len(results.read_text().splitlines()) == 2
    assert "rules:rules-v1" in plot.read_text() and "<svg" in plot.read_text()


def test_two_jobs_run_the_same_seeds_in_worker_processes(capsys) -> None:
    assert agent_cli.main(["--seeds", "2", "--jobs", "2", "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert [e["seed"] for e in out["episodes"]] == [95_000, 95_001]  # in seed order
    assert all(e["success"] and e["verified"] and e["truth"] for e in out["episodes"])
    assert out["summary"][0]["success"] == 2
    assert "2/2 episodes, 2 succeeded" in cap.err  # progress on stderr


def test_a_local_server_run_prints_the_table_with_reported_usage(tmp_path, capsys,
                                                                 local_server) -> None:
    url = local_server("")
    assert agent_cli.main(["--planner", "openai", "--model", "local-test", "--base-url", url,
                           "--seeds", "1", "--results", str(tmp_path / "r.jsonl")]) == 0
    table = capsys.readouterr().out
    assert "openai:local-test" in table and "1/1 (100 %)" in table
    assert "no price" in table and "~" not in table.split("\n")[2]


@pytest.mark.parametrize("argv, says", [
    (["--seeds", "0"], "--seeds"),
    (["--faults", "grasp=2"], "probability"),
    (["--planner", "openai"], "needs --model"),
    (["--base-url", "http://x"], "--planner openai"),
    (["--max-usd", "-1"], "--max-usd"),
    (["--monitor", "model"], "--monitor model asks the run's model"),
])
def test_bad_values_are_one_line_usage_errors(argv, says, capsys) -> None:
    with pytest.raises(SystemExit) as ex:
        agent_cli.main(argv)
    assert ex.value.code == 2
    assert says in capsys.readouterr().err


def test_ctrl_c_keeps_the_finished_episodes(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "solarian_agent.cli", "bench", "agent",
                          "--seeds", "20", "--results", str(results), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert p.stderr is not None
        for line in p.stderr:
            if "1/20 episodes" in line:
                break
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    assert p.returncode == 130, err
    rec = json.loads(out)
    assert rec["interrupted"] and 1 <= len(rec["episodes"]) < 20
    assert json.loads(results.read_text())["episodes"] == rec["episodes"]


def test_the_price_table_is_validated_with_its_yaml_path(tmp_path: Path) -> None:
    table = load_prices()
    assert table.date and table.price("gpt-4.1") is not None
    bad = tmp_path / "p.yaml"
    bad.write_text("date: '2025-01-01'\nmodels:\n  m: {input: -1, cached_input: 0, "
                   "output: 1}\n")
    with pytest.raises(ConfigError, match=r"models\.m\.input"):
        load_prices(bad)
    bad.write_text("models: {}\n")
    with pytest.raises(ConfigError, match="date"):
        load_prices(bad)


def test_an_estimate_counts_the_shared_prefix_as_cached() -> None:
    tools = (ToolDef("t", "x" * 8000, {"type": "object"}),)
    first = ModelRequest("s" * 400, (Message.user("task"),), tools)
    second = ModelRequest(first.system, (*first.messages, Message.user("more")), tools)
    reply = ModelReply("ok")
    a = estimate_usage(first, reply, "openai", None)
    b = estimate_usage(second, reply, "openai", first)
    assert a.cache_read_tokens == 0 and a.input_tokens > 2000
    assert b.cache_read_tokens == a.input_tokens and b.input_tokens == 1  # "more": 1 token


def test_the_meter_reads_images_as_its_provider_does_now() -> None:
    from solarian_agent.benchmarks.agent_meter import MeteredProvider
    from solarian_agent.models.rules_planner import RulesPlanner

    inner = RulesPlanner()
    meter = MeteredProvider(inner, "openai")
    assert meter.reads_images
    inner.reads_images = False  # as a provider whose server turned out to take no images
    assert not meter.reads_images
