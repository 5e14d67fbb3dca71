"""The test harness builds a planner without the composition root: importing it (and building a
harness) needs neither Pinocchio nor the simulator, so a planner test runs where they are not
installed."""

from __future__ import annotations

import subprocess
import sys


def test_the_harness_imports_without_pinocchio_the_simulator_or_system_py() -> None:
    code = ("import sys\n"
            "from solarian_agent.testing.harness import make_harness\n"
            "h = make_harness()\n"
            "bad = sorted(m for m in sys.modules if m in ('pinocchio', 'pin', "
            "'solarian_agent.system') or m.startswith('solarian_agent.sim'))\n"
            "print(','.join(bad) or 'none')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "none"
