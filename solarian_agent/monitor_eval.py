"""Measure monitor questions on recorded ticks before trusting them, since a vision answer can
be wrong: a wording is judged by the per-pick replay of its rules, not by per-tick accuracy
alone.

Two commands (the CLI wires them as ``solarian-agent label-ticks`` and ``eval-monitor``):

``label-ticks TICKS`` (:func:`main_label`)
    Shows each tick's previous | current close-up over the question (written to
    ``--image-out`` and, with ``--show``, in a window) and reads keys from a stream, one per line:
    ``1``-``4`` label the tick with that choice (a predicate: 1 true, 2 false), ``s`` unsure,
    ``b`` back, ``q`` quit.  Labels are appended to ``--labels`` (default
    ``TICKS/labels.jsonl``; the last label of a tick wins) and a new session resumes at the first
    tick missing one.  With ``--mark-target`` it also asks where the target is in each close-up
    (``x0 y0 x1 y1`` as tight as a tracker's mask, or ``o`` when it is out of view); boxes go to
    ``--targets`` (default ``TICKS/targets.jsonl``).

``eval-monitor TICKS --repeats 3 [--model M] [--reasoning R] [--no-target]`` (:func:`main_eval`)
    Sends each labelled tick as the robot would (its images, labels and ages, the readings,
    marked where the boxes say unless ``--no-target``) ``--repeats`` times, and reports per
    question: accuracy, the confusion between choices, how often an answer met a rule's condition
    on a tick labelled otherwise (wrong tick), how often it fell below its floor, how often the
    repeats of one tick disagree, and latency.  Then it replays each pick through the skill's
    rules, consecutive included, and prints the first rule to fire and the label of the tick it
    fired on.

``TICKS`` is a tick-set directory (``ticks.jsonl``, ``images/``, ``skill.json`` with the tool's
``monitor`` questions; made by ``solarian-agent make-ticks`` from the product's own episodes, or
see ``test/data/make_monitor_ticks.py``) or an episode log directory (or
a tree of them), whose ``monitor_tick`` events name the frames the monitor saw; then
``--skill`` names a JSON/YAML file holding the tool's ``monitor`` questions.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import cv2
import numpy as np
import yaml

from .cli_common import CliParser
from .cli_keys import KeyReader
from .core.monitor import (
    BELOW_FLOOR,
    MET,
    QuestionSpec,
    RuleState,
    condition,
    draw_mark,
    parse_questions,
)
from .core.text import TerminalWriter
from .perception import images as im
from .perception.vision import (
    MonitorAnswer,
    MonitorImage,
    MonitorTickRequest,
    VisionBackend,
)

UNSURE = "unsure"


# -------------------------------------------------------------------------------------------
# loading
# -------------------------------------------------------------------------------------------

@dataclass
class Tick:
    id: str
    pick: str
    tick: int
    tool: str
    elapsed_s: float
    questions: list[str]
    images: list[dict[str, Any]]
    readings: dict[str, Any]
    root: Path

    def image_path(self, rec: dict[str, Any]) -> Path:
        return self.root / str(rec["file"])


@dataclass
class TickSet:
    ticks: list[Tick]
    skill: dict[str, Any] = field(default_factory=dict)
    root: Path = Path(".")

    def questions(self) -> tuple[QuestionSpec, ...]:
        tool = str(self.skill.get("tool", "tool"))
        return parse_questions(tool, list(self.skill.get("monitor") or ()))

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.skill.get("monitor_config") or {})


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line
    return out


def _load_skill(path: Path | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(path, dict):
        return dict(path)
    if path is None or not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if isinstance(doc, dict) and "agent" in doc and isinstance(doc["agent"], dict):
        doc = doc["agent"]
    return dict(doc or {})


def load_ticks(path: Path, skill: Path | dict[str, Any] | None = None) -> TickSet:
    path = Path(path)
    if (path / "ticks.jsonl").exists():
        ticks = [Tick(str(r["id"]), str(r.get("pick", r["id"])), int(r.get("tick", 0)),
                      str(r.get("tool", "")), float(r.get("elapsed_s", 0.0)),
                      list(r.get("questions") or []), list(r.get("images") or []),
                      dict(r.get("readings") or {}), path)
                 for r in _read_jsonl(path / "ticks.jsonl")]
        return TickSet(ticks, _load_skill(skill or path / "skill.json"), path)
    logs = sorted(p.parent for p in path.rglob("events.jsonl")) if path.is_dir() else []
    ticks = []
    for log in logs:
        ep = str(log.relative_to(path)) if log != path else log.name
        for ev in _read_jsonl(log / "events.jsonl"):
            if ev.get("kind") != "monitor_tick" or not ev.get("images"):
                continue
            aid = str(ev.get("action_id", ""))
            n = int(ev.get("tick", 0))
            ticks.append(Tick(f"{ep}/{aid}/t{n:03d}", f"{ep}/{aid}", n, str(ev.get("tool", "")),
                              float(ev.get("elapsed_s", 0.0)), list(ev.get("questions") or []),
                              [i for i in ev["images"] if not i.get("reference")],
                              dict(ev.get("readings") or {}), log))
    return TickSet(ticks, _load_skill(skill), path)


def load_labels(path: Path) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for r in _read_jsonl(path):
        out[(str(r["id"]), str(r.get("question", "")))] = str(r["label"])
    return out


def load_targets(path: Path) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for r in _read_jsonl(path):
        box = r.get("box")
        out[str(r["file"])] = [int(v) for v in box] if box else None
    return out


def _append(path: Path, rec: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def _tick_options(ap: CliParser) -> None:
    """What label-ticks and eval-monitor both take: the ticks, the tool, labels and boxes."""
    ap.add_argument("ticks", type=Path, help="a tick-set directory or episode log directory")
    ap.add_argument("--skill", default=None, metavar="TOOL|FILE",
                    help="the tool whose monitor questions are asked: a tool's name "
                         "(pick_object, place_at) or a JSON/YAML file with its monitor list "
                         "(default: TICKS/skill.json)")
    ap.add_argument("--labels", type=Path, default=None,
                    help="the labels file (default TICKS/labels.jsonl)")
    ap.add_argument("--targets", type=Path, default=None,
                    help="the target boxes file (default TICKS/targets.jsonl)")


def skill_file(ap: CliParser, value: str | None) -> Path | dict[str, Any] | None:
    """``--skill``: an existing file, or the name of a tidy tool with monitor questions
    (its questions and the shipped configuration's monitor settings); else a usage error."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.exists():
        return path
    from .system import default_config_path, tidy_tools

    tools = {name: t.skill for name, t in tidy_tools().items()
             if getattr(t.skill, "monitor", ())}
    if value not in tools:
        ap.error(f"--skill {value!r}: no such file, and no tool of that name has monitor "
                 f"questions (tools: {', '.join(sorted(tools))})")
    doc = yaml.safe_load(default_config_path().read_text(encoding="utf-8")) or {}
    monitor = dict((doc.get("agent") or {}).get("monitor") or {})
    return {"tool": value, "monitor": [dict(q) for q in tools[value].monitor],
            "monitor_config": monitor}


# -------------------------------------------------------------------------------------------
# label-ticks
# -------------------------------------------------------------------------------------------

def side_by_side(tick: Tick, question: str = "") -> np.ndarray:
    """previous | current (the last two images of the tick's first camera), captioned."""
    recs = tick.images[-2:]
    tiles = []
    for rec in recs:
        img = cv2.imread(str(tick.image_path(rec)), cv2.IMREAD_COLOR)
        if img is None:
            img = np.zeros((120, 160, 3), np.uint8)
        img = img.copy()
        cv2.putText(img, str(rec.get("label", "")), (4, 16), cv2.FONT_HERSHEY_PLAIN, 1.1,
                    (0, 0, 0), 2)
        cv2.putText(img, str(rec.get("label", "")), (4, 16), cv2.FONT_HERSHEY_PLAIN, 1.1,
                    (255, 255, 255), 1)
        tiles.append(img)
    h = max(t.shape[0] for t in tiles)
    tiles = [cv2.copyMakeBorder(t, 0, h - t.shape[0], 0, 4, cv2.BORDER_CONSTANT) for t in tiles]
    out = np.hstack(tiles)
    if question:
        bar = np.full((24, out.shape[1], 3), 255, np.uint8)
        cv2.putText(bar, question[:90], (4, 17), cv2.FONT_HERSHEY_PLAIN, 1.0, (0, 0, 0), 1)
        out = np.vstack([bar, out])
    return out


def _keys(question: Any) -> list[str]:
    return list(question.values)


def main_label(argv: Sequence[str] | None = None, stdin: IO[str] | None = None,
               stdout: IO[str] | None = None) -> int:
    ap = CliParser(prog="solarian-agent label-ticks", description="Label recorded monitor "
                   "ticks: keys 1-4 label, s unsure, b back, q quit (at a terminal a key "
                   "needs no Enter).")
    _tick_options(ap)
    ap.add_argument("--question", default=None, help="label only this question")
    ap.add_argument("--mark-target", action="store_true",
                    help="also ask for the target's box in each close-up")
    ap.add_argument("--image-out", type=Path, default=None,
                    help="write the previous | current image of each tick here")
    ap.add_argument("--show", action="store_true", help="also show it in an OpenCV window")
    a = ap.parse_args(list(argv) if argv is not None else None)
    keys = KeyReader(stdin or sys.stdin)
    out = TerminalWriter(stdout or sys.stdout)  # tick and answer text escaped
    ts = load_ticks(a.ticks, skill_file(ap, a.skill))
    labels_path = a.labels or a.ticks / "labels.jsonl"
    targets_path = a.targets or a.ticks / "targets.jsonl"
    questions = {q.name: q.question for q in ts.questions()}
    if not questions:
        print("no monitor questions: pass --skill with the tool's monitor list", file=out)
        return 2

    def asked(t: Tick) -> list[str]:
        qs = [q for q in (t.questions or list(questions)) if q in questions]
        return [q for q in qs if a.question in (None, q)]

    labels = load_labels(labels_path)
    targets = load_targets(targets_path)
    todo = [(t, q) for t in ts.ticks for q in asked(t)]
    i = next((k for k, (t, q) in enumerate(todo) if (t.id, q) not in labels), len(todo))
    if i:
        print(f"resuming at {i + 1}/{len(todo)} (the first tick without a label)", file=out)
    while i < len(todo):
        tick, qname = todo[i]
        q = questions[qname]
        values = _keys(q)
        img = side_by_side(tick, f"{qname}: {q.instructions}")
        if a.image_out is not None:
            cv2.imwrite(str(a.image_out), img)
        if a.show:  # pragma: no cover - needs a display
            cv2.imshow("label-ticks", img)
            cv2.waitKey(1)
        print(f"\n[{i + 1}/{len(todo)}] {tick.id}  {tick.tool}  {tick.elapsed_s:.1f} s  "
              f"images: {' | '.join(str(r.get('file')) for r in tick.images[-2:])}", file=out)
        print(f"{qname} ({q.type}): {q.instructions}", file=out)
        for k, v in enumerate(values, start=1):
            definition = dict(q.choices).get(v, "")
            print(f"  {k} {v}" + (f": {definition}" if definition else ""), file=out)
        print("  s unsure   b back   q quit", file=out)
        out.flush()
        key = keys.key()
        if key is None:
            break
        if keys.raw and key:
            print(f"  -> {key}", file=out)
        if key == "q":
            break
        if key == "b":
            i = max(0, i - 1)
            continue
        if key == "s":
            value = UNSURE
        elif key.isdigit() and 1 <= int(key) <= len(values):
            value = values[int(key) - 1]
        else:
            print(f"unknown key {key!r}", file=out)
            continue
        _append(labels_path, {"id": tick.id, "question": qname, "label": value})
        labels[(tick.id, qname)] = value
        if a.mark_target:
            for rec in tick.images[-2:]:
                f = str(rec["file"])
                if f in targets:
                    continue
                while True:
                    print(f"target box in {f} (x0 y0 x1 y1), or o if out of view:", file=out)
                    out.flush()
                    ans = keys.line()
                    if not ans or ans.strip().lower() == "q":
                        return 0
                    s = ans.strip().lower()
                    if s == "o":
                        box = None
                        break
                    try:
                        vals = [int(float(v)) for v in s.replace(",", " ").split()]
                    except ValueError:
                        vals = []
                    if len(vals) == 4 and vals[0] <= vals[2] and vals[1] <= vals[3]:
                        box = vals
                        break
                    print("expected four numbers x0 y0 x1 y1 with x0 <= x1, y0 <= y1", file=out)
                _append(targets_path, {"file": f, "box": box})
                targets[f] = box
        i += 1
    done = sum(1 for t, q in todo if (t.id, q) in labels)
    print(f"{done}/{len(todo)} labelled; labels in {labels_path}", file=out)
    return 0


# -------------------------------------------------------------------------------------------
# eval-monitor
# -------------------------------------------------------------------------------------------

def build_request(tick: Tick, specs: Sequence[QuestionSpec], targets: dict[str, list[int] | None],
                  *, mark: bool, instructions: str = "") -> MonitorTickRequest:
    """The tick as the robot sent it: its images with their labels and ages, marked where the
    boxes say (unless ``mark`` is False)."""
    images = []
    marked = False
    for rec in tick.images:
        px = cv2.imread(str(tick.image_path(rec)), cv2.IMREAD_COLOR)
        if px is None:
            raise FileNotFoundError(f"{tick.id}: cannot read {tick.image_path(rec)}")
        box = targets.get(str(rec["file"])) if mark else None
        if box is None and mark and rec.get("mark"):
            box = list(rec["mark"])
        mbox: tuple[int, int, int, int] | None = None
        if box is not None:
            mbox = (int(box[0]), int(box[1]), int(box[2]), int(box[3]))
            px = draw_mark(px, mbox)
            marked = True
        data, mt = im.encode(px, "png")
        images.append(MonitorImage(str(rec.get("camera", "")), str(rec.get("label", "")),
                                   float(rec.get("age_s", 0.0)), data, mt, px.shape[1],
                                   px.shape[0], px, bool(rec.get("close_up", False)),
                                   bool(rec.get("reference", False)), mbox, str(rec["file"])))
    asked = [s.question for s in specs if not tick.questions or s.name in tick.questions]
    return MonitorTickRequest(tick.pick, tick.tool, tick.elapsed_s, tuple(asked),
                              tuple(images), tick.readings, instructions, marked,
                              any(i.reference for i in images))


@dataclass
class Sent:
    tick: Tick
    repeat: int
    answers: dict[str, MonitorAnswer]
    latency_s: float
    error: str = ""


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:5.1f}%" if d else "    -"


