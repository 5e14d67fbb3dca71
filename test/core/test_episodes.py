"""Episodes a user can trust: one episode per run, sessions named by local date and time plus
what ran, ``t`` on the wall clock with the simulator's time in ``sim_t``."""

from __future__ import annotations

import datetime as dt
import json
import time

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.episode_log import Recorder, read_events, session_name
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness


def _iso(t: str) -> float:
    return dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()


def _episodes(root):
    return sorted(p.parent for p in root.rglob("events.jsonl"))


def test_session_name_is_local_date_and_time_plus_what_ran():
    when = dt.datetime(2026, 11, 3, 14, 22, 5)
    assert session_name("demo put the red cup", when) == "2026-11-03_14-22-05_demo_put_the_red_cup"
    assert session_name("ros planner", when) == "2026-11-03_14-22-05_ros_planner"
    assert session_name("!!!", when) == "2026-11-03_14-22-05_run"


def test_each_run_in_one_process_opens_its_own_episode(tmp_path):
    h = make_harness([reply("", ("finish_task", {"summary": "one", "success": True})),
                      reply("", ("finish_task", {"summary": "two", "success": True}))],
                     log_root=tmp_path)
    h.say("first task")
    assert h.run_until(lambda: h.planner.status == "succeeded", 5)
    first = h.planner.log
    h.say("second task")
    assert h.run_until(lambda: h.planner.status == "succeeded" and h.planner.log is not first, 5)
    h.recorder.close()
    logs = _episodes(tmp_path)
    assert [p.parent.name for p in logs] == ["000001", "000002"]
    for n, (log, task) in enumerate(zip(logs, ["first task", "second task"], strict=True)):
        events = read_events(log / "events.jsonl")
        kinds = [e["kind"] for e in events]
        assert kinds[0] == "episode_started" and events[0]["task"] == task
        assert kinds[-1] == "episode_ended"
        runs = [e for e in events if e["kind"] == "run_started"]
        assert [r["task"] for r in runs] == [task]  # one run, never the other's
        assert runs[0]["run_id"] == f"0001_test/00000{n + 1}"
        # each episode has its own turn 0001 (nothing overwritten), its images beside it
        turn = json.loads((log / "turns" / "0001.json").read_text())
        texts = [c.get("text", "") for m in turn["input"]["messages"] for c in m["content"]]
        assert f'Task from the operator: ⟦operator: "{task}"⟧' in texts
        files = [c["file"] for m in turn["input"]["messages"] for c in m["content"]
                 if c["type"] == "image"]
        assert files and all((log / f).is_file() for f in files)


def test_two_recorders_on_one_session_never_share_an_episode(tmp_path):
    clock = FakeClock()
    a = Recorder(tmp_path, clock, "2026-11-03_14-22-05_demo")
    b = Recorder(tmp_path, clock, "2026-11-03_14-22-05_demo")
    la = a.episode_for_run("a")
    lb = b.episode_for_run("b")
    lb2 = b.episode_for_run("b again")
    assert [la.dir.parent.name, lb.dir.parent.name, lb2.dir.parent.name] == [
        "000001", "000002", "000003"]
    assert lb.closed and not lb2.closed
    a.close()
    b.close()


def test_an_episode_opened_ahead_of_its_run_is_the_runs(tmp_path):
    rec = Recorder(tmp_path, FakeClock(), "s")
    ahead = rec.open_episode("the task")  # the demo opens it to put the bag beside it
    assert rec.episode_for_run("the task") is ahead
    assert rec.episode_for_run("next") is not ahead and ahead.closed


def test_t_is_the_wall_clock_and_sim_t_the_simulators(tmp_path):
    run = FakeClock(start=1000.0)
    wall = FakeClock(start=0.0, epoch=1_800_000_000.0)
    rec = Recorder(tmp_path, run, "s", wall=wall)
    log = rec.open_episode("t")
    run.advance(12.5)  # the simulator runs 25 times faster than the wall clock
    wall.advance(0.5)
    log.event("tick")
    rec.close()
    events = read_events(log.dir / "events.jsonl")
    started, tick, ended = events
    assert started["kind"] == "episode_started" and started["sim_t"] == 0.0
    assert started["clock"] == {"now": 1000.0, "epoch": run.epoch() - 12.5, "simulated": True}
    assert _iso(started["t"]) == 1_800_000_000.0
    assert tick["sim_t"] == 12.5 and _iso(tick["t"]) == 1_800_000_000.5
    assert ended["kind"] == "episode_ended"


def test_t_defaults_to_real_time_whatever_the_run_clock(tmp_path):
    rec = Recorder(tmp_path, FakeClock(epoch=1_790_000_000.0), "s")  # a fixed simulated start
    log = rec.open_episode()
    rec.close()
    (started, _ended) = read_events(log.dir / "events.jsonl")
    assert abs(_iso(started["t"]) - time.time()) < 600  # today, not 2026-09-21T14:13:20Z
    assert started["clock"]["epoch"] == 1_790_000_000.0


def test_a_real_clock_run_has_no_sim_t(tmp_path):
    from solarian_agent.core.clock import SystemClock

    rec = Recorder(tmp_path, SystemClock(), "s")
    log = rec.open_episode()
    log.event("x")
    rec.close()
    assert all("sim_t" not in e for e in read_events(log.dir / "events.jsonl"))


def test_run_continued_marks_the_episode_as_the_runs(tmp_path):
    h = make_harness([reply("", ("wait", {"seconds": 1.0})),
                      reply("", ("finish_task", {"summary": "ok", "success": True})),
                      reply("", ("finish_task", {"summary": "again", "success": True}))],
                     log_root=tmp_path)
    h.say("wait")
    assert h.run_until(lambda: h.planner.actions, 5)
    h.planner.continue_in(h.recorder.open_episode())
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    continued = h.planner.log
    h.say("next task")  # a new run: a new episode, not the one the old run continued in
    assert h.run_until(lambda: h.planner.log is not continued, 5)
    assert h.planner.log.dir.parent.name == "000003" and continued.closed
    events = read_events(continued.dir / "events.jsonl")
    assert [e["kind"] for e in events[:2]] == ["episode_started", "run_continued"]
    assert not any(e["kind"] == "run_started" for e in events)


def test_three_demo_runs_in_one_folder_leave_three_episodes(tmp_path, capsys):
    from solarian_agent.demo import main

    for _ in range(3):
        main(["sing a song", "--out", str(tmp_path), "--no-record", "--monitor", "none"])
    capsys.readouterr()
    logs = _episodes(tmp_path)
    assert len(logs) == 3
    run_ids = set()
    for log in logs:
        session = log.parent.parent.parent.name
        assert session.endswith("_demo_sing_a_song")
        dt.datetime.strptime(session[:19], "%Y-%m-%d_%H-%M-%S")
        events = read_events(log / "events.jsonl")
        starts = [e for e in events if e["kind"] == "run_started"]
        assert len(starts) == 1
        run_ids.add(starts[0]["run_id"])
        assert all("sim_t" in e for e in events)
        assert abs(_iso(events[0]["t"]) - time.time()) < 600
    assert len(run_ids) == 3
