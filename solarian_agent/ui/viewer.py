"""``solarian-agent view-episode <episode dir>``: one self-contained HTML page for an episode.

The page plays the episode's camera frames as a video with its events beside it on one
timeline, the agent's and the operator's alike; the trackers' overlays are drawn on the frames
they were logged for (``o`` toggles them); clicking a planner turn shows what the planner was
sent and what it replied; monitor verdicts are marked on the timeline by decision.

It reads the episode log (``logs/``, or ``agent/`` for sessions recorded before ``logs/``:
``events.jsonl``, ``turns/``, ``images/``, ``overlays/``) and the episode's rosbag2 recording
(camera frames; the agent's, the operator's and the monitor's topics where the log lacks
them).  The bag is found next to the log, inside the episode directory, or in the robot's
recording of the same session; ``--bag`` names it.  Bags are read with
:mod:`solarian_agent.ros.bag` when it is available, else with ``rosbags`` directly.

Without a bag the "video" is the images the planner saw, at the times it saw them.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import html
import json
import logging
import math
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..core import names
from ..core.episode_log import iter_turns, read_events
from .link import compact, describe_event

log = logging.getLogger(__name__)

MONITOR_KINDS = ("monitor_answer", "monitor_decision", "monitor_verdict")
OPERATOR_KINDS = ("operator_takeover", "operator_event", "run_paused", "run_resumed")


# ----------------------------------------------------------------------------------------
# finding things
# ----------------------------------------------------------------------------------------
def iso_to_epoch(t: Any) -> float | None:
    if not isinstance(t, str) or not t:
        return None
    try:
        d = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return d.timestamp()


def find_log_dir(path: Path) -> tuple[Path, Path | None]:
    """(episode dir, log dir) for an episode dir, its ``logs/`` / ``agent/`` dir, or a dir
    holding ``events.jsonl``.  The log dir is None when there is no log (a bag only)."""
    path = Path(path)
    if (path / "events.jsonl").is_file():
        ep = path.parent if path.name in ("logs", "agent") else path
        return ep, path
    for sub in ("logs", "agent"):
        if (path / sub / "events.jsonl").is_file():
            return path, path / sub
    return path, None


def _is_bag(d: Path) -> bool:
    return d.is_dir() and (d / "metadata.yaml").is_file()


def find_bags(episode_dir: Path, log_dir: Path | None) -> list[Path]:
    """rosbag2 directories recorded for this episode."""
    out: list[Path] = []

    def add(d: Path) -> None:
        if _is_bag(d) and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)

    add(episode_dir)
    roots = [episode_dir] + ([log_dir] if log_dir is not None else [])
    for root in roots:
        for meta in sorted(root.glob("*/metadata.yaml")) + sorted(root.glob("*/*/metadata.yaml")):
            add(meta.parent)
    # the robot's recording of the same session: recordings/robot/<session>/episodes/<ep>
    parts = episode_dir.resolve().parts
    if "controller" in parts:
        i = len(parts) - 1 - parts[::-1].index("controller")
        robot = Path(*parts[:i], "robot", *parts[i + 1:])
        if robot.is_dir():
            add(robot)
            for meta in sorted(robot.glob("*/metadata.yaml")):
                add(meta.parent)
    return out


# ----------------------------------------------------------------------------------------
# the episode as data
# ----------------------------------------------------------------------------------------
@dataclass
class Frame:
    t: float  # on the log's clock (epoch seconds)
    stamp: float  # the image's own stamp (what overlays name)
    jpeg: bytes
    width: int
    height: int
    overlays: list[int] = field(default_factory=list)


@dataclass
class Episode:
    episode_dir: Path
    log_dir: Path | None
    events: list[dict[str, Any]] = field(default_factory=list)
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    images: dict[str, bytes] = field(default_factory=dict)
    frames: dict[str, list[Frame]] = field(default_factory=dict)
    overlays: list[dict[str, Any]] = field(default_factory=list)
    bags: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    frames_from: str = "none"  # bag | log images | none

    @property
    def title(self) -> str:
        run = next((e for e in self.events if e.get("kind") in ("run_started",
                                                                 "run_continued")), None)
        if run is not None:
            return f"{run.get('run_id', '')}: {run.get('task', '')}"
        return str(self.episode_dir)


def _walk_strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _walk_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_strings(v)


def _image_refs(obj: Any) -> list[str]:
    return [s for s in _walk_strings(obj) if s.startswith("images/") and ".." not in s]


def load_episode(path: Path, *, bags: Sequence[Path] | None = None, fps: float = 5.0,
                 max_side: int = 480, max_frames: int = 3000, quality: int = 75) -> Episode:
    episode_dir, log_dir = find_log_dir(Path(path))
    ep = Episode(episode_dir, log_dir)
    if log_dir is not None:
        _load_log(ep, log_dir)
    ep.bags = list(bags) if bags is not None else find_bags(episode_dir, log_dir)
    if log_dir is None and not ep.bags:
        raise FileNotFoundError(f"{path}: no events.jsonl (in logs/ or agent/) and no rosbag2 "
                                "recording found")
    offset = None
    for bag in ep.bags:
        try:
            offset = _load_bag(ep, bag, fps, max_side, max_frames, quality, offset)
        except Exception as e:  # one unreadable bag never loses the log
            ep.warnings.append(f"could not read the bag {bag}: {type(e).__name__}: {e}")
            log.warning("could not read the bag %s", bag, exc_info=True)
    if ep.frames:
        ep.frames_from = "bag"
    elif ep.images:
        _frames_from_log_images(ep, max_side, quality)
    if log_dir is not None and ep.frames_from == "bag":
        _load_overlays(ep, log_dir)
    ep.events.sort(key=lambda e: (e.get("_ts") is None, e.get("_ts") or 0.0, e.get("_n", 0)))
    return ep


def _load_log(ep: Episode, log_dir: Path) -> None:
    try:
        events = read_events(log_dir / "events.jsonl")
    except (OSError, ValueError) as e:
        ep.warnings.append(f"events.jsonl: {e}")
        events = []
    for n, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        ev = dict(ev)
        ev["_ts"] = iso_to_epoch(ev.get("t"))
        ev["_n"] = n
        ev["_src"] = "log"
        ep.events.append(ev)
    for p in iter_turns(log_dir):
        rel = f"turns/{p.name}"
        try:
            ep.turns[rel] = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            ep.warnings.append(f"{rel}: {e}")
            ep.turns[rel] = {"error": {"kind": "unreadable", "message": str(e)}}
    refs: list[str] = []
    for ev in ep.events:
        refs.extend(_image_refs(ev))
    for turn in ep.turns.values():
        refs.extend(_image_refs(turn.get("input")))
    for rel in dict.fromkeys(refs):
        f = log_dir / rel
        if f.is_file():
            ep.images[rel] = f.read_bytes()
        else:
            ep.warnings.append(f"{rel} is named but missing")


# ----------------------------------------------------------------------------------------
# bags
# ----------------------------------------------------------------------------------------
@dataclass
class _BagMsg:
    topic: str
    type: str
    t_ns: int
    value: Any


def _iter_bag(path: Path) -> Iterator[_BagMsg]:
    try:
        from ..ros.bag import read_bag
    except ImportError:
        read_bag = None  # type: ignore[assignment]
    if read_bag is not None:
        for m in read_bag(path):  # a compressed camera is shown as its camera
            yield _BagMsg(m.topic.removesuffix("/compressed"), m.type, m.t_ns, m.value)
        return
    yield from _iter_bag_rosbags(path)


def _iter_bag_rosbags(path: Path) -> Iterator[_BagMsg]:
    """Images straight from ``rosbags`` (used when solarian_agent.ros.bag is unavailable)."""
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


def _encode(img: Any, max_side: int, quality: int) -> tuple[bytes, int, int] | None:
    import cv2

    if hasattr(img, "format") and isinstance(getattr(img, "data", None), bytes):
        img = {"jpeg": img.data}  # a CompressedFrame from read_bag
    if isinstance(img, dict) and "jpeg" in img:  # a CompressedImage
        a = cv2.imdecode(np.frombuffer(img["jpeg"], np.uint8), cv2.IMREAD_COLOR)
        if a is None:
            return None
        enc = "bgr8"
    else:
        a = np.asarray(img.data)
        enc = getattr(img, "encoding", "bgr8")
    if a.ndim == 3 and enc == "rgb8":
        a = cv2.cvtColor(a, cv2.COLOR_RGB2BGR)
    elif a.ndim == 3 and a.shape[2] == 4:
        a = cv2.cvtColor(a, cv2.COLOR_RGBA2BGR if enc == "rgba8" else cv2.COLOR_BGRA2BGR)
    h, w = a.shape[:2]
    if max(h, w) > max_side:
        s = max_side / max(h, w)
        a = cv2.resize(a, (max(1, round(w * s)), max(1, round(h * s))),
                       interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", a, [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    return (bytes(buf), w, h) if ok else None


def _load_bag(ep: Episode, bag: Path, fps: float, max_side: int, max_frames: int,
              quality: int, offset: float | None) -> float | None:
    """Read one bag into ``ep``; returns the offset from bag time to log time it used."""
    have_log = ep.log_dir is not None and bool(ep.events)
    log_kinds = {e.get("kind") for e in ep.events}
    images: list[_BagMsg] = []
    extra: list[dict[str, Any]] = []
    offsets: list[float] = []  # log time - bag time, from agent events
    stamp_offsets: list[float] = []  # log time - the run's own clock, from event/state pairs
    last_event: tuple[int, float] | None = None  # (message index, log time)
    bad = 0
    for n, m in enumerate(_iter_bag(bag)):
        try:
            v = m.value
            if m.type in (names.T_IMAGE, "sensor_msgs/msg/CompressedImage"):
                images.append(m)
            elif m.type == names.T_AGENT_STATE:
                # the planner publishes its state in the same tick as the event before it:
                # that pairs the run's clock (stamps) with the log's (ISO times)
                stamp = float(getattr(v, "stamp", 0.0) or 0.0)
                if last_event is not None and n - last_event[0] <= 50 and stamp > 0:
                    stamp_offsets.append(last_event[1] - stamp)
            elif m.type == names.T_AGENT_EVENT:
                t = iso_to_epoch(getattr(v, "t", None))
                if t is not None:
                    offsets.append(t - m.t_ns * 1e-9)
                    last_event = (n, t)
                if not have_log:
                    extra.append({"t": v.t, "kind": v.kind, **dict(v.data), "_ts": t,
                                  "_src": "bag"})
            elif m.type == names.T_OPERATOR_EVENT:
                extra.append({"kind": "operator_event", "by": "operator", "action": v.kind,
                              "detail": dict(v.detail), "_bag_ns": m.t_ns, "_stamp": v.stamp,
                              "_src": "bag"})
            elif m.type == names.T_MONITOR_VERDICT and "monitor_answer" not in log_kinds:
                extra.append({"kind": "monitor_verdict", "action_id": v.action_id,
                              "tool": v.tool, "question": v.question, "value": v.value,
                              "probability": v.probability, "decision": v.decision,
                              "reason": v.reason, "source": v.source, "_bag_ns": m.t_ns,
                              "_stamp": v.stamp, "_src": "bag"})
        except Exception:
            bad += 1
    if bad:
        ep.warnings.append(f"{bag.name}: {bad} messages could not be read")
    if offsets:
        offsets.sort()
        offset = offsets[len(offsets) // 2]
    elif offset is None:
        offset = _guess_offset(ep, images)
    stamp_offset = None
    if stamp_offsets:
        stamp_offsets.sort()
        stamp_offset = stamp_offsets[len(stamp_offsets) // 2]

    def bag_time(t_ns: int) -> float:
        return t_ns * 1e-9 + (offset or 0.0)

    def when(stamp: float, t_ns: int) -> float:
        """A message's time on the log's clock: its own stamp when that is on the log's clock
        (ROS time) or maps onto it (a monotonic or simulated run clock), else the time the
        bag received it."""
        if stamp > 1e9 and abs(offset or 0.0) < 5.0:
            return stamp
        if 0 < stamp < 1e9 and stamp_offset is not None:
            return stamp + stamp_offset
        return bag_time(t_ns)

    for e in extra:
        if "_bag_ns" in e:
            e["_ts"] = when(float(e.pop("_stamp", 0.0) or 0.0), e.pop("_bag_ns"))
            e["t"] = _iso(e["_ts"])
        e["_n"] = len(ep.events)
        ep.events.append(e)
    last: dict[str, float] = {}
    truncated: dict[str, int] = {}
    for m in images:
        v = m.value
        stamp = float(v["stamp"] if isinstance(v, dict) else getattr(v, "stamp", 0.0))
        t = when(stamp, m.t_ns)
        frames = ep.frames.setdefault(m.topic, [])
        if m.topic in last and t - last[m.topic] < 1.0 / fps - 1e-6:
            continue
        if len(frames) >= max_frames:
            truncated[m.topic] = truncated.get(m.topic, 0) + 1
            continue
        enc = _encode(v, max_side, quality)
        if enc is None:
            continue
        last[m.topic] = t
        frames.append(Frame(t, stamp, enc[0], enc[1], enc[2]))
    for topic, n in truncated.items():
        ep.warnings.append(f"{topic}: {n} frames after the first {max_frames} left out "
                           "(--max-frames)")
    for topic in [t for t, f in ep.frames.items() if not f]:
        del ep.frames[topic]
    return offset


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


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def _frames_from_log_images(ep: Episode, max_side: int, quality: int) -> None:
    """No bag: the images the planner saw, each at the first event that names it."""
    import cv2

    from ..core.messages import Image

    seen: set[str] = set()
    for ev in ep.events:
        t = ev.get("_ts")
        refs = _image_refs(ev)
        if ev.get("kind") == "planner_turn":
            turn = ep.turns.get(str(ev.get("turn", "")))
            if turn is not None:
                refs += _image_refs(turn.get("input"))
        for rel in refs:
            if rel in seen or rel not in ep.images or t is None:
                continue
            seen.add(rel)
            a = cv2.imdecode(np.frombuffer(ep.images[rel], np.uint8), cv2.IMREAD_COLOR)
            if a is None:
                continue
            stem = Path(rel).stem
            camera = stem.split("_", 1)[1] if "_" in stem else "images"
            enc = _encode(Image(a, 0.0, camera), max_side, quality)
            if enc is not None:
                ep.frames.setdefault(f"{camera} (planner images)", []).append(
                    Frame(t, 0.0, enc[0], enc[1], enc[2]))
    for frames in ep.frames.values():
        frames.sort(key=lambda f: f.t)
    if ep.frames:
        ep.frames_from = "log images"


# ----------------------------------------------------------------------------------------
# overlays
# ----------------------------------------------------------------------------------------
def _mask_polygons(b64: str, max_points: int = 400) -> list[list[list[int]]]:
    import cv2

    a = cv2.imdecode(np.frombuffer(base64.b64decode(b64), np.uint8), cv2.IMREAD_GRAYSCALE)
    if a is None:
        return []
    contours, _ = cv2.findContours((a > 127).astype(np.uint8), cv2.RETR_EXTERNAL,
                                   cv2.CHAIN_APPROX_SIMPLE)
    out = []
    for c in sorted(contours, key=cv2.contourArea, reverse=True)[:8]:
        eps = 1.0
        poly = cv2.approxPolyDP(c, eps, True)
        while len(poly) > max_points:
            eps *= 2
            poly = cv2.approxPolyDP(c, eps, True)
        out.append([[int(p[0][0]), int(p[0][1])] for p in poly])
    return out


def overlay_shapes(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The drawable shapes of one overlay record (mask -> outline polygons)."""
    shapes: list[dict[str, Any]] = []
    for key, val in rec.items():
        if key in ("ts", "size", "camera") or not isinstance(val, dict):
            continue
        shape: dict[str, Any] = {"field": key}
        if isinstance(val.get("mask"), str):
            try:
                shape["polys"] = _mask_polygons(val["mask"])
            except Exception:
                shape["polys"] = []
        box = val.get("box")
        if isinstance(box, (list, tuple)) and len(box) == 4:
            shape["box"] = [float(x) for x in box]
        pt = val.get("point")
        if isinstance(pt, (list, tuple)) and len(pt) >= 2:
            shape["point"] = [float(x) for x in pt[:3]]
        if len(shape) > 1:
            shapes.append(shape)
    return shapes


