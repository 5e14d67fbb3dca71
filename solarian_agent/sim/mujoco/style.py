"""The 3D scene's look, and its domain shift: lighting, textures, camera pose jitter.

:class:`SceneStyle` wraps the 2D renderer's :class:`~solarian_agent.sim.visual_style.VisualStyle`
(the colours, the table texture and the light gain mean the same in both backends, so a
domain-shift regime is comparable across them) and adds what only 3D has:

* ``light_tilt_deg`` / ``light_azimuth_deg`` — the key light's direction away from overhead;
* ``camera_jitter_m`` / ``camera_jitter_deg`` — how far each simulated camera sits from the
  calibration the skills use (the published ``CameraInfo`` and URDF frames stay nominal), so
  perception and grasps are tested against a miscalibrated camera.

The 2D style's pixel noise, light gradient and object textures are not drawn in 3D.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..camera import RenderError
from ..visual_style import VisualStyle


@dataclass(frozen=True)
class SceneStyle:
    visual: VisualStyle = field(default_factory=VisualStyle)
    light_tilt_deg: float = 8.0
    light_azimuth_deg: float = 210.0
    camera_jitter_m: float = 0.0
    camera_jitter_deg: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.light_tilt_deg <= 75.0:
            raise RenderError("light_tilt_deg must be in [0, 75]")
        if not math.isfinite(self.light_azimuth_deg):
            raise RenderError("light_azimuth_deg must be finite")
        if not (0.0 <= self.camera_jitter_m <= 0.05 and 0.0 <= self.camera_jitter_deg <= 10):
            raise RenderError("camera_jitter_m must be in [0, 0.05] and camera_jitter_deg in "
                              "[0, 10]")

    @classmethod
    def randomized(cls, seed: int, *, lighting: bool = False, textures: bool = False,
                   camera: bool = False) -> SceneStyle:
        """A style for the 3D domain-shift test; each flag varies one group (all ``False``
        is the default look): ``lighting`` the light's strength and direction,
        ``textures`` the table's colour and texture and the objects' colours (each keeping
        its category), ``camera`` the cameras' poses (a few mm, about a degree)."""
        rng = np.random.default_rng([int(seed), 0x3D57])
        vis = VisualStyle.randomized(seed, background=textures, appearance=textures,
                                     lighting=False)
        vis = replace(vis, object_texture="none")
        style = cls(visual=vis, seed=int(seed))
        if lighting:
            style = replace(style, visual=replace(style.visual,
                                                  light_gain=float(rng.uniform(0.7, 1.3))),
                            light_tilt_deg=float(rng.uniform(10.0, 45.0)),
                            light_azimuth_deg=float(rng.uniform(0.0, 360.0)))
        if camera:
            style = replace(style, camera_jitter_m=0.004, camera_jitter_deg=0.8)
        return style

    def camera_offset(self, camera: str) -> tuple[np.ndarray, np.ndarray]:
        """(translation m, rotation vector rad) of ``camera`` away from its calibration."""
        if self.camera_jitter_m == 0 and self.camera_jitter_deg == 0:
            return np.zeros(3), np.zeros(3)
        rng = np.random.default_rng([self.seed, 0xCA3, sum(map(ord, camera))])
        t = rng.normal(0.0, 1.0, 3)
        t *= self.camera_jitter_m / max(1e-9, float(np.linalg.norm(t)))
        r = rng.normal(0.0, 1.0, 3)
        r *= math.radians(self.camera_jitter_deg) / max(1e-9, float(np.linalg.norm(r)))
        return t, r

    def key_light_dir(self) -> np.ndarray:
        tilt, az = math.radians(self.light_tilt_deg), math.radians(self.light_azimuth_deg)
        return np.array([math.sin(tilt) * math.cos(az), math.sin(tilt) * math.sin(az),
                         -math.cos(tilt)])
