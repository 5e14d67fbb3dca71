"""``solarian-agent make-ticks``: labelled monitor ticks from the product's own episodes.

Runs the tidy-up demo (the rules planner, the real pick / place skills of
:mod:`~solarian_agent.skills.arm_skills` starting from the closed home pose, the shipped
``agent.monitor`` settings: its period, cameras, close-ups and reference frames) on the 2D
simulator under grasp faults and slips, one episode per seed, and keeps every monitor tick
exactly as the engine sent it: the images (the pixels it encoded, stored losslessly, so a
backend reads from the file what it read live), their labels and ages, the
reference frames and the readings.  Each tick is labelled from the simulator's truth at the
capture time of its frames, with the definitions of the skill's questions:

pick_object ``progress`` (the target is the object the jaws close on):

* ``holding``: the target is held (pinched between the jaws);
* ``grasping``: nothing held, the jaws closed since the previous frame and are still about
  as wide as the target (at least 90 % of its width: the SO-101's rigid jaws stop on a held
  object at its width, so a jaw well inside it with nothing held has missed);
* ``failed``: the target slipped out of the jaws, or nothing is held and the jaws are
  closer together than the target is wide after closing on it (a missed grasp), or they
  reopened after closing;
* ``approaching``: the jaws have not closed on anything yet in this action (the gripper
  opening from the home pose and the arm moving over and down to the target).

place_at ``released``: ``true`` once the held object has left the jaws.

Target boxes (``targets.jsonl``) are the tracker's box on each image that shows the target,
mapped into the image's pixels (``null`` when no tracker result covers it, as in a
close-up of a camera the tracker does not run on).

The ticks go to ``OUT/<tool>/`` (``ticks.jsonl``, ``labels.jsonl``, ``targets.jsonl``,
``images/``, ``skill.json`` with the shipped questions and monitor settings), the format
``label-ticks`` and ``eval-monitor`` read.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import cv2
import numpy as np

from .cli_common import CliParser, number_arg
from .core.vision import (
    Description,
    FrameForVision,
    MonitorImage,
    MonitorTickRequest,
    TickReply,
)

Box = tuple[int, int, int, int]
GRASPING_MIN = 0.9  # a closing gripper narrower than this share of the target: failed
MOVE_EPS = 0.0008  # m of aperture between two frames that count as a change


@dataclass
class Truth:
    t: float
    aperture: float  # m: the jaws' opening (SO101_JAW), not the gripper joint's angle
    held: str | None
    tip: tuple[float, float, float]


@dataclass
class RecordedTick:
    action_id: str
    tool: str
    elapsed_s: float
    questions: list[str]
    images: list[dict[str, Any]]
    readings: dict[str, Any]
    answers: dict[str, Any]


@dataclass
class Episode:
    seed: int
    truth: list[Truth] = field(default_factory=list)
    ticks: list[RecordedTick] = field(default_factory=list)
    files: dict[tuple[str, int, bool], tuple[str, bytes, Box | None]] = field(
        default_factory=dict)
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)


class RecordingBackend:
    """Wraps the configured vision backend: every tick request is kept (its images as sent)
    before the inner backend answers it."""

    def __init__(self, inner: Any, episode: Episode, boxes: Any = None, fmt: str = "webp"
                 ) -> None:
        self.inner = inner
        self.fmt = fmt
        self.episode = episode
        self.boxes = boxes  # (camera, stamp) -> the tracker's box in capture pixels, or None
        self.name = getattr(inner, "name", "")
        self.model = getattr(inner, "model", "")
        self.reads_images = getattr(inner, "reads_images", True)
        self.inline = getattr(inner, "inline", False)

    def encode(self, img: MonitorImage) -> bytes:
        """The pixels the engine encoded and sent, stored losslessly: what a backend reads
        from the file is what it read live."""
        px = img.pixels if img.pixels is not None else cv2.imdecode(
            np.frombuffer(img.data, np.uint8), cv2.IMREAD_COLOR)
        params = ([cv2.IMWRITE_WEBP_QUALITY, 101] if self.fmt == "webp"
                  else [cv2.IMWRITE_PNG_COMPRESSION, 9])
        ok, buf = cv2.imencode(f".{self.fmt}", np.ascontiguousarray(px), params)
        if not ok:
            raise OSError(f"{img.camera} frame {img.seq}: cannot encode as {self.fmt}")
        return buf.tobytes()

    def answer_tick(self, request: MonitorTickRequest, *, timeout_s: float) -> TickReply:
        reply: TickReply = self.inner.answer_tick(request, timeout_s=timeout_s)
        ep = self.episode
        recs = []
        for img in request.images:
            key = (img.camera, img.seq, img.reference)
            if key not in ep.files:
                kind = "ref" if img.reference else "f"
                name = (f"images/s{ep.seed:03d}_{request.action_id}_{img.camera}_{kind}"
                        f"{img.seq:05d}")
                box = None if self.boxes is None or img.reference else self.boxes(
                    request.action_id, img.camera, img.seq, img.stamp)
                ep.files[key] = (f"{name}.{self.fmt}", self.encode(img), box)
            recs.append({"camera": img.camera, "label": img.label, "file": ep.files[key][0],
                         "age_s": img.age_s, "close_up": img.close_up,
                         "reference": img.reference, "size": [img.width, img.height],
                         "stamp": img.stamp})
        ep.ticks.append(RecordedTick(
            request.action_id, request.tool, round(request.elapsed_s, 3),
            [q.name for q in request.questions], recs, json.loads(json.dumps(
                dict(request.readings), default=str)),
            {k: v.as_dict() for k, v in reply.answers.items()}))
        return reply

    def describe(self, frame: FrameForVision, focus: str, *, timeout_s: float) -> Description:
        out: Description = self.inner.describe(frame, focus, timeout_s=timeout_s)
        return out


def truth_at(truth: Sequence[Truth], t: float) -> Truth:
    """The newest truth sample at or before ``t`` (the first one before any)."""
    lo, hi = 0, len(truth)
    while lo < hi:
        mid = (lo + hi) // 2
        if truth[mid].t <= t + 1e-9:
            lo = mid + 1
        else:
            hi = mid
    return truth[max(0, lo - 1)]


def pick_label(prev: Truth, cur: Truth, width: float, closed_before: bool, target: str,
               held_before: bool = False) -> str:
    """The ``progress`` choice the truth of two frames means (see the module's docstring).
    ``held_before``: the target was held earlier in the action (it slipped out since)."""
    if cur.held == target:
        return "holding"
    if held_before:
        return "failed"  # it slipped out: nothing between the jaws any more
    ap0, ap1 = prev.aperture, cur.aperture
    if not closed_before and ap1 >= ap0 - MOVE_EPS:
        return "approaching"  # nothing closed on yet: opening from home, moving over it
    if ap1 > ap0 + MOVE_EPS:
        return "failed"  # reopened after closing
    if ap1 < ap0 - MOVE_EPS:
        return "grasping" if ap1 >= GRASPING_MIN * width else "failed"
    return "failed" if ap1 < width else "approaching"


def _closed_before(span: Sequence[Truth], until: float, target: str) -> bool:
    """Whether the jaws closed (3 mm from an earlier, wider aperture) or held the target at
    some sample up to ``until``."""
    peak = -1.0
    for s in span:
        if s.t > until + 1e-9:
            break
        if s.held == target or (peak >= 0 and s.aperture < peak - 0.003):
            return True
        peak = max(peak, s.aperture)
    return False


def _label_episode(ep: Episode, widths: dict[str, float]) -> list[dict[str, Any]]:
    """Each recorded tick with its label, its action's target and whether its frames show
    what the label says (rows: tick, label, question)."""
    out: list[dict[str, Any]] = []
    by_action: dict[str, list[RecordedTick]] = {}
    for tk in ep.ticks:
        by_action.setdefault(tk.action_id, []).append(tk)
    for aid, ticks in by_action.items():
        tool = ticks[0].tool
        info = ep.actions.get(aid, {})
        t0, t1 = float(info.get("t0", -1.0)), float(info.get("t1", 1e18))
        span = [s for s in ep.truth if t0 <= s.t <= t1]
        if not span:
            continue
        held_any = [s.held for s in span if s.held]
        for tk in ticks:
            wrist = [i for i in tk.images if not i["reference"] and i["camera"] == "wrist"]
            if len(wrist) < 2:
                continue
            prev = truth_at(ep.truth, float(wrist[-2]["stamp"]))
            cur = truth_at(ep.truth, float(wrist[-1]["stamp"]))
            if tool == "pick_object":
                target = info.get("target") or (held_any[0] if held_any else "")
                width = widths.get(target, 0.04)
                closed = _closed_before(span, prev.t, target)
                held_before = any(s.held == target for s in span if s.t <= cur.t)
                lab = pick_label(prev, cur, width, closed, target, held_before)
                out.append({"tick": tk, "question": "progress", "label": lab,
                            "target": target})
            elif tool == "place_at":
                carried = held_any[0] if held_any else ""
                out.append({"tick": tk, "question": "released",
                            "label": "false" if cur.held else "true", "target": carried})
    return out


def shipped_skill(tool: str) -> dict[str, Any]:
    """A tidy tool's shipped monitor questions and the shipped ``agent.monitor`` settings."""
    import yaml

    from .system import default_config_path, tidy_tools

    spec = tidy_tools()[tool].skill
    doc = yaml.safe_load(default_config_path().read_text(encoding="utf-8")) or {}
    monitor = dict((doc.get("agent") or {}).get("monitor") or {})
    return {"tool": tool, "monitor": [dict(q) for q in spec.monitor], "monitor_config": monitor}


def _tracker_boxes(engine: Any) -> Any:
    """(action_id, camera, seq, stamp) -> the action's tracker box on that frame, in the sent
    image's pixels (the box ``mark_target`` would draw its mark around), or None."""
    from .core.monitor_frames import box_to_sent, tracker_target_box

    port = engine.target_box or tracker_target_box(lambda f: None)

    def boxes(action_id: str, camera: str, seq: int, stamp: float
              ) -> tuple[int, int, int, int] | None:
        act = engine.actions.get(action_id)
        shot = engine.framing.shots.get((camera, seq, stamp))
        if act is None or shot is None:
            return None
        box = port(action_id, act.trackers, camera, shot.frame)
        return None if box is None else box_to_sent(box, shot.scaling)

    return boxes


def record_episode(seed: int, faults: float, timeout_s: float = 400.0, fmt: str = "webp"
                   ) -> tuple[Episode, dict[str, float]]:
    """One demo episode on seed ``seed``; returns the recorded episode and the objects'
    widths (m)."""
    from .arm.jaw import SO101_JAW
    from .core import names
    from .core.messages import AgentEvent
    from .core.transport import QoS
    from .models.wiring import build_monitor_backend
    from .sim.faults import FaultConfig
    from .system import build_sim_system, load_config

    cfg = load_config()
    assert cfg.monitor is not None
    ep = Episode(seed)
    backend = RecordingBackend(build_monitor_backend(cfg.monitor), ep, fmt=fmt)
    fc = FaultConfig(grasp_fail_p=faults, slip_p=faults / 2) if faults else None
    system = build_sim_system(config=cfg, seed=seed, faults=fc, monitor_backend=backend)
    backend.boxes = _tracker_boxes(system.monitor)
    world = system.world
    clock = system.clock

    def sample(_dt: float) -> None:
        held = getattr(world, "held", None)
        tip = getattr(world, "tip_xyz", np.zeros(3))
        ep.truth.append(Truth(clock.now(), SO101_JAW.opening(float(world.q[5])),
                              held.name if held is not None else None,
                              (float(tip[0]), float(tip[1]), float(tip[2]))))

    sample(0.0)
    system.runtime.add("truth", sample)  # right after the simulator's step
    comps = system.runtime.components
    comps.insert(1, comps.pop())

    def on_event(ev: AgentEvent) -> None:
        d = ev.data
        aid = str(d.get("action_id", ""))
        if ev.kind == "skill_started" and aid:
            ep.actions[aid] = {"tool": d.get("skill"), "t0": clock.now()}
        elif ev.kind == "skill_ended" and aid in ep.actions:
            ep.actions[aid]["t1"] = clock.now()
            ep.actions[aid]["outcome"] = d.get("outcome")

    system.bus.subscribe(names.SKILL_EVENTS, names.T_AGENT_EVENT, callback=on_event,
                         qos=QoS(depth=100))
    from .demo import DEFAULT_TASK

    system.planner.message(DEFAULT_TASK)
    system.run_until(lambda: system.planner.status not in ("idle", "running", "paused"),
                     timeout_s)
    objects = getattr(world, "objects", {})
    for info in ep.actions.values():  # a pick's target: what its jaws closed on
        if info.get("tool") != "pick_object":
            continue
        t1 = float(info.get("t1", 1e18))
        span = [s for s in ep.truth if info["t0"] <= s.t <= t1]
        held = [s.held for s in span if s.held]
        if held:
            info["target"] = held[0]
        elif span and objects:
            low = min(span, key=lambda s: s.tip[2])
            info["target"] = min(objects.values(), key=lambda o: (o.x - low.tip[0]) ** 2
                                 + (o.y - low.tip[1]) ** 2).name
    widths = {n: float(o.width) for n, o in objects.items()}
    system.shutdown()
    return ep, widths


def write_set(out: Path, tool: str, rows: list[dict[str, Any]],
              files: dict[str, tuple[str, bytes, Box | None]]) -> dict[str, Any]:
    """One tick set in ``out/tool``; ``files``: image name -> (name, its encoded bytes,
    target box)."""
    d = out / tool
    if d.exists():
        shutil.rmtree(d)
    (d / "images").mkdir(parents=True)
    ticks, labels, used = [], [], set()
    boxes = {name: box for name, _data, box in files.values()}
    for n, row in enumerate(rows):
        tk: RecordedTick = row["tick"]
        tid = f"{row['pick']}_t{n:04d}"
        ticks.append({"id": tid, "pick": row["pick"], "tick": row["n"], "tool": tool,
                      "elapsed_s": tk.elapsed_s, "questions": tk.questions,
                      "object": row["target"], "kind": row["kind"],
                      "images": [{k: v for k, v in i.items() if k != "stamp"}
                                 for i in tk.images],
                      "readings": tk.readings, "answered_live": tk.answers})
        labels.append({"id": tid, "question": row["question"], "label": row["label"]})
        used.update(i["file"] for i in tk.images)
    size = 0
    for name in sorted(used):
        data = files[name][1]
        (d / name).write_bytes(data)
        size += len(data)
    (d / "skill.json").write_text(json.dumps(shipped_skill(tool), indent=1) + "\n")
    (d / "ticks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ticks))
    (d / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))
    (d / "targets.jsonl").write_text("".join(
        json.dumps({"file": f, "box": list(boxes[f]) if boxes.get(f) else None}) + "\n"
        for f in sorted(used)))
    counts: dict[str, int] = {}
    for lab in labels:
        counts[lab["label"]] = counts.get(lab["label"], 0) + 1
    return {"tool": tool, "ticks": len(ticks), "picks": len({r["pick"] for r in rows}),
            "labels": counts, "images": len(used), "bytes": size}


_count = number_arg(int, lambda v: 1 <= v <= 1000, "a whole number", "from 1 to 1000")
_probability = number_arg(float, lambda v: 0.0 <= v <= 1.0, "a number",
                          "a probability from 0 to 1")


def main_make_ticks(argv: Sequence[str] | None = None, stdout: IO[str] | None = None) -> int:
    ap = CliParser(prog="solarian-agent make-ticks", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="where the tick sets go (OUT/<tool>/)")
    ap.add_argument("--seeds", type=_count, default=20, help="episodes, one per seed "
                    "(default 20)")
    ap.add_argument("--first-seed", type=int, default=1, help="the first seed (default 1)")
    ap.add_argument("--faults", type=_probability, default=0.5,
                    help="grasp-failure probability per attempt (slips: half of it; "
                         "default 0.5)")
    ap.add_argument("--format", choices=("webp", "png"), default="webp",
                    help="lossless image format (default webp: the smallest)")
    a = ap.parse_args(list(argv) if argv is not None else None)
    out = stdout or sys.stdout
    rows: dict[str, list[dict[str, Any]]] = {"pick_object": [], "place_at": []}
    files: dict[str, tuple[str, bytes, Box | None]] = {}
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        ep, widths = record_episode(seed, a.faults, fmt=a.format)
        per_action: dict[str, int] = {}
        for row in _label_episode(ep, widths):
            tk: RecordedTick = row["tick"]
            info = ep.actions.get(tk.action_id, {})
            n = per_action[tk.action_id] = per_action.get(tk.action_id, 0) + 1
            row.update(pick=f"s{seed:03d}_{tk.action_id}", n=n,
                       kind=str(info.get("outcome", "")))
            rows[tk.tool].append(row)
        for name, data, box in ep.files.values():
            files[name] = (name, data, box)
        print(f"seed {seed}: {len(ep.ticks)} monitor ticks, "
              f"{sum(1 for i in ep.actions.values() if i.get('tool') == 'pick_object')} picks",
              file=out, flush=True)
    for tool, rs in rows.items():
        if rs:
            print(json.dumps(write_set(a.out, tool, rs, files)), file=out)
    return 0


__all__ = ["RecordingBackend", "main_make_ticks", "pick_label", "record_episode",
           "shipped_skill", "truth_at"]
