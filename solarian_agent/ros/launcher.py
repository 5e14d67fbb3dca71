"""``solarian-agent launch sim|robot|replay [name:=value ...]``: a launch file's nodes without
``ros2 launch``.

PyPI serves rclpy but not ``launch`` / ``launch_ros``; with ROS 2 from the wheels this starts
the package's nodes of the same plan the launch files start (:mod:`.launch_plan`), with the
same arguments, as processes it owns (:mod:`.processes`).  Nodes of other packages the plan
names (robot_state_publisher, rviz2, ``ros2 bag``) need a full ROS installation: they are
listed as not started.  SIGINT / SIGTERM stop every node in order (each aborts its goals with a
result) and the exit status is 0 when every node exited 0.  Under a full ROS installation,
``ros2 launch solarian_agent <kind>.launch.py`` does the same from the same plan.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .launch_plan import LAUNCH_ARGS, PKG, PLANS

USAGE = ("usage: solarian-agent launch {sim,robot,replay} [name:=value ...]\n"
         "  e.g. solarian-agent launch sim planner_provider:=rules seed:=3")


def _usage_error(msg: str) -> int:
    print(f"solarian-agent launch: {msg}\n{USAGE}", file=sys.stderr)
    return 2


def parse(argv: Sequence[str]) -> tuple[str, dict[str, str]]:
    """``kind`` and the launch arguments (defaults filled in); ValueError names what is
    wrong."""
    if not argv or argv[0] not in PLANS:
        got = repr(argv[0]) if argv else "nothing"
        raise ValueError(f"the first argument must be one of {', '.join(PLANS)}, got {got}")
    kind = argv[0]
    known = {a.name: a.default for a in LAUNCH_ARGS[kind]}
    values = dict(known)
    for item in argv[1:]:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            raise ValueError(f"{item!r} is not name:=value")
        if name not in known:
            raise ValueError(f"{kind} has no argument {name!r}; arguments: "
                             f"{', '.join(known)}")
        values[name] = value
    return kind, values


def main_launch(argv: Sequence[str]) -> int:
    from .components import share_dir
    from .processes import NodeProcesses

    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        for kind, args in LAUNCH_ARGS.items():
            print(f"\n{kind}:")
            for a in args:
                print(f"  {a.name}:={a.default!s:<10} {a.description}")
        return 0
    try:
        kind, values = parse(argv)
        plan = PLANS[kind](values, share_dir())
    except ValueError as e:
        return _usage_error(str(e))
    for p in plan:
        if p.cmd or p.package != PKG:
            what = " ".join(p.cmd) if p.cmd else f"{p.package}/{p.executable}"
            print(f"not started (needs a full ROS 2 installation: use ros2 launch): {what}",
                  file=sys.stderr)
    stop = threading.Event()

    def on_signal(_sig: int, _frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    workdir = Path(tempfile.mkdtemp(prefix=f"solarian_{kind}_"))
    nodes = NodeProcesses(workdir, namespace=values.get("namespace", ""), own_domain=False,
                          log_to_files=False)
    try:
        procs = nodes.start_plan(plan)
        print(f"started {', '.join(p.name for p in procs)} (Ctrl-C stops them)", flush=True)
        while not stop.wait(0.5):
            ended = [p for p in procs if p.returncode is not None]
            if ended:
                for p in ended:
                    print(f"{p.name} exited with status {p.returncode}; stopping the others",
                          file=sys.stderr)
                break
    finally:
        codes = nodes.close()
    bad = {n: c for n, c in codes.items() if c != 0}
    for n, c in bad.items():
        print(f"{n}: exit status {c}", file=sys.stderr)
    return 1 if bad else 0


__all__ = ["USAGE", "main_launch", "parse"]
