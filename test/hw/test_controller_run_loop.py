"""ArmController.run: paced by the clock, a late step caught up at once, overruns counted and
their missed ticks skipped, a stop obeyed without sleeping out the period."""

from __future__ import annotations

import threading

import pytest
from hw_helpers import PERIOD, make

from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import ArmController, ArmControllerConfig, FeetechArm
from solarian_agent.hw.feetech.controller import ArmReading
from solarian_agent.hw.feetech.simbus import SimulatedBus


def test_run_loop_paces_with_the_clock(sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, _ = make(arm)
    t0 = clock.now()
    ctl.run(threading.Event(), max_steps=10)
    assert ctl.steps == 10 and clock.now() == pytest.approx(t0 + 10 * PERIOD)


P64 = 1 / 64  # a period that is exact in binary: clock sums are exact, boundaries sharp


class _LoopClock(FakeClock):
    """FakeClock for ``run()``: ``sleep_until`` jumps to ``t``, except that, as SystemClock's
    ``stop.wait`` does, it returns at once when ``stop`` is set."""

    def sleep_until(self, t: float, stop: threading.Event | None = None) -> None:
        if stop is not None and stop.is_set():
            return
        super().sleep_until(t, stop)


def _timed_steps(arm: FeetechArm, costs: list[float], stop_after: int | None = None,
                 stop: threading.Event | None = None
                 ) -> tuple[ArmController, _LoopClock, list[float]]:
    """A 64 Hz controller whose n-th step takes ``costs[n]`` seconds of the clock; the times
    the steps began are returned in the list (filled by ``run``)."""
    clock = _LoopClock()
    ctl = ArmController(arm, clock, ArmControllerConfig(rate_hz=64.0), workspace=False)
    real_step, starts = ctl.step, list[float]()

    def step() -> ArmReading:
        starts.append(clock.now())
        r = real_step()
        clock.advance(costs[len(starts) - 1])
        if stop is not None and len(starts) == stop_after:
            stop.set()
        return r

    ctl.step = step  # type: ignore[method-assign]
    return ctl, clock, starts


def test_run_catches_up_a_step_at_most_one_period_late(sim: SimulatedBus,
                                                       arm: FeetechArm) -> None:
    """A step within its period, then one a whole period late: no overrun, the missed tick
    runs at once and the loop is back on its grid."""
    ctl, clock, starts = _timed_steps(arm, [P64 / 2, 2 * P64, 0.0, 0.0])
    t0 = clock.now()
    ctl.run(threading.Event(), max_steps=4)
    assert ctl.overruns == 0
    assert starts == [t0, t0 + P64, t0 + 3 * P64, t0 + 3 * P64]
    assert clock.now() == t0 + 4 * P64


def test_run_counts_overruns_and_skips_the_missed_ticks(
        sim: SimulatedBus, arm: FeetechArm) -> None:
    ctl, clock, starts = _timed_steps(arm, [3 * P64, 0.0, 3 * P64, 0.0, 0.0])
    t0 = clock.now()
    ctl.run(threading.Event(), max_steps=5)
    assert ctl.overruns == 2
    # after an overrun the next step comes one period after it ended, never in a burst
    assert starts == [t0, t0 + 3 * P64, t0 + 4 * P64, t0 + 7 * P64, t0 + 8 * P64]
    assert clock.now() == t0 + 9 * P64


def test_run_returns_on_stop_without_sleeping_out_the_period(sim: SimulatedBus,
                                                             arm: FeetechArm) -> None:
    stop = threading.Event()
    ctl, clock, starts = _timed_steps(arm, [0.0, 0.0, 0.0], stop_after=2, stop=stop)
    t0 = clock.now()
    ctl.run(stop)
    assert ctl.steps == 2 and starts == [t0, t0 + P64]
    assert clock.now() == t0 + P64  # stopped during the step: no wait for the next tick
