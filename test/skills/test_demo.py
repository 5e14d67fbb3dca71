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
    assert "OK: the goal holds (red cup on the tray; yellow paper in the bin)" in out
    logs = next(tmp_path.rglob("events.jsonl")).parent
    events = read_events(logs / "events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["episode_started", "run_started"] and "run_ended" in kinds
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


def test_demo_records_a_compact_rosbag_with_the_graph_names(tmp_path, capsys):
    from solarian_agent.rosmsg.bag import bag_summary, read_bag

    rc = main(["--seed", "3", "--out", str(tmp_path), "--monitor", "none"])
    out = capsys.readouterr().out
    assert rc == 0, out
    bag = next(p for p in tmp_path.rglob("rosbag") if p.is_dir())
    assert bag.parent / "logs" == next(tmp_path.rglob("events.jsonl")).parent  # beside the log
    summary = bag_summary(bag)
    for cam in ("overhead", "wrist"):  # as image_transport's compressed transport names them
        assert summary[f"{cam}/image_raw/compressed"][0] == "sensor_msgs/msg/CompressedImage"
        assert f"{cam}/image_raw" not in summary
    assert summary["joint_states"] == ("sensor_msgs/msg/JointState", summary["joint_states"][1])
    assert summary["joint_states"][1] > 100
    assert summary["agent/events"][0] == "solarian_agent/msg/AgentEvent"
    img = next(m for m in read_bag(bag, ["overhead/image_raw/compressed"]))
    assert img.value.decode().data.shape == (480, 640, 3)
    kinds = [m.value.kind for m in read_bag(bag, ["agent/events"])]
    assert "run_started" in kinds and "run_ended" in kinds
    # the bag's stamps are the simulator's, started at the real time (not a fixed 2026 date)
    import time

    first = next(read_bag(bag, ["joint_states"])).t_ns * 1e-9
    assert abs(first - time.time()) < 600
    size = sum(f.stat().st_size for f in bag.iterdir())
    seconds = sum(1 for _ in read_bag(bag, ["joint_states"])) / 50.0  # joint states at 50 Hz
    assert size / seconds < 1.5e6, f"{size / seconds:.0f} bytes per simulated second"


def test_a_tidied_table_leaves_no_plan_step_pending():
    """The rules planner's plan ended with its last step ("check the table ... and finish")
    still pending after a successful run."""
    from solarian_agent.system import build_sim_system

    s = build_sim_system(seed=7)
    try:
        s.planner.message("put the red cup on the tray and the yellow paper in the bin")
        assert s.run_until(lambda: s.planner.status in ("succeeded", "failed"), 300.0)
        assert s.planner.status == "succeeded"
        steps = [(st.description, st.status) for st in s.planner.plan.steps]
        assert steps and all(status == "done" for _, status in steps), steps
    finally:
        s.shutdown()


def _demo(tmp_path, capsys, task):
    rc = main([task, "--seed", "7", "--out", str(tmp_path), "--no-record", "--monitor", "none"])
    return rc, capsys.readouterr().out


def test_demo_judges_the_task_it_was_given(tmp_path, capsys):
    rc, out = _demo(tmp_path, capsys, "put the red cup on the tray")
    assert rc == 0, out
    assert "goal as read: red cup on the tray" in out
    assert "OK: the goal holds (red cup on the tray)" in out
    assert "run ended: succeeded - done" in out  # the final summary is printed


def test_demo_asks_about_an_object_not_on_the_table_and_moves_nothing(tmp_path, capsys):
    rc, out = _demo(tmp_path, capsys, "put the blue cup on the tray")
    assert rc == 1, out
    assert "planner asks the user: There is no blue cup on the table" in out
    assert "FAILED: the planner asked a question" in out
    assert "skill_started" not in out and "  > a" not in out  # nothing was started


def test_demo_answers_a_negation_and_leaves_the_table(tmp_path, capsys):
    rc, out = _demo(tmp_path, capsys,
                    "don't put the cup on the tray; leave everything as it is")
    assert rc == 0, out
    assert "red cup left as it is" in out and "yellow paper left as it is" in out
    assert "As you asked, I did not act on: put the red cup on the tray" in out
    assert "pick_object" not in out


@pytest.mark.parametrize("argv, names", [
    ([""], "the task is empty"),
    (["   "], "the task is empty"),
    (["/cancel"], "/cancel is a command"),
    (["/reset"], "/reset is a command"),
    (["--seed", "x"], "--seed"),
    (["--seed", "-1"], "--seed"),
    (["--faults", "2"], "--faults"),
    (["--faults", "nan"], "--faults"),
    (["--timeout", "-1"], "--timeout"),
    (["--timeout", "soon"], "--timeout"),
])
def test_demo_usage_errors_are_one_line_and_exit_2(capsys, argv, names):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert names in err and len(err.strip().splitlines()) == 1, err


def test_a_second_task_in_the_same_conversation_is_planned_from_its_own_run():
    """The conversation outlives runs: the rules planner read the first run's task and checks
    and 'finished' the second task at once without moving anything."""
    from solarian_agent.system import build_sim_system

    s = build_sim_system(seed=7)
    try:
        s.planner.message("put the red cup on the tray")
        assert s.run_until(lambda: s.planner.status in ("succeeded", "failed"), 300.0)
        assert s.planner.status == "succeeded"
        s.planner.message("put the yellow paper in the bin")
        assert s.run_until(lambda: s.planner.status == "running", 5.0)
        assert s.run_until(lambda: s.planner.status in ("succeeded", "failed"), 300.0)
        assert s.planner.status == "succeeded", s.planner.summary
        truth = s.world.truth()
        assert truth["objects"]["yellow_paper"]["location"] == "bin"
        assert truth["objects"]["red_cup"]["location"] == "tray"
    finally:
        s.shutdown()
