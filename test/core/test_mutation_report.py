"""`make mutate`'s report (benchmarks/mutate.py, written by scripts/mutate.py) and its benchmark
rows (bench mutate): figures only from mutmut's own results, "not run" where there are none,
equivalent mutants counted apart only while their code is what was looked at."""

from __future__ import annotations

import json
from pathlib import Path

from solarian_agent.benchmarks import format_table
from solarian_agent.benchmarks.mutate import (
    load,
    module_report,
    mutant_digest,
    not_killed,
    rows,
    total,
    unchecked,
)

PLAN = "solarian_agent/core/plan.py"
MUTANTS_SRC = '''
def x_a__mutmut_1(q):
    return q + 1

def x_a__mutmut_2(q):
    return q - 1
'''


def _results(root: Path, codes: dict[str, int | None], path: str = PLAN) -> None:
    meta = root / "mutants" / (path + ".meta")
    meta.parent.mkdir(parents=True, exist_ok=True)
    mod = path.removesuffix(".py").replace("/", ".")
    meta.write_text(json.dumps({"exit_code_by_key": {f"{mod}.{k}": v for k, v in codes.items()}}))
    (root / "mutants" / path).write_text(MUTANTS_SRC)


CODES = {"x_a__mutmut_1": 1, "x_a__mutmut_2": 0, "x_b__mutmut_1": 36, "x_b__mutmut_2": None,
         "x_c__mutmut_1": 33, "x_c__mutmut_2": 2}


def test_no_report_is_not_run(tmp_path: Path) -> None:
    assert load(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert load(tmp_path / "bad.json") is None
    [row] = rows(None)
    assert row["value"] == "not run" and "make mutate" in row["note"]


def test_module_figures_come_from_mutmuts_results(tmp_path: Path) -> None:
    _results(tmp_path, CODES)
    m = module_report(PLAN, tmp_path)
    assert (m["mutants"], m["checked"], m["killed"], m["timeout"], m["survived"],
            m["equivalent"], m["no_tests"], m["other"], m["not_checked"]) == (
        6, 5, 1, 1, 1, 0, 1, 1, 1)
    assert m["killed_pct"] == 40.0 and m["survivors"] == ["x_a__mutmut_2"]
    assert m["untested"] == ["x_c__mutmut_1"]
    assert module_report("solarian_agent/core/events.py", tmp_path) == {
        "module": "solarian_agent/core/events.py", "run": False}
    # a results file a killed run left half-written reads as not run, never a crash
    (tmp_path / "mutants" / "solarian_agent" / "core" / "events.py.meta").write_text('{"exit')
    assert module_report("solarian_agent/core/events.py", tmp_path)["run"] is False


def test_a_listed_equivalent_mutant_counts_apart_only_while_its_code_is_unchanged(
        tmp_path: Path) -> None:
    _results(tmp_path, CODES)
    name = "solarian_agent.core.plan.x_a__mutmut_2"
    digest = mutant_digest(PLAN, name, tmp_path)
    assert digest is not None and len(digest) == 10
    assert mutant_digest(PLAN, "solarian_agent.core.plan.x_a__mutmut_9", tmp_path) is None
    m = module_report(PLAN, tmp_path, {name: f"{digest}: q - 1 reads the same"})
    assert (m["survived"], m["equivalent"], m["checked"], m["killed_pct"]) == (0, 1, 4, 50.0)
    assert m["stale_equivalent"] == []
    # the mutant's code changed since it was looked at: a survivor again, and said so
    (tmp_path / "mutants" / PLAN).write_text(MUTANTS_SRC.replace("q - 1", "q - 2"))
    m = module_report(PLAN, tmp_path, {name: f"{digest}: q - 1 reads the same"})
    assert (m["survived"], m["equivalent"], m["stale_equivalent"]) == (1, 0, ["x_a__mutmut_2"])
    assert "listed as equivalent but changed: x_a__mutmut_2" in rows(
        {"modules": [m], "total": total([m])})[0]["note"]


def test_a_retest_reruns_all_not_killed_and_a_run_goes_on_with_the_unchecked(
        tmp_path: Path) -> None:
    _results(tmp_path, CODES)
    mod = "solarian_agent.core.plan."
    assert not_killed([PLAN], tmp_path) == [mod + k for k in (
        "x_a__mutmut_2", "x_b__mutmut_2", "x_c__mutmut_1", "x_c__mutmut_2")]
    assert unchecked([PLAN], tmp_path) == [mod + "x_b__mutmut_2"]
    assert unchecked([PLAN, "solarian_agent/core/events.py"], tmp_path) is None  # never ran


def test_the_rows_say_partial_or_failed_and_name_the_survivors(tmp_path: Path) -> None:
    _results(tmp_path, CODES)
    m = module_report(PLAN, tmp_path)
    mods = [m, {"module": "solarian_agent/core/events.py", "run": False}]
    report = {"measured_at": "2026-12-02T07:00:00Z", "commit": "abc1234", "complete": False,
              "mutmut_exit": 124, "tool": "mutmut 3.8.1", "modules": mods, "total": total(mods)}
    got = rows(report)
    assert [r["name"] for r in got] == ["core/plan.py", "core/events.py", "all listed modules"]
    assert got[0]["value"] == 40.0 and got[1]["value"] == "not run" and got[2]["value"] == 40.0
    assert got[0]["note"].startswith(
        "6 mutants: 2 killed, 1 survived, 0 equivalent, 1 reached by no test, 1 not checked, "
        "1 interrupted or crashed; measured 2026-12-02T07:00:00Z at abc1234 (partial")
    assert got[0]["note"].endswith("survivors: x_a__mutmut_2")
    assert "(mutmut failed: exit 1)" in rows({**report, "mutmut_exit": 1})[2]["note"]
    assert "core/plan.py" in format_table({"suite": "mutate", **r} for r in got)
