"""Mutation testing of the safety and correctness modules (``make mutate``): mutmut's
results read into a report, and the report as benchmark rows.

``scripts/mutate.py`` runs mutmut and writes the report (``test-artifacts/mutation/report.json``)
with :func:`module_report`; ``solarian-agent bench mutate`` shows it (:func:`rows`): per module
the share of mutants the tests killed, the counts and the survivors, with the commit and time it
was measured at.  The bench runs nothing itself (a full run takes about an hour on two cores):
with no report it says so, never a figure.

Equivalent mutants (no behaviour can differ) are listed by name in pyproject.toml
``[tool.solarian-mutate.equivalent]``, each with the digest of the mutant's code and the reason.
A listed mutant counts apart from the score only while its code still has that digest: after an
edit renumbers or changes it, it is a survivor again until someone looks at it anew.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

AIM_PCT = 95.0
REPORT = Path("test-artifacts") / "mutation" / "report.json"
SHOWN_SURVIVORS = 3  # the rest are in the report file
# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code): 1 and 3 killed by a
# test, 37 by the type checker, 0 survived, None not yet checked; timeouts count as killed
# (the mutant made a test hang); anything else (interrupted, crashed) is checked again by a
# retest and reported as "other"
KILLED = {1, 3, 37}
TIMEOUT = {36, 24, -24, 152, 255}
NO_TESTS = {5, 33}


def report_path() -> Path:
    """In the source tree ``make mutate`` ran in (an editable install's)."""
    return Path(__file__).resolve().parents[2] / REPORT


def dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def exit_codes(path: str, root: Path) -> dict[str, int | None] | None:
    """mutmut's results for one module (``mutants/<path>.meta``); None when it never ran or
    the file is unreadable (a run killed while writing it)."""
    try:
        codes = json.loads((root / "mutants" / (path + ".meta")).read_text())["exit_code_by_key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return codes if isinstance(codes, dict) else None


def mutant_digest(path: str, key: str, root: Path) -> str | None:
    """The first 10 hex digits of the SHA-1 of mutant ``key``'s code as mutmut wrote it into
    ``mutants/<path>``; None when it is not there."""
    try:
        src = (root / "mutants" / path).read_text()
        tree = ast.parse(src)
    except (OSError, SyntaxError, ValueError):
        return None
    short = key.removeprefix(dotted(path) + ".")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == short:
            code = ast.get_source_segment(src, node) or ""
            return hashlib.sha1(code.encode()).hexdigest()[:10]
    return None


def module_report(path: str, root: Path, equivalent: Mapping[str, str] | None = None
                  ) -> dict[str, Any]:
    """One module's figures from mutmut's results.  ``equivalent``: mutant name -> "digest:
    reason"; a survivor listed there with its digest unchanged is counted as equivalent."""
    codes = exit_codes(path, root)
    if codes is None:
        return {"module": path, "run": False}
    equivalent = equivalent or {}
    killed = sum(c in KILLED for c in codes.values())
    timeouts = sum(c in TIMEOUT for c in codes.values())
    survived = sorted(k for k, c in codes.items() if c == 0)
    equiv, stale = [], []
    for k in survived:
        if k in equivalent:
            digest = equivalent[k].split(":", 1)[0].strip()
            (equiv if mutant_digest(path, k, root) == digest else stale).append(k)
    survivors = [k for k in survived if k not in equiv]
    unchecked = sum(c is None for c in codes.values())
    no_tests = sorted(k for k, c in codes.items() if c in NO_TESTS)
    other = sum(1 for c in codes.values()
                if c is not None and c not in KILLED | TIMEOUT | NO_TESTS and c != 0)
    checked = len(codes) - unchecked - len(equiv)
    score = round(100.0 * (killed + timeouts) / checked, 1) if checked else None

    def short(names: Iterable[str]) -> list[str]:
        return [s.removeprefix(dotted(path) + ".") for s in names]

    return {"module": path, "run": True, "mutants": len(codes), "checked": checked,
            "killed": killed, "timeout": timeouts, "survived": len(survivors),
            "equivalent": len(equiv), "no_tests": len(no_tests), "other": other,
            "not_checked": unchecked, "killed_pct": score, "survivors": short(survivors),
            "untested": short(no_tests), "stale_equivalent": short(stale)}


def not_killed(paths: Iterable[str], root: Path) -> list[str]:
    """The mutants of ``paths`` a retest runs: every one neither killed nor timed out."""
    out: list[str] = []
    for path in paths:
        codes = exit_codes(path, root) or {}
        out += sorted(k for k, c in codes.items() if c not in KILLED | TIMEOUT)
    return out


def unchecked(paths: Iterable[str], root: Path) -> list[str] | None:
    """The mutants of ``paths`` not checked yet, None where a module never ran (mutmut then
    starts it; given names, mutmut reruns them even when it has results)."""
    out: list[str] = []
    for path in paths:
        codes = exit_codes(path, root)
        if codes is None:
            return None
        out += sorted(k for k, c in codes.items() if c is None)
    return out


def total(modules: list[dict[str, Any]]) -> dict[str, Any]:
    ran = [m for m in modules if m["run"]]
    t = {k: sum(int(m[k]) for m in ran)
         for k in ("mutants", "checked", "killed", "timeout", "survived", "equivalent",
                   "no_tests", "other", "not_checked")}
    t["killed_pct"] = (round(100.0 * (t["killed"] + t["timeout"]) / t["checked"], 1)
                       if t["checked"] else None)
    return t


def load(path: Path | None = None) -> dict[str, Any] | None:
    p = path or report_path()
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "modules" in data else None


def _counts(m: Mapping[str, Any]) -> str:
    s = (f"{m['mutants']} mutants: {m['killed'] + m['timeout']} killed, {m['survived']} "
         f"survived, {m.get('equivalent', 0)} equivalent, {m['no_tests']} reached by no test, "
         f"{m['not_checked']} not checked")
    return s + (f", {m['other']} interrupted or crashed" if m.get("other") else "")


def rows(report: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if report is None:
        return [{"name": "mutation testing", "value": "not run", "unit": "",
                 "baseline": f"aim {AIM_PCT:g} % killed",
                 "note": f"no report: run `make mutate` (writes {REPORT})"}]
    when = f"measured {report.get('measured_at', '?')} at {report.get('commit', '?')}"
    if report.get("mutmut_exit") not in (0, 124, None):
        when += f" (mutmut failed: exit {report['mutmut_exit']})"
    elif not report.get("complete"):
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
        stale = m.get("stale_equivalent") or []
        out.append({"name": name, "value": m["killed_pct"] if m["killed_pct"] is not None
                    else "not run", "unit": "% killed", "baseline": f"aim {AIM_PCT:g} %",
                    "note": f"{_counts(m)}; {when}" + (f"; survivors: {shown}" if surv else "")
                    + (f"; listed as equivalent but changed: {', '.join(stale)}"
                       if stale else "")})
    t = report["total"]
    out.append({"name": "all listed modules", "value": t["killed_pct"]
                if t["killed_pct"] is not None else "not run", "unit": "% killed",
                "baseline": f"aim {AIM_PCT:g} %",
                "note": f"{_counts(t)}; {report.get('tool', 'mutmut')}, {when}"})
    return out


def run(quick: bool = False) -> list[dict[str, Any]]:
    return rows(load())