def _load_overlays(ep: Episode, log_dir: Path) -> None:
    """Attach each overlay line to the shown frame it was logged for (by the frame's stamp)."""
    odir = log_dir / "overlays"
    if not odir.is_dir():
        return
    stamps = {topic: np.array([f.stamp for f in frames]) for topic, frames in ep.frames.items()}
    for path in sorted(odir.glob("*.jsonl")):
        module = path.stem.split(".", 1)[0]
        topics = [t for t in ep.frames if t in (names.image_topic(module), module)
                  or t.startswith(module + "/")] or (list(ep.frames) if len(ep.frames) == 1
                                                      else [])
        if not topics:
            ep.warnings.append(f"overlays/{path.name}: no camera {module!r} in the recording")
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            ep.warnings.append(f"overlays/{path.name}: {e}")
            continue
        for line in lines:
            try:
                rec = json.loads(line)
                ts = float(rec["ts"])
            except (ValueError, KeyError, TypeError):
                continue
            if not math.isfinite(ts):
                continue
            for topic in topics:
                st = stamps[topic]
                if not len(st):
                    continue
                i = int(np.argmin(np.abs(st - ts)))
                frame = ep.frames[topic][i]
                if abs(st[i] - ts) > 1e-3:  # logged for a frame the page does not show
                    continue
                size = rec.get("size") or [frame.height, frame.width]
                ep.overlays.append({"file": path.name, "size": [int(size[0]), int(size[1])],
                                    "shapes": overlay_shapes(rec)})
                frame.overlays.append(len(ep.overlays) - 1)


