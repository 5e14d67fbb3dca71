"""A process killed mid-run leaves every log file parseable up to the last event."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from solarian_agent.core.episode_log import read_events

SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from solarian_agent.models.scripted import reply
    from solarian_agent.testing.harness import make_harness
    script = [reply("x" * 200, ("wait", {"seconds": 0.02})) for _ in range(100000)]
    h = make_harness(script, log_root=Path(sys.argv[1]), config={"budgets": {"max_turns": 100000}})
    h.say("run forever")
    print("ready", flush=True)
    while True:
        h.runtime.step()
""")


def test_killed_process_leaves_parseable_log(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        logs = tmp_path / "0001_test" / "episodes" / "000001" / "logs"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ev = logs / "events.jsonl"
            if ev.exists() and ev.stat().st_size > 200_000:
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    events = read_events(logs / "events.jsonl")
    assert len(events) > 200
    assert [e["kind"] for e in events[:2]] == ["episode_started", "run_started"]
    for e in events:
        assert "t" in e and "kind" in e
    # every complete turn file parses; no half-written ones exist under their final name
    turns = sorted((logs / "turns").glob("*.json"))
    assert turns
    for t in turns:
        json.loads(t.read_text())
