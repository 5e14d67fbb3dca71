"""``solarian-agent demo --sim mujoco`` tidies the physical table: the rules planner and the
cv monitor on the rendered images, the skills through the safety layer, the MuJoCo physics."""

from __future__ import annotations

from pathlib import Path

import pytest

from solarian_agent.core.episode_log import read_events
from solarian_agent.demo import main


@pytest.mark.timeout(600)  # a whole episode in MuJoCo with the cv monitor
def test_demo_tidies_the_table_in_mujoco(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    rc = main(["--sim", "mujoco", "--seed", "7", "--out", str(tmp_path), "--no-record"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "tidy-up demo (mujoco simulator)" in out
    assert "OK: the goal holds (red cup on the tray; yellow paper in the bin)" in out
    assert ("simulator truth (for the record, not used by the agent): red cup on the tray: yes; "
            "yellow paper in the bin: yes") in out
    events = read_events(next(tmp_path.rglob("events.jsonl")))
    ended = next(e for e in events if e["kind"] == "run_ended")
    assert ended["status"] == "succeeded"
    picks = [e for e in events if e["kind"] == "skill_ended" and e["skill"] == "pick_object"]
    assert picks and all(e["outcome"] in ("succeeded", "failed") for e in picks)


def test_demo_rejects_an_unknown_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--sim", "gazebo"])
    assert e.value.code == 2
    assert "invalid choice: 'gazebo'" in capsys.readouterr().err
