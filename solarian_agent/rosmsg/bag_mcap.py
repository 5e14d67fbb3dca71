"""Crash-safe rosbag2 MCAP storage: a bag split into files every few seconds, each closed file
listed in ``metadata.yaml`` as soon as it is closed.

A rosbag2 directory written here is what ``ros2 bag record -s mcap --max-bag-duration N``
leaves: ``<name>_0.mcap``, ``<name>_1.mcap``, ... and ``metadata.yaml`` (rosbag2 version 9)
naming them.  Each file is a complete MCAP file (profile ``ros2``, ``ros2msg`` schemas, ``cdr``
messages, channels carrying ``offered_qos_profiles``) written by the reference ``mcap`` library,
its chunks compressed with zstd.  The metadata is rewritten (to a temporary name, then renamed)
after every closed split, so after a ``kill -9`` at any moment the bag opens with ``rosbags``
or ``ros2 bag`` and holds everything up to the last closed split; the chunks of the file that
was still open are on disk too (each chunk is flushed to the OS every ``flush_s``) and
:func:`solarian_agent.ros.bag_repair.repair_bag` recovers them.

Splits and flushes follow a monotonic wall clock (what a kill takes away is wall time), not
the messages' stamps (a simulator may run faster than the wall).
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROSBAG2_VERSION = 9
COMPRESSIONS = ("zstd", "lz4", "none")


@dataclass(frozen=True)
class Topic:
    """One connection of the bag: what rosbag2 keeps per topic."""

    name: str  # with the leading slash
    type: str
    msgdef: str  # ros2msg text (the type with its dependencies)
    type_hash: str  # RIHS01_...
    qos: tuple[dict[str, Any], ...]  # offered QoS profiles, rosbag2 v9 dicts

    def qos_yaml(self) -> str:
        return yaml.safe_dump(list(self.qos), sort_keys=False).strip() if self.qos else ""


@dataclass
class FileInfo:
    """What metadata.yaml says of one split file."""

    path: str
    start_ns: int = 0
    end_ns: int = 0
    count: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # topic name -> messages

    def add(self, topic: str, t_ns: int) -> None:
        if self.count == 0 or t_ns < self.start_ns:
            self.start_ns = t_ns
        self.end_ns = max(self.end_ns, t_ns)
        self.count += 1
        self.counts[topic] = self.counts.get(topic, 0) + 1


def metadata_dict(topics: Sequence[Topic], files: Sequence[FileInfo], *,
                  distro: str = "jazzy", custom: Mapping[str, str] | None = None
                  ) -> dict[str, Any]:
    """rosbag2 version 9 ``metadata.yaml`` content for ``files`` holding ``topics``."""
    used = [f for f in files if f.count]
    start = min((f.start_ns for f in used), default=0)
    end = max((f.end_ns for f in used), default=0)
    counts: dict[str, int] = {}
    for f in files:
        for name, n in f.counts.items():
            counts[name] = counts.get(name, 0) + n
    return {"rosbag2_bagfile_information": {
        "version": ROSBAG2_VERSION,
        "storage_identifier": "mcap",
        "duration": {"nanoseconds": max(0, end - start)},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": sum(f.count for f in files),
        "topics_with_message_count": [
            {"topic_metadata": {"name": t.name, "type": t.type, "serialization_format": "cdr",
                                "offered_qos_profiles": list(t.qos),
                                "type_description_hash": t.type_hash},
             "message_count": counts.get(t.name, 0)}
            for t in topics],
        "compression_format": "",  # chunk compression is the MCAP storage's own
        "compression_mode": "",
        "relative_file_paths": [f.path for f in files],
        "files": [{"path": f.path, "starting_time": {"nanoseconds_since_epoch": f.start_ns},
                   "duration": {"nanoseconds": max(0, f.end_ns - f.start_ns)},
                   "message_count": f.count} for f in files],
        "custom_data": dict(custom or {"recorded_by": "solarian_agent"}),
        "ros_distro": distro,
    }}


def write_metadata(bag_dir: Path, topics: Sequence[Topic], files: Sequence[FileInfo],
                   **kw: Any) -> None:
    """Replace ``bag_dir/metadata.yaml`` atomically (a kill leaves the old or the new one)."""
    text = yaml.safe_dump(metadata_dict(topics, files, **kw), sort_keys=False)
    tmp = bag_dir / "metadata.yaml.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, bag_dir / "metadata.yaml")


def mcap_writer(stream: Any, compression: str, chunk_size: int) -> Any:
    """A started ``mcap`` writer with the ros2 profile."""
    from mcap.writer import CompressionType, Writer

    kinds = {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4,
             "none": CompressionType.NONE}
    w = Writer(stream, chunk_size=chunk_size, compression=kinds[compression])
    w.start(profile="ros2", library="solarian_agent")
    return w


class SplitMcapWriter:
    """Writes messages into ``path/<name>_<n>.mcap`` files, a new one every ``split_s`` seconds
    of wall time, flushing the open file's chunk every ``flush_s``.

    ``on_durable(kind, count)`` is told when messages reached the OS: ``"flush"`` (in the open
    file's chunks: :func:`repair_bag` recovers them) and ``"split"`` (in a closed file listed in
    metadata.yaml: readable as it is).  ``count`` is the number of messages written so far.
    Not thread-safe: one writer thread calls it.
    """

    def __init__(self, path: str | Path, *, split_s: float = 5.0, flush_s: float = 1.0,
                 compression: str = "zstd", chunk_size: int = 4 << 20, distro: str = "jazzy",
                 monotonic: Callable[[], float] = time.monotonic,
                 on_durable: Callable[[str, int], None] | None = None) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {list(COMPRESSIONS)}, "
                             f"got {compression!r}")
        if not split_s > 0 or not flush_s > 0:
            raise ValueError(f"split_s and flush_s must be > 0, got {split_s}, {flush_s}")
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True)
        except FileExistsError:
            raise FileExistsError(f"{self.path} exists already, not overwriting") from None
        self.split_s = split_s
        self.flush_s = flush_s
        self.compression = compression
        self.chunk_size = chunk_size
        self.distro = distro
        self.monotonic = monotonic
        self.on_durable = on_durable
        self.topics: list[Topic] = []
        self.files: list[FileInfo] = []  # closed ones
        self.count = 0
        self._stream: io.BufferedWriter | None = None
        self._writer: Any = None
        self._file: FileInfo | None = None
        self._channels: dict[int, int] = {}  # topic index -> channel id in the open file
        self._opened_at = 0.0
        self._flushed_at = 0.0
        self._dirty = False
        self.closed = False
        write_metadata(self.path, self.topics, self.files, distro=distro)  # opens as empty

    # ---------------------------------------------------------------------------------------
    def add_topic(self, topic: Topic) -> int:
        self.topics.append(topic)
        idx = len(self.topics) - 1
        if self._writer is not None:
            self._register(idx)
        return idx

    def _register(self, idx: int) -> None:
        t = self.topics[idx]
        schema = self._writer.register_schema(t.type, "ros2msg", t.msgdef.encode("utf-8"))
        meta = {"offered_qos_profiles": t.qos_yaml()}
        if t.type_hash:
            meta["topic_type_hash"] = t.type_hash
        self._channels[idx] = self._writer.register_channel(t.name, "cdr", schema, meta)

    def _open(self) -> None:
        name = f"{self.path.name}_{len(self.files)}.mcap"
        # buffered; flushed to the OS with every chunk (tick) and at the split
        self._stream = open(self.path / name, "xb")  # noqa: SIM115
        self._writer = mcap_writer(self._stream, self.compression, self.chunk_size)
        self._file = FileInfo(name)
        self._channels = {}
        for idx in range(len(self.topics)):
            self._register(idx)
        self._opened_at = self._flushed_at = self.monotonic()

    def write(self, topic: int, t_ns: int, data: bytes) -> None:
        if self.closed:
            raise ValueError(f"{self.path}: the bag is closed")
        self.tick()  # a split that is due closes before this message
        if self._writer is None:
            self._open()
        assert self._file is not None
        self._writer.add_message(self._channels[topic], log_time=t_ns, publish_time=t_ns,
                                 data=data)
        self._file.add(self.topics[topic].name, t_ns)
        self.count += 1
        self._dirty = True
        self._flush_if_due(self.monotonic())

    def tick(self) -> None:
        """Split or flush when their time has come (the writer thread calls it when idle)."""
        if self._writer is None or self.closed:
            return
        now = self.monotonic()
        if now - self._opened_at >= self.split_s:
            self._close_split()
        else:
            self._flush_if_due(now)

    def _flush_if_due(self, now: float) -> None:
        if self._dirty and now - self._flushed_at >= self.flush_s:
            self._writer.flush()
            self._flushed_at = now
            self._dirty = False
            self._tell("flush")

    def next_deadline(self) -> float | None:
        """The monotonic time of the next split or flush (None: nothing is open)."""
        if self._writer is None:
            return None
        split = self._opened_at + self.split_s
        return min(split, self._flushed_at + self.flush_s) if self._dirty else split

    def _close_split(self) -> None:
        assert self._file is not None and self._stream is not None
        self._writer.finish()
        self._stream.flush()
        os.fsync(self._stream.fileno())
        self._stream.close()
        self.files.append(self._file)
        self._writer = self._stream = self._file = None
        self._dirty = False
        write_metadata(self.path, self.topics, self.files, distro=self.distro)
        self._tell("split")

    def _tell(self, kind: str) -> None:
        if self.on_durable is not None:
            self.on_durable(kind, self.count)

    def close(self) -> None:
        if self.closed:
            return
        if self._writer is not None:
            self._close_split()
        self.closed = True


def topics_from_store(store: Any, specs: Iterable[tuple[str, str, Sequence[dict[str, Any]]]]
                      ) -> list[Topic]:
    """Topics for ``(name, type, qos dicts)`` with their definitions from a rosbags store."""
    out = []
    for name, typename, qos in specs:
        msgdef, _ = store.generate_msgdef(typename, ros_version=2)
        out.append(Topic("/" + name.lstrip("/"), typename, msgdef, store.hash_rihs01(typename),
                         tuple(qos)))
    return out


__all__ = ["COMPRESSIONS", "FileInfo", "SplitMcapWriter", "Topic", "metadata_dict",
           "mcap_writer", "topics_from_store", "write_metadata"]
