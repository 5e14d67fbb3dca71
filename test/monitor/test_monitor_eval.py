"""The monitor evaluation tooling on the shipped tick set (test/data/monitor_ticks, made from the
simulator by test/data/make_monitor_ticks.py): the cv backend's report, per-pick replay, the
report's measures on a scripted backend, and the interactive labeller."""

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from monitor_helpers import FakeBackend

from solarian_agent.monitor_eval import build_request, evaluate, main_eval
from solarian_agent.monitor_label import main_label
from solarian_agent.tick_sets import load_labels, load_targets, load_ticks

TICKS = Path(__file__).resolve().parents[1] / "data" / "monitor_ticks"


def test_the_shipped_tick_set_is_complete():
    ts = load_ticks(TICKS)
    labels = load_labels(TICKS / "labels.jsonl")
    assert len(ts.ticks) >= 80 and len({t.pick for t in ts.ticks}) == 8
    assert {labels[(t.id, "progress")] for t in ts.ticks} == {"approaching", "grasping",
                                                             "holding", "failed"}
    assert all(t.image_path(i).exists() for t in ts.ticks for i in t.images)
    assert [s.name for s in ts.questions()] == ["progress"]


def test_eval_monitor_with_the_cv_backend(tmp_path):
    out = io.StringIO()
    rc = main_eval([str(TICKS), "--repeats", "2", "--json", str(tmp_path / "r.json")],
                   stdout=out)
    assert rc == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    q = rep["questions"]["progress"]
    assert q["n"] == 2 * rep["ticks"] and q["accuracy"] >= 0.9
    assert q["wrong_tick_rate"] <= 0.05 and q["disagreement_rate"] == 0.0
    assert set(q["confusion"]) == {"approaching", "grasping", "holding", "failed"}
    assert q["latency_s"]["p50"] is not None and q["below_floor_rate"] is not None
    text = out.getvalue()
    for word in ("accuracy", "wrong tick", "below floor", "repeats disagree", "latency",
                 "confusion", "per-pick replay"):
        assert word in text
    # the replay: every pick fires its rule on a tick labelled with the rule's value
    picks = {r["pick"]: r for r in rep["picks"] if r["repeat"] == 0}
    assert len(picks) == 8
    for pick, row in picks.items():
        kind = "ok" if row["rule"]["do"] == "finish" else "fail"
        assert row["label"] == row["rule"]["value"], row
        assert kind == ("ok" if pick in ("pick01", "pick02", "pick04", "pick06") else "fail")
    esc = [r for r in picks.values() if r["rule"]["do"] == "escalate"]
    assert all(r["elapsed_s"] >= 6.0 and r["run"] == 2 for r in esc)  # after_s, consecutive
    assert "pick03 #1: progress escalate failed at" in text and "label: failed" in text


def test_no_target_sends_no_marks(tmp_path):
    ts = load_ticks(TICKS)
    targets = load_targets(TICKS / "targets.jsonl")
    tick = next(t for t in ts.ticks if targets.get(t.images[1]["file"]))
    marked = build_request(tick, ts.questions(), targets, mark=True)
    plain = build_request(tick, ts.questions(), targets, mark=False)
    assert marked.marked and not plain.marked
    x0, y0, x1, y1 = targets[tick.images[1]["file"]]
    diff = np.any(marked.images[1].pixels != plain.images[1].pixels, axis=2)
    ys, xs = np.nonzero(diff)
    h, w = diff.shape
    assert xs.min() == max(0, x0 - 3) or x0 - 3 < 0
    assert xs.max() == min(w - 1, x1 + 3) or x1 + 3 >= w
    assert ys.min() == max(0, y0 - 3) or y0 - 3 < 0
    out = io.StringIO()
    assert main_eval([str(TICKS), "--repeats", "1", "--no-target"], stdout=out) == 0
    assert "target marks off" in out.getvalue()


def test_the_measures_on_a_scripted_backend():
    ts = load_ticks(TICKS)
    ts.ticks = [t for t in ts.ticks if t.pick == "pick03"]
    labels = load_labels(TICKS / "labels.jsonl")
    n = len(ts.ticks)
    # repeat 1 always says failed (0.9); repeat 2 always approaching at 0.5 (below the floor);
    # the third call of repeat 1 fails
    script = []
    for i in range(n):
        script.append({"progress": ("failed", 0.9)} if i != 2 else RuntimeError("down"))
        script.append({"progress": ("approaching", 0.5)})
    be = FakeBackend(script)
    out = io.StringIO()
    rep = evaluate(ts, be, labels, {}, repeats=2, out=out)
    q = rep["questions"]["progress"]
    lab = [labels[(t.id, "progress")] for t in ts.ticks]
    assert q["n"] == 2 * n and rep["errors"] == 1
    right = lab.count("failed") - (lab[2] == "failed") + lab.count("approaching")
    assert q["accuracy"] == pytest.approx(right / (2 * n))
    assert q["confusion"][lab[2]]["none"] == 1  # the failed call answered nothing
    assert q["disagreement_rate"] == 1.0
    assert q["below_floor_rate"] == pytest.approx(n / (2 * n - 1))
    # "failed" at 0.9 met the escalate rule's condition on ticks labelled otherwise (from 6 s)
    late_wrong = sum(1 for t in ts.ticks[3:] if t.elapsed_s >= 6
                     and labels[(t.id, "progress")] != "failed")
    assert q["wrong_tick_rate"] == pytest.approx(late_wrong / (2 * n))
    rows = {r["repeat"]: r for r in rep["picks"]}
    assert rows[0]["rule"]["do"] == "escalate" and rows[0]["label"] == "failed"
    assert rows[1]["rule"] is None and "no rule fired" in out.getvalue()


