"""Without an OpenGL context the MuJoCo backend fails at start-up with the reason, and never
hangs: each case runs in a child process (MuJoCo picks its GL platform once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solarian_agent.sim.mujoco import gl

# glvnd finds no EGL vendor library: as on a machine without Mesa's EGL
NO_EGL = {"MUJOCO_GL": "egl", "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl.json"}
BUILD = """
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.backend import build_backend
from solarian_agent.sim.mujoco.gl import GLUnavailableError
try:
    build_backend("mujoco", ArmModel.default())
except GLUnavailableError as e:
    print("GLUnavailableError:", e)
else:
    print("started")
"""


def _run(code: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    full.update(env)
    # bounded: a hang would fail the test through the timeout, never stall the suite
    return subprocess.run([sys.executable, *code], capture_output=True, text=True, env=full,
                          cwd=cwd, timeout=180, stdin=subprocess.DEVNULL)


def test_without_egl_the_backend_fails_at_start_up_with_the_reason(repo_root: Path) -> None:
    done = _run(["-c", BUILD], NO_EGL, repo_root)
    out = done.stdout.strip()
    assert out.startswith("GLUnavailableError: cannot open an OpenGL context with "
                          "MUJOCO_GL=egl"), done.stdout + done.stderr
    assert "EGL" in out and "apt-get install libegl1" in out


def test_an_unknown_gl_platform_is_named_with_the_allowed_ones(repo_root: Path) -> None:
    done = _run(["-c", BUILD], {"MUJOCO_GL": "vulkan"}, repo_root)
    assert "MUJOCO_GL='vulkan' is not one of egl, osmesa, glfw" in done.stdout, done.stderr


def test_the_demo_says_why_in_one_line_and_exits_1(repo_root: Path, tmp_path: Path) -> None:
    done = _run(["-m", "solarian_agent.cli", "demo", "--sim", "mujoco", "--no-record",
                 "--out", str(tmp_path)], NO_EGL, repo_root)
    assert done.returncode == 1, done.stdout + done.stderr
    err = [ln for ln in done.stderr.splitlines() if ln.startswith("solarian-agent demo:")]
    assert len(err) == 1 and "the mujoco simulator cannot start" in err[0]
    assert "Traceback" not in done.stderr


def test_a_probe_that_does_not_answer_in_time_is_an_error_not_a_hang(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a real child process that cannot finish importing mujoco within 10 ms: it is killed
    monkeypatch.setattr(gl, "_probed", {})
    with pytest.raises(gl.GLUnavailableError, match=r"no answer .* within 0.01 s"):
        gl.probe(timeout_s=0.01)
    assert gl._probed == {}  # a time-out is not remembered: the next try may pass


def test_a_passing_probe_is_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gl, "_probed", {})
    gl.probe()
    assert list(gl._probed.values()) == [""]
    monkeypatch.setattr(gl, "_run_probe", lambda *a: pytest.fail("probed twice"))
    gl.probe()