# ----------------------------------------------------------------------------------------
# HTML
# ----------------------------------------------------------------------------------------
def _asset(name: str) -> str:
    return resources.files("solarian_agent").joinpath("data", "viewer", name).read_text(
        encoding="utf-8")


def _data_uri(data: bytes, name: str = ".jpg") -> str:
    mime = "image/png" if name.lower().endswith(".png") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _category(ev: dict[str, Any]) -> str:
    kind = str(ev.get("kind", ""))
    if kind == "planner_turn":
        return "turn"
    if kind in MONITOR_KINDS:
        return "monitor"
    if ev.get("by") == "operator" or kind in OPERATOR_KINDS:
        return "operator"
    return "agent"


def turn_anchor(rel: str) -> str:
    return "turn-" + re.sub(r"[^0-9A-Za-z]+", "-", Path(rel).stem)


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _pre(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, indent=2, ensure_ascii=False,
                                                       default=str)
    return f"<pre>{_esc(text)}</pre>"


def _render_content(content: Any) -> str:
    parts = []
    for c in content if isinstance(content, list) else []:
        if not isinstance(c, dict):
            continue
        if c.get("type") == "image":
            f = str(c.get("file", ""))
            parts.append(f'<figure class="turn-img"><img alt="{_esc(f)}" data-src="{_esc(f)}">'
                         f'<figcaption>{_esc(c.get("observation_id", ""))} {_esc(f)} '
                         f'{_esc(c.get("size", ""))}</figcaption></figure>')
        else:
            parts.append(_pre(str(c.get("text", ""))))
    return "".join(parts)


