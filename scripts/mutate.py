"""``make mutate``: mutation testing of the modules that hold the safety and correctness
promises (mutmut 3, configured in pyproject.toml ``[tool.mutmut]``), then its report.

    python scripts/mutate.py [--budget-s S] [--module PATH ...] [--retest] [--report-only]

mutmut runs with one worker under ``nice -n 10`` (the machine is shared) and stops at the
time budget; its results are kept in ``mutants/`` (git-ignored), so a later run goes on where
this one stopped.  ``--module`` runs only the named modules' mutants (module by module when the
whole set does not fit the budget); ``--retest`` runs again only the mutants not killed yet
(after tests were added for them).  The report (``test-artifacts/mutation/report.json``: per
module the mutants, killed, survived, not yet checked and the survivors by name, with the
commit and time it was measured at) is what ``solarian-agent bench mutate`` shows.  It is not
part of ``make test`` or CI.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "test-artifacts" / "mutation" / "report.json"
# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code): 1 and 3 killed by a
# test, 37 by the type checker, 0 survived, None not yet checked; timeouts count as killed
# (the mutant made a test hang), the rest are reported as they are
KILLED = {1, 3, 37}
TIMEOUT = {36, 24, -24, 152, 255}
NO_TESTS = {5, 33}


def modules() -> list[str]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(conf["only_mutate"])


def dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def run_mutmut(names: list[str], budget_s: float) -> int:
    """mutmut run (one worker, niced) for at most ``budget_s``; its exit status (124 when
    the budget ran out: the results so far are kept)."""
    cmd = ["nice", "-n", "10", str(Path(sys.executable).parent / "mutmut"), "run",
           "--max-children", "1", *names]
    shown = cmd[:7] + ([f"... ({len(names)} mutant names)"] if len(names) > 3 else names)
    print("+", " ".join(shown), flush=True)
    # SOLARIAN_MUTATING: the pty property tests run fewer examples, unshrunk (hw_helpers.py)
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True,
                            env={**os.environ, "SOLARIAN_MUTATING": "1"})
    try:
        return proc.wait(timeout=budget_s)
    except subprocess.TimeoutExpired:
        print(f"time budget of {budget_s:.0f} s spent: stopping mutmut (results so far are "
              "kept in mutants/)", flush=True)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 124


def module_report(path: str, root: Path = ROOT) -> dict[str, object]:
    """One module's figures from mutmut's results (``mutants/<path>.meta``)."""
    meta = root / "mutants" / (path + ".meta")
    if not meta.exists():
        return {"module": path, "run": False}
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    killed = sum(c in KILLED for c in codes.values())
    timeouts = sum(c in TIMEOUT for c in codes.values())
    survivors = sorted(k for k, c in codes.items() if c == 0)
    unchecked = sum(c is None for c in codes.values())
    no_tests = sorted(k for k, c in codes.items() if c in NO_TESTS)
    other = sum(1 for c in codes.values()
                if c is not None and c not in KILLED | TIMEOUT | NO_TESTS and c != 0)
    checked = len(codes) - unchecked
    score = round(100.0 * (killed + timeouts) / checked, 1) if checked else None
    return {"module": path, "run": True, "mutants": len(codes), "checked": checked,
            "killed": killed, "timeout": timeouts, "survived": len(survivors),
            "no_tests": len(no_tests), "other": other, "not_checked": unchecked,
            "killed_pct": score,
            "survivors": [s.removeprefix(dotted(path) + ".") for s in survivors],
            "untested": [s.removeprefix(dotted(path) + ".") for s in no_tests]}


def not_killed(paths: list[str], root: Path = ROOT) -> list[str]:
    """The mutants of ``paths`` that survived, were reached by no test or are unchecked."""
    out: list[str] = []
    for path in paths:
        meta = root / "mutants" / (path + ".meta")
        if meta.exists():
            codes = json.loads(meta.read_text())["exit_code_by_key"]
            out += sorted(k for k, c in codes.items()
                          if c is None or c == 0 or c in NO_TESTS)
    return out


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def write_report(wall_s: float, status: int) -> dict[str, object]:
    mods = [module_report(m) for m in modules()]
    ran = [m for m in mods if m["run"]]
    total = {k: sum(int(m[k]) for m in ran)  # type: ignore[call-overload]
             for k in ("mutants", "checked", "killed", "timeout", "survived", "no_tests",
                       "not_checked")}
    checked = total["checked"]
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    report = {
        "measured_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git("rev-parse", "--short", "HEAD") + ("+changes" if dirty else ""),
        "tool": "mutmut " + _version(), "wall_s": round(wall_s, 1), "mutmut_exit": status,
        "complete": status == 0 and all(m["run"] and m["not_checked"] == 0 for m in mods),
        "total": {**total, "killed_pct": round(100.0 * (total["killed"] + total["timeout"])
                                               / checked, 1) if checked else None},
        "modules": mods,
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=1) + "\n")
    return report


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("mutmut")
    except Exception:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get(
        "MUTATE_BUDGET_S", 5400)), help="stop mutmut after this many seconds (default 5400)")
    ap.add_argument("--module", action="append", default=[],
                    help="only this module's mutants (a path from [tool.mutmut] only_mutate)")
    ap.add_argument("--retest", action="store_true",
                    help="run again only the mutants not yet killed (survived, reached by no "
                         "test, not checked) of the modules: after new tests were added")
    ap.add_argument("--report-only", action="store_true",
                    help="write the report from the results in mutants/ without running")
    args = ap.parse_args(argv)
    known = modules()
    for m in args.module:
        if m not in known:
            ap.error(f"--module {m!r} is not among [tool.mutmut] only_mutate: "
                     f"{', '.join(known)}")
    t0 = time.monotonic()
    status = 0
    if args.retest:
        names = not_killed(args.module or known)
        print(f"retesting {len(names)} mutants not killed yet", flush=True)
        status = run_mutmut(names, args.budget_s) if names else 0
    elif not args.report_only:
        status = run_mutmut([dotted(m) + ".*" for m in args.module], args.budget_s)
    report = write_report(time.monotonic() - t0, status)
    from solarian_agent.benchmarks import format_table
    from solarian_agent.benchmarks.mutate import rows
    print(format_table({"suite": "mutate", **r} for r in rows(report)))
    print(f"report: {REPORT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
