"""The rosbag2 side of an episode for the viewer: camera frames (raw or compressed), joint
states, and the agent's, operator's and monitor's topics where the log lacks them, each put on
the episode's time axis (see :mod:`.episode_data`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core import names
from .episode_data import Episode, Frame, encode_frame, iso, iso_to_epoch

log = logging.getLogger(__name__)


@dataclass
class _BagMsg:
    topic: str
    type: str
    t_ns: int
    value: Any


def _iter_bag(path: Path) -> Iterator[_BagMsg]:
    try:
        from ..rosmsg.bag_read import read_bag
    except ImportError:
        read_bag = None  # type: ignore[assignment]
    if read_bag is not None:
        for m in read_bag(path):  # a compressed camera is shown as its camera
            yield _BagMsg(m.topic.removesuffix("/compressed"), m.type, m.t_ns, m.value)
        return
    yield from _iter_bag_rosbags(path)


def _iter_bag_rosbags(path: Path) -> Iterator[_BagMsg]:
    """Images straight from ``rosbags`` (used when solarian_agent.rosmsg.bag_read is
    unavailable)."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from ..core.messages import Image

    store = get_typestore(Stores.ROS2_HUMBLE)
    with Reader(path) as reader:
        conns = [c for c in reader.connections
                 if c.msgtype in (names.T_IMAGE, "sensor_msgs/msg/CompressedImage")]
        for conn, t_ns, raw in reader.messages(connections=conns):
            msg: Any = store.deserialize_cdr(raw, conn.msgtype)
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            topic = conn.topic.lstrip("/")
            if conn.msgtype == names.T_IMAGE:
                a = np.frombuffer(bytes(msg.data), np.uint8)
                ch = {"mono8": 1, "rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4}.get(
                    msg.encoding, 0)
                if not ch:
                    continue
                a = a.reshape(msg.height, msg.step)[:, :msg.width * ch].reshape(
                    msg.height, msg.width, ch) if ch > 1 else a.reshape(msg.height, msg.step)[
                    :, :msg.width]
                yield _BagMsg(topic, conn.msgtype, t_ns,
                              Image(a, stamp, msg.header.frame_id, 0, msg.encoding))
            else:
                yield _BagMsg(topic, conn.msgtype, t_ns,
                              {"jpeg": bytes(msg.data), "stamp": stamp})


def load_bag(ep: Episode, bag: Path, fps: float, max_side: int, max_frames: int,
             quality: int, offset: float | None) -> float | None:
    """Read one bag into ``ep``; returns the offset from bag time to log time it used."""
    found = _BagContents(have_log=ep.log_dir is not None and bool(ep.events),
                         log_kinds={e.get("kind") for e in ep.events})
    for n, m in enumerate(_iter_bag(bag)):
        try:
            found.take(ep, n, m)
        except Exception:
            found.bad += 1
    if found.bad:
        ep.warnings.append(f"{bag.name}: {found.bad} messages could not be read")
    if found.offsets:
        offset = _median(found.offsets)
    elif offset is None:
        offset = _guess_offset(ep, found.images)
    axis = _BagAxis(ep, offset, _median(found.stamp_offsets) if found.stamp_offsets else None)
    _add_events(ep, found.extra, axis)
    _add_joints(ep, found.joints, axis)
    _add_frames(ep, found.images, axis, fps, max_side, max_frames, quality)
    return offset


# a joint_states message as read: (its stamp, the bag's receive time in ns, names, positions)
JointSample = tuple[float, int, tuple[str, ...], tuple[float, ...]]


def _median(values: list[float]) -> float:
    """The upper median (what the offsets have always used)."""
    values.sort()
    return values[len(values) // 2]


@dataclass
class _BagContents:
    """What a bag holds for the episode, sorted by kind as it is read."""

    have_log: bool  # the log has the agent's events: the bag's are only used for the clock
    log_kinds: set[Any]
    images: list[_BagMsg] = field(default_factory=list)
    joints: list[JointSample] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)  # events the log lacks
    offsets: list[float] = field(default_factory=list)  # log time - bag time, from agent events
    # log time - the run's own clock, from event/state pairs
    stamp_offsets: list[float] = field(default_factory=list)
    last_event: tuple[int, float] | None = None  # (message index, log time)
    bad: int = 0

    def take(self, ep: Episode, n: int, m: _BagMsg) -> None:
        """Sort the ``n``-th message ``m`` (raises on a malformed one)."""
        v = m.value
        if m.type in (names.T_IMAGE, "sensor_msgs/msg/CompressedImage"):
            self.images.append(m)
        elif m.type == names.T_JOINT_STATE:
            self.joints.append((float(v.stamp), m.t_ns, tuple(v.name), tuple(v.position)))
        elif m.type == names.T_AGENT_STATE:
            # the planner publishes its state in the same tick as the event before it: that
            # pairs the run's clock (stamps) with the log's (ISO times)
            stamp = float(getattr(v, "stamp", 0.0) or 0.0)
            if self.last_event is not None and n - self.last_event[0] <= 50 and stamp > 0:
                self.stamp_offsets.append(self.last_event[1] - stamp)
        elif m.type == names.T_AGENT_EVENT:
            self._agent_event(ep, n, m)
        elif m.type == names.T_OPERATOR_EVENT:
            self.extra.append({"kind": "operator_event", "by": "operator", "action": v.kind,
                               "detail": dict(v.detail), "_bag_ns": m.t_ns, "_stamp": v.stamp,
                               "_src": "bag"})
        elif m.type == names.T_MONITOR_VERDICT and "monitor_answer" not in self.log_kinds:
            self.extra.append({"kind": "monitor_verdict", "action_id": v.action_id,
                               "tool": v.tool, "question": v.question, "value": v.value,
                               "probability": v.probability, "decision": v.decision,
                               "reason": v.reason, "source": v.source, "_bag_ns": m.t_ns,
                               "_stamp": v.stamp, "_src": "bag"})

    def _agent_event(self, ep: Episode, n: int, m: _BagMsg) -> None:
        v = m.value
        t = _event_axis(ep, v)
        if t is not None:
            self.offsets.append(t - m.t_ns * 1e-9)
            self.last_event = (n, t)
        if not self.have_log:
            self.extra.append({"t": v.t, "kind": v.kind, **dict(v.data), "_ts": t,
                               "_src": "bag"})


