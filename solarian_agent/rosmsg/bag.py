"""rosbag2 files without ROS: record Bus topics, read them back (built on ``rosbags`` and the
reference ``mcap`` library).

A bag written here holds the same topic names and types the ROS graph publishes (the package's
own types registered from ``msg/ srv/ action/``, standard types for images, joint states,
markers), CDR-serialized, with each topic's QoS as the graph offers it, so ``ros2 bag play``
replays it into a running graph (``launch/replay.launch.py``) and ``ros2 bag info`` lists it.

Camera images are recorded as image_transport's ``compressed`` transport publishes them:
``sensor_msgs/msg/CompressedImage`` (JPEG) on ``<camera>/image_raw/compressed``
(``images="raw"`` keeps ``sensor_msgs/msg/Image``, ``"both"`` records both).  Storage is MCAP,
split into a file every ``split_s`` seconds with ``metadata.yaml`` rewritten at every split and
chunks compressed with zstd (:mod:`.bag_mcap`): after a ``kill -9`` the bag reads up to the last
closed split, and ``solarian-agent bag-repair`` recovers the rest (:mod:`.bag_repair`).
``storage="sqlite3"`` writes the older format in one file, with raw images.

    rec = BagRecorder("episode_bag")          # a new directory
    rec.attach(bus)                           # every recorded topic on the bus
    ... run ...
    rec.close()
    for m in read_bag("episode_bag"):         # BagMessage(topic, type, t_ns, value)
        ...

Reading needs no ROS front end and lives in :mod:`solarian_agent.rosmsg.bag_read` (the
episode viewer reads bags too); its names are re-exported here.

Recording never blocks or breaks a run: messages are serialized where they are published and
written (images JPEG-encoded first) on the recorder's own thread through a bounded queue.  On a
real-time run a full queue drops the message (counted in ``dropped``); a simulated run waits
for the writer, at most ``wait_s``.  A message that cannot be converted is counted in
``errors`` and skipped.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core import names
from ..core.messages import Image
from ..core.transport import Bus, QoS
from . import convert as cv
from . import graph
from .bag_read import (
    COMPRESSED_SUFFIX,
    T_COMPRESSED,
    BagMessage,
    CompressedFrame,
    bag_summary,
    read_bag,
)
from .interfaces import typestore

IMAGE_MODES = ("compressed", "raw", "both")

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
    if topic.endswith(COMPRESSED_SUFFIX):
        topic = topic[:-len(COMPRESSED_SUFFIX)]
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


def compress_image(codec: cv.Codec, img: Image, quality: int = 80) -> Any:
    """image_transport's ``compressed`` message for a core Image (JPEG; format string as
    compressed_image_transport writes it: ``"bgr8; jpeg compressed bgr8"``)."""
    import cv2

    from ..perception.images import to_bgr

    enc = img.encoding
    a = to_bgr(np.asarray(img.data), enc)
    ok, buf = cv2.imencode(".jpg", a, [int(cv2.IMWRITE_JPEG_QUALITY), int(quality)])
    if not ok:
        raise cv.ConvertError(f"{T_COMPRESSED}: JPEG encoding of a {a.shape} image failed")
    target = "mono8" if a.ndim == 2 else "bgr8"
    return codec.new(T_COMPRESSED, header=cv.header(codec, img.stamp, img.frame_id),
                     format=f"{enc}; jpeg compressed {target}", data=buf.reshape(-1))


class BagRecorder:
    """Writes Bus topics to a new rosbag2 directory ``path`` (which must not exist).

    ``images``: ``compressed`` (default), ``raw`` or ``both``; ``jpeg_quality`` 1-100;
    ``compression``: MCAP chunk compression (``zstd``, ``lz4``, ``none``); ``split_s`` /
    ``flush_s``: wall seconds between split files / chunk flushes; ``realtime``: drop rather
    than wait when the writer falls behind; ``on_durable(kind, count)``: see
    :class:`.bag_mcap.SplitMcapWriter`.
    """

    def __init__(self, path: str | Path, *, storage: str = "mcap",
                 clock: Callable[[], int] | None = None, distro: str = "ROS2_JAZZY",
                 images: str = "compressed", jpeg_quality: int = 80, compression: str = "zstd",
                 split_s: float = 5.0, flush_s: float = 1.0, realtime: bool = False,
                 queue_size: int = 256, wait_s: float = 30.0,
                 on_durable: Callable[[str, int], None] | None = None) -> None:
        if storage not in ("mcap", "sqlite3"):
            raise ValueError(f"storage must be one of ['mcap', 'sqlite3'], got {storage!r}")
        if images not in IMAGE_MODES:
            raise ValueError(f"images must be one of {list(IMAGE_MODES)}, got {images!r}")
        if not 1 <= int(jpeg_quality) <= 100:
            raise ValueError(f"jpeg_quality must be 1-100, got {jpeg_quality!r}")
        self.path = Path(path)
        self.storage = storage
        self.images = images if storage == "mcap" else "raw"
        self.jpeg_quality = int(jpeg_quality)
        self.store = typestore(distro)
        self.codec = cv.rosbags_codec(self.store)
        self.clock = clock or time.time_ns
        self.realtime = realtime
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._subs: list[Any] = []
        self.counts: dict[str, int] = {}
        self.errors: dict[str, str] = {}
        self.dropped: dict[str, int] = {}
        self.closed = False
        self._topics: dict[tuple[str, str], Any] = {}  # (topic, type) -> writer's handle
        self._queue: queue.Queue[tuple[str, str, Any, int] | None] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        if storage == "mcap":
            from .bag_mcap import SplitMcapWriter

            self._split = SplitMcapWriter(self.path, split_s=split_s, flush_s=flush_s,
                                          compression=compression,
                                          distro=distro.removeprefix("ROS2_").lower(),
                                          on_durable=on_durable)
            self._thread = threading.Thread(target=self._run, name="bag-writer", daemon=True)
            self._thread.start()
        else:
            from rosbags.rosbag2 import StoragePlugin, Writer

            self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.SQLITE3)
            self._writer.open()

    # -- serializing (the publisher's thread) ----------------------------------------------
    def write(self, topic: str, typename: str, value: Any, t_ns: int | None = None) -> bool:
        """Record one core value as ``typename`` on ``topic``; False if it was skipped (an
        Image is recorded as the ``images`` mode says)."""
        items: list[tuple[str, str, Any]] = []
        try:
            if typename == names.T_IMAGE and self.images != "raw":
                items.append((topic + COMPRESSED_SUFFIX, T_COMPRESSED, value))  # encoded later
            if typename != names.T_IMAGE or self.images != "compressed":
                msg = cv.to_ros(self.codec, typename, value)
                items.append((topic, typename, self.store.serialize_cdr(msg, typename)))
        except Exception as e:  # a bad message is skipped, never raised into the run
            self.errors[topic] = f"{type(e).__name__}: {e}"
            return False
        with self._lock:
            if self.closed:
                return False
            t = self.clock() if t_ns is None else int(t_ns)
            for name, ty, payload in items:
                if not self._put((name, ty, payload, t)):
                    return False
        return True

    def _put(self, item: tuple[str, str, Any, int]) -> bool:
        if self._thread is None:
            self._store(*item)
            return True
        try:
            if self.realtime:
                self._queue.put_nowait(item)
            else:
                self._queue.put(item, timeout=self.wait_s)
            return True
        except queue.Full:
            self.dropped[item[0]] = self.dropped.get(item[0], 0) + 1
            return False

    # -- writing (the writer's thread) -----------------------------------------------------
    def _run(self) -> None:
        while True:
            deadline = self._split.next_deadline()
            timeout = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                self._guard(self._split.tick)
                continue
            if item is None:
                break
            self._guard(lambda item=item: self._store(*item))  # type: ignore[misc]
        self._guard(self._split.close)

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # a full disk: counted, and the queue keeps draining
            self.errors["<bag>"] = f"{type(e).__name__}: {e}"

    def _store(self, topic: str, typename: str, payload: Any, t_ns: int) -> None:
        if typename == T_COMPRESSED and isinstance(payload, Image):
            try:
                msg = compress_image(self.codec, payload, self.jpeg_quality)
                payload = self.store.serialize_cdr(msg, typename)
            except Exception as e:
                self.errors[topic] = f"{type(e).__name__}: {e}"
                return
        handle = self._topics.get((topic, typename))
        if handle is None:
            handle = self._add_topic(topic, typename)
            self._topics[(topic, typename)] = handle
        if self._thread is None:
            self._writer.write(handle, t_ns, payload)
        else:
            self._split.write(handle, t_ns, payload)
        self.counts[topic] = self.counts.get(topic, 0) + 1

    def _add_topic(self, topic: str, typename: str) -> Any:
        qos = _rosbags_qos(graph_qos(topic))
        if self._thread is None:
            return self._writer.add_connection("/" + topic.lstrip("/"), typename,
                                               typestore=self.store, offered_qos_profiles=[qos])
        from rosbags.rosbag2.metadata import dump_qos_v9

        from .bag_mcap import topics_from_store

        (spec,) = topics_from_store(self.store, [(topic, typename, dump_qos_v9([qos]))])
        return self._split.add_topic(spec)

    # -- wiring ------------------------------------------------------------------------------
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

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop recording, write what is queued, close the last split and the metadata."""
        for s in self._subs:
            s.close()
        self._subs.clear()
        with self._lock:
            if self.closed:
                return
            self.closed = True
        if self._thread is None:
            self._writer.close()
            return
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            self.errors["<bag>"] = "the writer did not drain its queue; the last split is open"
            return
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.errors["<bag>"] = f"the writer did not finish within {timeout_s:g} s"

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BagMessage", "BagRecorder", "CompressedFrame", "DEFAULT_TYPES", "IMAGE_MODES",
           "T_COMPRESSED", "bag_summary", "compress_image", "graph_qos", "read_bag"]
