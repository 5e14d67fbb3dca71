"""rosbag2 files without ROS: record Bus topics, read them back (built on ``rosbags``).

A bag written here holds the same topic names and types the ROS graph publishes (the package's
own types registered from ``msg/ srv/ action/``, standard types for images, joint states,
markers), CDR-serialized, with each topic's QoS as the graph offers it, so ``ros2 bag play``
replays it into a running graph (``launch/replay.launch.py``) and ``ros2 bag info`` lists it.
Storage is MCAP (rosbags' writer supports it); ``storage="sqlite3"`` writes the older format.

    rec = BagRecorder("episode_bag")          # a new directory
    rec.attach(bus)                           # every recorded topic on the bus
    ... run ...
    rec.close()
    for m in read_bag("episode_bag"):         # BagMessage(topic, type, t_ns, value)
        ...

Recording never blocks or breaks a run: a message that cannot be converted is counted in
``errors`` and skipped.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import names
from ..core.transport import Bus, QoS
from . import convert as cv
from . import graph
from .interfaces import typestore

# What a run records by default: images, joint states, agent events, verdicts, agent state and
# the rest of what the graph publishes (every topic whose type has a conversion).
DEFAULT_TYPES: tuple[str, ...] = (
    names.T_IMAGE, names.T_CAMERA_INFO, names.T_JOINT_STATE, names.T_JOINT_COMMAND,
    names.T_AGENT_EVENT, names.T_MONITOR_VERDICT, names.T_AGENT_STATE, names.T_GENERATION,
    names.T_OPERATOR_EVENT, names.T_MARKERS, names.T_DIAGNOSTICS,
)

@functools.lru_cache(maxsize=1)
def _graph_qos() -> dict[str, QoS]:
    """The QoS each topic is offered with in the ROS graph (kept in the bag for replay)."""
    out: dict[str, QoS] = {}
    specs = (graph.sim_node(graph.DEFAULT_SIM_CAMERAS), graph.planner_node((), ()),
             graph.skills_node((), ()), graph.monitor_node(()), graph.arm_node())
    for spec in specs:
        for e in spec.of("publisher"):
            if e.qos is not None:
                out.setdefault(e.name, e.qos)
    return out


def graph_qos(topic: str) -> QoS:
    if topic.endswith("/image_raw"):
        return graph.SENSOR_DATA
    if topic.endswith("/camera_info"):
        return graph.LATCHED
    return _graph_qos().get(topic, graph.RELIABLE)


def _rosbags_qos(q: QoS) -> Any:
    from rosbags.interfaces import (
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )

    inf = QosTime(2147483647, 4294967295)
    return Qos(QosHistory.KEEP_LAST, q.depth,
               QosReliability.BEST_EFFORT if q.best_effort else QosReliability.RELIABLE,
               QosDurability.TRANSIENT_LOCAL if q.transient_local else QosDurability.VOLATILE,
               inf, inf, QosLiveliness.AUTOMATIC, inf, False)


@dataclass(frozen=True)
class BagMessage:
    topic: str
    type: str
    t_ns: int
    value: Any  # the core's value (Image, JointState, AgentEvent, ...)


class BagRecorder:
    """Writes Bus topics to a new rosbag2 directory ``path`` (which must not exist)."""

    def __init__(self, path: str | Path, *, storage: str = "mcap",
                 clock: Callable[[], int] | None = None, distro: str = "ROS2_JAZZY") -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
        if storage not in plugins:
            raise ValueError(f"storage must be one of {sorted(plugins)}, got {storage!r}")
        self.path = Path(path)
        self.storage = storage
        self.store = typestore(distro)
        self.codec = cv.rosbags_codec(self.store)
        self.clock = clock or time.time_ns
        self._writer = Writer(self.path, version=9, storage_plugin=plugins[storage])
        self._writer.open()
        self._lock = threading.Lock()
        self._conns: dict[tuple[str, str], Any] = {}
        self._subs: list[Any] = []
        self.counts: dict[str, int] = {}
        self.errors: dict[str, str] = {}
        self.closed = False

    def _connection(self, topic: str, typename: str) -> Any:
        key = (topic, typename)
        conn = self._conns.get(key)
        if conn is None:
            conn = self._writer.add_connection(
                "/" + topic.lstrip("/"), typename, typestore=self.store,
                offered_qos_profiles=[_rosbags_qos(graph_qos(topic))])
            self._conns[key] = conn
        return conn

    def write(self, topic: str, typename: str, value: Any, t_ns: int | None = None) -> bool:
        """Serialize one core value as ``typename`` on ``topic``; False if it was skipped."""
        try:
            msg = cv.to_ros(self.codec, typename, value)
            raw = self.store.serialize_cdr(msg, typename)
        except Exception as e:  # a bad message is skipped, never raised into the run
            self.errors[topic] = f"{type(e).__name__}: {e}"
            return False
        with self._lock:
            if self.closed:
                return False
            self._writer.write(self._connection(topic, typename),
                               self.clock() if t_ns is None else int(t_ns), raw)
            self.counts[topic] = self.counts.get(topic, 0) + 1
        return True

    def attach(self, bus: Bus, topics: Iterable[str] | None = None,
               types: Sequence[str] = DEFAULT_TYPES) -> list[str]:
        """Record ``topics`` (default: every topic published on ``bus`` whose type is in
        ``types``) from now on; returns the topics attached."""
        known: dict[str, str] = {}
        for e in list(bus.endpoints):
            if e.kind == "publisher":
                known.setdefault(e.name, e.type)
        wanted = list(topics) if topics is not None else [t for t, ty in known.items()
                                                         if ty in types]
        attached = []
        for topic in wanted:
            typename = known.get(topic)
            if typename is None or typename not in cv.TO_ROS:
                continue
            self._subs.append(bus.subscribe(topic, typename, self._writer_for(topic, typename),
                                            qos=QoS(depth=1), node="bag_recorder"))
            attached.append(topic)
        return attached

    def _writer_for(self, topic: str, typename: str) -> Callable[[Any], None]:
        def write(msg: Any) -> None:
            self.write(topic, typename, msg)
        return write

    def close(self) -> None:
        for s in self._subs:
            s.close()
        self._subs.clear()
        with self._lock:
            if not self.closed:
                self.closed = True
                self._writer.close()

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_bag(path: str | Path, topics: Iterable[str] | None = None, *, decode: bool = True,
             distro: str = "ROS2_JAZZY") -> Iterator[BagMessage]:
    """The bag's messages in time order, converted to the core's values (``decode=False``:
    the deserialized ROS messages).  Topic names are given and returned without the leading
    slash, as the Bus names them."""
    from rosbags.rosbag2 import Reader

    store = typestore(distro)
    want = None if topics is None else {"/" + t.lstrip("/") for t in topics}
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if want is None or c.topic in want]
        for conn, t_ns, raw in reader.messages(connections=conns):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            value = cv.from_ros(conn.msgtype, msg) if decode else msg
            yield BagMessage(conn.topic.lstrip("/"), conn.msgtype, int(t_ns), value)


def bag_summary(path: str | Path) -> dict[str, tuple[str, int]]:
    """topic -> (type, message count), topics without the leading slash."""
    from rosbags.rosbag2 import Reader

    out: dict[str, tuple[str, int]] = {}
    with Reader(Path(path)) as reader:
        for c in reader.connections:
            name = c.topic.lstrip("/")
            prev = out.get(name, (c.msgtype, 0))[1]
            out[name] = (c.msgtype, prev + c.msgcount)
    return out


__all__ = ["BagMessage", "BagRecorder", "DEFAULT_TYPES", "bag_summary", "graph_qos",
           "read_bag"]
