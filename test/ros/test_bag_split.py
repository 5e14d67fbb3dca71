"""Crash-safe bags: split MCAP files with metadata.yaml after every closed split, checked with
rosbags and with the reference mcap reader; bag-repair of an unclosed or torn last file."""

from __future__ import annotations

import pytest
import yaml
from rosbags.rosbag2 import Reader

from solarian_agent.cli import main as cli
from solarian_agent.core import names
from solarian_agent.core.messages import JointState
from solarian_agent.ros.bag_repair import repair_bag
from solarian_agent.rosmsg import convert as cv
from solarian_agent.rosmsg.bag import bag_summary, read_bag
from solarian_agent.rosmsg.bag_mcap import SplitMcapWriter, topics_from_store
from solarian_agent.rosmsg.interfaces import typestore

QOS = [{"history": "keep_last", "depth": 10, "reliability": "reliable",
        "durability": "volatile", "deadline": {"sec": 2147483647, "nsec": 4294967295},
        "lifespan": {"sec": 2147483647, "nsec": 4294967295}, "liveliness": "automatic",
        "liveliness_lease_duration": {"sec": 2147483647, "nsec": 4294967295},
        "avoid_ros_namespace_conventions": False}]


class Mono:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _joint_bytes(i: int, joints: int = 1) -> bytes:
    store = typestore()
    msg = cv.to_ros(cv.rosbags_codec(store), names.T_JOINT_STATE,
                    JointState(float(i), tuple(f"joint_{k:02d}" for k in range(joints)),
                               tuple(i * 0.01 + k for k in range(joints))))
    return bytes(store.serialize_cdr(msg, names.T_JOINT_STATE))


def _writer(path, **kw):
    mono = Mono()
    w = SplitMcapWriter(path, split_s=1.0, flush_s=0.25, monotonic=mono, **kw)
    (topic,) = topics_from_store(typestore(), [(names.JOINT_STATES, names.T_JOINT_STATE, QOS)])
    return w, w.add_topic(topic), mono


def _seqs(bag):
    return [round(m.value.stamp) for m in read_bag(bag, [names.JOINT_STATES])]


def test_each_closed_split_is_listed_and_readable_while_recording(tmp_path):
    bag = tmp_path / "rosbag"
    durable: list[tuple[str, int]] = []
    w, topic, mono = _writer(bag, on_durable=lambda k, n: durable.append((k, n)))
    with Reader(bag) as r:  # an empty bag opens before the first split closes
        assert r.message_count == 0
    for i in range(50):  # a message every 0.1 s of wall time: 10 per split
        w.write(topic, 1_000_000_000 + i * 10_000_000, _joint_bytes(i))
        mono.t = (i + 1) / 10
    # splits closed at 1.0, 2.0, 3.0, 4.0 s: 40 messages listed; the open file is not
    assert _seqs(bag) == list(range(40))
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["relative_file_paths"] == [f"rosbag_{n}.mcap" for n in range(4)]
    assert [f["message_count"] for f in meta["files"]] == [10, 10, 10, 10]
    assert meta["message_count"] == 40 and meta["version"] == 9
    assert meta["storage_identifier"] == "mcap" and isinstance(meta["custom_data"], dict)
    assert meta["topics_with_message_count"][0]["topic_metadata"]["offered_qos_profiles"] == QOS
    # durable: at each split, and every 0.25 s a flush (before the message at 0.3 s, 0.6 s...)
    assert durable[:4] == [("flush", 3), ("flush", 6), ("flush", 9), ("split", 10)]
    assert ("split", 40) in durable and ("flush", 43) in durable
    w.close()
    assert _seqs(bag) == list(range(50))
    assert bag_summary(bag) == {names.JOINT_STATES: (names.T_JOINT_STATE, 50)}


