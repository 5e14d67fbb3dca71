"""The planner's heartbeat, and what the skills node does when it stops (ROS-free).

In one process the planner and the executor live and die together.  As separate nodes they do
not: a planner killed or hung mid-goal would leave its skill running with nobody to judge it,
finish it or stop it (an action server cannot see that its client has gone).  So the planner
publishes ``agent/heartbeat`` from its own loop (:class:`HeartbeatPublisher`), and the skills
node's :class:`PlannerWatchdog` advances the executor's generation when the beats stop while
skills run: every running skill stops at the next control tick (outcome ``stopped``, the reason
naming the planner), the arm holds where it is, and no goal decided before is executed after.

The watchdog arms itself on the first beat, so a skills node without a planner (goals sent by
another node, ``ros2 action send_goal``) is unaffected; while a planner is beating it guards
every running goal, whoever sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core import names
from ..core.clock import Clock
from ..core.liveness import PacedBeat
from ..core.messages import Heartbeat
from ..core.transport import Bus, QoS

HEARTBEAT_PERIOD_S = 0.25
DEFAULT_PLANNER_TIMEOUT_S = 2.0  # eight missed beats


class HeartbeatPublisher(PacedBeat):
    """Beats every ``period_s`` when :meth:`tick` is called from the planner's loop (a hung
    loop stops the beats; a model call in flight does not, it runs on its own thread); each
    beat carries the planner's status and generation."""

    def __init__(self, bus: Bus, clock: Clock, node: str,
                 state: Callable[[], tuple[str, int]], period_s: float = HEARTBEAT_PERIOD_S
                 ) -> None:
        self.state = state
        super().__init__(bus, clock, node, names.AGENT_HEARTBEAT, QoS(depth=1), self._beat,
                         period_s)

    def _beat(self, now: float) -> Heartbeat:
        status, generation = self.state()
        return Heartbeat(now, self.node, status, generation)


class PlannerWatchdog:
    """Stops the executor's running skills when the planner's heartbeat has been missing for
    ``timeout_s`` (0: never).  Call :meth:`tick` every control tick."""

    def __init__(self, bus: Bus, clock: Clock, executor: Any,
                 timeout_s: float = DEFAULT_PLANNER_TIMEOUT_S, node: str = "skills") -> None:
        if timeout_s < 0:
            raise ValueError(f"planner_timeout_s must be >= 0 (0 = never), got {timeout_s}")
        self.clock = clock
        self.executor = executor
        self.timeout_s = timeout_s
        self.last: float | None = None
        self.last_from = ""
        self.tripped = False
        bus.subscribe(names.AGENT_HEARTBEAT, names.T_HEARTBEAT, self._on_beat, QoS(depth=1),
                      node=node)

    def _on_beat(self, beat: Heartbeat) -> None:
        # stamped on arrival, by this node's clock: the planner's clock is not this one's
        self.last = self.clock.now()
        self.last_from = beat.node
        self.tripped = False

    def tick(self) -> None:
        if self.timeout_s <= 0 or self.last is None or self.tripped:
            return
        silent = self.clock.now() - self.last
        if silent <= self.timeout_s or not self.executor.running:
            return
        self.tripped = True  # once per silence: the next beat re-arms it
        who = self.last_from or "the planner"
        self.executor.advance_generation(
            f"planner lost: no heartbeat from {who} for {silent:.1f} s; the arm holds",
            "skills")


__all__ = ["DEFAULT_PLANNER_TIMEOUT_S", "HEARTBEAT_PERIOD_S", "HeartbeatPublisher",
           "PlannerWatchdog"]