def evaluate(ts: TickSet, backend: VisionBackend, labels: dict[tuple[str, str], str],
             targets: dict[str, list[int] | None], *, repeats: int = 3, mark: bool = True,
             question: str | None = None, timeout_s: float = 60.0,
             out: IO[str] | None = None) -> dict[str, Any]:
    """Run the evaluation and print its report; returns the report as data."""
    out = TerminalWriter(out or sys.stdout)  # answers escaped
    specs = [s for s in ts.questions() if question in (None, s.name)]
    instructions = str(ts.config.get("instructions", ""))
    labelled = [t for t in ts.ticks
                if any(labels.get((t.id, s.name), UNSURE) != UNSURE for s in specs)]
    sent: list[Sent] = []
    for t in labelled:
        req = build_request(t, specs, targets, mark=mark, instructions=instructions)
        for r in range(repeats):
            t0 = time.monotonic()
            try:
                rep = backend.answer_tick(req, timeout_s=timeout_s)
                answers, err = rep.answers, ""
                lat = rep.latency_s or (time.monotonic() - t0)
            except Exception as e:  # a failed call answers nothing
                answers, err = {}, f"{type(e).__name__}: {e}"
                lat = time.monotonic() - t0
            sent.append(Sent(t, r, answers, lat, err))
    report: dict[str, Any] = {"backend": getattr(backend, "name", ""),
                              "model": getattr(backend, "model", ""), "ticks": len(labelled),
                              "repeats": repeats, "marked": mark, "questions": {}, "picks": []}
    print(f"eval-monitor: {len(labelled)} labelled ticks x {repeats} repeats, backend "
          f"{report['backend']} {report['model']}, target marks {'on' if mark else 'off'}",
          file=out)
    for spec in specs:
        qrep = _question_report(spec, sent, labels)
        report["questions"][spec.name] = qrep
        _print_question(spec, qrep, out)
    report["picks"] = _replay(specs, sent, labels, repeats, out)
    errors = sum(1 for s in sent if s.error)
    if errors:
        print(f"\n{errors} calls failed and answered nothing", file=out)
    report["errors"] = errors
    return report


