"""Helpers shared by the hardware tests (a uniquely named module, unlike ``conftest``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from solarian_agent.arm.safety import ArmLimits
from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.feetech import (
    ArmController,
    ArmControllerConfig,
    FeetechArm,
    FeetechBus,
    default_so101,
)
from solarian_agent.hw.feetech.arm import ArmState
from solarian_agent.hw.feetech.simbus import SimulatedBus

# Per-answer timeout for tests: generous, so a loaded CI machine does not cause spurious
# retries; tests that exercise timeouts pay it 3 times at most.
TIMEOUT_S = 0.3


def settle(sim: SimulatedBus, bus: FeetechBus) -> None:
    """Make sure the sim processed everything sent so far: a PING is answered only after
    every earlier frame was handled (one thread, in order)."""
    bus.ping(next(iter(sim.servos)))


PERIOD = 0.02


# set by scripts/mutate.py for the whole mutmut run (its own MUTANT_UNDER_TEST changes meaning
# between the run's phases, and these settings are fixed when the test module is imported)
_MUTATING = os.environ.get("SOLARIAN_MUTATING") == "1"


def property_settings(max_examples: int) -> settings:
    """A pty property test's hypothesis settings.  Under ``make mutate``, which reruns every
    test reaching a mutant for each of the controller's ~800 mutants, it runs a fifth of the
    examples and does not shrink a failure (one failing example kills the mutant; shrinking
    over the pty takes minutes).  Fewer examples can only let a mutant live, never kill one
    that the full count would not."""
    if _MUTATING:
        return settings(max_examples=max(10, max_examples // 5), deadline=None, database=None,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=[HealthCheck.function_scoped_fixture,
                                               HealthCheck.too_slow])
    return settings(max_examples=max_examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def make(arm: FeetechArm, workspace: Any = False, **kw: Any
         ) -> tuple[ArmController, FakeClock, list[tuple[str, dict]]]:
    """A controller over the joint layer alone (workspace off) unless ``workspace`` is given;
    the workspace box has its own tests in test_controller_limits.py."""
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


class ArmPassThrough:
    """The sim's arm seen through the ``ArmPort`` protocol: the base of the tests' stand-ins
    that fail reads or writes, or record calls, on demand (they override what they change)."""

    def __init__(self, arm: FeetechArm) -> None:
        self._arm = arm

    @property
    def limits(self) -> ArmLimits:
        return self._arm.limits

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self._arm.joint_names

    @property
    def torque_enabled(self) -> bool:
        return self._arm.torque_enabled

    def read_state(self) -> ArmState:
        return self._arm.read_state()

    def write_goal(self, positions: Mapping[str, float]) -> Mapping[str, int]:
        return self._arm.write_goal(positions)

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
        self._arm.set_torque(enabled, joints)


# --------------------------------------------------------------------- the controller's tests

NAMES = default_so101().names

# what SpyArm's failing read and torque write say (the tests assert them in faults and events)
READ_ERR = "servo 1 did not answer (test)"
TORQUE_ERR = "torque write failed (test)"


class SpyArm(ArmPassThrough):
    """The sim's arm recording what the controller asks of ``set_torque`` and failing reads
    or torque writes on demand (a bus that stops answering, a torque write that does not go
    through), without the read timeouts."""

    def __init__(self, arm: FeetechArm) -> None:
        super().__init__(arm)
        self.torque_calls: list[tuple[bool, object]] = []
        self.fail_read = False
        self.fail_torque = False

    def read_state(self) -> ArmState:
        if self.fail_read:
            raise HardwareError(READ_ERR)
        return super().read_state()

    def set_torque(self, enabled: bool, joints: Sequence[str] | None = None) -> None:
        self.torque_calls.append((enabled, joints))
        if self.fail_torque:
            raise HardwareError(TORQUE_ERR)
        super().set_torque(enabled, joints)


class FailWriteArm(SpyArm):
    """A stand-in whose goal writes fail on demand (the SYNC_WRITE does not go out)."""

    fail_write = False

    def write_goal(self, positions: Mapping[str, float]) -> Mapping[str, int]:
        if self.fail_write:
            raise HardwareError("goal write failed (test)")
        return super().write_goal(positions)


def pan_with_lead(arm: FeetechArm) -> tuple[ArmController, FakeClock, float, float, float]:
    """A controller with a 0.1 s lead after its first step: shoulder_pan's start, its lead
    (max_velocity x lead_time_s) and its step (max_velocity x period)."""
    ctl, clock, _ = make(arm, lead_time_s=0.1)
    start = ctl.step().state.positions["shoulder_pan"]
    vmax = ctl.limits.as_dict()["shoulder_pan"].max_velocity
    return ctl, clock, start, vmax * 0.1, vmax * PERIOD
