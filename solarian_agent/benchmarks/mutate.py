"""Mutation testing of the safety and correctness modules (``make mutate``, issue 23), as
benchmark rows: the last report ``make mutate`` wrote (``test-artifacts/mutation/report.json``),
per module the share of mutants the tests killed, the counts and the survivors, with the commit
and time it was measured at.  This suite runs nothing itself (a full mutation run takes the
better part of an hour on two cores): with no report it says so, never a figure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

AIM_PCT = 95.0
REPORT = Path("test-artifacts") / "mutation" / "report.json"
SHOWN_SURVIVORS = 3  # the rest are in the report file


def report_path() -> Path:
    """In the source tree ``make mutate`` ran in (an editable install's)."""
    return Path(__file__).resolve().parents[2] / REPORT


def load(path: Path | None = None) -> dict[str, Any] | None:
    p = path or report_path()
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "modules" in data else None


def rows(report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if report is None:
        return [{"name": "mutation testing", "value": "not run", "unit": "",
                 "baseline": f"aim {AIM_PCT:g} % killed",
                 "note": f"no report: run `make mutate` (writes {REPORT})"}]
    when = f"measured {report.get('measured_at', '?')} at {report.get('commit', '?')}"
    if not report.get("complete"):
        when += " (partial: see not checked)"
    out: list[dict[str, Any]] = []
    for m in report["modules"]:
        name = str(m["module"]).removeprefix("solarian_agent/")
        if not m.get("run"):
            out.append({"name": name, "value": "not run", "unit": "",
                        "baseline": f"aim {AIM_PCT:g} %", "note": when})
            continue
        surv = list(m.get("survivors", []))
        shown = ", ".join(surv[:SHOWN_SURVIVORS]) + (
            f" and {len(surv) - SHOWN_SURVIVORS} more" if len(surv) > SHOWN_SURVIVORS else "")
        counts = (f"{m['mutants']} mutants: {m['killed'] + m['timeout']} killed, "
                  f"{m['survived']} survived, {m['no_tests']} reached by no test, "
                  f"{m['not_checked']} not checked")
        out.append({"name": name, "value": m["killed_pct"] if m["killed_pct"] is not None
                    else "not run", "unit": "% killed", "baseline": f"aim {AIM_PCT:g} %",
                    "note": f"{counts}; {when}" + (f"; survivors: {shown}" if surv else "")})
    t = report["total"]
    out.append({"name": "all listed modules", "value": t["killed_pct"]
                if t["killed_pct"] is not None else "not run", "unit": "% killed",
                "baseline": f"aim {AIM_PCT:g} %",
                "note": f"{t['mutants']} mutants: {t['killed'] + t['timeout']} killed, "
                        f"{t['survived']} survived, {t['not_checked']} not checked; "
                        f"{report.get('tool', 'mutmut')}, {when}"})
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    return rows(load())