def _question_report(spec: QuestionSpec, sent: list[Sent],
                     labels: dict[tuple[str, str], str]) -> dict[str, Any]:
    values = list(spec.question.values)
    n = correct = wrong_tick = below = answered = 0
    confusion: dict[str, dict[str, int]] = {v: {} for v in values}
    floors = [r.threshold for r in spec.rules if r.threshold is not None]
    floor = min(floors) if floors else None
    per_rule = [{"rule": r.as_dict(), "met": 0, "met_wrong": 0} for r in spec.rules]
    by_tick: dict[str, list[str]] = {}
    latencies = []
    for s in sent:
        lab = labels.get((s.tick.id, spec.name), UNSURE)
        if lab == UNSURE:
            continue
        n += 1
        latencies.append(s.latency_s)
        a = s.answers.get(spec.name)
        got = a.value if a is not None else "none"
        by_tick.setdefault(s.tick.id, []).append(got)
        confusion.setdefault(lab, {})
        confusion[lab][got] = confusion[lab].get(got, 0) + 1
        if a is None:
            continue
        answered += 1
        correct += a.value == lab
        if floor is not None and a.probability < floor:
            below += 1
        any_wrong = False
        for i, rule in enumerate(spec.rules):
            c = condition(rule, a, s.tick.elapsed_s)
            if c == MET:
                per_rule[i]["met"] += 1
                if lab != rule.value:
                    per_rule[i]["met_wrong"] += 1
                    any_wrong = True
            elif c == BELOW_FLOOR:
                pass
        wrong_tick += any_wrong
    disagree = sum(1 for v in by_tick.values() if len(set(v)) > 1)
    lat = sorted(latencies)
    return {
        "n": n, "answered": answered, "accuracy": correct / n if n else None,
        "confusion": confusion, "wrong_tick_rate": wrong_tick / n if n else None,
        "below_floor_rate": below / answered if answered else None, "floor": floor,
        "disagreement_rate": disagree / len(by_tick) if by_tick else None,
        "rules": per_rule,
        "latency_s": {"mean": statistics.fmean(lat) if lat else None,
                      "p50": lat[len(lat) // 2] if lat else None,
                      "p90": lat[min(len(lat) - 1, int(0.9 * len(lat)))] if lat else None,
                      "max": lat[-1] if lat else None},
    }


def _print_question(spec: QuestionSpec, q: dict[str, Any], out: IO[str]) -> None:
    n = q["n"]
    print(f"\n{spec.name} ({spec.question.type}): {n} labelled answers", file=out)
    acc = q["accuracy"]
    print(f"  accuracy            {'-' if acc is None else f'{100 * acc:.1f}%'}", file=out)
    wt = q["wrong_tick_rate"]
    print(f"  rule met, wrong tick {'-' if wt is None else f'{100 * wt:.1f}%'}", file=out)
    for r in q["rules"]:
        print(f"    {json.dumps(r['rule'])}: met {r['met']}, on a wrong tick "
              f"{r['met_wrong']}", file=out)
    bf = q["below_floor_rate"]
    print(f"  below floor ({q['floor']})   {'-' if bf is None else f'{100 * bf:.1f}%'}",
          file=out)
    dis = q["disagreement_rate"]
    print(f"  repeats disagree    {'-' if dis is None else f'{100 * dis:.1f}%'}", file=out)
    lat = q["latency_s"]
    if lat["mean"] is not None:
        print(f"  latency             mean {lat['mean']:.3f} s, p50 {lat['p50']:.3f} s, "
              f"p90 {lat['p90']:.3f} s, max {lat['max']:.3f} s", file=out)
    answers = sorted({a for row in q["confusion"].values() for a in row}
                     | set(spec.question.values))
    w = max(10, *(len(a) for a in answers))
    print("  confusion (rows: label, columns: answer)", file=out)
    print("    " + " " * w + "".join(f"{a[:w]:>{w + 1}}" for a in answers), file=out)
    for lab, row in q["confusion"].items():
        if not row:
            continue
        print(f"    {lab[:w]:<{w}}" + "".join(f"{row.get(a, 0):>{w + 1}}" for a in answers),
              file=out)


def _replay(specs: Sequence[QuestionSpec], sent: list[Sent],
            labels: dict[tuple[str, str], str], repeats: int, out: IO[str]
            ) -> list[dict[str, Any]]:
    print("\nper-pick replay through the rules (first rule to fire, and the label of that "
          "tick)", file=out)
    picks: dict[str, list[Tick]] = {}
    for s in sent:
        if s.repeat == 0:
            picks.setdefault(s.tick.pick, []).append(s.tick)
    by_key = {(s.tick.id, s.repeat): s for s in sent}
    rows = []
    for pick, ticks in picks.items():
        ticks = sorted(ticks, key=lambda t: t.tick)
        for r in range(repeats):
            states = {spec.name: RuleState(spec) for spec in specs}
            fired_row: dict[str, Any] | None = None
            for t in ticks:
                s = by_key.get((t.id, r))
                if s is None:
                    continue
                for spec in specs:
                    if t.questions and spec.name not in t.questions:
                        continue
                    fired = states[spec.name].feed(s.answers.get(spec.name), t.elapsed_s)
                    if fired and fired_row is None:
                        rule, run = fired[0]
                        fired_row = {"pick": pick, "repeat": r, "question": spec.name,
                                     "rule": rule.as_dict(), "tick": t.id,
                                     "elapsed_s": t.elapsed_s, "run": run,
                                     "label": labels.get((t.id, spec.name), "(none)")}
                if fired_row is not None:
                    break
            if fired_row is None:
                fired_row = {"pick": pick, "repeat": r, "question": None, "rule": None,
                             "tick": None, "label": None}
                print(f"  {pick} #{r + 1}: no rule fired", file=out)
            else:
                ok = "" if fired_row["label"] == fired_row["rule"]["value"] else \
                    "   <-- label differs"
                print(f"  {pick} #{r + 1}: {fired_row['question']} {fired_row['rule']['do']} "
                      f"{fired_row['rule']['value']} at {fired_row['tick']} "
                      f"({fired_row['elapsed_s']:.1f} s); label: {fired_row['label']}{ok}",
                      file=out)
            rows.append(fired_row)
    return rows


def make_backend(name: str, model: str | None, reasoning: str | None) -> VisionBackend:
    if name == "cv":
        from .perception.cv_monitor import CvVisionBackend

        return CvVisionBackend()
    from .core.config import MonitorConfig
    from .models.factory import build_provider
    from .perception.vision import ModelVisionBackend

    cfg = MonitorConfig(provider=name, model=model or "", reasoning_effort=reasoning)
    return ModelVisionBackend(build_provider(cfg, purpose="monitor"))


def main_eval(argv: Sequence[str] | None = None, stdout: IO[str] | None = None,
              backend: VisionBackend | None = None) -> int:
    ap = CliParser(prog="solarian-agent eval-monitor", description="Evaluate monitor "
                   "questions on labelled ticks.")
    _tick_options(ap)
    ap.add_argument("--repeats", type=int, default=3,
                    help="how many times each tick is asked (default 3)")
    ap.add_argument("--backend", default="cv",
                    choices=("cv", "openai_responses", "openai_decisions", "openai",
                             "anthropic"), help="the vision backend that answers (default cv)")
    ap.add_argument("--model", default=None, help="the model's name (a model backend)")
    ap.add_argument("--reasoning", default=None,
                    choices=(None, "minimal", "low", "medium", "high"),
                    help="the model's reasoning effort")
    ap.add_argument("--no-target", action="store_true",
                    help="send the close-ups without the target's mark")
    ap.add_argument("--question", default=None, help="evaluate only this question")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds a model answer may take (default 60)")
    ap.add_argument("--json", type=Path, default=None, help="also write the report here")
    a = ap.parse_args(list(argv) if argv is not None else None)
    out = TerminalWriter(stdout or sys.stdout)  # tick and answer text escaped
    if a.repeats < 1:
        ap.error(f"--repeats {a.repeats}: expected at least 1")
    ts = load_ticks(a.ticks, skill_file(ap, a.skill))
    if not ts.questions():
        print("no monitor questions: pass --skill with the tool's monitor list", file=out)
        return 2
    labels = load_labels(a.labels or a.ticks / "labels.jsonl")
    targets = load_targets(a.targets or a.ticks / "targets.jsonl")
    if backend is None:
        name = a.backend
        if a.model and name == "cv":
            name = "openai_responses"
        backend = make_backend(name, a.model, a.reasoning)
    report = evaluate(ts, backend, labels, targets, repeats=a.repeats, mark=not a.no_target,
                      question=a.question, timeout_s=a.timeout, out=out)
    if a.json is not None:
        a.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


__all__ = ["TickSet", "build_request", "evaluate", "load_labels", "load_targets",
           "load_ticks", "main_eval", "main_label", "side_by_side"]
