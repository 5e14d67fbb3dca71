"""``bench cost``'s row "uncached input tokens per pick-and-place": what a pick-and-place
sends a provider uncached, against the frame-every-turn loop.

The product runs "put the red cup on the tray" with the ``rules`` planner on the shipped
defaults, the path a user runs: only the overhead camera watched from a run's start
(``watch_at_start``; the wrist is one look away), images sized to what pointing needs
(``image_max_side``), older images beyond ``max_images_in_context`` turned to text, skill
results trimmed to what the planner still needs (:mod:`solarian_agent.core.result_text`).
Every request the harness builds is captured and billed as a provider with a prefix cache
bills it (:func:`~.agent_meter.estimate_usage`): the blocks a request shares from the start
with the request before it are a cache read, the rest uncached input.  The system prompt and
the tools, the same in every request of a session, are read from the cache from a session's
second task on; the first task of a session writes them once, which the note gives.

The baseline is measured on the same turns of the same runs: the frame-every-turn loop simple
LLM-robot agents use, every camera's frame at full capture size appended every turn and the
whole history resent with nothing cached, the text the same.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from ..core.model_api import ModelReply, ModelRequest, Usage
from .agent_meter import estimate_usage, load_prices, prefix_blocks
from .tokens import (
    anthropic_image_tokens,
    openai_image_tokens,
    pick_and_place,
    request_text_chars,
    text_tokens,
)

ROW = "uncached input tokens per pick-and-place"
GOAL = 10  # times below the frame-every-turn loop, in a warm session
NAMED_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1"}


class _Capture:
    """The rules planner, every request it is sent kept."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.model = inner.name, inner.model
        self.reads_images, self.max_image_side = inner.reads_images, inner.max_image_side
        self.requests: list[ModelRequest] = []
        self.replies: list[ModelReply] = []

    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply:
        reply: ModelReply = self.inner.complete(request, timeout_s=timeout_s)
        self.requests.append(request)
        self.replies.append(reply)
        return reply


def captured_run(seed: int) -> dict[str, Any]:
    """One pick-and-place through the product on the shipped defaults: its requests, replies,
    whether it was done, every camera's capture size and the settings that shape images."""
    from ..core.config import load_agent_config
    from ..models.rules_planner import RulesPlanner
    from ..system import default_config_path

    cfg = load_agent_config(default_config_path())
    cap = _Capture(RulesPlanner())
    _, done, sizes = pick_and_place(cfg, seed, cap)
    return {"seed": seed, "done": done, "requests": cap.requests, "replies": cap.replies,
            "cameras": sizes, "settings": {"watch_at_start": cfg.watch_at_start,
                                           "image_max_side": cfg.image_max_side}}


def billed(run: dict[str, Any], provider: str) -> tuple[Usage, int]:
    """The run's usage with a warm prefix cache, and the system-and-tools tokens the first
    task of a session writes to the cache once."""
    total, prev, prefix = Usage(), None, 0
    for req, reply in zip(run["requests"], run["replies"], strict=True):
        u = estimate_usage(req, reply, provider, prev)
        if prev is None:  # a session's later tasks find system and tools in the cache
            prefix = sum(n for b, n in prefix_blocks(req, provider)
                         if b.startswith(("system:", "tool:")))
            u = replace(u, input_tokens=u.input_tokens - prefix,
                        cache_read_tokens=u.cache_read_tokens + prefix)
        total = total + u
        prev = req
    return total, prefix


def frame_every_turn(run: dict[str, Any], provider: str) -> int:
    """The baseline's input tokens on the run's own turns: the same text, and every camera's
    full frame appended each turn and resent with the whole history, nothing cached."""
    f = anthropic_image_tokens if provider == "anthropic" else openai_image_tokens
    per_turn = sum(f(w, h) for w, h in run["cameras"])
    return sum(text_tokens(request_text_chars(q)) + per_turn * (k + 1)
               for k, q in enumerate(run["requests"]))


def rows_of(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    prices = load_prices()
    out: list[dict[str, Any]] = []
    for provider in ("anthropic", "openai"):
        usage = [billed(r, provider) for r in runs]
        unc = statistics.mean(u.input_tokens for u, _ in usage)
        cached = statistics.mean(u.cache_read_tokens for u, _ in usage)
        outp = statistics.mean(u.output_tokens for u, _ in usage)
        prefix = statistics.mean(p for _, p in usage)
        base = statistics.mean(frame_every_turn(r, provider) for r in runs)
        model = NAMED_MODELS[provider]
        price = prices.price(model)
        # Anthropic's breakpoint on the last message writes each request's new tokens to the
        # cache, billed as cache writes; OpenAI bills them as input
        mean_u = (Usage(0, round(outp), round(cached), round(unc)) if provider == "anthropic"
                  else Usage(round(unc), round(outp), round(cached)))
        usd = price.dollars(mean_u) if price else 0.0
        base_usd = (base * price.input + outp * price.output) / 1e6 if price else 0.0
        turns = statistics.mean(len(r["requests"]) for r in runs)
        name = ROW if provider == "anthropic" else f"{ROW} (openai image formula)"
        out.append({
            "name": name, "value": round(unc), "unit": "tokens",
            "baseline": f"{round(base)} the frame-every-turn loop with its history resent "
                        f"({base / unc:.1f}x)",
            "note": f"{provider} image formula; cached input {round(cached)}, output "
                    f"{round(outp)}; the value is a warm session's (system and tools read "
                    f"from the cache): the >={GOAL}x holds from a session's second task on, "
                    f"within the provider's cache lifetime; cold, a session's first task "
                    f"(system and tools, {round(prefix)} tokens, uncached and written to the "
                    f"cache once): {round(unc + prefix)} uncached input tokens "
                    f"({base / (unc + prefix):.1f}x); {model} at the "
                    f"{prices.date} prices: ${usd:.4f} per pick-and-place (baseline "
                    f"${base_usd:.4f}); the shipped defaults "
                    f"{runs[0]['settings'] if runs else {}}; {turns:.1f} planner requests; "
                    f"{sum(r['done'] for r in runs)}/{len(runs)} runs done"})
    return out


def run(seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    return rows_of([captured_run(s) for s in seeds])


__all__ = ["ROW", "billed", "captured_run", "frame_every_turn", "rows_of", "run"]
