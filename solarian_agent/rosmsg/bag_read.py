"""A rosbag2 bag's messages as the core's values, read with ``rosbags`` (no ROS needed).

Bags written by ``solarian_agent.rosmsg.bag.BagRecorder`` (or ``ros2 bag record``) hold the
graph's topic names and types; :func:`read_bag` deserializes each message with the package's
typestore and converts it to the core's value (:mod:`.convert`).  A compressed camera image
(``<camera>/image_raw/compressed``) is kept encoded, as a :class:`CompressedFrame`, until it
is decoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.messages import Image
from . import convert as cv
from .interfaces import typestore

T_COMPRESSED = "sensor_msgs/msg/CompressedImage"
COMPRESSED_SUFFIX = "/compressed"


@dataclass(frozen=True)
class BagMessage:
    topic: str
    type: str
    t_ns: int
    value: Any  # the core's value (Image, JointState, AgentEvent, CompressedFrame, ...)


@dataclass(frozen=True)
class CompressedFrame:
    """A ``sensor_msgs/msg/CompressedImage`` as read from a bag: the encoded bytes."""

    stamp: float
    frame_id: str
    format: str
    data: bytes

    def decode(self) -> Image:
        """The core Image (bgr8, or mono8 for a grey frame)."""
        import cv2

        a = cv2.imdecode(np.frombuffer(self.data, np.uint8), cv2.IMREAD_UNCHANGED)
        if a is None:
            raise cv.ConvertError(f"{T_COMPRESSED}: {len(self.data)} bytes of {self.format!r} "
                                  "do not decode")
        a.setflags(write=False)
        return Image(a, self.stamp, self.frame_id, 0, "mono8" if a.ndim == 2 else "bgr8")


def read_bag(path: str | Path, topics: Iterable[str] | None = None, *, decode: bool = True,
             distro: str = "ROS2_JAZZY") -> Iterator[BagMessage]:
    """The bag's messages in time order, converted to the core's values (a CompressedImage to
    a :class:`CompressedFrame`; ``decode=False``: the deserialized ROS messages).  Topic names
    are given and returned without the leading slash, as the Bus names them."""
    from rosbags.rosbag2 import Reader

    store = typestore(distro)
    want = None if topics is None else {"/" + t.lstrip("/") for t in topics}
    with Reader(Path(path)) as reader:
        conns = [c for c in reader.connections if want is None or c.topic in want]
        for conn, t_ns, raw in reader.messages(connections=conns):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if not decode:
                value = msg
            elif conn.msgtype == T_COMPRESSED:
                value = CompressedFrame(cv.time_from_ros(msg.header.stamp),
                                        str(msg.header.frame_id), str(msg.format),
                                        bytes(msg.data))
            else:
                value = cv.from_ros(conn.msgtype, msg)
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


__all__ = ["COMPRESSED_SUFFIX", "T_COMPRESSED", "BagMessage", "CompressedFrame", "bag_summary",
           "read_bag"]
