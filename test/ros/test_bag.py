"""rosbag2 files written and read back with a real rosbag2 library (rosbags), no ROS: a Bus run
of the toy harness recorded with the graph's topic names and types."""

from __future__ import annotations

import numpy as np
import pytest

from solarian_agent.core import names
from solarian_agent.core.messages import AgentEvent, AgentState, Image, JointState
from solarian_agent.models.scripted import reply
from solarian_agent.rosmsg.bag import (
    T_COMPRESSED,
    BagRecorder,
    CompressedFrame,
    bag_summary,
    read_bag,
)
from solarian_agent.testing.harness import make_harness


def _run(tmp_path, storage="mcap", **kw):
    h = make_harness([reply("go", ("wait", {"seconds": 1})),
                      reply("", ("finish_task", {"summary": "done", "success": True}))])
    bag = tmp_path / f"episode_{storage}"
    rec = BagRecorder(bag, storage=storage, **kw)
    attached = rec.attach(h.bus)
    frames: list[Image] = []
    h.bus.subscribe(names.image_topic("cam"), names.T_IMAGE, frames.append)
    h.say("wait a second")
    assert h.run_until(lambda: h.planner.status == "succeeded", 20)
    rec.close()
    return h, bag, rec, attached, frames


@pytest.mark.parametrize("storage, images", [("mcap", "compressed"), ("mcap", "raw"),
                                             ("sqlite3", "raw")])
def test_bus_run_recorded_and_read_back(tmp_path, storage, images):
    h, bag, rec, attached, frames = _run(tmp_path, storage, images=images)
    assert {names.image_topic("cam"), names.JOINT_STATES, names.AGENT_EVENTS,
            names.AGENT_STATE, names.SKILL_EVENTS, names.EXECUTOR_GENERATION} <= set(attached)
    assert rec.errors == {} and rec.dropped == {}
    summary = bag_summary(bag)
    image_topic = names.image_topic("cam") + ("/compressed" if images == "compressed" else "")
    image_type = T_COMPRESSED if images == "compressed" else names.T_IMAGE
    assert summary[image_topic] == (image_type, len(frames))
    assert (names.image_topic("cam") in summary) == (images == "raw")
    assert summary[names.JOINT_STATES][0] == names.T_JOINT_STATE
    assert summary[names.AGENT_EVENTS][0] == names.T_AGENT_EVENT
    assert summary[names.AGENT_STATE][0] == names.T_AGENT_STATE
    # latched: the first value, then the one the planner's first run claims (a new planner
    # refuses the goals sent before it)
    assert summary[names.EXECUTOR_GENERATION] == (names.T_GENERATION, 2)
    for topic, (_t, count) in summary.items():
        assert count == rec.counts[topic], topic
    files = list(bag.iterdir())
    assert any(f.suffix == (".mcap" if storage == "mcap" else ".db3") for f in files)

    msgs = list(read_bag(bag))
    assert len(msgs) == sum(c for _, c in summary.values())
    assert [m.t_ns for m in msgs] == sorted(m.t_ns for m in msgs)
    images_read = [m for m in msgs if m.topic == image_topic]
    first = images_read[0].value
    if images == "compressed":
        assert isinstance(first, CompressedFrame)
        assert first.format == "bgr8; jpeg compressed bgr8" and first.data[:2] == b"\xff\xd8"
        assert len(first.data) < frames[0].data.nbytes / 5
        first = first.decode()
        diff = np.abs(first.data.astype(int) - frames[0].data.astype(int)).mean()
        assert first.data.shape == frames[0].data.shape and diff < 4.0
    else:
        assert isinstance(first, Image) and first.encoding == "bgr8"
        assert np.array_equal(first.data, frames[0].data)
    assert first.stamp == pytest.approx(frames[0].stamp) and first.frame_id == "cam"
    assert all(isinstance(m.value, JointState) for m in msgs if m.topic == names.JOINT_STATES)
    events = [m.value for m in msgs if m.topic == names.AGENT_EVENTS]
    assert all(isinstance(e, AgentEvent) for e in events)
    assert "run_ended" in {e.kind for e in events}
    states = [m.value for m in msgs if m.topic == names.AGENT_STATE]
    assert isinstance(states[-1], AgentState) and states[-1].status == "succeeded"


def test_bag_metadata_keeps_the_graph_qos(tmp_path):
    _h, bag, *_ = _run(tmp_path)
    meta = (bag / "metadata.yaml").read_text()
    assert "storage_identifier: mcap" in meta
    from rosbags.rosbag2 import Reader

    with Reader(bag) as r:
        qos = {c.topic: c.ext.offered_qos_profiles[0] for c in r.connections}
    assert qos["/cam/image_raw/compressed"].reliability.name == "BEST_EFFORT"
    assert qos["/agent/state"].durability.name == "TRANSIENT_LOCAL"
    assert qos["/agent/events"].reliability.name == "RELIABLE"


def test_read_selected_topics_undecoded(tmp_path):
    _h, bag, *_ = _run(tmp_path)
    raw = list(read_bag(bag, [names.JOINT_STATES], decode=False))
    assert raw and all(m.topic == names.JOINT_STATES for m in raw)
    assert hasattr(raw[0].value, "position")


def test_recorder_refuses_an_existing_bag_and_skips_bad_messages(tmp_path):
    rec = BagRecorder(tmp_path / "b")
    assert rec.write(names.JOINT_STATES, names.T_JOINT_STATE,
                     JointState(1.0, ("a",), (0.5,)), t_ns=5)
    assert not rec.write(names.AGENT_EVENTS, names.T_AGENT_EVENT, "not an event")
    assert names.AGENT_EVENTS in rec.errors
    rec.close()
    assert not rec.write(names.JOINT_STATES, names.T_JOINT_STATE,
                         JointState(1.0, ("a",), (0.5,)))
    with pytest.raises(Exception, match="exists"):
        BagRecorder(tmp_path / "b")
    with pytest.raises(ValueError, match="storage"):
        BagRecorder(tmp_path / "c", storage="zip")
    with pytest.raises(ValueError, match="images must be one of"):
        BagRecorder(tmp_path / "d", images="png")
    with pytest.raises(ValueError, match="compression must be one of"):
        BagRecorder(tmp_path / "e", compression="gzip")
    assert bag_summary(tmp_path / "b") == {names.JOINT_STATES: (names.T_JOINT_STATE, 1)}