def small_set(tmp_path, n=3):
    dst = tmp_path / "ticks"
    (dst / "images").mkdir(parents=True)
    rows = [json.loads(line) for line in (TICKS / "ticks.jsonl").read_text().splitlines()][:n]
    for r in rows:
        for i in r["images"]:
            shutil.copy(TICKS / i["file"], dst / i["file"])
    (dst / "ticks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copy(TICKS / "skill.json", dst / "skill.json")
    return dst, rows


def test_label_ticks_reads_keys_appends_and_resumes(tmp_path):
    d, rows = small_set(tmp_path)
    out = io.StringIO()
    # 1 = approaching, s = unsure, b = back (relabel tick 2 as 2 = grasping), then quit
    rc = main_label([str(d), "--image-out", str(tmp_path / "view.png")],
                    stdin=io.StringIO("1\ns\nb\n2\nq\n"), stdout=out)
    assert rc == 0 and (tmp_path / "view.png").exists()
    text = out.getvalue()
    assert "1 approaching" in text and "s unsure   b back   q quit" in text
    lines = [json.loads(x) for x in (d / "labels.jsonl").read_text().splitlines()]
    assert [(x["id"], x["label"]) for x in lines] == [
        (rows[0]["id"], "approaching"), (rows[1]["id"], "unsure"),
        (rows[1]["id"], "grasping")]
    assert load_labels(d / "labels.jsonl")[(rows[1]["id"], "progress")] == "grasping"
    # a new session resumes at the first tick without a label
    out2 = io.StringIO()
    main_label([str(d)], stdin=io.StringIO("4\n"), stdout=out2)
    assert "resuming at 3/3" in out2.getvalue()
    assert load_labels(d / "labels.jsonl")[(rows[2]["id"], "progress")] == "failed"


def test_label_ticks_asks_for_target_boxes(tmp_path):
    d, rows = small_set(tmp_path, 2)
    keys = "3\n10 20 30 40\no\n9\n1\nbad\n1,2,3,4\nq\n"
    out = io.StringIO()
    main_label([str(d), "--mark-target"], stdin=io.StringIO(keys), stdout=out)
    t = load_targets(d / "targets.jsonl")
    f0, f1, f2 = rows[0]["images"][0]["file"], rows[0]["images"][1]["file"], \
        rows[1]["images"][1]["file"]
    assert t[f0] == [10, 20, 30, 40] and t[f1] is None and t[f2] == [1, 2, 3, 4]
    assert "unknown key '9'" in out.getvalue() and "expected four numbers" in out.getvalue()
    assert load_labels(d / "labels.jsonl")[(rows[1]["id"], "progress")] == "approaching"


def test_the_monitor_benchmark_reports_rows_with_baselines():
    from solarian_agent.benchmarks import monitor

    rows = monitor.run(quick=True)[:3]  # the image work; then the product ticks' rows
    assert [r["unit"] for r in rows] == ["ms", "%", "ms"]
    assert all(isinstance(r["value"], float) and r["baseline"] for r in rows)


def test_skill_by_the_tools_name(tmp_path):
    """--skill takes a tool's name: its monitor questions, as the tick set's own file has them."""
    from solarian_agent.skills.arm_skills import PICK_MONITOR

    d, _ = small_set(tmp_path)
    (d / "skill.json").unlink()
    out = io.StringIO()
    assert main_eval([str(d), "--skill", "pick_object", "--repeats", "1", "--labels",
                      str(TICKS / "labels.jsonl"), "--json", str(tmp_path / "r.json")],
                     stdout=out) == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    assert set(rep["questions"]) == {q["name"] for q in PICK_MONITOR} == {"progress"}
    assert rep["questions"]["progress"]["n"] == 3
    # a name no tool has (and no file) is a one-line usage error naming it and the tools
    with pytest.raises(SystemExit) as e:
        main_eval([str(d), "--skill", "pick_objct"], stdout=io.StringIO())
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main_label([str(d), "--skill", "pick_objct"], stdin=io.StringIO(""),
                   stdout=io.StringIO())


def test_skill_by_name_error_text(tmp_path, capsys):
    d, _ = small_set(tmp_path)
    with pytest.raises(SystemExit):
        main_eval([str(d), "--skill", "pick_objct"], stdout=io.StringIO())
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'pick_objct'" in err, err
    assert "pick_object" in err and "place_at" in err


def test_label_ticks_keys_need_no_enter_at_a_terminal(tmp_path):
    """At a terminal (a pseudo-terminal here) one key labels a tick: no Enter."""
    import os
    import pty
    import select
    import subprocess
    import sys
    import time

    d, rows = small_set(tmp_path, 2)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "solarian_agent.cli", "label-ticks", str(d)],
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = b""

    def read_until(text: bytes, timeout_s: float = 30.0) -> None:
        nonlocal seen
        end = time.monotonic() + timeout_s
        while text not in seen:
            left = end - time.monotonic()
            assert left > 0, (text, seen[-2000:])
            r, _, _ = select.select([master], [], [], left)
            if r:
                try:
                    seen += os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
        assert text in seen, (text, seen[-2000:])

    try:
        read_until(b"[1/2]")
        read_until(b"q quit")
        os.write(master, b"2")  # no newline
        read_until(b"[2/2]")
        os.write(master, b"q")
        assert proc.wait(30) == 0, seen[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)
    labels = load_labels(d / "labels.jsonl")
    assert labels == {(rows[0]["id"], "progress"): "grasping"}
