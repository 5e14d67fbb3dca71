"""Leader-arm teleop over two pseudo-terminal buses: the leader (torque off, moved by hand)
on its own simulated bus steers the follower through the follower's limits, speed clamp and
e-stop; misalignment, a lost leader and the e-stop each stop it, said in sentences."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import pytest
from hw_helpers import TIMEOUT_S, settle

from solarian_agent.core.clock import FakeClock
from solarian_agent.hw.feetech import (
    ArmController,
    ArmControllerConfig,
    FeetechArm,
    FeetechArmConfig,
    default_so101,
)
from solarian_agent.hw.feetech.calibration import RAD_PER_TICK
from solarian_agent.hw.feetech.simbus import SimulatedBus
from solarian_agent.hw.feetech.teleop_cli import run_leader
from solarian_agent.hw.leader import LeaderConfig, LeaderFollower

PERIOD = 0.02
PAN = 1  # servo id of shoulder_pan


@pytest.fixture
def rig() -> Iterator[tuple[SimulatedBus, SimulatedBus, FeetechArm, FeetechArm]]:
    with SimulatedBus(speed_ticks_per_s=None) as fsim, SimulatedBus() as lsim:
        follower = FeetechArm(FeetechArmConfig(port=fsim.port_name, timeout_s=TIMEOUT_S),
                              calibration=default_so101())
        leader = FeetechArm(FeetechArmConfig(port=lsim.port_name, timeout_s=TIMEOUT_S),
                            calibration=default_so101())
        follower.connect()
        leader.connect()
        yield fsim, lsim, follower, leader
        follower.disconnect()
        leader.disconnect()


def _setup(follower: FeetechArm, leader: FeetechArm, **kw: float
           ) -> tuple[ArmController, LeaderFollower, FakeClock]:
    clock = FakeClock()
    ctl = ArmController(follower, clock, ArmControllerConfig(rate_hz=1 / PERIOD),
                        workspace=False)
    ctl.step()
    leader.set_torque(False)
    lf = LeaderFollower(lambda: leader.read_state().positions, ctl, follower.limits,
                        LeaderConfig(**kw),
                        estop_reason=lambda: ctl.latch.reason if ctl.latch.tripped else None)
    return ctl, lf, clock


def _tick(ctl: ArmController, lf: LeaderFollower, clock: FakeClock, n: int = 1):
    st = None
    for _ in range(n):
        clock.advance(PERIOD)
        st = lf.step()
        ctl.step()
    return st


def test_the_follower_follows_at_its_speed_limit(rig):
    fsim, lsim, follower, leader = rig
    ctl, lf, clock = _setup(follower, leader)
    st = _tick(ctl, lf, clock)
    assert st.state == "following" and st.message.startswith("Following: shoulder_pan +0.00")
    lsim.set_position(PAN, 2048 + 600)  # the leader's shoulder_pan turned by hand, 0.92 rad
    want = 600 * RAD_PER_TICK
    settle(fsim, follower.bus)
    fsim.clear_frames()
    seen = []
    for _ in range(60):
        _tick(ctl, lf, clock)
        settle(fsim, follower.bus)
        seen.append(fsim.goal(PAN))
    steps = [b - a for a, b in zip([2048] + seen, seen, strict=False)]
    # never more than max_velocity (1.5 rad/s) x 20 ms per tick, and it gets there
    assert max(steps) <= round(1.5 * PERIOD / RAD_PER_TICK) + 1
    assert abs(ctl.positions()["shoulder_pan"] - want) < 2 * RAD_PER_TICK


def test_a_leader_beyond_the_followers_limits_is_clipped(rig):
    fsim, lsim, follower, leader = rig
    ctl, lf, clock = _setup(follower, leader)
    _tick(ctl, lf, clock)
    for k in range(1, 40):  # moved slowly past the follower's +1.92 rad
        lsim.set_position(PAN, 2048 + 40 * k)
        _tick(ctl, lf, clock, 3)
    settle(fsim, follower.bus)
    lo, hi = follower.calibration.joint("shoulder_pan").raw_window()
    assert all(lo <= g <= hi for i, g in fsim.goal_writes() if i == PAN)
    assert ctl.positions()["shoulder_pan"] == pytest.approx(1.92, abs=2 * RAD_PER_TICK)


def test_a_leader_held_elsewhere_does_not_yank_the_follower(rig):
    fsim, lsim, follower, leader = rig
    lsim.set_position(PAN, 2048 + 520)  # 0.80 rad off
    ctl, lf, clock = _setup(follower, leader)
    st = _tick(ctl, lf, clock, 5)
    assert st.state == "waiting" and lf.commands == 0
    assert st.message == ("Bring the leader arm to the follower's pose to start following: "
                          "shoulder_pan is 0.80 rad away.")
    lsim.set_position(PAN, 2048 + 60)  # brought close: it engages
    assert _tick(ctl, lf, clock).state == "following"


def test_the_leaders_jaw_is_an_angle_like_every_joint(rig):
    """Leader and follower jaws both read LeRobot's gripper degrees (in rad): the leader's
    jaw angle becomes the follower's, and the alignment check counts it in rad."""
    fsim, lsim, follower, leader = rig
    lsim.set_position(6, 2048 + 400)  # the leader's jaw held 35 degrees open
    ctl, lf, clock = _setup(follower, leader)
    st = _tick(ctl, lf, clock, 3)
    assert st.state == "waiting"
    assert st.message.endswith("gripper is 0.61 rad away.")  # 400 * 2 pi / 4095
    lsim.set_position(6, 2048 + 100)
    st = _tick(ctl, lf, clock)
    assert st.state == "following"
    assert st.target["gripper"] == pytest.approx(100 * 2 * math.pi / 4095)
    assert "gripper +0.15 rad (" in st.message and "mm open)" in st.message


