"""What a node shell runs: the core component(s) on the node's Bus, and its loops."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import names
from ..core.clock import SystemClock
from ..core.liveness import NODE_BEAT_S, NodeBeat
from ..core.transport import Bus
from ..rosmsg import graph


@dataclass
class Loop:
    """``fn`` called every ``period_s`` on the node's own thread (0: back to back, for a
    function that blocks with its own timeout)."""

    name: str
    period_s: float
    fn: Callable[[], None]


@dataclass
class NodeCore:
    bus: Bus
    spec: graph.NodeSpec
    loops: list[Loop] = field(default_factory=list)
    start: Callable[[], None] = lambda: None  # after the bridge is up (may call services)
    shutdown: Callable[[], None] = lambda: None
    parts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a node whose spec publishes nodes/heartbeat beats on a loop of its own: a dead or
        # wedged process stops beating, and the planner's NodeWatch says it is lost
        if any(e.kind == "publisher" and e.name == names.NODES_HEARTBEAT
               for e in self.spec.endpoints):
            beat = NodeBeat(self.bus, SystemClock(), self.spec.name)
            self.loops.append(Loop("heartbeat", NODE_BEAT_S / 5, beat.tick))
            self.parts["heartbeat_beat"] = beat


__all__ = ["Loop", "NodeCore"]
