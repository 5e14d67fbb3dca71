"""``solarian-agent bag-repair DIR``: make a rosbag2 MCAP directory readable after a crash.

A recording killed mid-run leaves its last MCAP file without a summary or footer (rosbags:
"File end magic is invalid") and possibly no ``metadata.yaml`` at all ("Expected metadata
file").  Repair reads every file of the bag; one that does not end in a valid footer is read
record by record up to its last complete, CRC-checked chunk, and rewritten (to a temporary name,
then renamed over it) as a complete MCAP file with what it held.  Then ``metadata.yaml`` is
written from the files themselves: topics, QoS, counts and times.  The torn tail (the chunk
being written when the process died) is what is lost, and the report says how many bytes.

Works on the split bags :class:`solarian_agent.rosmsg.bag.BagRecorder` writes and on the
single-file MCAP bags rosbags' writer leaves.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..cli_common import CliParser
from ..rosmsg.bag_mcap import FileInfo, Topic, mcap_writer, write_metadata


@dataclass
class FileReport:
    path: str
    status: str  # ok | repaired | unreadable
    messages: int = 0
    dropped_bytes: int = 0
    error: str = ""


@dataclass
class RepairReport:
    bag: Path
    files: list[FileReport] = field(default_factory=list)
    messages: int = 0

    def lines(self) -> list[str]:
        out = []
        for f in self.files:
            if f.status == "ok":
                out.append(f"{f.path}: complete, {f.messages} messages")
            elif f.status == "repaired":
                out.append(f"{f.path}: unclosed; recovered {f.messages} messages, dropped a "
                           f"torn tail of {f.dropped_bytes} bytes ({f.error or 'end of file'})")
            else:
                out.append(f"{f.path}: unreadable, left out ({f.error})")
        out.append(f"metadata.yaml: {sum(1 for f in self.files if f.status != 'unreadable')} "
                   f"files, {self.messages} messages")
        return out


def _split_key(p: Path) -> tuple[int, str]:
    m = re.search(r"_(\d+)\.mcap$", p.name)
    return (int(m.group(1)) if m else -1, p.name)


def _qos(meta: dict[str, str]) -> tuple[dict[str, Any], ...]:
    text = meta.get("offered_qos_profiles", "")
    try:
        loaded = yaml.safe_load(text) if text else []
    except yaml.YAMLError:
        return ()
    return tuple(d for d in loaded if isinstance(d, dict)) if isinstance(loaded, list) else ()


def _topic(channel: Any, schema: Any) -> Topic:
    meta = dict(channel.metadata)
    return Topic(channel.topic, schema.name, bytes(schema.data).decode("utf-8", "replace"),
                 meta.get("topic_type_hash", ""), _qos(meta))


def _read_complete(path: Path) -> tuple[list[Topic], FileInfo] | None:
    """(topics, file info) from a file's summary; None when it has no valid footer."""
    from mcap.reader import make_reader

    try:
        with open(path, "rb") as f:
            summary = make_reader(f).get_summary()
    except Exception:
        return None
    if summary is None or summary.statistics is None:
        return None
    info = FileInfo(path.name)
    topics: list[Topic] = []
    for cid, ch in summary.channels.items():
        schema = summary.schemas.get(ch.schema_id)
        if schema is None:
            continue
        topics.append(_topic(ch, schema))
        n = summary.statistics.channel_message_counts.get(cid, 0)
        if n:
            info.counts[ch.topic] = info.counts.get(ch.topic, 0) + n
    info.count = summary.statistics.message_count
    if info.count:
        info.start_ns = summary.statistics.message_start_time
        info.end_ns = summary.statistics.message_end_time
    return topics, info


