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

    def run(self, seconds: float) -> None:
        for _ in range(int(round(seconds / DT))):
            self.clock.advance(DT)
            self.sim.step(DT)

    def command(self, **joints: float) -> None:
        self.cmd.publish(JointCommand(stamp=self.clock.now(), name=tuple(joints),
                                      position=tuple(joints.values())))


__all__ = ["DEEP", "DT", "SimRig"]
