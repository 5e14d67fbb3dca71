"""The simulator's backends behind one interface: the 2D tabletop world (the default) and the
MuJoCo physics world.

:class:`~solarian_agent.sim.component.SimWorldComponent` (the sim node's core) needs a world it
can command and step (:class:`SimWorld`) and a renderer for its cameras (:class:`SimRenderer`);
both backends provide them, with the same joints, cameras, topics and services.
:func:`build_backend` makes either by name; ``mujoco`` is imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import CameraInfo

from .camera import CameraSpec, PinholeCamera
from .faults import FaultConfig, FaultInjector
from .tabletop import WorldConfig

SIM_BACKENDS: tuple[str, ...] = ("2d", "mujoco")
DEFAULT_BACKEND = "2d"


class SimWorld(Protocol):
    """What the sim component drives: joints to command and read, time to step, faults to
    inject, and the ground truth."""

    arm: ArmModel
    config: WorldConfig
    faults: FaultInjector
    joint_names: tuple[str, ...]
    seed: int
    t: float
    q: np.ndarray
    qd: np.ndarray

    def reset(self, seed: int | None = None) -> None: ...

    def command(self, positions: Mapping[str, float] | Sequence[float] | np.ndarray,
                max_velocity: float = 0.0) -> None: ...

    def control_base(self) -> dict[str, float]: ...

    def step(self, dt: float) -> None: ...

    def joint_positions(self) -> dict[str, float]: ...

    def success(self) -> bool: ...

    def truth(self) -> dict[str, Any]: ...


class SimRenderer(Protocol):
    """The cameras: their models (published as ``CameraInfo``) and their frames."""

    specs: dict[str, CameraSpec]

    @property
    def cameras(self) -> tuple[str, ...]: ...

    def camera(self, name: str) -> PinholeCamera: ...

    def camera_info(self, name: str, stamp: float = 0.0) -> CameraInfo: ...

    def render(self, name: str, world: Any) -> np.ndarray: ...


@dataclass
class SimBackend:
    name: str
    world: SimWorld
    renderer: SimRenderer

    def close(self) -> None:
        close = getattr(self.renderer, "close", None)
        if close is not None:
            close()


# the tools whose points the planner takes in the overhead image, and the height (m) of the
# surface such a point shows in each backend: the 2D world draws footprints on the table; in
# 3D the camera sees the top of the cup and the paper ball (pick) and the inside of the bin
# and the tray (place), and unprojecting at z = 0 would miss by a centimetre or more
_POINT_Z: dict[str, dict[str, float]] = {
    "2d": {},
    "mujoco": {"pick_object": 0.04, "place_at": 0.02},
}


def point_heights(name: str) -> dict[str, dict[str, float]]:
    """Per pointing tool, the ``point_z`` its binding needs in backend ``name``."""
    check_backend(name)
    return {tool: {"point_z": z} for tool, z in _POINT_Z[name].items()}


def check_backend(name: str, path: str = "sim") -> str:
    """``name`` if it is a backend, else :class:`ConfigError` naming ``path`` and the allowed
    values."""
    if name not in SIM_BACKENDS:
        raise ConfigError(path, f"{name!r} is not a simulator backend; allowed: "
                                f"{', '.join(SIM_BACKENDS)}")
    return name


def build_backend(name: str, arm: ArmModel, *, seed: int = 0,
                  faults: FaultConfig | None = None, style: Any = None) -> SimBackend:
    """The world and renderer of backend ``name`` (``2d`` or ``mujoco``).  ``style`` is the
    renderer's look (a ``VisualStyle``; for ``mujoco`` also a ``SceneStyle``).  For
    ``mujoco`` a missing OpenGL context raises
    :class:`~solarian_agent.sim.mujoco.gl.GLUnavailableError` with the reason; a missing
    ``mujoco`` package a :class:`ConfigError`."""
    check_backend(name)
    injector = FaultInjector(faults or FaultConfig(), seed)
    if name == "2d":
        from .render import Renderer, VisualStyle
        from .world import World

        return SimBackend(name, World(arm, faults=injector, seed=seed),
                          Renderer(arm, style or VisualStyle()))
    import importlib.util

    if importlib.util.find_spec("mujoco") is None:
        raise ConfigError("sim", "the mujoco backend needs the mujoco package: pip install "
                                 "'mujoco>=3.3'")
    from .mujoco import gl

    gl.probe()  # in a child process, before mujoco picks its GL platform in this one
    try:
        from .mujoco.render import MujocoRenderer
        from .mujoco.style import SceneStyle
        from .mujoco.world import MujocoWorld
    except Exception as e:  # mujoco's import fails in its GL platform's own ways
        raise gl.GLUnavailableError(f"cannot import mujoco with MUJOCO_GL={gl.platform()}: "
                                    f"{type(e).__name__}: {e}; {gl.INSTALL_HINT}") from e
    renderer = MujocoRenderer(arm, style or SceneStyle())  # GL first: fail before the build
    return SimBackend(name, MujocoWorld(arm, faults=injector, seed=seed), renderer)