def test_the_files_follow_the_ros2_mcap_profile(tmp_path):
    from mcap.reader import make_reader

    w, topic, mono = _writer(tmp_path / "b")
    for i in range(30):
        w.write(topic, 1_000_000_000 + i, _joint_bytes(i))
        mono.t = (i + 1) / 10
    w.close()
    files = sorted((tmp_path / "b").glob("*.mcap"))
    assert len(files) == 3
    for f in files:
        with open(f, "rb") as fh:
            r = make_reader(fh, validate_crcs=True)
            assert r.get_header().profile == "ros2"
            summary = r.get_summary()
            (ch,) = summary.channels.values()
            assert ch.topic == "/joint_states" and ch.message_encoding == "cdr"
            assert yaml.safe_load(ch.metadata["offered_qos_profiles"]) == QOS
            assert ch.metadata["topic_type_hash"].startswith("RIHS01_")
            schema = summary.schemas[ch.schema_id]
            assert schema.name == names.T_JOINT_STATE and schema.encoding == "ros2msg"
            assert b"std_msgs/Header header" in schema.data
            assert {c.compression for c in summary.chunk_indexes} == {"zstd"}
            assert sum(1 for _ in r.iter_messages()) == 10


def test_repair_recovers_the_flushed_chunks_of_an_unclosed_file(tmp_path, capsys):
    bag = tmp_path / "rosbag"
    w, topic, mono = _writer(bag)
    for i in range(25):
        w.write(topic, 1_000_000_000 + i, _joint_bytes(i))
        mono.t = (i + 1) / 10
    # a kill now: two closed splits (20 messages), the third file open with a flushed chunk
    # (messages 20-22, flushed at 2.3 s) and two more still in the writer's memory
    assert _seqs(bag) == list(range(20))
    with pytest.raises(Exception, match="magic"), Reader(bag / "rosbag_2.mcap") as r:
        list(r.messages())  # no footer yet
    assert cli(["bag-repair", str(bag)]) == 0
    out = capsys.readouterr().out
    assert "rosbag_2.mcap: unclosed; recovered 3 messages" in out
    assert "metadata.yaml: 3 files, 23 messages" in out
    assert _seqs(bag) == list(range(23))
    assert repair_bag(bag).files[2].status == "ok"  # repaired files are complete files


def test_repair_drops_a_torn_chunk_and_keeps_the_rest(tmp_path):
    bag = tmp_path / "rosbag"
    w, topic, mono = _writer(bag)
    for i in range(14):
        w.write(topic, 1_000_000_000 + i, _joint_bytes(i))
        mono.t = (i + 1) / 10
    f = bag / "rosbag_1.mcap"
    whole = f.stat().st_size
    with open(f, "ab") as fh:  # half a chunk record: opcode, a length past the end, bytes
        fh.write(b"\x06" + (5000).to_bytes(8, "little") + b"\x00" * 100)
    report = repair_bag(bag)
    assert [x.status for x in report.files] == ["ok", "repaired"]
    assert report.files[1].messages == 3 and report.files[1].dropped_bytes >= 109
    assert whole > 0 and _seqs(bag) == list(range(13))


def test_repair_reads_a_rosbags_single_file_bag_without_footer(tmp_path):
    from rosbags.rosbag2 import StoragePlugin, Writer

    bag = tmp_path / "old"
    store = typestore()
    w = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    w.open()
    conn = w.add_connection("/joint_states", names.T_JOINT_STATE, typestore=store)
    for i in range(3000):  # rosbags closes a chunk every MiB
        w.write(conn, 1_000_000_000 + i, _joint_bytes(i, joints=40))
    w.storage.bio.flush()  # what a kill leaves: chunks on disk, no footer, no metadata
    assert not (bag / "metadata.yaml").exists()
    report = repair_bag(bag)
    assert report.files[0].status == "repaired" and report.files[0].messages > 1000
    seqs = [round(m.value.stamp) for m in read_bag(bag)]
    assert seqs == list(range(len(seqs))) and len(seqs) == report.messages


def test_bag_repair_usage_errors(tmp_path, capsys):
    assert cli(["bag-repair", str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert cli(["bag-repair", str(tmp_path)]) == 2
    assert "no .mcap files" in capsys.readouterr().err
