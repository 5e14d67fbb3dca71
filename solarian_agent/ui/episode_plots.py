"""What the viewer plots, as data on the episode's axis (seconds from its start): joint positions
and the jaws' opening (mm, from the gripper joint's angle) from the bag's joint_states; each
monitor question's answers and probabilities with its rules' thresholds (the questions from
``episode_started``, the answers from ``monitor_answer`` events or the bag's verdicts); and the
span of every action."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..arm.jaw import SO101_JAW
from .episode_data import Episode

GRIPPER = "gripper"  # the moving jaw's joint: its angle (rad) is plotted as the jaws' opening
ANSWER_KINDS = ("monitor_answer", "monitor_verdict")


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def joint_plots(ep: Episode, t0: float) -> dict[str, Any]:
    """``{"t": [...], "joints": [{"name", "values"}], "gripper_mm": [...] | None}``."""
    if not ep.joints:
        return {"t": [], "joints": [], "gripper_mm": None}
    order: list[str] = []
    for _t, jnames, _p in ep.joints:
        for n in jnames:
            if n not in order:
                order.append(n)
    ts = [_r(t - t0) for t, _n, _p in ep.joints]
    series: dict[str, list[float | None]] = {n: [] for n in order}
    for _t, jnames, pos in ep.joints:
        got = dict(zip(jnames, pos, strict=False))
        for n in order:
            v = got.get(n)
            series[n].append(None if v is None else _r(v, 4))
    gripper = series.pop(GRIPPER, None)
    return {"t": ts, "joints": [{"name": n, "values": v} for n, v in series.items()],
            "gripper_mm": None if gripper is None else
            [None if v is None else _r(1000 * SO101_JAW.opening(v), 2) for v in gripper]}


def rule_text(rule: Mapping[str, Any]) -> str:
    parts = [str(rule.get("do", "?"))]
    if "value" in rule:
        parts.append(f"on {rule['value']}")
    if rule.get("threshold") is not None:
        parts.append(f"p >= {rule['threshold']:g}")
    if int(rule.get("consecutive", 1) or 1) > 1:
        parts.append(f"x{int(rule['consecutive'])} in a row")
    if rule.get("after_s"):
        parts.append(f"after {rule['after_s']:g} s")
    if rule.get("then"):
        parts.append(f"then {rule['then']}")
    return " ".join(parts)


def _rules(q: Mapping[str, Any]) -> list[dict[str, Any]]:
    when = q.get("when") or []
    rules = [when] if isinstance(when, Mapping) else list(when)
    out = []
    for r in rules:
        if not isinstance(r, Mapping):
            continue
        th = r.get("threshold")
        value = r.get("value", True if q.get("type") == "predicate" else None)
        if isinstance(value, bool):  # as a predicate's answers read: "true" / "false"
            value = "true" if value else "false"
        out.append({"do": str(r.get("do", "")), "value": "" if value is None else str(value),
                    "threshold": float(th) if isinstance(th, (int, float)) else None,
                    "text": rule_text({**r, "value": value} if value is not None else r)})
    return out


def _values(q: Mapping[str, Any]) -> list[str]:
    choices = q.get("choices")
    if isinstance(choices, Mapping):
        return [str(c) for c in choices]
    if isinstance(choices, Sequence) and not isinstance(choices, str):
        return [str(c) for c in choices]
    return ["true", "false"] if q.get("type") == "predicate" else []


def monitor_plots(ep: Episode, t0: float) -> list[dict[str, Any]]:
    """One entry per (tool, question) answered: its values, rules and answers."""
    started = next((e for e in ep.events if e.get("kind") == "episode_started"), {})
    defs: dict[tuple[str, str], Mapping[str, Any]] = {}
    for tool, qs in (started.get("monitor_questions") or {}).items():
        for q in qs if isinstance(qs, list) else []:
            if isinstance(q, Mapping) and q.get("name"):
                defs[(str(tool), str(q["name"]))] = q
    plots: dict[tuple[str, str], dict[str, Any]] = {}
    for e in ep.events:
        if e.get("kind") not in ANSWER_KINDS or e.get("_ts") is None:
            continue
        key = (str(e.get("tool", "")), str(e.get("question", "")))
        plot = plots.get(key)
        if plot is None:
            q = defs.get(key, {})
            plot = plots[key] = {
                "tool": key[0], "question": key[1], "type": str(q.get("type", "")),
                "values": _values(q), "rules": _rules(q), "defined": bool(q), "answers": []}
        value = str(e.get("value", ""))
        if value not in plot["values"]:
            plot["values"].append(value)
        p = e.get("probability")
        plot["answers"].append({"t": _r(e["_ts"] - t0), "value": value,
                                "p": _r(p) if isinstance(p, (int, float)) else None,
                                "decision": str(e.get("decision") or ""),
                                "action": str(e.get("action_id", ""))})
    return list(plots.values())


def action_spans(ep: Episode, t0: float, t_end: float) -> list[dict[str, Any]]:
    """Every action from its start to its end (or the episode's end), with its outcome; skills
    the harness or a check ran outside the planner's actions come from skill events."""
    spans: dict[str, dict[str, Any]] = {}
    for starts, ends in (("action_started", "action_ended"), ("skill_started", "skill_ended")):
        for e in ep.events:
            aid = str(e.get("action_id", ""))
            t = e.get("_ts")
            if not aid or t is None:
                continue
            if e.get("kind") == starts and aid not in spans:
                spans[aid] = {"id": aid, "tool": str(e.get("tool") or e.get("skill") or ""),
                              "start": _r(t - t0), "end": None, "outcome": "", "_k": ends}
            elif e.get("kind") == ends and aid in spans and spans[aid]["_k"] == ends \
                    and spans[aid]["end"] is None:
                spans[aid]["end"] = _r(t - t0)
                spans[aid]["outcome"] = str(e.get("outcome", ""))
    out = []
    for s in spans.values():
        s.pop("_k")
        if s["end"] is None:
            s["end"], s["outcome"] = _r(t_end - t0), "running"
        out.append(s)
    return sorted(out, key=lambda s: s["start"])


def plot_data(ep: Episode, t0: float, t_end: float) -> dict[str, Any]:
    return {**joint_plots(ep, t0), "monitor": monitor_plots(ep, t0),
            "actions": action_spans(ep, t0, t_end)}


__all__ = ["action_spans", "joint_plots", "monitor_plots", "plot_data", "rule_text"]
