"""Token usage read from a reply.

``Usage.input_tokens`` counts input that was neither read from nor written to the prompt
cache (how Anthropic reports it); OpenAI's inclusive totals are split the same way, so the
four fields add up to everything billed as input plus output across providers.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ..core.model_api import Usage
from .sdk_errors import clip

log = logging.getLogger(__name__)

MAX_TOKEN_COUNT = 10**12  # no reply uses more tokens; a larger count is no count


def usage_count(v: Any, what: str = "usage count") -> int:
    """A token count from a reply's usage: a whole number from 0 to :data:`MAX_TOKEN_COUNT`
    (an integral float such as ``12.0`` too).  Anything else (negative, fractional, NaN, a
    string, a list) is logged as invalid, naming ``what``, and counted as 0: a usage block
    is bookkeeping and never costs the reply it came with.  A missing count is 0."""
    if v is None:
        return 0
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKEN_COUNT:
        return v
    log.warning("invalid %s in a model reply's usage: %s (counted as 0)", what,
                clip(repr(v), 80))
    return 0


def openai_usage(total_in: Any, out: Any, cached: Any, written: Any = 0) -> Usage:
    """Split an OpenAI-style inclusive input total into uncached / cache read / cache write."""
    t = usage_count(total_in, "input token count")
    c = usage_count(cached, "cached token count")
    w = usage_count(written, "cache write token count")
    return Usage(input_tokens=max(0, t - c - w),
                 output_tokens=usage_count(out, "output token count"),
                 cache_read_tokens=c, cache_write_tokens=w)

