"""Make the labelled monitor tick set shipped in ``test/data/monitor_ticks/`` from the simulator.

Each pick is scripted on the simulated world (the arm is placed above the object with the
gripper open, then descends, closes and lifts), with the wrist camera rendered every
``--tick-s`` seconds of sim time.  A monitor tick pairs one frame (``current``) with the frame
before it (``previous``), as the engine sends them with ``history: 2``; only the close-up the
skill's monitor sees is stored.  Labels come from the simulator's ground truth, read with the
definitions of the pick's ``progress`` choices:

* ``holding``: the object is held (pinched between the jaws);
* ``grasping``: nothing held, the jaws closed since the previous frame and are still at
  least as wide as the object;
* ``failed``: nothing held and the jaws are visibly (15 %) closer together than the object
  is wide, or they reopened;
* ``approaching``: anything else (jaws open, the object ahead).

The SO-101's jaws: the gripper joint is the moving jaw's angle (``SO101_JAW`` turns it into the
opening); a pick puts the fixed jaw at the object's near side (``grasp_joints``), a miss aims
that 3 cm sideways.

Target boxes (``targets.jsonl``) are the bounds of the object's colour in each close-up, as
tight as a tracker's mask, or ``null`` when it is out of view.

Run from the repository root: ``python test/data/make_monitor_ticks.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import cv2
import numpy as np

from solarian_agent.arm.grasp import grasp_joints
from solarian_agent.arm.jaw import SO101_JAW
from solarian_agent.arm.kinematics import ArmModel
from solarian_agent.sim.faults import FaultConfig, FaultInjector
from solarian_agent.sim.layout import APPROACH_PITCHES
from solarian_agent.sim.render import Renderer
from solarian_agent.sim.tabletop import WorldConfig
from solarian_agent.sim.world import World

OUT = Path(__file__).resolve().parent / "monitor_ticks"
CLOSE_UP = [0.2, 0.35, 0.8, 1.0]  # wrist camera, as config/controller.yaml: the jaws
OPEN_M = 0.065  # the jaws' opening for a pick (m), as the pick skill's
OPEN = SO101_JAW.angle_for(OPEN_M)  # the jaw angle (rad)
CLOSE = SO101_JAW.lower  # closing squeezes: a held object stops the jaw on it
DT = 0.02

PROGRESS = {
    "name": "progress", "type": "choice", "camera": "wrist",
    "instructions": "Which phase the pick is in. Compare the previous close-up with the "
                    "current one.",
    "choices": {
        "approaching": "The fingers are open, the target lies ahead of them, and it looks "
                       "larger (closer) in the current close-up than in the previous one.",
        "grasping": "The fingers are down at the target and closing on it: they are closer "
                    "together in the current close-up than in the previous one.",
        "holding": "The target is pinched between the fingers: it sits between them and both "
                   "fingers touch it.",
        "failed": "The fingers are closer together than the target is wide, with nothing "
                  "between them, or they reopened.",
    },
    "when": [
        {"do": "finish", "value": "holding", "threshold": 0.8, "consecutive": 1,
         "then": "home_holding"},
        {"do": "escalate", "value": "failed", "threshold": 0.8, "consecutive": 2,
         "after_s": 6},
    ],
}

# (seed, object, kind): kind is ok | fault (the grasp fails) | miss (pointed 3 cm off)
PICKS = [
    (1, "red_cup", "ok"), (2, "yellow_paper", "ok"), (3, "red_cup", "fault"),
    (4, "red_cup", "ok"), (5, "yellow_paper", "miss"), (6, "yellow_paper", "ok"),
    (7, "red_cup", "miss"), (8, "yellow_paper", "fault"),
]


def colour_box(img: np.ndarray) -> list[int] | None:
    hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
    mask = (hsv[..., 1] > 90) & (hsv[..., 2] > 60)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return None
    i = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    if stats[i, cv2.CC_STAT_AREA] < 30:
        return None
    x, y, w, h = (int(v) for v in stats[i, :4])
    return [x, y, x + w - 1, y + h - 1]


class Recorder:
    def __init__(self, world: World, renderer: Renderer, tick_s: float) -> None:
        self.world = world
        self.renderer = renderer
        self.tick_s = tick_s
        self.t = 0.0
        self.next = 0.0
        self.frames: list[dict[str, object]] = []
        self.recording = False

    def step(self, dt: float) -> None:
        self.world.step(dt)
        if not self.recording:
            return
        self.t += dt
        if self.t + 1e-9 >= self.next:
            self.next += self.tick_s
            self.snap()

    def snap(self) -> None:
        w = self.world
        img = self.renderer.render("wrist", w)
        h, wd = img.shape[:2]
        x0, y0 = round(CLOSE_UP[0] * wd), round(CLOSE_UP[1] * h)
        x1, y1 = round(CLOSE_UP[2] * wd), round(CLOSE_UP[3] * h)
        self.frames.append({"t": round(self.t, 3), "img": img[y0:y1, x0:x1].copy(),
                            "aperture": SO101_JAW.opening(float(w.q[5])),
                            "held": w.held is not None,
                            "tip_z": float(w.tip_xyz[2])})

    def run_until_settled(self, timeout_s: float = 12.0) -> None:
        for _ in range(int(timeout_s / DT)):
            if self.world.settled():
                return
            self.step(DT)

    def wait(self, seconds: float) -> None:
        for _ in range(int(round(seconds / DT))):
            self.step(DT)


def move_tip(rec: Recorder, xyz: tuple[float, float, float], jaw: float,
             width: float | None = None) -> None:
    """The tool point to ``xyz``, or with ``width`` the fixed jaw to the near side of an
    object of that width centred at ``xyz``; ``jaw``: the jaw angle (rad)."""
    w = rec.world
    if width is None:
        q, _ = w.arm.ik_search(xyz, APPROACH_PITCHES, q0=w.q[:5])
    else:
        q, _ = grasp_joints(w.arm, xyz, width, APPROACH_PITCHES, w.q[:5])
    w.command(np.concatenate([q, [jaw]]))
    rec.run_until_settled()


def label(prev: dict[str, object], cur: dict[str, object], width: float) -> str:
    if cur["held"]:
        return "holding"
    ap0, ap1 = float(prev["aperture"]), float(cur["aperture"])  # type: ignore[arg-type]
    if ap1 > ap0 + 0.001 and ap1 < OPEN_M - 0.002:
        return "failed"  # reopened
    if ap1 < 0.85 * width:
        return "failed"  # visibly closer together than the object is wide
    if ap1 < ap0 - 0.001:
        return "grasping"
    return "approaching"


def make(out: Path, tick_s: float, speed: float) -> None:
    if out.exists():
        shutil.rmtree(out)
    (out / "images").mkdir(parents=True)
    arm = ArmModel.default()
    renderer = Renderer(arm)
    ticks, labels, targets = [], [], []
    for seed, name, kind in PICKS:
        faults = FaultInjector(FaultConfig(grasp_fail_p=1.0 if kind == "fault" else 0.0,
                                           max_consecutive=10))
        world = World(arm, WorldConfig(speed_scale=speed), faults, seed=seed)
        rec = Recorder(world, renderer, tick_s)
        obj = world.objects[name]
        ox, oy = obj.x, obj.y
        if kind == "miss":
            r = math.hypot(ox, oy)
            ox, oy = ox - 0.03 * oy / r, oy + 0.03 * ox / r  # 3 cm sideways
        world.command({"gripper": OPEN})
        rec.run_until_settled()
        move_tip(rec, (ox, oy, 0.12), OPEN, obj.width)
        rec.recording = True
        rec.snap()  # the action's first frame, at t = 0
        rec.next = tick_s
        move_tip(rec, (ox, oy, 0.015), OPEN, obj.width)
        world.command({"gripper": CLOSE})
        rec.run_until_settled()
        move_tip(rec, (float(world.tip_xyz[0]), float(world.tip_xyz[1]), 0.10),
                 float(world.target[5]))
        rec.wait(max(0.0, 8.0 - rec.t) if kind != "ok" else 1.2)
        pick = f"pick{seed:02d}"
        files = []
        for i, fr in enumerate(rec.frames):
            fname = f"images/{pick}_f{i:02d}.png"
            cv2.imwrite(str(out / fname), fr["img"], [cv2.IMWRITE_PNG_COMPRESSION, 9])
            files.append(fname)
            targets.append({"file": fname, "box": colour_box(fr["img"])})  # type: ignore[arg-type]
        for i in range(1, len(rec.frames)):
            prev, cur = rec.frames[i - 1], rec.frames[i]
            tid = f"{pick}_t{i:02d}"
            h, w = cur["img"].shape[:2]  # type: ignore[attr-defined]
            ticks.append({
                "id": tid, "pick": pick, "tick": i, "tool": "pick_object",
                "elapsed_s": cur["t"], "questions": ["progress"],
                "object": name, "kind": kind,
                "images": [
                    {"camera": "wrist", "label": "previous", "file": files[i - 1],
                     "age_s": round(float(cur["t"]) - float(prev["t"]), 3),  # type: ignore[arg-type]
                     "close_up": True, "size": [w, h]},
                    {"camera": "wrist", "label": "current", "file": files[i], "age_s": 0.0,
                     "close_up": True, "size": [w, h]},
                ],
                "readings": {"gripper": {"opening_mm": round(float(cur["aperture"]) * 1000,
                                                             1)}},  # type: ignore[arg-type]
            })
            labels.append({"id": tid, "question": "progress",
                           "label": label(prev, cur, obj.width)})
    skill = {"tool": "pick_object", "monitor": [PROGRESS],
             "monitor_config": {"close_ups": {"wrist": CLOSE_UP}, "history": 2,
                                "period_s": tick_s, "reference": False, "mark_target": False,
                                "instructions": "The wrist camera looks along the gripper: "
                                                "its two grey jaws come up from the "
                                                "bottom of every close-up."}}
    (out / "skill.json").write_text(json.dumps(skill, indent=1) + "\n")
    for fname, rows in (("ticks.jsonl", ticks), ("labels.jsonl", labels),
                        ("targets.jsonl", targets)):
        (out / fname).write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts: dict[str, int] = {}
    for lab in labels:
        counts[lab["label"]] = counts.get(lab["label"], 0) + 1
    size = sum(p.stat().st_size for p in (out / "images").iterdir())
    print(f"{len(ticks)} ticks from {len(PICKS)} picks, labels {counts}, images {size} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--tick-s", type=float, default=0.6)
    ap.add_argument("--speed", type=float, default=0.2)
    a = ap.parse_args()
    make(a.out, a.tick_s, a.speed)


if __name__ == "__main__":
    main()
