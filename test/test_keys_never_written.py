"""A run with a real provider over HTTP: the API key never appears in anything the run writes,
and every planner_turn records latency, usage and the model."""

from dataclasses import replace

from solarian_agent.core.config import load_agent_config
from solarian_agent.core.episode_log import read_events
from solarian_agent.core.planner import InlineCaller
from solarian_agent.system import build_sim_system, default_config_path
from solarian_agent.testing.fake_model_server import FakeModelServer, HTTPError, Reply, ToolUse

KEY = "sk-ant-test-0123456789-SECRET-abcdefghij"


def test_key_never_reaches_logs_turns_or_events(tmp_path, monkeypatch):
    monkeypatch.setenv("SOLARIAN_TEST_KEY", KEY)
    with FakeModelServer(api_key=KEY) as server:
        server.add(
            Reply(text="checking", tool_calls=[ToolUse("verify_state", {})]),
            HTTPError(429, "slow down", retry_after=0.0),
            Reply(text="done", tool_calls=[ToolUse("finish_task", {"summary": "checked",
                                                                   "success": True})]),
        )
        cfg = load_agent_config(default_config_path())
        cfg = replace(cfg, monitor=None, planner=replace(
            cfg.planner, provider="anthropic", model="claude-test",
            api_key_env="SOLARIAN_TEST_KEY", base_url=server.anthropic_base_url, timeout_s=10.0))
        system = build_sim_system(config=cfg, seed=3, log_root=tmp_path, caller=InlineCaller())
        system.planner.message("check the table")
        assert system.run_until(lambda: system.planner.status == "succeeded", 120)
        system.shutdown()
        assert server.remaining == 0
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "events.jsonl" for p in written)
    for p in written:
        assert KEY.encode() not in p.read_bytes(), p
    events = read_events(next(tmp_path.rglob("events.jsonl")))
    turns = [e for e in events if e["kind"] == "planner_turn"]
    assert len(turns) == 2
    for t in turns:
        assert t["model"] and t["usage"]["input_tokens"] >= 0 and t["latency_s"] > 0
