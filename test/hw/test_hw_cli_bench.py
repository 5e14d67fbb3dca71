"""The set-up CLI and the bench, end to end against the simulated bus."""

from __future__ import annotations

import io

import pytest

from solarian_agent.hw.feetech.__main__ import main


def test_cli_ping_sim(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ping", "--sim"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines()]
    assert rows[3][:2] == ["shoulder_pan", "1"] and rows[3][-1] == "ok"
    assert rows[-1][0] == "gripper" and rows[-1][-1] == "ok"


def test_cli_teleop_sim(monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("qqo\x1b"))
    assert main(["teleop", "--sim"]) == 0
    out = capsys.readouterr().out
    assert "Teleop keys" in out and "jog shoulder_pan +: shoulder_pan" in out
    assert "open the gripper:" in out and "quit:" in out


def test_cli_missing_port_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ping", "--port", "/dev/no-such-adapter"]) == 1
    assert "cannot open servo bus serial port '/dev/no-such-adapter'" in capsys.readouterr().err


def test_bench_rows() -> None:
    from solarian_agent.benchmarks import hw as bench

    rows = bench.run(iterations=30, loop_seconds=0.2)
    names = {r["name"] for r in rows}
    assert "sync_read 6 positions, mean" in names
    pos = next(r for r in rows if r["name"] == "sync_read 6 positions, mean")
    assert pos["unit"] == "ms" and pos["baseline"] == pytest.approx(0.62)
    assert all({"name", "value", "unit", "baseline"} <= set(r) for r in rows)
    by = {r["name"]: r for r in rows}
    plain = by["ArmController.run at 50 Hz, achieved"]
    health = by["ArmController.run at 50 Hz with health reads, achieved"]
    assert health["baseline"] == plain["value"]  # the loop without, from the same run
    # health reads do not cost the loop its rate (relative: a loaded machine slows both)
    assert health["value"] >= 0.8 * plain["value"]
    step = by["control step with health reads, mean"]
    assert step["baseline"] == by["control step (read+clamp+write), mean"]["value"]
