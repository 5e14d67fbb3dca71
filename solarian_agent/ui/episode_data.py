"""An episode as data, for the viewer: the episode log (events, turns, images, overlays) and the
frames, joint states and verdicts of its rosbag2 recording, every time on one axis.

The axis is the run's: ``sim_t`` when a simulator ran (the frames' stamps are on that clock),
else the wall clock ``t``.  An episode log's ``episode_started`` holds the run clock's reading
at that event (``clock.now``), which maps any stamp on the run's clock (frames, overlays, joint
states, verdicts) onto the axis exactly.  Logs from before ``episode_started`` fall back to
pairing the bag's agent events with the log's.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core import names
from ..core.episode_log import iter_turns, read_events


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
    t: float  # on the episode's axis (see Episode.simulated)
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
    # the axis: simulated seconds (sim_t) when a simulator ran, else Unix seconds (t)
    simulated: bool = False
    # (run clock reading, axis time) at one instant: maps run-clock stamps onto the axis
    anchor: tuple[float, float] | None = None
    joints: list[tuple[float, tuple[str, ...], tuple[float, ...]]] = field(
        default_factory=list)  # (axis time, names, positions) from the bag's joint_states

    def stamp_time(self, stamp: float) -> float | None:
        """A stamp on the run's clock (a frame's, an overlay's) on the axis; None when the log
        holds no anchor (a log from before episode_started)."""
        if self.anchor is None:
            return None
        return stamp - self.anchor[0] + self.anchor[1]

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


def image_refs(obj: Any) -> list[str]:
    return [s for s in _walk_strings(obj) if s.startswith("images/") and ".." not in s]


def load_log(ep: Episode, log_dir: Path) -> None:
    try:
        events = read_events(log_dir / "events.jsonl")
    except (OSError, ValueError) as e:
        ep.warnings.append(f"events.jsonl: {e}")
        events = []
    events = [e for e in events if isinstance(e, dict)]
    ep.simulated = any(isinstance(e.get("sim_t"), (int, float)) for e in events)
    for n, ev in enumerate(events):
        ev = dict(ev)
        sim_t = ev.get("sim_t")
        ev["_ts"] = (float(sim_t) if isinstance(sim_t, (int, float)) else None) \
            if ep.simulated else iso_to_epoch(ev.get("t"))
        ev["_n"] = n
        ev["_src"] = "log"
        ep.events.append(ev)
    started = next((e for e in ep.events if e.get("kind") == "episode_started"), None)
    clock = started.get("clock") if started is not None else None
    if isinstance(clock, dict) and isinstance(clock.get("now"), (int, float)) \
            and started is not None and started["_ts"] is not None:
        ep.anchor = (float(clock["now"]), float(started["_ts"]))
    for p in iter_turns(log_dir):
        rel = f"turns/{p.name}"
        try:
            ep.turns[rel] = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            ep.warnings.append(f"{rel}: {e}")
            ep.turns[rel] = {"error": {"kind": "unreadable", "message": str(e)}}
    refs: list[str] = []
    for ev in ep.events:
        refs.extend(image_refs(ev))
    for turn in ep.turns.values():
        refs.extend(image_refs(turn.get("input")))
    for rel in dict.fromkeys(refs):
        f = log_dir / rel
        if f.is_file():
            ep.images[rel] = f.read_bytes()
        else:
            ep.warnings.append(f"{rel} is named but missing")


def encode_frame(img: Any, max_side: int, quality: int) -> tuple[bytes, int, int] | None:
    """A frame for the page (an Image, a CompressedFrame or ``{"jpeg": bytes}``) as a JPEG at
    most ``max_side``; None when it does not decode."""
    import cv2

    from ..perception.images import jpeg_preview

    if hasattr(img, "format") and isinstance(getattr(img, "data", None), bytes):
        img = {"jpeg": img.data}  # a CompressedFrame from read_bag
    if isinstance(img, dict) and "jpeg" in img:  # a CompressedImage
        a = cv2.imdecode(np.frombuffer(img["jpeg"], np.uint8), cv2.IMREAD_COLOR)
        if a is None:
            return None
        return jpeg_preview(a, "bgr8", max_side, quality)
    return jpeg_preview(np.asarray(img.data), getattr(img, "encoding", "bgr8"), max_side,
                        quality)


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def frames_from_log_images(ep: Episode, max_side: int, quality: int) -> None:
    """No bag: the images the planner saw, each at the first event that names it."""
    import cv2

    from ..core.messages import Image

    seen: set[str] = set()
    for ev in ep.events:
        t = ev.get("_ts")
        refs = image_refs(ev)
        if ev.get("kind") == "planner_turn":
            turn = ep.turns.get(str(ev.get("turn", "")))
            if turn is not None:
                refs += image_refs(turn.get("input"))
        for rel in refs:
            if rel in seen or rel not in ep.images or t is None:
                continue
            seen.add(rel)
            a = cv2.imdecode(np.frombuffer(ep.images[rel], np.uint8), cv2.IMREAD_COLOR)
            if a is None:
                continue
            stem = Path(rel).stem
            camera = stem.split("_", 1)[1] if "_" in stem else "images"
            enc = encode_frame(Image(a, 0.0, camera), max_side, quality)
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


def load_overlays(ep: Episode, log_dir: Path) -> None:
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

