"""``solarian-agent bench agent``: run :mod:`.agent`'s episodes for one model, print the table
(or ``--json``), append the run to the results file and draw success against dollars per task
for every model the results file holds.

Progress goes to stderr; Ctrl-C stops after the episode in flight and keeps the finished ones
(table, JSON and results file as for a whole run, marked ``interrupted``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cli_common import CliParser, number_arg
from ..sim.faults import FaultConfig
from .agent import MONITORS, PLANNERS, SEED_BASE, AgentRun, agent_episode, format_rows, summarize
from .agent_meter import Budget, load_prices
from .agent_plot import write_plot

_positive_int = number_arg(int, lambda n: n >= 1, "a whole number >= 1")
_nonneg_float = number_arg(float, lambda x: x >= 0, "a number >= 0")
_positive_float = number_arg(float, lambda x: x > 0, "a number > 0")


def default_results_path() -> Path:
    """``$XDG_DATA_HOME/solarian_agent/bench_agent.jsonl`` (``~/.local/share`` without it)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "solarian_agent" / "bench_agent.jsonl"


def parse_faults(text: str) -> FaultConfig | None:
    """``none``, ``default`` (grasp fails 30 %, slips 15 %) or ``grasp=P,slip=P``."""
    from .episodes import FAULTS

    if text == "none":
        return None
    if text == "default":
        return FAULTS
    vals: dict[str, float] = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        if k.strip() not in ("grasp", "slip"):
            raise ValueError(f"--faults: {k.strip()!r} is not grasp or slip")
        try:
            p = float(v)
        except ValueError:
            raise ValueError(f"--faults: {part!r} needs a probability") from None
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"--faults: {part!r}: a probability from 0 to 1")
        vals[k.strip()] = p
    return FaultConfig(grasp_fail_p=vals.get("grasp", 0.0), slip_p=vals.get("slip", 0.0))


def _parser() -> CliParser:
    p = CliParser(prog="solarian-agent bench agent",
                  description="Success, tokens, dollars and latency of one planner model on "
                              "the tidy task through the product, on the same seeds as every "
                              "other model; each run is appended to the results file.")
    p.add_argument("--planner", choices=PLANNERS, default="rules")
    p.add_argument("--model", default="", help="the model name (the price table's key)")
    p.add_argument("--base-url", default="",
                   help="an OpenAI-compatible server (llama.cpp, Ollama, vLLM) for --planner "
                        "openai")
    p.add_argument("--monitor", choices=MONITORS, default="cv",
                   help="cv (offline), none, or model: the run's model, metered (default cv)")
    p.add_argument("--seeds", type=_positive_int, default=5,
                   help=f"episodes, on seeds {SEED_BASE}, {SEED_BASE + 1}, ... (default 5)")
    p.add_argument("--faults", default="none",
                   help="none (default), default (grasp 30 %%, slip 15 %%) or grasp=P,slip=P")
    p.add_argument("--jobs", type=_positive_int, default=1,
                   help="episodes run at once on that many processes")
    p.add_argument("--max-turns", type=_positive_int, default=40,
                   help="model calls per episode before it ends as over budget (default 40)")
    p.add_argument("--max-seconds", type=_positive_float, default=600.0,
                   help="wall seconds per episode (default 600)")
    p.add_argument("--max-usd", type=_nonneg_float, default=0.0,
                   help="dollars per episode before it ends as over budget (0: no limit)")
    p.add_argument("--timeout", type=_positive_float, default=60.0,
                   help="seconds one model call may take (default 60)")
    p.add_argument("--prices", type=Path, default=None,
                   help="the price table (default config/model_prices.yaml)")
    p.add_argument("--results", type=Path, default=None,
                   help=f"the results file to append to (default {default_results_path()})")
    p.add_argument("--plot", type=Path, default=None,
                   help="write success against dollars per task for every model in the "
                        "results file (.html or .svg)")
    p.add_argument("--json", action="store_true", help="print the run as JSON")
    return p


