"""Cost benchmark: model tokens per pick-and-place.

The product (:func:`~solarian_agent.system.build_sim_system`: bus, skills, executor, planner,
trackers; the cv monitor, which spends no tokens) runs "put the red cup on the tray" with the
``rules`` planner, a scripted planner that answers like a good model (it reads the images it is
sent, points in them, plans with the plan queue).  Every request the harness builds for it is
metered on the way in, every reply on the way out:

* input tokens: the text (system prompt, tool definitions, messages; about 4 characters a
  token: :data:`CHARS_PER_TOKEN`, an estimate, the providers' tokenizers differ) plus every
  image in the request by each provider's published formula (:func:`anthropic_image_tokens`,
  :func:`openai_image_tokens`);
* output tokens: the reply's text and tool calls (the same estimate);
* images sent.

Rows, all measured in the same run on the same seeds:

* this harness's defaults: the cameras of ``watch_at_start`` watched from the run's start (a
  fresh view of each with every turn until the planner unwatches), sized to
  ``image_max_side``, images beyond ``max_images_in_context`` turned into text stubs;
* views chosen by the planner: the same planner whose first reply also calls
  ``watch(cameras=[overhead])`` (the one camera it points in; holds are checked by
  ``verify_state``), so later turns carry one view;
* always-on images (``runtime.cameras``: every camera's view with every turn, whatever the
  planner does);
* the baseline simple LLM-robot loops use, computed on the defaults' own turns: every camera's
  frame at full capture size appended to the conversation every turn and resent with it (the
  note also gives it without the history resent), the text the same.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.model_api import ImagePart, ModelReply, ModelRequest, ToolCall
from .tokens import (
    CHARS_PER_TOKEN,
    anthropic_image_tokens,
    openai_image_tokens,
    pick_and_place,
    reply_chars,
    request_text_chars,
    text_tokens,
)

SEEDS_FULL = (90_000, 90_001, 90_002, 90_003, 90_004)
SEEDS_QUICK = (90_000,)
MODES = ("defaults", "views", "always_on")


# metering -----------------------------------------------------------------------------------
@dataclass
class TurnCost:
    text_chars: int
    images: list[tuple[int, int]]  # (width, height) of every image in the request
    output_chars: int

    def input_tokens(self, provider: str) -> int:
        f = anthropic_image_tokens if provider == "anthropic" else openai_image_tokens
        return text_tokens(self.text_chars) + sum(f(w, h) for w, h in self.images)


@dataclass
class MeteredPlanner:
    """A planner provider that meters every request and reply of the one it wraps; with
    ``watch``, its first reply also watches only those cameras."""

    inner: Any
    watch: list[str] | None = None
    turns: list[TurnCost] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.name = self.inner.name
        self.model = self.inner.model
        self.reads_images = self.inner.reads_images
        self.max_image_side = self.inner.max_image_side

    def complete(self, request: ModelRequest, *, timeout_s: float) -> ModelReply:
        reply: ModelReply = self.inner.complete(request, timeout_s=timeout_s)
        if self.watch is not None and not self.turns:
            reply = dataclasses.replace(reply, tool_calls=(
                ToolCall("watch_0", "watch", {"cameras": list(self.watch)}),
                *reply.tool_calls))
        images = [(p.width, p.height) for m in request.messages for p in m.content
                  if isinstance(p, ImagePart)]
        self.turns.append(TurnCost(request_text_chars(request), images, reply_chars(reply)))
        return reply


def metered_run(seed: int, mode: str = "defaults") -> dict[str, Any]:
    """One pick-and-place through the product, metered.  ``mode``: ``defaults``, ``views``
    (the planner watches the overhead camera only) or ``always_on`` (``runtime.cameras``)."""
    from ..core.config import load_agent_config
    from ..models.rules_planner import RulesPlanner
    from ..system import default_config_path

    cfg = load_agent_config(default_config_path())
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "always_on":
        cfg = replace(cfg, runtime=replace(cfg.runtime, cameras=list(cfg.cameras)))
    meter = MeteredPlanner(RulesPlanner(), watch=["overhead"] if mode == "views" else None)
    status, done, cameras = pick_and_place(cfg, seed, meter)
    return {"seed": seed, "status": status, "done": done, "turns": meter.turns,
            "cameras": cameras}


def _per_run(runs: Sequence[dict[str, Any]], provider: str, baseline: str = ""
             ) -> tuple[float, float, float]:
    """Mean input tokens, output tokens and images sent per pick-and-place; ``baseline``
    ``history`` (every camera's full frame appended each turn and resent) or ``turn`` (only
    this turn's frames) recomputes the images of the same turns."""
    ins, outs, imgs = [], [], []
    for r in runs:
        turns: list[TurnCost] = r["turns"]
        if baseline:
            per = list(r["cameras"])
            turns = [TurnCost(t.text_chars, per * (k + 1 if baseline == "history" else 1),
                              t.output_chars) for k, t in enumerate(turns)]
        ins.append(sum(t.input_tokens(provider) for t in turns))
        outs.append(sum(text_tokens(t.output_chars) for t in turns))
        imgs.append(sum(len(t.images) for t in turns))
    return statistics.mean(ins), statistics.mean(outs), statistics.mean(imgs)


def _summary(runs: Sequence[dict[str, Any]]) -> str:
    turns = statistics.mean(len(r["turns"]) for r in runs)
    return f"{turns:.1f} planner requests; {sum(r['done'] for r in runs)}/{len(runs)} runs done"


def rows_of(by_mode: dict[str, Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows from the runs of each of :data:`MODES`."""
    rows: list[dict[str, Any]] = []
    defaults, views, always = (by_mode[m] for m in MODES)
    for provider, formula in (("anthropic", "w*h/750"),
                              ("openai", "85 + 170 per 512 px tile, high detail")):
        d_in, d_out, d_img = _per_run(defaults, provider)
        b_in, _, b_img = _per_run(defaults, provider, baseline="history")
        t_in, _, t_img = _per_run(defaults, provider, baseline="turn")
        v_in, _, v_img = _per_run(views, provider)
        a_in, _, a_img = _per_run(always, provider)
        what = f"image tokens {formula}, text about {CHARS_PER_TOKEN:g} chars a token"
        rows += [
            {"name": f"cost, {provider}: input tokens per pick-and-place (harness defaults)",
             "value": round(d_in), "unit": "tokens",
             "baseline": f"{round(b_in)} sending every camera frame at full size every turn",
             "note": f"{d_img:.1f} images sent (baseline {b_img:.1f}; {round(t_in)} tokens and "
                     f"{t_img:.1f} images when old frames are not resent); {what}; "
                     f"{_summary(defaults)}"},
            {"name": f"cost, {provider}: input tokens per pick-and-place (views: watch "
                     "overhead only)",
             "value": round(v_in), "unit": "tokens",
             "baseline": f"{round(a_in)} with always-on images ({a_img:.1f} images sent)",
             "note": f"{v_img:.1f} images sent; {_summary(views)}; always-on: "
                     f"{_summary(always)}"},
        ]
        if provider == "anthropic":
            rows.append({"name": "cost: output tokens per pick-and-place (harness defaults)",
                         "value": round(d_out), "unit": "tokens",
                         "baseline": f"{round(_per_run(views, provider)[1])} with views, "
                                     f"{round(_per_run(always, provider)[1])} always-on",
                         "note": "reply text and tool calls, about "
                                 f"{CHARS_PER_TOKEN:g} chars a token"})
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    from solarian_agent.benchmarks import one_cv_thread

    seeds = SEEDS_QUICK if quick else SEEDS_FULL
    from . import cost_cache

    with one_cv_thread():
        by_mode = {m: [metered_run(s, m) for s in seeds] for m in MODES}
        uncached = cost_cache.run(seeds)  # the row against the frame-every-turn loop
    return uncached + rows_of(by_mode)


__all__ = ["MeteredPlanner", "anthropic_image_tokens", "metered_run", "openai_image_tokens",
           "rows_of", "run"]
