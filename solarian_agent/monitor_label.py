"""``label-ticks TICKS`` (:func:`main_label`): label recorded monitor ticks by hand.

Shows each tick's previous | current close-up over the question (written to ``--image-out``
and, with ``--show``, in a window) and reads keys from a stream, one per line: ``1``-``4``
label the tick with that choice (a predicate: 1 true, 2 false), ``s`` unsure, ``b`` back,
``q`` quit.  Labels are appended to ``--labels`` (default ``TICKS/labels.jsonl``; the last
label of a tick wins) and a new session resumes at the first tick missing one.  With
``--mark-target`` it also asks where the target is in each close-up (``x0 y0 x1 y1`` as tight
as a tracker's mask, or ``o`` when it is out of view); boxes go to ``--targets`` (default
``TICKS/targets.jsonl``).  ``TICKS`` is read by :mod:`.tick_sets`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import cv2
import numpy as np

from .cli_common import CliParser
from .cli_keys import KeyReader
from .core.text import TerminalWriter
from .tick_sets import (
    UNSURE,
    Tick,
    append_record,
    load_labels,
    load_targets,
    load_ticks,
    skill_file,
    tick_options,
)


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
    tick_options(ap)
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
        append_record(labels_path, {"id": tick.id, "question": qname, "label": value})
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
                append_record(targets_path, {"file": f, "box": box})
                targets[f] = box
        i += 1
    done = sum(1 for t, q in todo if (t.id, q) in labels)
    print(f"{done}/{len(todo)} labelled; labels in {labels_path}", file=out)
    return 0


__all__ = ["main_label", "side_by_side"]