def test_the_estop_wins_and_following_needs_realigning_after_reset(rig):
    fsim, lsim, follower, leader = rig
    ctl, lf, clock = _setup(follower, leader)
    _tick(ctl, lf, clock)
    ctl.estop("operator e-stop (test)")
    lsim.set_position(PAN, 2048 + 300)
    st = _tick(ctl, lf, clock, 5)
    settle(fsim, follower.bus)
    assert st.state == "estop"
    assert st.message.startswith("E-stop is latched (operator e-stop (test)); reset it before "
                                 "commanding motion. Press z to reset it")
    assert fsim.goal(PAN) == 2048  # held
    ctl.reset_estop()
    st = _tick(ctl, lf, clock)  # the leader is 0.46 rad away now: not followed at once
    assert st.state == "waiting" and "shoulder_pan is 0.46 rad away" in st.message


def test_a_lost_leader_makes_the_follower_hold(rig):
    fsim, lsim, follower, leader = rig
    ctl, lf, clock = _setup(follower, leader, max_missed_reads=3)
    _tick(ctl, lf, clock)
    for i in range(1, 7):
        lsim.inject(i, "no_answer", count=None)
    states = [_tick(ctl, lf, clock).state for _ in range(4)]
    assert states[:2] == ["waiting", "waiting"] and states[2:] == ["lost", "lost"]
    st = lf.step()
    assert st.message.startswith("The leader arm does not answer (Servo")
    assert st.message.endswith("The follower holds.")
    assert ctl.latest.mode == "holding"


class _Keys:
    """A key stream that waits until the test lets the next key through."""

    def __init__(self) -> None:
        self.go = threading.Event()

    def read(self, n: int = 1) -> str:
        assert self.go.wait(20.0), "the leader never reported following"
        return "\x1b"


def test_run_leader_over_two_buses(rig):
    fsim, lsim, follower, leader = rig
    keys = _Keys()
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if line.startswith("Following"):
            keys.go.set()

    assert run_leader(follower, leader, keys=keys, out=out) == 0
    assert any(ln.startswith("Following: shoulder_pan +0.00 rad, shoulder_lift") for ln in lines)
    assert lines[-1].startswith("Leader teleop ended after ")
    assert not any(lsim.torque(i) for i in range(1, 7))  # the leader stays limp
