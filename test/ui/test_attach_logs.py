"""attach-logs: controller logs copied in beside the robot's recording of the same session."""

from __future__ import annotations

import json
from pathlib import Path

from solarian_agent.ui.attach_logs import attach_logs, main_attach_logs
from solarian_agent.ui.viewer import load_episode

SESSION = "0003_7f3a9c_cup_stacking"


def controller_episode(root: Path, ep: str, text: str = "") -> Path:
    logs = root / "recordings" / "controller" / SESSION / "episodes" / ep / "logs"
    (logs / "turns").mkdir(parents=True)
    (logs / "images").mkdir()
    rec = {"t": "2026-01-01T00:00:00Z", "kind": "run_started", "run_id": f"{SESSION}/{ep}",
           "task": text or "stack the cups"}
    (logs / "events.jsonl").write_text(json.dumps(rec) + "\n")
    (logs / "turns" / "0001.json").write_text('{"input": {}, "output": null}\n')
    (logs / "images" / "obs-1_cam.jpg").write_bytes(b"\xff\xd8fake")
    return logs


def robot_episode(root: Path, ep: str) -> Path:
    d = root / "recordings" / "robot" / SESSION / "episodes" / ep
    (d / "rosbag").mkdir(parents=True)
    return d


def test_attach_copies_beside_the_robot_episodes(tmp_path, capsys):
    for ep in ("000001", "000002", "000003"):
        controller_episode(tmp_path, ep)
    robot_episode(tmp_path, "000001")
    robot_episode(tmp_path, "000002")
    robot = tmp_path / "recordings" / "robot" / SESSION
    assert main_attach_logs([str(robot), "--dry-run"]) == 0
    assert "would attach logs to episode 000001" in capsys.readouterr().out
    assert not (robot / "episodes" / "000001" / "logs").exists()

    assert main_attach_logs([str(robot)]) == 0
    out = capsys.readouterr()
    assert "2 attached" in out.out and "000003: the robot did not record it" in out.err
    for ep in ("000001", "000002"):
        logs = robot / "episodes" / ep / "logs"
        assert (logs / "events.jsonl").read_text().count("run_started") == 1
        assert (logs / "turns" / "0001.json").is_file()
        assert (logs / "images" / "obs-1_cam.jpg").read_bytes() == b"\xff\xd8fake"
        assert load_episode(robot / "episodes" / ep).log_dir == logs
    assert not (robot / "episodes" / "000003").exists()
    assert not list(robot.rglob("*.attach-tmp"))
    # again: nothing to do
    assert main_attach_logs([str(robot)]) == 0
    assert "2 already there" in capsys.readouterr().out


def test_conflicts_are_left_alone_unless_forced(tmp_path, capsys):
    controller_episode(tmp_path, "000001")
    robot = robot_episode(tmp_path, "000001").parent.parent
    logs = robot / "episodes" / "000001" / "logs"
    logs.mkdir()
    (logs / "events.jsonl").write_text("something else\n")
    (logs / "notes.txt").write_text("keep me")
    assert main_attach_logs([str(robot)]) == 1
    assert "differ" in capsys.readouterr().err
    assert (logs / "events.jsonl").read_text() == "something else\n"
    rep = attach_logs(robot, force=True)
    assert rep.updated == ["000001"] and rep.ok
    assert "run_started" in (logs / "events.jsonl").read_text()
    assert (logs / "notes.txt").read_text() == "keep me"


def test_explicit_controller_dir_and_errors(tmp_path, capsys):
    other = tmp_path / "elsewhere"
    controller_episode(other, "000001")
    robot = robot_episode(tmp_path, "000001").parent.parent
    assert main_attach_logs([str(robot)]) == 2  # no controller recording beside it
    assert "no controller recording" in capsys.readouterr().err
    ctrl_session = other / "recordings" / "controller" / SESSION
    assert main_attach_logs([str(robot), "--controller", str(ctrl_session)]) == 0
    assert (robot / "episodes" / "000001" / "logs" / "events.jsonl").is_file()
    assert main_attach_logs([str(tmp_path / "nope")]) == 2
