"""A recording subprocess killed with SIGKILL at several moments: the bag opens with rosbags as it
was left (everything up to the last closed split), and ``solarian-agent bag-repair`` recovers
everything the recorder had reported on disk before the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from solarian_agent.cli import main as cli
from solarian_agent.core import names
from solarian_agent.rosmsg.bag import CompressedFrame, read_bag

# the recorder as a run uses it (thread, queue, JPEG, splits), fed as fast as it takes them;
# every durable point it reports goes to stdout
CHILD = textwrap.dedent("""
    import itertools, sys
    import numpy as np
    from solarian_agent.core import names
    from solarian_agent.core.messages import Image, JointState
    from solarian_agent.rosmsg.bag import BagRecorder

    def tell(kind, count):
        print(kind, count, flush=True)

    rec = BagRecorder(sys.argv[1], split_s=0.3, flush_s=0.05, on_durable=tell)
    y, x = np.mgrid[0:240, 0:320]
    for seq in itertools.count():
        rec.write(names.JOINT_STATES, names.T_JOINT_STATE,
                  JointState(float(seq), ("shoulder_pan",), (seq * 1e-3,)))
        if seq % 4 == 0:
            img = np.dstack([(x + seq) % 256, y % 256, (x * y + seq) % 256]).astype(np.uint8)
            rec.write(names.image_topic("cam"), names.T_IMAGE, Image(img, float(seq), "cam"))
""")

# when to kill, by what the recorder has reported: (the report to wait for, how many of them,
# then how many more reports of any kind); the writer goes on meanwhile, so the kill lands
# anywhere in its work (a chunk, a split's footer, the metadata)
KILL_POINTS = {
    "at the first flush (usually before any split)": ("flush", 1, 0),
    "right after the 2nd split": ("split", 2, 0),
    "3 reports after the 3rd split (mid-split)": ("split", 3, 3),
    "1 report after the 6th split": ("split", 6, 1),
}


def _prefix(seqs: list[int]) -> bool:
    return seqs == list(range(len(seqs)))


def _joints(bag) -> list[int]:
    return [round(m.value.stamp) for m in read_bag(bag, [names.JOINT_STATES])]


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_kill_9_at_any_moment_leaves_a_readable_repairable_bag(tmp_path, capsys, point):
    kind, n, then = KILL_POINTS[point]
    bag = tmp_path / "rosbag"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(bag)], stdout=subprocess.PIPE,
                            text=True)
    durable = {"flush": 0, "split": 0}
    seen = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            k, count = line.split()
            durable[k] = max(durable[k], int(count))
            if k == "split":
                durable["flush"] = max(durable["flush"], int(count))
            if k == kind:
                seen += 1
            if seen >= n:
                if then == 0:
                    break
                then -= 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    # as the kill left it: the closed splits read with rosbags, nothing else needed
    with Reader(bag) as r:
        listed = r.message_count
    as_left = _joints(bag)
    assert _prefix(as_left)
    assert listed >= durable["split"]
    assert sum(1 for _ in read_bag(bag)) == listed

    # `solarian-agent bag-repair DIR` recovers every message the recorder had reported flushed
    assert cli(["bag-repair", str(bag)]) == 0
    assert "metadata.yaml:" in capsys.readouterr().out
    msgs = list(read_bag(bag))
    assert len(msgs) >= max(durable.values()) and len(msgs) >= listed
    joints = _joints(bag)
    assert _prefix(joints) and len(joints) >= len(as_left)
    frames = [m.value for m in msgs if m.topic == "cam/image_raw/compressed"]
    assert all(isinstance(f, CompressedFrame) for f in frames)
    assert [round(f.stamp) for f in frames] == list(range(0, 4 * len(frames), 4))
    if frames:
        img = frames[-1].decode()
        assert img.data.shape == (240, 320, 3) and np.asarray(img.data).std() > 10
    assert [m.t_ns for m in msgs] == sorted(m.t_ns for m in msgs)
    with capsys.disabled():
        print(f"kill {point}: reported durable {durable}; readable as left {listed} messages "
              f"({len(as_left)} joint states); after bag-repair {len(msgs)} ({len(joints)})")