@dataclass(frozen=True)
class _BagAxis:
    """Bag messages put on the episode's time axis: ``offset`` from bag time to log time,
    ``stamp_offset`` from the run's own clock (stamps) to the log's, when known."""

    ep: Episode
    offset: float | None
    stamp_offset: float | None

    def bag_time(self, t_ns: int) -> float:
        return t_ns * 1e-9 + (self.offset or 0.0)

    def when(self, stamp: float, t_ns: int) -> float:
        """A message's time on the axis: its own stamp through the log's clock anchor, else
        its stamp when that is on the log's clock (ROS time) or maps onto it (a monotonic or
        simulated run clock), else the time the bag received it."""
        exact = self.ep.stamp_time(stamp) if stamp > 0 else None
        if exact is not None:
            return exact
        if stamp > 1e9 and abs(self.offset or 0.0) < 5.0:
            return stamp
        if 0 < stamp < 1e9 and self.stamp_offset is not None:
            return stamp + self.stamp_offset
        return self.bag_time(t_ns)


def _add_events(ep: Episode, extra: list[dict[str, Any]], axis: _BagAxis) -> None:
    for e in extra:
        if "_bag_ns" in e:
            e["_ts"] = axis.when(float(e.pop("_stamp", 0.0) or 0.0), e.pop("_bag_ns"))
            if not ep.simulated:
                e["t"] = iso(e["_ts"])
        e["_n"] = len(ep.events)
        ep.events.append(e)


def _add_joints(ep: Episode, joints: list[JointSample], axis: _BagAxis) -> None:
    last_joint = -1e18
    for stamp, t_ns, jnames, pos in joints:  # at most 25 samples a second for the plots
        t = axis.when(stamp, t_ns)
        if t - last_joint >= 0.04 - 1e-9:
            ep.joints.append((t, jnames, pos))
            last_joint = t


def _add_frames(ep: Episode, images: list[_BagMsg], axis: _BagAxis, fps: float, max_side: int,
                max_frames: int, quality: int) -> None:
    """The camera frames, at most ``fps`` a second and ``max_frames`` a camera."""
    last: dict[str, float] = {}
    truncated: dict[str, int] = {}
    for m in images:
        v = m.value
        stamp = float(v["stamp"] if isinstance(v, dict) else getattr(v, "stamp", 0.0))
        t = axis.when(stamp, m.t_ns)
        frames = ep.frames.setdefault(m.topic, [])
        if m.topic in last and t - last[m.topic] < 1.0 / fps - 1e-6:
            continue
        if len(frames) >= max_frames:
            truncated[m.topic] = truncated.get(m.topic, 0) + 1
            continue
        enc = encode_frame(v, max_side, quality)
        if enc is None:
            continue
        last[m.topic] = t
        frames.append(Frame(t, stamp, enc[0], enc[1], enc[2]))
    for topic, n in truncated.items():
        ep.warnings.append(f"{topic}: {n} frames after the first {max_frames} left out "
                           "(--max-frames)")
    for topic in [t for t, f in ep.frames.items() if not f]:
        del ep.frames[topic]


def _guess_offset(ep: Episode, images: list[_BagMsg]) -> float:
    """Bag and log clocks with nothing to pair them: align the first frame with the first
    event when they are far apart (a simulated clock), else trust them."""
    ts = [float(e["_ts"]) for e in ep.events if e.get("_ts") is not None]
    if not ts or not images:
        return 0.0
    first = images[0].t_ns * 1e-9
    if abs(first - min(ts)) > 3600:
        ep.warnings.append("the bag and the log share no clock; aligned the first frame with "
                           "the first event")
        return min(ts) - first
    return 0.0



def _event_axis(ep: Episode, ev: Any) -> float | None:
    """An agent event's time on the axis: its sim_t on a simulated episode, else its t."""
    if ep.simulated:
        sim_t = dict(getattr(ev, "data", {}) or {}).get("sim_t")
        return float(sim_t) if isinstance(sim_t, (int, float)) else None
    return iso_to_epoch(getattr(ev, "t", None))
