"""``solarian-agent bench agent``: which model should I plan with?

Each episode is the tidy task through the product (:func:`~solarian_agent.system.build_sim_system`:
the skills, simulator, monitor and harness a user runs) with the planner model under test wrapped
in a :class:`~.agent_meter.MeteredProvider`.  Success is judged as the demo judges it: the
planner's claim, a fresh ``verify_state`` through the skill's action server, and the simulator's
truth (:mod:`solarian_agent.task_check`).  The model is called inline (the simulated clock waits
for it), so a slow model costs wall seconds and latency, never simulated time the arm would
not have had.

Every model runs on the same seed list (``SEED_BASE`` + k).  Rows per episode are plain dicts
(JSON as they are); :func:`summarize` turns them into one row per model.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..sim.faults import FaultConfig
from .agent_meter import Budget, MeteredProvider, PriceTable, failure_of, percentile
from .agent_monitor import monitor_backend, monitor_fields, monitor_meter
from .episodes import TASK

SEED_BASE = 95_000  # seeds no test and no other benchmark uses
PLANNERS = ("rules", "anthropic", "openai")
MONITORS = ("cv", "none", "model")  # model: the run's model, through the same provider


@dataclass(frozen=True)
class AgentRun:
    """What one ``bench agent`` model runs with (picklable: it crosses to worker processes)."""

    planner: str = "rules"
    model: str = ""
    base_url: str = ""
    monitor: str = "cv"
    faults: FaultConfig | None = None
    budget: Budget = field(default_factory=Budget)
    timeout_s: float = 60.0  # one model call's limit
    task: str = TASK
    max_sim_s: float = 900.0  # simulated seconds an episode may take

    @property
    def label(self) -> str:
        m = self.model or ("rules-v1" if self.planner == "rules" else "?")
        return f"{self.planner}:{m}" + (f" @ {self.base_url}" if self.base_url else "")


def _provider(run: AgentRun, cfg: Any) -> Any:
    from ..models.factory import build_provider
    from ..models.rules_planner import RulesPlanner

    if run.planner == "rules":
        return RulesPlanner(model=run.model or "rules-v1")
    pcfg = replace(cfg.planner, provider=run.planner, model=run.model,
                   base_url=run.base_url or None, timeout_s=run.timeout_s, max_retries=0)
    return build_provider(pcfg, purpose="planner")


def agent_episode(run: AgentRun, seed: int, prices: PriceTable) -> dict[str, Any]:
    """One metered episode of ``run`` on ``seed``: every field of the bench's JSON."""
    from ..core import names
    from ..core.config import load_agent_config
    from ..core.model_caller import InlineCaller
    from ..core.transport import QoS
    from ..models.task_reading import read_task
    from ..system import build_sim_system, default_config_path
    from ..task_check import final_check, judge

    t0 = time.perf_counter()
    cfg = load_agent_config(default_config_path())
    cfg = replace(cfg, planner=replace(cfg.planner, timeout_s=run.timeout_s))
    if run.budget.max_turns:
        cfg = replace(cfg, budgets=replace(cfg.budgets, max_turns=run.budget.max_turns))
    inner = _provider(run, cfg)
    model = str(inner.model)
    meter = MeteredProvider(inner, "anthropic" if run.planner == "anthropic" else "openai",
                            prices.price(model), run.budget, call_timeout_s=run.timeout_s)
    mon = monitor_meter(run, cfg, prices) if run.monitor == "model" else None
    if mon is not None:  # --max-usd is the episode's: the monitor model's dollars count too
        meter.shares_budget_with.append(mon)
    system = build_sim_system(config=cfg, seed=seed, faults=run.faults, planner=meter,
                              with_monitor=run.monitor != "none", caller=InlineCaller(),
                              monitor_backend=monitor_backend(mon, cfg) if mon else None)
    verdicts: list[Any] = []
    system.bus.subscribe(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT,
                         callback=verdicts.append, qos=QoS(depth=10_000))
    planner = system.planner
    start = system.world.truth()
    try:
        planner.message(run.task)
        system.run_until(lambda: planner.status not in ("idle", "running", "paused")
                         or meter.over_budget() or meter.hopeless(), run.max_sim_s)
        status = str(getattr(planner.status, "value", planner.status))
        if status in ("idle", "running", "paused") and not (meter.stopped_by
                                                            or meter.hopeless()):
            meter.stopped_by = f"{run.max_sim_s:g} simulated seconds"
        check = final_check(system)
        end = system.world.truth()
    finally:
        system.shutdown()
    verdict = judge(read_task(run.task), start, end, check)
    claimed = status == "succeeded"
    success = claimed and verdict.verified and verdict.truth
    failure = failure_of(success, claimed, status, meter)
    u = meter.usage
    lat = [c.latency_s for c in meter.calls]
    return {
        "model": run.label, "planner": run.planner, "seed": seed, "success": success,
        "claimed": claimed, "verified": verdict.verified, "truth": verdict.truth,
        "status": status, "failure": failure.value,
        "failure_detail": "" if success else (
            "; ".join(x for x in (meter.stopped_by, meter.last_error) if x)
            or str(planner.summary)),
        "turns": planner.turns, "model_calls": len(meter.calls),
        "model_errors": [c.error for c in meter.calls if c.error],
        "monitor_calls": len(verdicts),
        "input_tokens": u.input_tokens, "cached_input_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens,
        "tokens_estimated": any(c.estimated for c in meter.calls),
        # the planner's dollars and the monitor model's (--monitor model)
        "usd": round(meter.episode_dollars, 6),
        "priced": meter.price is not None,
        "wall_s": round(time.perf_counter() - t0, 3), "sim_s": round(float(end["t"]), 2),
        "latency_p50_s": round(percentile(lat, 0.5), 4),
        "latency_p95_s": round(percentile(lat, 0.95), 4),
        "latencies_s": [round(x, 4) for x in lat],
        "prices_date": prices.date, **monitor_fields(mon),
    }


