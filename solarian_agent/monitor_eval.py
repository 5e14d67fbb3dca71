"""``eval-monitor TICKS --repeats 3 [--model M] [--reasoning R] [--no-target]``
(:func:`main_eval`): measure monitor questions on recorded ticks before trusting them, since a
vision answer can be wrong: a wording is judged by the per-pick replay of its rules, not by
per-tick accuracy alone.

Sends each labelled tick as the robot would (its images, labels and ages, the readings,
marked where the boxes say unless ``--no-target``) ``--repeats`` times, and reports per
question: accuracy, the confusion between choices, how often an answer met a rule's condition
on a tick labelled otherwise (wrong tick), how often it fell below its floor, how often the
repeats of one tick disagree, and latency.  Then it replays each pick through the skill's
rules, consecutive included, and prints the first rule to fire and the label of the tick it
fired on.

``TICKS`` and its labels are read by :mod:`.tick_sets` and labelled with ``label-ticks``
(:mod:`.monitor_label`).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import cv2

from .cli_common import CliParser
from .core.monitor import (
    BELOW_FLOOR,
    MET,
    QuestionSpec,
    RuleState,
    condition,
    draw_mark,
)
from .core.text import TerminalWriter
from .perception import images as im
from .perception.vision import (
    MonitorAnswer,
    MonitorImage,
    MonitorTickRequest,
    VisionBackend,
)
from .tick_sets import (
    UNSURE,
    Tick,
    TickSet,
    load_labels,
    load_targets,
    load_ticks,
    skill_file,
    tick_options,
)


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
    tick_options(ap)
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


__all__ = ["build_request", "evaluate", "main_eval", "make_backend"]
