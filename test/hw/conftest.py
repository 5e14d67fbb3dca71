"""Fixtures for the hardware tests: a simulated STS3215 bus on a pty and the driver on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hw_helpers import TIMEOUT_S

from solarian_agent.hw.feetech import FeetechArm, FeetechArmConfig, FeetechBus, default_so101
from solarian_agent.hw.feetech.simbus import SimulatedBus


@pytest.fixture
def sim() -> Iterator[SimulatedBus]:
    with SimulatedBus(speed_ticks_per_s=None) as s:
        yield s


@pytest.fixture
def bus(sim: SimulatedBus) -> Iterator[FeetechBus]:
    b = FeetechBus(sim.port_name, timeout_s=TIMEOUT_S, retries=2)
    b.connect()
    yield b
    b.disconnect()


@pytest.fixture
def arm(sim: SimulatedBus) -> Iterator[FeetechArm]:
    a = FeetechArm(FeetechArmConfig(port=sim.port_name, timeout_s=TIMEOUT_S),
                   calibration=default_so101())
    a.connect()
    yield a
    a.disconnect()

