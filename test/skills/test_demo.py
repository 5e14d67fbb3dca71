"""The main job: ``solarian-agent demo`` tidies the simulated table, offline."""

import json

import pytest

from solarian_agent.core.episode_log import read_events
from solarian_agent.demo import main
from solarian_agent.models.rules_planner import parse_task


def test_parse_task_several_clauses():
    assert parse_task("put the red cup on the tray and the yellow paper in the bin") == [
        ("red_cup", "tray"), ("yellow_paper", "bin")]
    assert parse_task("Throw the crumpled paper into the trash.") == [("yellow_paper", "bin")]
    assert parse_task("sing a song") == []


@pytest.mark.parametrize("seed, faults", [(7, 0.0), (5, 0.4)])
def test_demo_tidies_the_table(tmp_path, capsys, seed, faults):
    rc = main(["--seed", str(seed), "--faults", str(faults), "--out", str(tmp_path),
               "--no-record", "--monitor", "none"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "OK: the table is tidy" in out
    logs = next(tmp_path.rglob("events.jsonl")).parent
    events = read_events(logs / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_started" and "run_ended" in kinds
    ended = next(e for e in events if e["kind"] == "run_ended")
    assert ended["status"] == "succeeded"
    turns = [e for e in events if e["kind"] == "planner_turn"]
    assert all((logs / t["turn"]).exists() for t in turns)
    if faults:
        assert any(e["kind"] == "skill_ended" and e["outcome"] == "failed" for e in events)
    else:
        assert len(turns) <= 6  # two pick-and-places and a check through the plan queue
    json.loads((logs / turns[0]["turn"]).read_text())


def test_demo_with_unreachable_planner_key_fails_at_start(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    rc = main(["--planner", "anthropic", "--out", str(tmp_path), "--no-record"])
    err = capsys.readouterr().err
    assert rc == 2 and "ANTHROPIC_API_KEY" in err