def render_turn(rel: str, turn: dict[str, Any], ev: dict[str, Any] | None) -> str:
    inp = turn.get("input") or {}
    out = turn.get("output")
    err = turn.get("error")
    head = [f"<h3>{_esc(rel)}</h3>", '<p class="muted">']
    if ev is not None:
        head.append(f"at {_esc(ev.get('t', ''))}, latency {_esc(ev.get('latency_s', '?'))} s, ")
    head.append(f"generation {_esc(turn.get('generation', '?'))}")
    if isinstance(out, dict):
        head.append(f", model {_esc(out.get('model', ''))}, stop {_esc(out.get('stop_reason'))}"
                    f", usage {_esc(compact(out.get('usage', {}), 200))}")
    head.append("</p>")
    sent = ["<h4>Sent</h4>"]
    if inp.get("messages_from"):
        sent.append(f'<p class="muted">messages from #{_esc(inp["messages_from"])} (the run '
                    "continued from an earlier episode)</p>")
    sent.append(f"<details><summary>system prompt</summary>{_pre(inp.get('system', ''))}"
                "</details>")
    tools = inp.get("tools") or []
    sent.append(f"<details><summary>{len(tools)} tools: "
                f"{_esc(', '.join(str(t.get('name')) for t in tools if isinstance(t, dict)))}"
                f"</summary>{_pre(tools)}</details>")
    for i, m in enumerate(inp.get("messages") or []):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", ""))
        extra = ""
        if m.get("tool_call_id"):
            extra = f' <span class="muted">result of {_esc(m["tool_call_id"])}'
            extra += " (error)</span>" if m.get("is_error") else "</span>"
        body = _render_content(m.get("content"))
        if m.get("tool_calls"):
            body += _pre(m["tool_calls"])
        sent.append(f'<div class="tmsg" data-role="{_esc(role)}"><div class="role">#{i} '
                    f"{_esc(role)}{extra}</div>{body}</div>")
    reply = ["<h4>Replied</h4>"]
    if isinstance(out, dict):
        if out.get("text"):
            reply.append(_pre(out["text"]))
        for c in out.get("tool_calls") or []:
            if isinstance(c, dict):
                pe = f' <span class="bad">parse error: {_esc(c["parse_error"])}</span>' if \
                    c.get("parse_error") else ""
                reply.append(f'<div class="call"><b>{_esc(c.get("name"))}</b> '
                             f'<span class="muted">{_esc(c.get("id", ""))}</span>{pe}'
                             f"{_pre(c.get('arguments', {}))}</div>")
    if err:
        reply.append(f'<div class="bad">error: {_esc(compact(err, 500))}</div>')
    if not isinstance(out, dict) and not err:
        reply.append('<p class="muted">no reply recorded</p>')
    return "".join(head + sent + reply)


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else round(t - t0, 3)


