"""Fixtures for the hardware tests: a simulated STS3215 bus on a pty and the driver on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hw_helpers import TIMEOUT_S

from solarian_agent.core.clock import FakeClock
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


@pytest.fixture
def blocked() -> Iterator[tuple[SimulatedBus, FeetechArm, FakeClock]]:
    """An arm that cannot move: the simulated servos advance on their own clock, which this
    fixture never advances, so every goal is taken and none is reached (a blocked arm)."""
    frozen = FakeClock()
    with SimulatedBus(clock=frozen, speed_ticks_per_s=3400.0) as s:
        a = FeetechArm(FeetechArmConfig(port=s.port_name, timeout_s=TIMEOUT_S),
                       calibration=default_so101())
        a.connect()
        yield s, a, frozen
        a.disconnect()
