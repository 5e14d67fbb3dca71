"""Simulator benchmark suite (see solarian_agent.sim.benchmark)."""

from solarian_agent.sim.benchmark import run

__all__ = ["run"]
