"""The MuJoCo arm draws the published meshes when they are cached, its boxes otherwise."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from solarian_agent.arm.description import mesh_dir
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.mujoco.urdf_mjcf import arm_mjcf, read_urdf

ROOT = Path(__file__).resolve().parents[2]


def _ensure_meshes() -> Path:
    """The cache, fetched by scripts/fetch_meshes.py if needed; under CI a failed fetch fails
    the test (never a silent skip), elsewhere it skips."""
    spec = importlib.util.spec_from_file_location("fetch_meshes",
                                                  ROOT / "scripts" / "fetch_meshes.py")
    assert spec is not None and spec.loader is not None
    fetch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetch)
    try:
        return Path(fetch.ensure(mesh_dir()))
    except fetch.FetchError as e:
        if os.environ.get("CI") == "true" or os.environ.get("SOLARIAN_REQUIRE_ROS") == "1":
            pytest.fail(f"the SO-101 meshes are required here and could not be had: {e}")
        pytest.skip(f"no meshes: {e}")


def test_mesh_visuals_never_collide_and_boxes_do(arm: ArmModel) -> None:
    robot = read_urdf(arm.urdf_path)
    mjcf = arm_mjcf(robot, mesh_dir=_ensure_meshes())
    assert len(mjcf.meshes) == 13  # the parts the URDF names
    visuals = [g for b in mjcf.bodies for g in b.iter("geom") if g.get("type") == "mesh"]
    assert visuals and all(g.get("contype") == "0" and g.get("conaffinity") == "0"
                           for g in visuals)


def test_without_meshes_the_collision_boxes_are_drawn(arm: ArmModel, tmp_path: Path) -> None:
    robot = read_urdf(arm.urdf_path)
    mjcf = arm_mjcf(robot, mesh_dir=tmp_path)
    assert mjcf.meshes == []
    geoms = [g for b in mjcf.bodies for g in b.iter("geom")]
    assert not [g for g in geoms if g.get("type") == "mesh"]
    n_boxes = sum(len(ln.collisions) for ln in robot.links.values()
                  if any(v.kind == "mesh" for v in ln.visuals))
    drawn = [g for g in geoms if g.get("contype") == "0" and g.get("type") == "box"]
    assert len(drawn) >= n_boxes
