"""Shared fixtures for the simulator tests: one parsed arm model per session."""

from __future__ import annotations

import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.world import World


@pytest.fixture(scope="session")
def arm() -> ArmModel:
    return ArmModel.from_urdf()


@pytest.fixture
def world(arm: ArmModel) -> World:
    return World(arm, seed=7)
