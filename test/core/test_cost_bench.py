"""The cost benchmark: image tokens by the providers' published formulas, metering of the
product's planner requests, and the rows against the full-frame baseline."""

from __future__ import annotations

import pytest

from solarian_agent.benchmarks import cost


@pytest.mark.parametrize("w, h, tokens", [(200, 200, 54), (1000, 1000, 1334),
                                          (1092, 1092, 1590), (3000, 3000, 1600)])
def test_anthropic_image_tokens_follow_the_published_formula(w: int, h: int,
                                                             tokens: int) -> None:
    assert cost.anthropic_image_tokens(w, h) == pytest.approx(tokens, abs=2)


@pytest.mark.parametrize("w, h, tokens", [(1024, 1024, 765), (2048, 4096, 1105),
                                          (640, 480, 425), (512, 512, 255)])
def test_openai_image_tokens_follow_the_published_formula(w: int, h: int, tokens: int) -> None:
    assert cost.openai_image_tokens(w, h) == tokens
    assert cost.openai_image_tokens(w, h, "low") == 85


def _run(images_per_turn: list[int]) -> dict:
    return {"done": True, "cameras": [(640, 480), (640, 480)],
            "turns": [cost.TurnCost(4000, [(640, 480)] * n, 400) for n in images_per_turn]}


def test_rows_compare_against_every_full_frame_every_turn() -> None:
    by_mode = {"defaults": [_run([2, 4, 4])], "views": [_run([2, 3, 3])],
               "always_on": [_run([2, 4, 4])]}
    rows = {r["name"]: r for r in cost.rows_of(by_mode)}
    d = rows["cost, anthropic: input tokens per pick-and-place (harness defaults)"]
    per_image = cost.anthropic_image_tokens(640, 480)
    assert d["value"] == 3 * 1000 + 10 * per_image
    # the baseline resends 2 + 4 + 6 full frames, or 2 a turn without the history
    assert d["baseline"].startswith(f"{3 * 1000 + 12 * per_image} ")
    assert f"{3 * 1000 + 6 * per_image} tokens and 6.0 images" in d["note"]
    v = rows["cost, anthropic: input tokens per pick-and-place (views: watch overhead only)"]
    assert v["value"] == 3 * 1000 + 8 * per_image
    assert rows["cost: output tokens per pick-and-place (harness defaults)"]["value"] == 300


def test_a_metered_run_through_the_product_watching_one_camera() -> None:
    r = cost.metered_run(13, "views")
    assert r["done"] and r["status"] == "succeeded"
    assert r["cameras"] == [(640, 480), (480, 360)]  # overhead and wrist capture sizes
    first, *later = r["turns"]
    # the first turn brings the cameras watched from the start (the shipped watch_at_start:
    # the overhead one)
    assert [t.images for t in r["turns"]][0] == [(256, 192)]
    assert later and all(t.text_chars > 1000 and t.output_chars > 0 for t in r["turns"])
    # after watch(overhead) each new turn adds one view, not two
    assert all(b - a <= 1 for a, b in zip([len(t.images) for t in r["turns"]],
                                          [len(t.images) for t in later], strict=False))
    with pytest.raises(ValueError, match="mode"):
        cost.metered_run(13, "sometimes")
