"""A sim node core on a private bus, stepped by hand on a fake clock: for tests and
experiments that drive the simulated arm through its topics, as the skills do, without the rest
of the harness.  Any backend (the 2D world, MuJoCo) with its renderer.

    rig = SimRig(World(arm, seed=5), Renderer(arm))
    rig.command(gripper=0.5)
    rig.run(1.0)                  # 50 steps of 20 ms of simulated time
    states = rig.js.drain()          # every JointState it published
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import names
from ..core.clock import FakeClock
from ..core.messages import JointCommand
from ..core.transport import Bus, QoS
from .component import T_SIM_TRUTH, SimRates, SimWorldComponent

DT = 0.02
DEEP = QoS(depth=1000)  # a whole test's worth of messages, nothing dropped


class SimRig:
    """The sim core on its own :class:`Bus` with subscribers on its outputs (kept deep) and a
    joint-command publisher."""

    def __init__(self, world: Any, renderer: Any, rates: SimRates | None = None) -> None:
        self.world = world
        self.bus = Bus()
        self.clock = FakeClock()
        self.sim = SimWorldComponent(self.bus, self.clock, world, renderer, rates or SimRates())
        self.js = self.bus.subscribe(names.JOINT_STATES, names.T_JOINT_STATE, qos=DEEP)
        self.imgs = {c: self.bus.subscribe(names.image_topic(c), names.T_IMAGE, qos=DEEP)
                     for c in ("overhead", "wrist")}
        self.truth = self.bus.subscribe(names.SIM_TRUTH, T_SIM_TRUTH)
        self.cmd = self.bus.publisher(names.JOINT_COMMANDS, names.T_JOINT_COMMAND)
        self._live: JointCommand | None = None

    def run(self, seconds: float) -> None:
        """Step the sim; a live rig sends its newest command again every step, as a running
        skill does (the sim stops the arm when commands go quiet): :meth:`go_quiet` ends
        that, as a dead commander would."""
        for _ in range(int(round(seconds / DT))):
            self.clock.advance(DT)
            if self._live is not None:
                self._send(JointCommand(self.clock.now(), self._live.name,
                                        self._live.position, self._live.max_velocity))
            self.sim.step(DT)

    def command(self, **joints: float) -> None:
        self._live = JointCommand(stamp=self.clock.now(), name=tuple(joints),
                                  position=tuple(joints.values()))
        self._send(self._live)

    def _send(self, cmd: JointCommand) -> None:
        # a refused command is not sent again: the commander gives up, as a skill would
        refused = self.sim.commands_rejected
        self.cmd.publish(cmd)
        if self.sim.commands_rejected > refused:
            self._live = None

    def go_quiet(self) -> None:
        """Stop sending commands (the commander died)."""
        self._live = None


def quiet_after_motion(rig: SimRig) -> tuple[float, np.ndarray, list[np.ndarray]]:
    """Drive pan and wrist roll at full speed, then go quiet; the seconds until the arm joints
    are still, and the joint speeds of each step from the last command on."""
    rig.command(shoulder_pan=1.5, wrist_roll=2.5, gripper=0.2)
    rig.run(0.3)
    if abs(rig.world.qd[0]) <= 1.0:
        raise AssertionError(f"the arm should move fast when its commander dies: {rig.world.qd}")
    rig.go_quiet()
    t0 = rig.clock.now()
    speeds = [rig.world.qd.copy()]
    still_at = None
    for _ in range(int(0.6 / DT)):
        rig.run(DT)
        speeds.append(rig.world.qd.copy())
        if still_at is None and np.all(np.abs(rig.world.qd[:5]) < 0.05):
            still_at = rig.clock.now() - t0
    if still_at is None:
        raise AssertionError("the arm never came to rest")
    return still_at, rig.world.q.copy(), speeds


__all__ = ["DEEP", "DT", "SimRig", "quiet_after_motion"]
