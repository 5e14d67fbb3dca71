"""Helpers shared by the hardware tests (a uniquely named module, unlike ``conftest``)."""

from __future__ import annotations

from solarian_agent.hw.feetech import FeetechBus
from solarian_agent.hw.feetech.simbus import SimulatedBus

# Per-answer timeout for tests: generous, so a loaded CI machine does not cause spurious
# retries; tests that exercise timeouts pay it 3 times at most.
TIMEOUT_S = 0.05


def settle(sim: SimulatedBus, bus: FeetechBus) -> None:
    """Make sure the sim processed everything sent so far: a PING is answered only after
    every earlier frame was handled (one thread, in order)."""
    bus.ping(next(iter(sim.servos)))
