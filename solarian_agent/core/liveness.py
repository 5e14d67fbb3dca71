"""Which nodes of the graph are alive, from their beats on ``nodes/heartbeat`` (ROS-free).

Every node of a graph run as separate processes (skills, monitor, simulator, cameras, the
arm) beats on ``nodes/heartbeat`` every :data:`NODE_BEAT_S` with a per-process ``instance``
(:class:`NodeBeat`).  The planner's :class:`NodeWatch` turns the beats into each node's state:

* ``up``: beating;
* ``lost``: silent for ``lost_after_s`` (default 1.5 s, at most 2 s: the planner must learn of
  a dead node within 2 s);
* ``back``: beating again after it was lost, or beating with a new instance (a restart
  faster than ``lost_after_s``: goals it had are gone all the same).

A node that never beat is not watched: an in-process run has no beats and nothing changes.
Beats are stamped on arrival by the watcher's clock (the sender's clock is not this one's).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import names
from .clock import Clock
from .event_record import TypedEvent
from .messages import Heartbeat
from .statuses import WireEnum
from .transport import Bus, QoS

NODE_BEAT_S = 0.25
DEFAULT_LOST_AFTER_S = 1.5
MAX_LOST_AFTER_S = 2.0
BEAT_QOS = QoS(depth=10)  # beats of several nodes arrive together: none may push out another


class NodeState(WireEnum):
    UP = "up"
    LOST = "lost"
    BACK = "back"


@dataclass(frozen=True)
class NodeChange:
    """A node's state changed: ``silent_s`` is how long it had been silent (lost) or was
    gone (back); ``restarted`` when it came back as a new process."""

    node: str
    state: NodeState
    silent_s: float
    restarted: bool = False

    def describe(self) -> str:
        if self.state == NodeState.LOST:
            return (f"The {self.node} node is gone: no heartbeat for {self.silent_s:.1f} s.")
        how = "restarted" if self.restarted else "beating again"
        return f"The {self.node} node is back ({how}, after {self.silent_s:.1f} s)."


@dataclass(frozen=True)
class NodeChanged(TypedEvent, kind="node_changed"):
    """The journal's record of a :class:`NodeChange`."""

    node: str = ""
    state: str = ""  # up | lost | back
    silent_s: float = 0.0
    restarted: bool = False


class PacedBeat:
    """A heartbeat on ``topic``, at most one every ``period_s``: :meth:`tick` is called from
    the beating node's own loop (a hung loop stops the beats), more often than the period;
    ``make(now)`` builds each beat.  The one pacing of every beat of the graph (the nodes'
    on ``nodes/heartbeat``, the planner's on ``agent/heartbeat``)."""

    def __init__(self, bus: Bus, clock: Clock, node: str, topic: str, qos: QoS,
                 make: Callable[[float], Heartbeat], period_s: float = NODE_BEAT_S) -> None:
        self.clock = clock
        self.node = node
        self.period_s = period_s
        self._make = make
        self._next = float("-inf")
        self._pub = bus.publisher(topic, names.T_HEARTBEAT, qos, node=node)

    def tick(self) -> None:
        now = self.clock.now()
        if now < self._next:
            return
        self._next = now + self.period_s
        self._pub.publish(self._make(now))


class NodeBeat(PacedBeat):
    """A node's beat on ``nodes/heartbeat`` with this process's ``instance``."""

    def __init__(self, bus: Bus, clock: Clock, node: str, period_s: float = NODE_BEAT_S,
                 status: str = "up") -> None:
        self.status = status
        self.instance = uuid.uuid4().hex[:12]
        super().__init__(bus, clock, node, names.NODES_HEARTBEAT, BEAT_QOS,
                         lambda now: Heartbeat(now, self.node, self.status, 0, self.instance),
                         period_s)


@dataclass
class _Seen:
    last: float
    instance: str
    state: NodeState
    since: float
    lost_at: float | None = None
    restarted: bool = False


class NodeWatch:
    """The nodes' states from their beats; :meth:`tick` (from the owner's loop) returns what
    changed since the last tick.  ``ignore``: nodes not watched (the watcher itself)."""

    def __init__(self, bus: Bus, clock: Clock, lost_after_s: float = DEFAULT_LOST_AFTER_S,
                 node: str = "planner", ignore: Iterable[str] = ("planner",)) -> None:
        if not (0 < lost_after_s <= MAX_LOST_AFTER_S):
            raise ValueError(f"lost_after_s must be in (0, {MAX_LOST_AFTER_S}], "
                             f"got {lost_after_s}")
        self.clock = clock
        self.lost_after_s = lost_after_s
        self.ignore = frozenset(ignore)
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()
        bus.subscribe(names.NODES_HEARTBEAT, names.T_HEARTBEAT, self._on_beat, BEAT_QOS,
                      node=node)

    def _on_beat(self, beat: Heartbeat) -> None:
        if beat.node in self.ignore:
            return
        now = self.clock.now()
        with self._lock:
            s = self._seen.get(beat.node)
            if s is None:
                self._seen[beat.node] = _Seen(now, beat.instance, NodeState.UP, now)
                return
            if beat.instance != s.instance:
                s.restarted = True
                if s.lost_at is None:
                    s.lost_at = s.last
            s.last, s.instance = now, beat.instance

    def tick(self) -> list[NodeChange]:
        now = self.clock.now()
        out: list[NodeChange] = []
        with self._lock:
            for node, s in sorted(self._seen.items()):
                silent = now - s.last
                if s.state != NodeState.LOST and silent > self.lost_after_s:
                    s.state, s.since, s.lost_at = NodeState.LOST, now, s.last
                    out.append(NodeChange(node, NodeState.LOST, silent))
                elif s.lost_at is not None and silent <= self.lost_after_s:
                    gone = s.last - s.lost_at
                    s.state, s.since = NodeState.BACK, now
                    out.append(NodeChange(node, NodeState.BACK, gone, s.restarted))
                    s.lost_at, s.restarted = None, False
        return out

    def watched(self) -> int:
        """How many nodes have beaten so far (a node's first beat is no change, but the
        state that lists the nodes is out of date)."""
        with self._lock:
            return len(self._seen)

    def state(self, node: str) -> NodeState | None:
        with self._lock:
            s = self._seen.get(node)
            return None if s is None else s.state

    def statuses(self) -> tuple[dict[str, object], ...]:
        """For ``AgentState.nodes``: each watched node, its state and for how long."""
        now = self.clock.now()
        with self._lock:
            return tuple({"node": n, "state": s.state.value, "since_s": round(now - s.since, 2)}
                         for n, s in sorted(self._seen.items()))


__all__ = ["BEAT_QOS", "DEFAULT_LOST_AFTER_S", "MAX_LOST_AFTER_S", "NODE_BEAT_S", "NodeBeat",
           "NodeChange", "NodeChanged", "NodeState", "NodeWatch", "PacedBeat"]
