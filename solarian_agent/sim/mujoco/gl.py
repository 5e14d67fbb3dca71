"""An offscreen OpenGL context for MuJoCo's renderer, opened so that it fails with the reason
and never hangs.

MuJoCo picks its GL platform from ``MUJOCO_GL`` when ``mujoco`` is first imported: ``egl``
(headless: Mesa's or a GPU driver's EGL), ``osmesa`` or ``glfw`` (needs a display).  This
module sets ``egl`` unless the variable is already set, then, before making a context in this
process, opens and renders one in a child process under a time limit: a missing library, a
display that does not answer or a driver that blocks inside ``eglInitialize`` becomes a
:class:`GLUnavailableError` naming what failed and what to install, within ``timeout_s``.
The probe's answer is kept for the process, so a second world does not pay for it again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from solarian_agent.core.errors import CoreError

GL_PLATFORMS: tuple[str, ...] = ("egl", "osmesa", "glfw")
DEFAULT_PLATFORM = "egl"
PROBE_TIMEOUT_S = 60.0
INSTALL_HINT = ("install Mesa's EGL and GL drivers (Debian: apt-get install libegl1 "
                "libegl-mesa0 libgl1-mesa-dri libgles2; or run scripts/install_gl.sh), or set "
                "MUJOCO_GL to one of " + ", ".join(GL_PLATFORMS))

_PROBE = r"""
import mujoco
ctx = mujoco.GLContext(64, 48)
ctx.make_current()
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="0.1"/></worldbody></mujoco>')
con = mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_100)
print("ok")
ctx.free()
"""

_lock = threading.Lock()
_probed: dict[tuple[str, str], str] = {}  # (platform, env fingerprint) -> "" ok | the reason


class GLUnavailableError(CoreError):
    """No OpenGL context could be opened for MuJoCo's renderer; the message says why."""


def platform() -> str:
    """The GL platform MuJoCo will use: ``MUJOCO_GL``, set to ``egl`` when unset."""
    value = os.environ.setdefault("MUJOCO_GL", DEFAULT_PLATFORM).strip().lower()
    if value not in GL_PLATFORMS:
        raise GLUnavailableError(f"MUJOCO_GL={value!r} is not one of {', '.join(GL_PLATFORMS)}")
    if value in ("egl", "osmesa"):
        # PyOpenGL must agree with MuJoCo, or it looks for GLX and a display
        os.environ.setdefault("PYOPENGL_PLATFORM", value)
    return value


def _fingerprint() -> str:
    keys = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "MUJOCO_EGL_DEVICE_ID", "EGL_PLATFORM",
            "__EGL_VENDOR_LIBRARY_FILENAMES", "__EGL_VENDOR_LIBRARY_DIRS", "LIBGL_ALWAYS_SOFTWARE",
            "DISPLAY", "LD_LIBRARY_PATH")
    return "|".join(f"{k}={os.environ.get(k, '')}" for k in keys)


def probe(timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Open and render a tiny context in a child process; raise :class:`GLUnavailableError`
    with the child's last words if it fails, or if it has not answered within ``timeout_s``
    (it is killed then).  Passing probes are remembered for this process."""
    plat = platform()
    key = (plat, _fingerprint())
    with _lock:
        known = _probed.get(key)
    if known == "":
        return
    if known:
        raise GLUnavailableError(known)
    reason = _run_probe(plat, timeout_s)
    with _lock:
        if reason == "" or not reason.startswith("no answer"):
            _probed[key] = reason  # a time-out is not remembered: the next try may pass
    if reason:
        raise GLUnavailableError(reason)


def _run_probe(plat: str, timeout_s: float) -> str:
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                              timeout=timeout_s, env=dict(os.environ), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return (f"no answer from the OpenGL ({plat}) start-up within {timeout_s:g} s: the GL "
                f"driver is blocked; {INSTALL_HINT}")
    except OSError as e:
        return f"could not start the OpenGL probe: {e}"
    if done.returncode == 0 and done.stdout.strip().endswith("ok"):
        return ""
    lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {done.returncode}"
    return f"cannot open an OpenGL context with MUJOCO_GL={plat}: {last[:300]}; {INSTALL_HINT}"


def open_context(width: int, height: int, timeout_s: float = PROBE_TIMEOUT_S) -> Any:
    """A current ``mujoco.GLContext`` of at least ``width`` x ``height`` (probed first)."""
    probe(timeout_s)
    import mujoco

    plat = platform()
    chosen = getattr(mujoco.GLContext, "__module__", "")
    if not chosen.endswith(f".{plat}"):
        raise GLUnavailableError(
            f"mujoco was imported with another GL platform ({chosen or 'none'}) before "
            f"MUJOCO_GL={plat} was set; set MUJOCO_GL in the environment, or import "
            "solarian_agent's simulator before mujoco")
    try:
        ctx = mujoco.GLContext(int(width), int(height))
        ctx.make_current()
    except Exception as e:  # the platform's own error type (EGLError, GLFWError, ...)
        raise GLUnavailableError(
            f"cannot open an OpenGL context with MUJOCO_GL={platform()}: {e}; {INSTALL_HINT}"
        ) from e
    return ctx
