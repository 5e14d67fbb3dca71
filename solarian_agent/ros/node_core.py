"""What a node shell runs: the core component(s) on the node's Bus, and its loops."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


__all__ = ["Loop", "NodeCore"]
