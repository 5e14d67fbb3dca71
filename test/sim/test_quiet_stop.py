"""A dead commander leaves nothing driving the simulated arm: once the joint commands go quiet
the arm joints ramp to rest within the speed and deceleration limits (never a jerk) and hold,
and the jaw keeps its last command.  Both backends share the sim component's command path."""

from __future__ import annotations

import numpy as np
import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.arm.stopping import (
    DEFAULT_COMMAND_TIMEOUT_S,
    DEFAULT_STOP_DECEL,
    SmoothStop,
    stop_step,
)
from solarian_agent.core.clock import FakeClock
from solarian_agent.sim.render import Renderer
from solarian_agent.sim.rig import DT, SimRig, quiet_after_motion
from solarian_agent.sim.world import World


def test_a_stop_step_ramps_down_and_never_reverses() -> None:
    q, v, path = 0.0, 2.5, []
    for _ in range(20):
        q2, v2 = stop_step(q, v, 0.01, 50.0)
        assert 0.0 <= v2 <= v and v - v2 <= 50.0 * 0.01 + 1e-12
        assert q2 >= q
        path.append(q2)
        q, v = q2, v2
    assert v == 0.0 and q == pytest.approx(2.5 ** 2 / (2 * 50.0))
    q, v = stop_step(1.0, -0.2, 0.01, 50.0)  # slower than one step's braking: at rest now
    assert v == 0.0 and q == pytest.approx(1.0 - 0.04 / 100)
    with pytest.raises(ValueError):
        SmoothStop(0.0)


def test_the_2d_arm_stops_smoothly_within_200_ms_of_its_commands_going_quiet() -> None:
    arm = ArmModel.from_urdf()
    rig = SimRig(World(arm, seed=5), Renderer(arm))
    still_at, q_rest, speeds = quiet_after_motion(rig)
    assert still_at <= 0.2
    # no jerk: the speed falls by at most the stop's deceleration per step, never jumps
    for a, b in zip(speeds, speeds[1:], strict=False):
        assert np.all(np.abs(b[:5]) <= np.abs(a[:5]) + 1e-9)
        assert np.all(np.abs(a[:5] - b[:5]) <= DEFAULT_STOP_DECEL * DT + 1e-6)
    assert rig.world.q[0] < 1.5 - 0.5  # far short of the dead commander's target
    rig.run(1.0)
    assert np.allclose(rig.world.q[:5], q_rest[:5])  # it holds there
    assert rig.world.target[5] == pytest.approx(0.2)  # the jaw keeps its command
    assert rig.sim.quiet_stop.trips == 1
    # a live commander again: it moves from where it stopped
    rig.command(shoulder_pan=q_rest[0] + 0.3)
    rig.run(0.5)
    assert rig.world.q[0] == pytest.approx(q_rest[0] + 0.3)


def test_a_live_commander_never_trips_the_timeout() -> None:
    arm = ArmModel.from_urdf()
    rig = SimRig(World(arm, seed=5), Renderer(arm))
    rig.command(shoulder_pan=1.5)
    rig.run(2.0)
    assert rig.world.q[0] == pytest.approx(1.5) and rig.sim.quiet_stop.trips == 0
    assert DEFAULT_COMMAND_TIMEOUT_S < 0.2 and isinstance(rig.clock, FakeClock)
