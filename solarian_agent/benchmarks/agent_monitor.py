"""``bench agent --monitor model``: the monitor asked by the model under test, through
the same provider (``anthropic``, or ``openai`` with its ``base_url``), metered like the
planner, its dollars counted in the episode's.

The monitor's settings are the shipped ``agent.monitor`` block's (period, history, image size,
close-ups, instructions) with the provider, model and server of the run; ``max_retries`` 0 as
the monitor always has (the next tick asks again with newer frames).  A monitor model's
answers that cannot be read cost their tokens and change nothing: the skills end on their
own, as with ``--monitor none``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .agent_meter import MeteredProvider, PriceTable


def monitor_meter(run: Any, cfg: Any, prices: PriceTable) -> MeteredProvider:
    """The run's model as the monitor's provider, metered (no budget of its own: the
    planner's budgets end the episode)."""
    from ..models.factory import build_provider

    mcfg = replace(cfg.monitor, provider=run.planner, model=run.model,
                   base_url=run.base_url or None, max_retries=0)
    inner = build_provider(mcfg, purpose="monitor")
    return MeteredProvider(inner, "anthropic" if run.planner == "anthropic" else "openai",
                           prices.price(str(inner.model)))


def monitor_backend(meter: MeteredProvider, cfg: Any) -> Any:
    from ..perception.vision import ModelVisionBackend

    return ModelVisionBackend(meter, max_tokens=cfg.monitor.max_tokens)


def monitor_fields(meter: MeteredProvider | None) -> dict[str, Any]:
    """The episode's monitor-model fields (zeros with ``--monitor cv`` / ``none``)."""
    if meter is None:
        return {"monitor_model_calls": 0, "monitor_input_tokens": 0,
                "monitor_cached_input_tokens": 0, "monitor_output_tokens": 0,
                "monitor_usd": 0.0, "monitor_errors": []}
    u = meter.usage
    return {"monitor_model_calls": len(meter.calls), "monitor_input_tokens": u.input_tokens,
            "monitor_cached_input_tokens": u.cache_read_tokens,
            "monitor_output_tokens": u.output_tokens, "monitor_usd": round(meter.dollars, 6),
            "monitor_errors": sorted({c.error for c in meter.calls if c.error})}


__all__ = ["monitor_backend", "monitor_fields", "monitor_meter"]