def render_html(ep: Episode) -> str:
    times = [e["_ts"] for e in ep.events if e.get("_ts") is not None]
    times += [f.t for frames in ep.frames.values() for f in frames]
    t0 = min(times) if times else 0.0
    t1 = max(times) if times else 0.0
    turn_events: dict[str, dict[str, Any]] = {}
    for e in ep.events:
        if e.get("kind") == "planner_turn" and e.get("turn"):
            turn_events.setdefault(str(e["turn"]), e)

    # the event list (rendered here, so it is in the page whatever JS does)
    rows = []
    data_events = []
    for i, e in enumerate(ep.events):
        kind = str(e.get("kind", ""))
        cat = _category(e)
        rest = {k: v for k, v in e.items() if not k.startswith("_")}
        text = describe_event(kind, {k: v for k, v in rest.items() if k not in ("t", "kind")})
        at = _rel(e.get("_ts"), t0)
        when = "" if at is None else f"{at:8.2f}"
        link = ""
        if kind == "planner_turn" and e.get("turn"):
            anchor = turn_anchor(str(e["turn"]))
            link = (f' <a class="turn-link" href="#{anchor}" data-turn="{_esc(e["turn"])}">'
                    f"{_esc(e['turn'])}</a>")
        by = f' <span class="by">{_esc(e["by"])}</span>' if e.get("by") else ""
        src = ' <span class="src">bag</span>' if e.get("_src") == "bag" else ""
        rows.append(
            f'<li class="ev" id="ev-{i}" data-i="{i}" data-cat="{cat}" data-kind="{_esc(kind)}"'
            f' data-t="{"" if at is None else at}" data-decision="{_esc(e.get("decision", ""))}"'
            f'><span class="when">{when}</span> <span class="kind">{_esc(kind)}</span>{by}{src} '
            f'<span class="text">{_esc(text)}</span>{link}</li>')
        data_events.append({"t": at, "kind": kind, "cat": cat,
                            "decision": str(e.get("decision") or ""),
                            "turn": str(e.get("turn", "")) if kind == "planner_turn" else "",
                            "detail": rest})
    # turns: every turn file gets a section, linked from its planner_turn event
    sections = []
    for rel, turn in ep.turns.items():
        sections.append(f'<section class="turn" id="{turn_anchor(rel)}" data-turn="{_esc(rel)}"'
                        f' hidden>{render_turn(rel, turn, turn_events.get(rel))}</section>')
    orphan_links = "".join(
        f'<a class="turn-link" href="#{turn_anchor(rel)}" data-turn="{_esc(rel)}">{_esc(rel)}</a> '
        for rel in ep.turns if rel not in turn_events)

    frame_images: list[str] = []
    cameras = []
    order = sorted(ep.frames, key=lambda t: t == names.AGENT_VIEW)  # the planner's view last
    for topic in order:
        frames = ep.frames[topic]
        rows_f = []
        for f in frames:
            frame_images.append(_data_uri(f.jpeg))
            rows_f.append([round(f.t - t0, 3), len(frame_images) - 1, f.overlays])
        w = max((f.width for f in frames), default=0)
        h = max((f.height for f in frames), default=0)
        cameras.append({"topic": topic, "frames": rows_f, "size": [w, h]})
    data = {
        "title": ep.title, "t0": t0, "t0_iso": _iso(t0) if times else "",
        "duration": round(t1 - t0, 3), "cameras": cameras, "frames": frame_images,
        "overlays": ep.overlays, "events": data_events,
        "images": {rel: _data_uri(b, rel) for rel, b in ep.images.items()},
        "frames_from": ep.frames_from,
    }
    blob = json.dumps(data, ensure_ascii=False, default=str).replace("<", "\\u003c")
    counts = {c: sum(1 for e in data_events if e["cat"] == c)
              for c in ("agent", "operator", "monitor", "turn")}
    warn = "".join(f"<li>{_esc(w)}</li>" for w in ep.warnings)
    page = _asset("viewer.html")
    subs = {
        "TITLE": _esc(ep.title),
        "CSS": _asset("viewer.css"),
        "JS": _asset("viewer.js"),
        "DATA": blob,
        "SUMMARY": _esc(f"{len(ep.events)} events ({counts['agent']} agent, "
                        f"{counts['operator']} operator, {counts['monitor']} monitor, "
                        f"{counts['turn']} planner turns); frames from {ep.frames_from}; "
                        f"{sum(len(f) for f in ep.frames.values())} frames on "
                        f"{len(ep.frames)} cameras; {_fmt_duration(t1 - t0)}"),
        "SOURCE": _esc(f"{ep.episode_dir} — log: {_show(ep.log_dir, ep.episode_dir)}; "
                       f"bags: {', '.join(_show(b, ep.episode_dir) for b in ep.bags) or 'none'}"),
        "WARNINGS": f'<ul class="warnings">{warn}</ul>' if warn else "",
        "EVENTS": "\n".join(rows),
        "TURNS": "\n".join(sections),
        "ORPHANS": f'<p class="muted">turns without an event: {orphan_links}</p>'
                   if orphan_links else "",
    }
    return re.sub(r"\{\{(\w+)\}\}", lambda m: subs.get(m.group(1), m.group(0)), page)


