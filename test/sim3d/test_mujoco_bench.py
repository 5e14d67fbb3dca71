"""The benchmark's backend rows: the full harness over both backends side by side, the 3D
domain shift, and the speed measured against the 2D renderer in the same run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solarian_agent.benchmarks import backends
from solarian_agent.cli import main as cli
from solarian_agent.sim.faults import FaultConfig


@pytest.mark.timeout(600)  # three whole episodes (two in MuJoCo): slow on a loaded machine
def test_both_backends_side_by_side_then_the_3d_domain_shift() -> None:
    # a shifted regime this seed tidies under (a failing one runs to the planner's budget)
    regimes = {"default": {}, "lighting": backends.REGIMES_3D["lighting"]}
    rows = backends.tidy_rows(("2d", "mujoco"), [1], 1, FaultConfig(), regimes)
    by = {r["name"]: r for r in rows}
    for sim in ("2d", "mujoco"):
        assert by[f"backend {sim}: harness success"]["unit"] == "%"
        assert by[f"backend {sim}: planner turns per episode"]["value"] >= 3
        assert by[f"backend {sim}: wall seconds per episode"]["value"] > 0
    assert by["backend 2d: harness success"]["baseline"] == "(the baseline)"
    two_d = by["backend 2d: wall seconds per episode"]["value"]
    assert by["backend mujoco: wall seconds per episode"]["baseline"] == f"2d {two_d:.2f} s"
    assert by["backend mujoco: harness success"]["value"] == 100.0  # seed 1, no faults
    for regime in regimes:
        for what in ("harness success", "perception accuracy"):
            row = by[f"mujoco domain shift, {regime}: {what}"]
            assert 0.0 <= row["value"] <= 100.0
    assert by["mujoco domain shift, default: perception accuracy"]["value"] == 100.0
    assert by["mujoco domain shift, lighting: harness success"]["baseline"] == "default 100.0 %"
    assert len(by) == len(rows)


def test_a_backend_that_cannot_start_gives_a_row_saying_why(repo_root: Path) -> None:
    code = ("from solarian_agent.benchmarks import backends\n"
            "from solarian_agent.sim.faults import FaultConfig\n"
            "print(backends.tidy_rows(('mujoco',), [1], 1, FaultConfig()))")
    env = {**os.environ, "MUJOCO_GL": "egl",
           "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl.json"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=repo_root, timeout=180, stdin=subprocess.DEVNULL)
    assert "'name': 'backend mujoco: (not available)'" in done.stdout, done.stderr
    assert "cannot open an OpenGL context" in done.stdout


def test_speed_rows_measure_mujoco_against_the_2d_world_on_one_core() -> None:
    rows = backends.speed_rows(seconds=0.2)
    by = {r["name"]: r for r in rows}
    phys = by["mujoco physics, simulated s per wall s"]
    assert phys["value"] > 0 and "2D world" in phys["baseline"]
    tick = by["mujoco two-camera tick, both 640x480"]
    assert tick["unit"] == "ms" and tick["value"] > 0 and "2D renderer" in tick["baseline"]
    assert "LP_NUM_THREADS=1" in tick["note"] and "1 CPU" in tick["note"]


def test_the_bench_cli_rejects_an_unknown_backend(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli(["bench", "tidy", "--sim", "unity"])
    assert e.value.code == 2 and "invalid choice: 'unity'" in capsys.readouterr().err