def summarize(episodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per model (in the order first seen): success, means per episode of turns,
    monitor calls, tokens, dollars and wall seconds, latency p50/p95 over every call, and the
    failure reasons counted."""
    by: dict[str, list[Mapping[str, Any]]] = {}
    for e in episodes:
        by.setdefault(str(e["model"]), []).append(e)
    rows = []
    for model, eps in by.items():
        n = len(eps)
        ok = sum(bool(e["success"]) for e in eps)
        lat = [x for e in eps for x in e["latencies_s"]]
        reasons: dict[str, int] = {}
        for e in eps:
            if e["failure"]:
                reasons[e["failure"]] = reasons.get(e["failure"], 0) + 1

        def mean(k: str, eps: Sequence[Mapping[str, Any]] = eps) -> float:
            return statistics.mean(float(e[k]) for e in eps)

        rows.append({
            "model": model, "episodes": n, "success": ok, "success_pct": round(100 * ok / n, 1),
            "turns": round(mean("turns"), 2), "monitor_calls": round(mean("monitor_calls"), 1),
            "input_tokens": round(mean("input_tokens")),
            "cached_input_tokens": round(mean("cached_input_tokens")),
            "output_tokens": round(mean("output_tokens")),
            "tokens_estimated": any(e["tokens_estimated"] for e in eps),
            "usd_per_episode": round(mean("usd"), 5),
            "usd_per_success": round(sum(float(e["usd"]) for e in eps) / ok, 5) if ok else None,
            "priced": all(e["priced"] for e in eps),
            "wall_s": round(mean("wall_s"), 2),
            "latency_p50_s": round(percentile(lat, 0.5), 3),
            "latency_p95_s": round(percentile(lat, 0.95), 3),
            "failures": reasons, "seeds": [e["seed"] for e in eps],
        })
    return rows


HEAD = ("model", "success", "turns", "monitor", "in tok", "cached", "out tok", "$/task",
        "wall s", "p50 s", "p95 s", "failures")


def format_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """The per-model rows as a text table; ``~`` marks estimated token counts."""
    cells = []
    for r in rows:
        est = "~" if r["tokens_estimated"] else ""
        cells.append((
            str(r["model"]), f"{r['success']}/{r['episodes']} ({r['success_pct']:g} %)",
            f"{r['turns']:g}", f"{r['monitor_calls']:g}", f"{est}{r['input_tokens']}",
            f"{est}{r['cached_input_tokens']}", f"{est}{r['output_tokens']}",
            f"{r['usd_per_episode']:.4f}" if r["priced"] else "no price",
            f"{r['wall_s']:g}", f"{r['latency_p50_s']:g}", f"{r['latency_p95_s']:g}",
            ", ".join(f"{k} {v}" for k, v in r["failures"].items()) or "none"))
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEAD)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEAD, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip()
              for c in cells]
    if any(r["tokens_estimated"] for r in rows):
        lines.append("~ estimated: the server reported no usage (about 4 characters a token, "
                     "images by the provider's formula, the prefix shared with the previous "
                     "request counted as cached)")
    return "\n".join(lines)


__all__ = ["MONITORS", "PLANNERS", "SEED_BASE", "AgentRun", "agent_episode", "format_rows",
           "summarize"]
