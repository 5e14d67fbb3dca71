"""Fixtures of the MuJoCo backend's tests: one arm model, one physics world and one renderer
(one GL context) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.mujoco.world import MujocoWorld


@pytest.fixture(scope="session")
def arm() -> ArmModel:
    return ArmModel.from_urdf()


@pytest.fixture(scope="module")
def world(arm: ArmModel) -> MujocoWorld:
    return MujocoWorld(arm, seed=3)


@pytest.fixture(scope="module")
def renderer(arm: ArmModel) -> Iterator[object]:
    from solarian_agent.sim.mujoco.render import MujocoRenderer

    r = MujocoRenderer(arm)
    yield r
    r.close()
