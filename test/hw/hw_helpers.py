"""Helpers shared by the hardware tests (a uniquely named module, unlike ``conftest``)."""

from __future__ import annotations

import os
from typing import Any

from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import ArmController, ArmControllerConfig, FeetechArm, FeetechBus
from solarian_agent.hw.feetech.simbus import SimulatedBus

# Per-answer timeout for tests: generous, so a loaded CI machine does not cause spurious
# retries; tests that exercise timeouts pay it 3 times at most.
TIMEOUT_S = 0.3


def settle(sim: SimulatedBus, bus: FeetechBus) -> None:
    """Make sure the sim processed everything sent so far: a PING is answered only after
    every earlier frame was handled (one thread, in order)."""
    bus.ping(next(iter(sim.servos)))


PERIOD = 0.02


def examples(n: int) -> int:
    """A property test's example count: ``n`` in ``make test``; a fifth of it under mutmut
    (``make mutate`` sets MUTANT_UNDER_TEST), which reruns every test reaching a mutant for each
    of the controller's ~800 mutants.  Fewer examples can only let a mutant live, never kill
    one that the full count would not."""
    return max(10, n // 5) if os.environ.get("MUTANT_UNDER_TEST") else n


def make(arm: FeetechArm, workspace: Any = False, **kw: Any
         ) -> tuple[ArmController, FakeClock, list[tuple[str, dict]]]:
    """A controller over the joint layer alone (workspace off) unless ``workspace`` is given;
    the workspace box has its own tests in test_hw_controller.py."""
    clock = FakeClock()
    events: list[tuple[str, dict]] = []
    cfg = ArmControllerConfig(rate_hz=1 / PERIOD, **kw)
    ctl = ArmController(arm, clock, cfg, on_event=lambda k, d: events.append((k, d)),
                        workspace=workspace)
    return ctl, clock, events


def tick(ctl: ArmController, clock: FakeClock, n: int = 1) -> Any:
    r = None
    for _ in range(n):
        clock.advance(PERIOD)
        r = ctl.step()
    return r
