"""``bench cost``'s row "uncached input tokens per pick-and-place" (issue 32, item 3): measured
through the product on the cost suite's seeds, at least 10x below the frame-every-turn loop
with its history resent on the same turns; and the pieces it is computed from."""

from __future__ import annotations

from solarian_agent.benchmarks import cost, cost_cache
from solarian_agent.core.model_api import ImagePart
from solarian_agent.models.openai_chat import image_detail


def test_the_row_is_ten_times_below_the_frame_every_turn_loop() -> None:
    runs = [cost_cache.captured_run(s) for s in cost.SEEDS_FULL]
    assert all(r["done"] for r in runs)
    rows = {r["name"]: r for r in cost_cache.rows_of(runs)}
    row = rows["uncached input tokens per pick-and-place"]
    base = int(row["baseline"].split()[0])
    assert base >= 10 * row["value"], row
    assert "claude-sonnet-4-5" in row["note"] and "$" in row["note"]
    assert "gpt-4.1" in rows["uncached input tokens per pick-and-place (openai image formula)"][
        "note"]
    # the baseline is recomputed from the runs' own turns: every camera, full size, resent
    r = runs[0]
    per_turn = sum(cost.anthropic_image_tokens(w, h) for w, h in r["cameras"])
    assert len(r["cameras"]) == 2 and per_turn > 500
    assert cost_cache.frame_every_turn(r, "anthropic") > per_turn * 6  # 1 + 2 + 3 turns
    # the product sent one small overhead view a turn, and later turns mostly hit the cache
    sizes = {(p.width, p.height) for q in r["requests"] for m in q.messages for p in m.content
             if isinstance(p, ImagePart)}
    assert sizes and all(max(s) <= cost_cache.LOW_TOKEN_SIDE for s in sizes)
    usage, prefix = cost_cache.billed(r, "anthropic")
    assert usage.cache_read_tokens > usage.input_tokens and prefix > 2000


def test_openai_images_within_512_px_go_at_low_detail() -> None:
    small = ImagePart(b"", width=256, height=192)
    big = ImagePart(b"", width=640, height=480)
    assert image_detail(small, "high") == "low" and image_detail(big, "high") == "high"
    assert image_detail(small, "auto") == "auto"
