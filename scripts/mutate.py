"""``make mutate``: mutation testing of the modules that hold the safety and correctness
promises (mutmut 3, configured in pyproject.toml ``[tool.mutmut]``), then its report.

    python scripts/mutate.py [--budget-s S] [--module PATH ...] [--retest] [--report-only]

mutmut runs with one worker under ``nice -n 10`` (the machine is shared) and stops at the
time budget; its results are kept in ``mutants/`` (git-ignored), so a later run goes on where
this one stopped.  ``--module`` runs only the named modules' mutants (module by module when the
whole set does not fit the budget); ``--retest`` runs again only the mutants not killed yet
(after tests were added for them); ``--digest NAME`` prints a mutant's digest for the list of
equivalent mutants in pyproject.toml.  The report (``test-artifacts/mutation/report.json``: per
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
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package of this tree, whatever is installed

from solarian_agent.benchmarks import mutate as report_of  # noqa: E402

REPORT = report_of.REPORT


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]


def modules() -> list[str]:
    return list(_pyproject()["mutmut"]["only_mutate"])


def equivalent() -> dict[str, str]:
    """``[tool.solarian-mutate.equivalent]``: mutant name -> "digest: why it is equivalent"."""
    return dict(_pyproject().get("solarian-mutate", {}).get("equivalent", {}))


def run_mutmut(names: list[str], budget_s: float, jobs: int = 1) -> int:
    """mutmut run (``jobs`` workers, niced) for at most ``budget_s``; its exit status (124
    when the budget ran out: the results so far are kept)."""
    cmd = ["nice", "-n", "10", str(Path(sys.executable).parent / "mutmut"), "run",
           "--max-children", str(jobs), *names]
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


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def write_report(wall_s: float, status: int) -> dict[str, object]:
    equiv = equivalent()
    mods = [report_of.module_report(m, ROOT, equiv) for m in modules()]
    dirty = bool(git("status", "--porcelain"))
    report = {
        "measured_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git("rev-parse", "--short", "HEAD") + ("+changes" if dirty else ""),
        "tool": "mutmut " + _version(), "wall_s": round(wall_s, 1), "mutmut_exit": status,
        "complete": status == 0 and all(m["run"] and m["not_checked"] == 0 for m in mods),
        "total": report_of.total(mods),
        "modules": mods,
    }
    path = ROOT / REPORT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
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
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATE_JOBS", 1)),
                    help="mutmut workers (default 1: the machine is shared)")
    ap.add_argument("--digest", metavar="NAME", action="append", default=[],
                    help="print a mutant's digest for [tool.solarian-mutate.equivalent]")
    args = ap.parse_args(argv)
    for name in args.digest:
        path = next((m for m in modules() if name.startswith(report_of.dotted(m) + ".")), None)
        digest = report_of.mutant_digest(path, name, ROOT) if path else None
        if digest is None:
            ap.error(f"--digest {name!r}: no such mutant in mutants/ (run make mutate first)")
        print(f'"{name}" = "{digest}: "')
    if args.digest:
        return 0
    known = modules()
    for m in args.module:
        if m not in known:
            ap.error(f"--module {m!r} is not among [tool.mutmut] only_mutate: "
                     f"{', '.join(known)}")
    t0 = time.monotonic()
    status = 0
    paths = args.module or known
    if args.retest:
        names = report_of.not_killed(paths, ROOT)
        print(f"retesting {len(names)} mutants not killed yet", flush=True)
        status = run_mutmut(names, args.budget_s, args.jobs) if names else 0
    elif not args.report_only:
        # with results there, only the unchecked ones: mutmut reruns every mutant it is
        # named, checked or not, so a pattern would start the module over
        todo = report_of.unchecked(paths, ROOT)
        if todo is None:
            status = run_mutmut([report_of.dotted(m) + ".*" for m in args.module], args.budget_s,
                                args.jobs)
        elif todo:
            status = run_mutmut(todo, args.budget_s, args.jobs)
        else:
            print("every mutant of these modules is checked: --retest reruns the survivors",
                  flush=True)
    report = write_report(time.monotonic() - t0, status)
    from solarian_agent.benchmarks import format_table
    print(format_table({"suite": "mutate", **r} for r in report_of.rows(report)))
    print(f"report: {REPORT}")
    return 0 if status in (0, 124) else status


if __name__ == "__main__":
    sys.exit(main())