def _salvage(path: Path) -> tuple[list[Topic], FileInfo, int, str]:
    """Rewrite a torn file with its complete chunks; (topics, info, bytes dropped, why)."""
    from mcap.records import Channel, Message, Schema
    from mcap.stream_reader import StreamReader

    size = path.stat().st_size
    schemas: dict[int, Any] = {}
    channels: dict[int, Any] = {}
    messages: list[Any] = []
    good_end = 0
    why = ""
    with open(path, "rb") as f:
        reader = StreamReader(f, validate_crcs=True, record_size_limit=max(size, 1))
        try:
            for rec in reader.records:
                if isinstance(rec, Schema):
                    schemas[rec.id] = rec
                elif isinstance(rec, Channel):
                    channels[rec.id] = rec
                elif isinstance(rec, Message):
                    messages.append(rec)
                good_end = f.tell()
        except Exception as e:  # the torn tail: end of file, a bad CRC, a half record
            why = f"{type(e).__name__}: {e}".strip().rstrip(":")
    tmp = path.with_name(path.name + ".repair")
    topics: list[Topic] = []
    info = FileInfo(path.name)
    with open(tmp, "wb") as out:
        w = mcap_writer(out, "zstd", 4 << 20)
        sid: dict[int, int] = {}
        cid: dict[int, int] = {}
        for old, ch in channels.items():
            schema = schemas.get(ch.schema_id)
            if schema is None:
                continue
            if ch.schema_id not in sid:
                sid[ch.schema_id] = w.register_schema(schema.name, schema.encoding, schema.data)
            cid[old] = w.register_channel(ch.topic, ch.message_encoding, sid[ch.schema_id],
                                          dict(ch.metadata))
            topics.append(_topic(ch, schema))
        for m in messages:
            new = cid.get(m.channel_id)
            if new is None:
                continue
            w.add_message(new, log_time=m.log_time, publish_time=m.publish_time, data=m.data,
                          sequence=m.sequence)
            info.add(channels[m.channel_id].topic, m.log_time)
        w.finish()
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return topics, info, max(0, size - good_end), why


def repair_bag(path: str | Path) -> RepairReport:
    """Repair every unclosed MCAP file in the bag directory and rewrite ``metadata.yaml``."""
    bag = Path(path)
    if not bag.is_dir():
        raise FileNotFoundError(f"{bag}: not a directory (a rosbag2 bag is one)")
    files = sorted((p for p in bag.glob("*.mcap") if p.is_file()), key=_split_key)
    if not files:
        raise FileNotFoundError(f"{bag}: no .mcap files (only MCAP bags can be repaired)")
    report = RepairReport(bag)
    topics: dict[tuple[str, str], Topic] = {}
    infos: list[FileInfo] = []
    for p in files:
        done = _read_complete(p)
        if done is not None:
            got, info = done
            report.files.append(FileReport(p.name, "ok", info.count))
        else:
            try:
                got, info, dropped, why = _salvage(p)
            except Exception as e:  # not MCAP at all
                report.files.append(FileReport(p.name, "unreadable",
                                               error=f"{type(e).__name__}: {e}"))
                continue
            report.files.append(FileReport(p.name, "repaired", info.count, dropped, why))
        for t in got:
            topics.setdefault((t.name, t.type), t)
        infos.append(info)
    report.messages = sum(i.count for i in infos)
    write_metadata(bag, list(topics.values()), infos)
    return report


def main_bag_repair(argv: Sequence[str] | None = None) -> int:
    p = CliParser(
        prog="solarian-agent bag-repair",
        description="Recover what the last, unclosed MCAP file of a rosbag2 bag holds (after a "
                    "crash or kill -9) and write metadata.yaml for every file.")
    p.add_argument("bag", type=Path, help="the rosbag2 directory")
    a = p.parse_args(list(argv) if argv is not None else None)
    try:
        report = repair_bag(a.bag)
    except FileNotFoundError as e:
        print(f"bag-repair: {e}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 0 if report.messages or any(f.status != "unreadable" for f in report.files) else 1


__all__ = ["FileReport", "RepairReport", "main_bag_repair", "repair_bag"]
