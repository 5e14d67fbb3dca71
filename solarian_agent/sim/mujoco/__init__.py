"""The MuJoCo backend of the simulator: the SO-101 tidying a table in 3D physics.

* :mod:`.urdf_mjcf` — the arm's MJCF generated from ``urdf/so101.urdf``;
* :mod:`.scene` — the table, cup, paper ball, tray and bin around it, laid out per seed as the
  2D world lays them out;
* :mod:`.world` — ``MujocoWorld``: physics, servos, contact grasps, faults, truth;
* :mod:`.render` / :mod:`.style` — the overhead and wrist cameras rendered offscreen, and the
  3D domain shift (lighting, textures, camera pose jitter);
* :mod:`.gl` — the GL context, opened so that it fails with a reason and never hangs.

MuJoCo reads ``MUJOCO_GL`` when it is first imported: importing this package sets it to
``egl`` (headless) unless it is already set.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
if os.environ["MUJOCO_GL"].strip().lower() in ("egl", "osmesa"):
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"].strip().lower())
