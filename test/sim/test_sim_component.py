"""The sim world on the bus: joint states, images, camera info, truth, commands, services."""

from __future__ import annotations

import numpy as np
import pytest

from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.core import names
from solarian_agent.core.messages import CameraInfo, Image, JointCommand, JointState
from solarian_agent.sim.component import (
    SimRates,
)
from solarian_agent.sim.ideal import run_ideal_episode
from solarian_agent.sim.render import Renderer
from solarian_agent.sim.rig import SimRig
from solarian_agent.sim.world import World


class Rig(SimRig):
    def __init__(self, arm: ArmModel, rates: SimRates = SimRates()) -> None:
        super().__init__(World(arm, seed=5), Renderer(arm), rates)


@pytest.fixture
def rig(arm: ArmModel) -> Rig:
    return Rig(arm)


def test_publishes_states_images_info_and_truth_at_their_rates(rig: Rig) -> None:
    rig.run(1.0)
    states: list[JointState] = rig.js.drain()
    assert len(states) == 50
    assert states[-1].name == rig.world.joint_names
    assert states[-1].position == pytest.approx(tuple(rig.world.q))
    assert states[-1].stamp == rig.clock.now()
    for cam, (w, h) in {"overhead": (640, 480), "wrist": (480, 360)}.items():
        frames: list[Image] = rig.imgs[cam].drain()
        assert len(frames) == 10
        assert [f.seq for f in frames] == list(range(1, 11))
        assert all(not f.data.flags.writeable for f in frames)
        assert (frames[0].width, frames[0].height) == (w, h)
        assert frames[0].frame_id == f"{cam}_camera_optical"
        assert frames[1].stamp - frames[0].stamp == pytest.approx(0.1)
    # camera_info is latched: a late subscriber still gets it
    late = rig.bus.subscribe(names.camera_info_topic("overhead"), names.T_CAMERA_INFO)
    info: CameraInfo = late.latest()
    assert info is not None and info.k[0] == 680.0 and info.width == 640
    truth = rig.truth.latest()
    assert isinstance(truth, dict) and set(truth["objects"]) == {"red_cup", "yellow_paper"}


def test_joint_commands_move_the_arm_within_limits_and_speed(rig: Rig) -> None:
    rig.command(shoulder_pan=5.0, gripper=0.5)  # pan beyond its limit; the jaw in rad
    rig.run(0.1)
    vmax = rig.world.arm.limits["shoulder_pan"].velocity
    assert rig.world.q[0] == pytest.approx(min(vmax * 0.1, 1.91986))  # the URDF limit
    rig.run(3.0)
    assert rig.world.q[0] == pytest.approx(1.91986)
    assert rig.world.q[5] == pytest.approx(0.5)
    # the first command, then the rig's live resend on each of the 155 steps
    assert rig.sim.commands_received == 1 + 155 and rig.sim.commands_rejected == 0


def test_bad_commands_are_refused_and_counted(rig: Rig) -> None:
    rig.command(elbow=0.3)
    rig.command(shoulder_pan=float("nan"))
    rig.cmd.publish(JointCommand(stamp=0.0, name=("shoulder_pan",), position=(0.1, 0.2)))
    rig.run(0.2)
    assert rig.sim.commands_rejected == 3
    assert "elbow" in rig.sim.last_rejection or "positions" in rig.sim.last_rejection
    assert tuple(rig.world.q) == pytest.approx(rig.world.config.home)


def test_reset_service_reseeds_the_world(rig: Rig) -> None:
    before = rig.world.truth()["objects"]
    rig.command(shoulder_pan=1.0)
    rig.run(0.2)
    rig.go_quiet()  # the commander gone: only the sim's own memory of the goal is left
    ans = rig.bus.call(names.SIM_RESET, {"seed": 99})
    assert ans["ok"] and ans["seed"] == 99
    assert rig.world.truth()["objects"] != before and rig.world.at_home()
    rig.run(0.2)
    assert rig.world.at_home()  # the old command does not come back after a reset
    assert rig.bus.call(names.SIM_RESET, None)["seed"] == 100
    bad = rig.bus.call(names.SIM_RESET, {"seed": "x"})
    assert not bad["ok"] and "seed" in bad["message"]


def test_inject_fault_service(rig: Rig) -> None:
    ok = rig.bus.call(names.SIM_INJECT_FAULT, {"kind": "grasp_fail", "count": 2})
    assert ok["ok"]
    bad = rig.bus.call(names.SIM_INJECT_FAULT, {"kind": "meteor"})
    assert not bad["ok"] and "meteor" in bad["message"]
    bad = rig.bus.call(names.SIM_INJECT_FAULT, "grasp_fail")
    assert not bad["ok"] and "mapping" in bad["message"]


def test_a_frozen_camera_repeats_its_old_frame(rig: Rig) -> None:
    rig.run(0.5)
    rig.imgs["overhead"].drain()
    ans = rig.bus.call(names.SIM_INJECT_FAULT,
                       {"kind": "camera_freeze", "camera": "overhead", "duration_s": 0.5})
    assert ans["ok"]
    rig.command(shoulder_pan=0.8)
    rig.run(0.5)
    frozen: list[Image] = rig.imgs["overhead"].drain()
    assert len(frozen) == 5
    assert len({f.seq for f in frozen}) == 1 and len({f.stamp for f in frozen}) == 1
    assert all(f is frozen[0] for f in frozen)
    wrist = rig.imgs["wrist"].drain()
    assert len({f.seq for f in wrist}) == len(wrist)  # the other camera keeps going
    rig.run(0.3)
    after: list[Image] = rig.imgs["overhead"].drain()
    assert after[-1].seq == frozen[0].seq + len(after)
    assert not np.array_equal(after[-1].data, frozen[0].data)  # the arm moved meanwhile
    assert rig.world.faults.counts["camera_freeze"] == 1


def test_rates_are_validated() -> None:
    with pytest.raises(ValueError, match="wrist_hz"):
        SimRates(wrist_hz=-1.0)


def test_joint_states_carry_velocities(rig: Rig) -> None:
    rig.command(shoulder_pan=1.0)
    rig.run(0.2)
    last: JointState = rig.js.drain()[-1]
    vmax = rig.world.arm.limits["shoulder_pan"].velocity
    assert last.velocity[0] == pytest.approx(vmax)
    assert last.velocity[1] == pytest.approx(0.0)


def test_the_ideal_controller_runs_through_the_component(arm: ArmModel) -> None:
    rig = Rig(arm)
    first = run_ideal_episode(rig.world, 1, step=rig.sim.step)
    before = rig.sim.frames_published["overhead"]
    # the world is reset directly (not via sim/reset): the schedules must restart
    second = run_ideal_episode(rig.world, 2, step=rig.sim.step)
    assert first.success and second.success
    assert rig.sim.frames_published["overhead"] - before >= int(second.sim_time_s * 10) - 1
    for _ in range(6):  # the truth goes out at 10 Hz: one more period shows the final state
        rig.sim.step(0.02)
    assert rig.truth.latest()["success"]
