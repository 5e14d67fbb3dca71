"""``solarian-agent make-ticks``: monitor ticks of the product's own episodes, labelled from
the simulator's truth, in the format label-ticks and eval-monitor read."""

import io
import json

import pytest

from solarian_agent.cli import main as cli_main
from solarian_agent.monitor_eval import main_eval
from solarian_agent.monitor_record import Truth, main_make_ticks, pick_label, truth_at
from solarian_agent.tick_sets import load_labels, load_ticks

CUP = 0.045


def at(t, ap, held=None):
    return Truth(t, ap, held, (0.0, 0.0, 0.0))


@pytest.mark.parametrize("prev, cur, closed_before, held_before, label", [
    (at(0, 0.0), at(0.5, 0.025), False, False, "approaching"),  # opening from closed home
    (at(0, 0.050), at(0.5, 0.055), False, False, "approaching"),
    (at(0, 0.055), at(0.5, 0.055), False, False, "approaching"),  # over and down to it
    (at(0, 0.055), at(0.5, 0.045, "red_cup"), True, False, "holding"),
    (at(0, 0.055), at(0.5, 0.042), True, False, "grasping"),  # closing, about its width
    (at(0, 0.055), at(0.5, 0.020), True, False, "failed"),  # closed past it: a miss
    (at(0, 0.020), at(0.5, 0.020), True, False, "failed"),  # stays closed on nothing
    (at(0, 0.030), at(0.5, 0.050), True, False, "failed"),  # reopened after closing
    (at(0, 0.045), at(0.5, 0.040), True, True, "failed"),  # it slipped out
])
def test_pick_labels_from_the_truth(prev, cur, closed_before, held_before, label):
    assert pick_label(prev, cur, CUP, closed_before, "red_cup", held_before) == label


def test_truth_at_takes_the_newest_sample_at_or_before_the_capture():
    samples = [at(1.0, 0.01), at(1.02, 0.02), at(1.04, 0.03)]
    assert truth_at(samples, 1.03).aperture == 0.02
    assert truth_at(samples, 1.04).aperture == 0.03
    assert truth_at(samples, 0.5).aperture == 0.01


def test_make_ticks_records_labelled_product_ticks_that_eval_monitor_reads(tmp_path):
    out = io.StringIO()
    assert main_make_ticks([str(tmp_path), "--seeds", "1", "--first-seed", "5"],
                           stdout=out) == 0
    summary = [json.loads(line) for line in out.getvalue().splitlines()
               if line.startswith("{")]
    pick = next(s for s in summary if s["tool"] == "pick_object")
    assert pick["ticks"] >= 10 and pick["picks"] >= 2 and pick["bytes"] < 600_000
    d = tmp_path / "pick_object"
    ts = load_ticks(d)
    labels = load_labels(d / "labels.jsonl")
    assert len(labels) == len(ts.ticks) == pick["ticks"]
    assert [s.name for s in ts.questions()] == ["progress"]  # the shipped question
    assert ts.config["period_s"] == 0.5 and ts.config["reference"] is True
    assert all(t.image_path(i).exists() for t in ts.ticks for i in t.images)
    # every pick starts from the closed home pose: its first judged tick is an approach
    assert all(labels[(t.id, "progress")] == "approaching" for t in ts.ticks if t.tick == 1)
    assert "failed" in {labels[(t.id, "progress")] for t in ts.ticks}  # seed 5 misses
    rep = io.StringIO()
    assert main_eval([str(d), "--repeats", "1"], stdout=rep) == 0
    assert "per-pick replay" in rep.getvalue() and "accuracy" in rep.getvalue()


def test_make_ticks_bad_values_are_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["make-ticks", str(tmp_path), "--seeds", "0"])
    assert e.value.code == 2
    assert "--seeds" in capsys.readouterr().err
