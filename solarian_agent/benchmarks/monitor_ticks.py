"""The monitor's judgement on the labelled ticks of the product's own episodes
(``test/data/product_ticks``, made by ``solarian-agent make-ticks``): ``eval-monitor`` per
backend, with the shipped questions and rules of each tool.

* ``accuracy``: answers equal to the label; baseline: always answering the most common label,
  measured on the same ticks.
* ``wrong-tick fires``: answers that met a rule's condition on a tick labelled otherwise;
  ``below floor``: answers less sure than the question's floor (they do nothing).
* ``replay``: each pick through the shipped rules (consecutive and after_s included): picks
  whose first fire was on a tick labelled as the rule says, out of the picks where the truth
  called for one (a hold to finish, a miss or slip to flag); baseline: every such pick.

The cv backend always runs; a model backend runs when its key is set and
``SOLARIAN_MONITOR_MODEL`` names the model (``provider:model`` also picks the provider).
"""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

TOOLS = ("pick_object", "place_at")
MODEL_KEYS = {"openai_responses": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def tick_root() -> Path:
    from ..arm.kinematics import default_urdf_path

    return default_urdf_path().parent.parent / "test" / "data" / "product_ticks"


def _backends() -> list[tuple[str, Any, str]]:
    """(label, backend, why not) for cv and the model backends whose key is set."""
    from ..monitor_eval import make_backend

    out: list[tuple[str, Any, str]] = [("cv", make_backend("cv", None, None), "")]
    want = os.environ.get("SOLARIAN_MONITOR_MODEL", "")
    for provider, key in MODEL_KEYS.items():
        if not os.environ.get(key):
            continue
        prov, _, model = want.partition(":") if ":" in want else (provider, "", want)
        if prov != provider:
            continue
        if not model:
            out.append((provider, None, f"{key} is set: name the model in "
                                        "SOLARIAN_MONITOR_MODEL to measure it"))
            continue
        try:
            out.append((f"{provider} {model}", make_backend(provider, model, None), ""))
        except Exception as e:  # a provider that cannot be built here: a row says why
            out.append((provider, None, f"{type(e).__name__}: {e}"))
    return out


def replay_summary(report: dict[str, Any], labels: dict[tuple[str, str], str],
                   ticks: list[Any]) -> dict[str, Any]:
    """From an evaluation's per-pick replay (repeat 0): picks, the picks that called for a
    fire (held at its last tick: finish; never held at the end: failed), those whose first
    fire was right, fires on a wrongly labelled tick, and picks where nothing fired."""
    last: dict[str, str] = {}
    for t in sorted(ticks, key=lambda t: t.tick):
        lab = next((v for (tid, _q), v in labels.items() if tid == t.id), None)
        if lab is not None:
            last[t.pick] = lab
    out: dict[str, Any] = {"picks": 0, "called_for": 0, "right": 0, "wrong": 0, "none": 0}
    when: list[float] = []
    for row in report["picks"]:
        if row.get("repeat", 0):
            continue
        out["picks"] += 1
        end = last.get(row["pick"], "")
        wants = {"holding": "holding", "failed": "failed"}.get(end)
        out["called_for"] += wants is not None
        rule = row.get("rule")
        if rule is None:
            out["none"] += 1
            continue
        if row.get("label") != rule["value"]:
            out["wrong"] += 1
        elif wants is not None:
            out["right"] += 1
            when.append(float(row.get("elapsed_s", 0.0)))
    out["when_s"] = (min(when), sum(when) / len(when), max(when)) if when else None
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    from ..monitor_eval import evaluate
    from ..monitor_record import shipped_skill
    from ..tick_sets import load_labels, load_targets, load_ticks

    root = tick_root()
    rows: list[dict[str, Any]] = []
    if not (root / "pick_object" / "ticks.jsonl").exists():
        return [{"name": "monitor on product ticks: (not available)", "value": "", "unit": "",
                 "baseline": "", "note": f"no tick set at {root}"}]
    for label, backend, why in _backends():
        if backend is None:
            rows.append({"name": f"monitor {label} on product ticks: (not measured)",
                         "value": "", "unit": "", "baseline": "", "note": why})
            continue
        for tool in TOOLS:
            d = root / tool
            if not (d / "ticks.jsonl").exists():
                continue
            ts = load_ticks(d, shipped_skill(tool))  # the shipped questions, not the set's
            labels = load_labels(d / "labels.jsonl")
            # marked only where the shipped monitor marks its frames (mark_target)
            rep = evaluate(ts, backend, labels, load_targets(d / "targets.jsonl"), repeats=1,
                           mark=bool(ts.config.get("mark_target")), out=io.StringIO())
            for qname, q in rep["questions"].items():
                n = q["n"]
                common = Counter(v for (tid, qq), v in labels.items() if qq == qname)
                majority = common.most_common(1)[0][1] / n if n else 0.0
                rows.append({
                    "name": f"monitor {label} {tool}.{qname}: accuracy ({n} ticks)",
                    "value": round(100 * (q["accuracy"] or 0.0), 1), "unit": "%",
                    "baseline": round(100 * majority, 1),
                    "note": "baseline: always the most common label"})
                rows.append({
                    "name": f"monitor {label} {tool}.{qname}: wrong-tick fires",
                    "value": round(100 * (q["wrong_tick_rate"] or 0.0), 1), "unit": "%",
                    "baseline": 0.0,
                    "note": "no rules" if q["floor"] is None else
                            f"below the floor {q['floor']}: "
                            f"{100 * (q['below_floor_rate'] or 0.0):.1f}% of answers"})
            if any(spec.rules for spec in ts.questions()):
                s = replay_summary(rep, labels, ts.ticks)
                rows.append({
                    "name": f"monitor {label} {tool}: replay, picks whose first fire was right",
                    "value": s["right"], "unit": "picks", "baseline": s["called_for"],
                    "note": f"{s['picks']} picks; {s['wrong']} fired on a wrong tick, "
                            f"{s['none']} with no fire"
                            + ("; right fires at {:.1f}-{:.1f} s (mean {:.1f})".format(
                                s["when_s"][0], s["when_s"][2], s["when_s"][1])
                               if s["when_s"] else "")
                            + "; baseline: the picks that called for one"})
    return rows


__all__ = ["replay_summary", "run", "tick_root"]
