"""Playing a recorded bag into the graph, without rosbag2 (ROS-free core of ``bag_player``).

``replay.launch.py`` replays an episode into a monitor on sim time to evaluate monitor
questions offline.  ``ros2 bag play`` is not on PyPI, so the package plays bags itself: the
messages are read with ``rosbags`` (:func:`.bag.read_bag`), paced by their recorded times at
``rate``, and published on the graph's names with the graph's QoS; ``clock`` (rosgraph_msgs/Clock)
carries the recorded time, so nodes with ``use_sim_time`` see the episode's clock.  Compressed
camera images (``<camera>/image_raw/compressed``, as the embedded recorder writes them) are
decoded and published raw on ``<camera>/image_raw``, what the monitor subscribes: no
image_transport republisher is needed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.clock import Clock
from ..core.errors import ConfigError
from ..core.transport import Bus
from ..rosmsg import graph
from ..rosmsg.bag import BagMessage, CompressedFrame, read_bag
from ..rosmsg.graph import COMPRESSED_SUFFIX, played_topic
from .node_core import Loop, NodeCore


def select_topics(bag_topics: Sequence[str], namespace: str = "",
                  wanted: Sequence[str] = ()) -> dict[str, str]:
    """bag topic -> the (relative) graph topic it is played on, for the bag's replayable
    topics (camera images raw or compressed, joint_states, skills/events) recorded in
    ``namespace``; ``wanted`` (relative names, raw or compressed) narrows them down."""
    prefix = namespace.strip("/")
    out: dict[str, str] = {}
    for t in bag_topics:
        name = t.lstrip("/")
        if prefix:
            if not name.startswith(prefix + "/"):
                continue
            name = name[len(prefix) + 1:]
        if wanted and name not in wanted and played_topic(name) not in wanted:
            continue
        try:
            graph.replay_topic(played_topic(name))
        except KeyError:
            continue
        out[t.lstrip("/")] = played_topic(name)
    if wanted:
        missing = [w for w in wanted if w not in out.values() and w not in
                   {k.rsplit("/", 1)[0] if k.endswith(COMPRESSED_SUFFIX) else k for k in out}]
        if missing:
            raise ConfigError("topics", f"not in the bag (or not replayable): "
                                        f"{', '.join(missing)}")
    return out


class BagPlayer:
    """Publishes a bag's messages on ``bus`` in recorded time at ``rate``; call :meth:`play`
    from a loop thread (it returns when the bag ends or ``stop`` is set)."""

    def __init__(self, bus: Bus, clock: Clock, path: str | Path, topics: Mapping[str, str],
                 *, rate: float = 1.0, delay_s: float = 0.0, publish_clock: bool = True,
                 node: str = "bag_player") -> None:
        """``topics``: bag topic -> graph topic (:func:`select_topics`)."""
        if not Path(path).is_dir():
            raise ConfigError("bag", f"{path} is not a bag directory")
        if not rate > 0:
            raise ConfigError("rate", f"must be > 0, got {rate}")
        self.path = Path(path)
        self.clock = clock
        self.rate = float(rate)
        self.delay_s = max(0.0, float(delay_s))
        self.topics = dict(topics)
        self.stop = threading.Event()
        self.done = threading.Event()
        self.played: dict[str, int] = {}
        self.errors: list[str] = []
        self._pubs: dict[str, Any] = {}
        for out in sorted(set(self.topics.values())):
            try:
                typename, qos = graph.replay_topic(out)
            except KeyError:
                raise ConfigError("topics", f"{out!r} is not a topic the replay plays (camera "
                                            "images, joint_states, skills/events)") from None
            self._pubs[out] = bus.publisher(out, typename, qos, node)
        self._clock_pub = (bus.publisher(graph.CLOCK, graph.T_CLOCK, graph.CLOCK_QOS, node)
                           if publish_clock else None)

    def _messages(self) -> Iterator[BagMessage]:
        return read_bag(self.path, list(self.topics))

    def play(self) -> None:
        if self.done.is_set():  # played once (the loop calls again): idle until stopped
            self.stop.wait(0.5)
            return
        try:
            if self.stop.wait(self.delay_s):
                return
            first: int | None = None
            t0 = self.clock.now()
            for m in self._messages():
                if first is None:
                    first = m.t_ns
                due = t0 + (m.t_ns - first) * 1e-9 / self.rate
                while not self.stop.is_set():
                    left = due - self.clock.now()
                    if left <= 0:
                        break
                    self.stop.wait(min(left, 0.05))
                if self.stop.is_set():
                    return
                self._publish(m)
        except Exception as e:  # a damaged bag ends the playback with the reason
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self.done.set()

    def _publish(self, m: BagMessage) -> None:
        if self._clock_pub is not None:
            self._clock_pub.publish(m.t_ns * 1e-9)
        value = m.value
        if isinstance(value, CompressedFrame):
            try:
                value = value.decode()
            except Exception as e:  # one bad frame is skipped, not the bag
                self.errors.append(f"{m.topic}: {e}")
                return
        out = self.topics[m.topic]
        self._pubs[out].publish(value)
        self.played[out] = self.played.get(out, 0) + 1


def build_bag_player_core(clock: Clock, bag: str, *, namespace: str = "",
                          topics: Sequence[str] = (), rate: float = 1.0, delay_s: float = 0.0,
                          publish_clock: bool = True, bus: Bus | None = None) -> NodeCore:
    """The player of ``bag``'s replayable topics recorded in ``namespace`` (``topics``: only
    these, relative names)."""
    from ..rosmsg.bag import bag_summary

    if not Path(bag).is_dir():
        raise ConfigError("bag", f"{bag!r} is not a bag directory")
    try:
        summary = bag_summary(bag)
    except Exception as e:
        raise ConfigError("bag", f"{bag}: not a readable bag: {e}") from e
    chosen = select_topics(list(summary), namespace, topics)
    if not chosen:
        raise ConfigError("bag", f"{bag} holds none of the topics a replay plays (camera "
                                 f"images, joint_states, skills/events) in namespace "
                                 f"{namespace or '/'}; it holds {', '.join(summary) or 'none'}")
    bus = bus or Bus()
    player = BagPlayer(bus, clock, bag, chosen, rate=rate, delay_s=delay_s,
                       publish_clock=publish_clock)
    return NodeCore(bus, graph.bag_player_node(sorted(set(chosen.values())), publish_clock),
                    [Loop("play", 0.0, player.play)], shutdown=player.stop.set,
                    parts={"player": player})


__all__ = ["BagPlayer", "build_bag_player_core", "played_topic", "select_topics"]