def _episodes(run: AgentRun, seeds: Sequence[int], prices: Any, jobs: int,
              say: Any) -> tuple[list[dict[str, Any]], bool]:
    """The finished episodes (in seed order) and whether Ctrl-C cut the run short."""
    done: dict[int, dict[str, Any]] = {}
    t0 = time.perf_counter()

    def step(e: dict[str, Any]) -> None:
        done[int(e["seed"])] = e
        ok = sum(bool(x["success"]) for x in done.values())
        say(f"bench agent: {run.label} {len(done)}/{len(seeds)} episodes, {ok} succeeded, "
            f"{time.perf_counter() - t0:.0f} s" + (
                f"; seed {e['seed']}: {e['failure']}" if e["failure"] else ""))

    try:
        if jobs <= 1:
            for s in seeds:
                step(agent_episode(run, s, prices))
        else:
            import concurrent.futures as cf
            import multiprocessing as mp

            with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
                futs = [pool.submit(agent_episode, run, s, prices) for s in seeds]
                try:
                    for f in cf.as_completed(futs):
                        step(f.result())
                except KeyboardInterrupt:
                    for f in futs:
                        f.cancel()
                    raise
    except KeyboardInterrupt:
        say(f"bench agent: interrupted; keeping {len(done)} finished episodes")
        return [done[s] for s in seeds if s in done], True
    return [done[s] for s in seeds if s in done], False


def main(argv: Sequence[str]) -> int:
    p = _parser()
    a = p.parse_args(list(argv))
    try:
        faults = parse_faults(a.faults)
    except ValueError as e:
        p.error(str(e))
    if a.planner != "rules" and not a.model:
        p.error(f"--planner {a.planner} needs --model")
    if a.monitor == "model" and a.planner == "rules":
        p.error("--monitor model asks the run's model: it needs --planner anthropic or openai")
    if a.base_url and a.planner != "openai":
        p.error("--base-url is for --planner openai (an OpenAI-compatible server)")
    prices = load_prices(a.prices)
    run = AgentRun(planner=a.planner, model=a.model, base_url=a.base_url, monitor=a.monitor,
                   faults=faults, timeout_s=a.timeout,
                   budget=Budget(a.max_turns, a.max_seconds, a.max_usd))
    if a.planner != "rules":  # a missing key or SDK: one line now, not one per episode
        from ..core.config import load_agent_config
        from ..system import default_config_path
        from .agent import _provider

        _provider(run, load_agent_config(default_config_path()))
    seeds = [SEED_BASE + k for k in range(a.seeds)]

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    from . import one_cv_thread

    with one_cv_thread():
        episodes, interrupted = _episodes(run, seeds, prices, a.jobs, say)
    rows = summarize(episodes) if episodes else []
    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run": run.label,
              "planner": a.planner, "model": a.model, "base_url": a.base_url,
              "monitor": a.monitor, "faults": a.faults, "seeds": seeds,
              "interrupted": interrupted, "prices_date": prices.date,
              "summary": rows, "episodes": episodes}
    results = a.results or default_results_path()
    if episodes:
        results.parent.mkdir(parents=True, exist_ok=True)
        with results.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        say(f"bench agent: appended to {results}")
    if a.plot is not None:
        write_plot(a.plot, read_results(results))
        say(f"bench agent: wrote {a.plot}")
    if a.json:
        print(json.dumps(record, indent=1))
    else:
        print(format_rows(rows) if rows else "no episode finished")
        print(f"prices of {prices.date}; seeds {seeds[0]}..{seeds[-1]}"
              + ("; interrupted" if interrupted else ""))
    return 130 if interrupted else 0


def read_results(path: Path) -> list[dict[str, Any]]:
    """Every run in the results file (a line that is not JSON is skipped)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


__all__ = ["default_results_path", "main", "parse_faults", "read_results"]
