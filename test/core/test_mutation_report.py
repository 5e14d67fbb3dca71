"""`make mutate`'s report (scripts/mutate.py) and its benchmark rows (bench mutate): figures
only from mutmut's own results, "not run" where there are none."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from solarian_agent.benchmarks import format_table
from solarian_agent.benchmarks.mutate import load, rows

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("mutate_script", ROOT / "scripts" / "mutate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_report_is_not_run(tmp_path: Path) -> None:
    assert load(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert load(tmp_path / "bad.json") is None
    [row] = rows(None)
    assert row["value"] == "not run" and "make mutate" in row["note"]


def test_module_figures_come_from_mutmuts_results(tmp_path: Path) -> None:
    mod = _script()
    meta = tmp_path / "mutants" / "solarian_agent" / "core" / "plan.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {f"solarian_agent.core.plan.{k}": v for k, v in {
        "x_a__mutmut_1": 1, "x_a__mutmut_2": 0, "x_b__mutmut_1": 36, "x_b__mutmut_2": None,
        "x_c__mutmut_1": 33}.items()}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    m = mod.module_report("solarian_agent/core/plan.py", root=tmp_path)
    assert (m["mutants"], m["checked"], m["killed"], m["timeout"], m["survived"],
            m["no_tests"], m["not_checked"]) == (5, 4, 1, 1, 1, 1, 1)
    assert m["killed_pct"] == 50.0 and m["survivors"] == ["x_a__mutmut_2"]
    assert mod.module_report("solarian_agent/core/events.py", root=tmp_path) == {
        "module": "solarian_agent/core/events.py", "run": False}
    report = {"measured_at": "2026-12-02T07:00:00Z", "commit": "abc1234", "complete": False,
              "tool": "mutmut 3.8.1", "modules": [m, {"module": "solarian_agent/core/events.py",
                                                     "run": False}],
              "total": {k: m[k] for k in ("mutants", "killed", "timeout", "survived",
                                          "not_checked", "killed_pct")}}
    got = rows(report)
    assert [r["name"] for r in got] == ["core/plan.py", "core/events.py", "all listed modules"]
    assert got[0]["value"] == 50.0 and got[1]["value"] == "not run"
    assert "5 mutants: 2 killed, 1 survived" in got[0]["note"]
    assert "x_a__mutmut_2" in got[0]["note"] and "abc1234" in got[0]["note"]
    assert "partial" in got[2]["note"]
    assert "core/plan.py" in format_table({"suite": "mutate", **r} for r in got)
