"""The shipped price table agrees with the providers' published billing rules.

Anthropic bills a 5-minute cache write at 1.25x the model's input price and a cache read at
0.1x; OpenAI bills no cache write and a cached read below the input price.  A typo in one of
the table's figures breaks one of these ratios, and every dollar `bench agent` prints with it.
"""

from __future__ import annotations

import pytest

from solarian_agent.benchmarks.agent_meter import load_prices
from solarian_agent.core.config import ConfigError


def test_every_claude_price_follows_anthropics_cache_multipliers() -> None:
    table = load_prices()
    claude = {n: p for n, p in table.models.items() if n.startswith("claude-")}
    assert len(claude) >= 3
    for name, p in claude.items():
        assert p.cache_write == pytest.approx(1.25 * p.input), name
        assert p.cached_input == pytest.approx(0.1 * p.input), name
        assert p.output > p.input, name


def test_every_openai_price_bills_no_cache_write_and_a_cheaper_cached_read() -> None:
    table = load_prices()
    gpt = {n: p for n, p in table.models.items() if n.startswith("gpt-")}
    assert gpt
    for name, p in gpt.items():
        assert p.cache_write == p.input, name  # absent in the file: no write surcharge
        assert 0 < p.cached_input < p.input, name
        assert p.output > p.input, name


def test_a_price_table_with_a_negative_price_names_its_yaml_path(tmp_path) -> None:
    bad = tmp_path / "prices.yaml"
    bad.write_text('date: "2026-12-06"\nmodels:\n  m: {input: -1, cached_input: 0, output: 1}\n')
    with pytest.raises(ConfigError, match=r"models\.m\.input"):
        load_prices(bad)
