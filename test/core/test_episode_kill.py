"""A process killed mid-run loses nothing it logged: every event written before the kill is in
the file (each is flushed as it is written), and every log file parses up to the last event."""

import json
import os
import signal
import subprocess
import sys
import textwrap

from solarian_agent.core.episode_log import read_events

# After each control step the child prints how many events its episode log has written so
# far; an event counted there had returned from EpisodeLog.event before the line was printed.
SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from solarian_agent.core import episode_log
    from solarian_agent.models.scripted import reply
    from solarian_agent.testing.harness import make_harness
    written = {}
    real_event = episode_log.EpisodeLog.event
    def counted(self, kind, by=None, **data):
        rec = real_event(self, kind, by, **data)
        written[self.dir] = written.get(self.dir, 0) + 1
        return rec
    episode_log.EpisodeLog.event = counted
    script = [reply("x" * 200, ("wait", {"seconds": 0.02})) for _ in range(100000)]
    h = make_harness(script, log_root=Path(sys.argv[1]), config={"budgets": {"max_turns": 100000}})
    h.say("run forever")
    while True:
        h.runtime.step()
        print(sum(written.values()), flush=True)
""")

KILL_AFTER_EVENTS = 1500  # a few hundred kB: many times any write buffer


def test_killed_process_loses_no_event_it_wrote(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # blocks on the child's output: no polling, no sleep
            if int(line) >= KILL_AFTER_EVENTS:
                break
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read().split()  # what it printed before it died
        reported = int(rest[-1]) if rest else int(line)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    logs = tmp_path / "0001_test" / "episodes" / "000001" / "logs"
    assert [p.name for p in (tmp_path / "0001_test" / "episodes").iterdir()] == ["000001"]
    events = read_events(logs / "events.jsonl")
    # nothing the process had written before the kill was lost (unflushed events would be)
    assert len(events) >= reported >= KILL_AFTER_EVENTS
    assert [e["kind"] for e in events[:2]] == ["episode_started", "run_started"]
    for e in events:
        assert "t" in e and "kind" in e
    # every complete turn file parses; no half-written ones exist under their final name
    turns = sorted((logs / "turns").glob("*.json"))
    assert turns
    for t in turns:
        json.loads(t.read_text())