def _show(p: Path | None, base: Path) -> str:
    if p is None:
        return "none"
    try:
        return str(p.resolve().relative_to(base.resolve())) + "/"
    except ValueError:
        return str(p)


def _fmt_duration(s: float) -> str:
    s = max(0.0, s)
    return f"{int(s // 60)}:{s % 60:04.1f}"


def write_viewer(episode: Path, out: Path | None = None, **kw: Any) -> Path:
    ep = load_episode(episode, **kw)
    out = out or ep.episode_dir / "viewer.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render_html(ep), encoding="utf-8")
    tmp.replace(out)
    return out


def _serve(path: Path, port: int) -> None:  # pragma: no cover - interactive
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving http://127.0.0.1:{httpd.server_address[1]}/{path.name}  "
              "(Ctrl+C to stop)", flush=True)
        try:
            httpd.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass


def main_view_episode(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="solarian-agent view-episode",
        description="Write a self-contained HTML viewer for an episode: video, events on one "
                    "timeline, overlays (o), planner turns (click).")
    p.add_argument("episode", type=Path, help="the episode directory (or its logs/ dir)")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help="where to write the page (default: <episode>/viewer.html)")
    p.add_argument("--bag", type=Path, action="append", default=None,
                   help="a rosbag2 directory to read frames from (default: found nearby)")
    p.add_argument("--fps", type=float, default=5.0, help="frames per second kept (default 5)")
    p.add_argument("--max-side", type=int, default=480, help="frame size in the page")
    p.add_argument("--max-frames", type=int, default=3000, help="frames per camera at most")
    p.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args(list(argv) if argv is not None else None)
    if a.fps <= 0 or a.max_side < 16 or a.max_frames < 1:
        print("view-episode: --fps must be > 0, --max-side >= 16, --max-frames >= 1",
              file=sys.stderr)
        return 2
    try:
        out = write_viewer(a.episode, a.out, bags=a.bag, fps=a.fps, max_side=a.max_side,
                           max_frames=a.max_frames)
    except FileNotFoundError as e:
        print(f"view-episode: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    if a.serve:
        _serve(out, a.port)
    return 0

