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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cli_common import CliParser
from .launch_plan import LAUNCH_ARGS, PKG, PLANS

USAGE = ("usage: solarian-agent launch {sim,robot,replay} [name:=value ...]\n"
         "  e.g. solarian-agent launch sim planner_provider:=rules seed:=3")
PROG = "solarian-agent launch"


def _arguments_text() -> str:
    out = ["launch arguments (name:=value; default after :=):"]
    for kind, args in LAUNCH_ARGS.items():
        out.append(f"\n{kind}:")
        for a in args:
            out.append(f"  {a.name}:={a.default!s:<10} {a.description}")
    return "\n".join(out)


def _parser() -> CliParser:
    p = CliParser(prog=PROG, description=__doc__.split("\n\n")[0].replace("``", ""),
                  epilog=_arguments_text())
    p.add_argument("kind", metavar="{sim,robot,replay}", nargs="?",
                   help="which launch file's graph: sim, robot or replay")
    p.add_argument("arguments", nargs="*", metavar="name:=value",
                   help="launch arguments, as ros2 launch takes them (listed below)")
    return p


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


def respawned(nodes: Any, ended: Sequence[Any], planned: dict[str, Any],
              died: dict[str, float], stop: threading.Event) -> list[Any]:
    """The dead nodes restarted once their respawn delay has passed (the others are kept
    as they are, to be looked at again at the next round)."""
    out = []
    now = time.monotonic()
    for pr in ended:
        died.setdefault(pr.name, now)
        p = planned[pr.name]
        if stop.is_set() or now - died[pr.name] < p.respawn_delay_s:
            out.append(pr)
            continue
        print(f"{pr.name} exited with status {pr.returncode}; respawning it", file=sys.stderr,
              flush=True)
        del died[pr.name]
        new = nodes.start(p.executable, p.name, p.parameters, p.remappings)
        planned[new.name] = p
        out.append(new)
    return out


def main_launch(argv: Sequence[str]) -> int:
    """SIGINT (Ctrl-C) stops the nodes and exits 130, SIGTERM 0, once every node exited 0
    (1 when one did not)."""
    from .components import share_dir
    from .processes import NodeProcesses

    p = _parser()
    a = p.parse_args(list(argv))
    try:
        kind, values = parse([a.kind, *a.arguments] if a.kind else [])
        plan = PLANS[kind](values, share_dir())
    except ValueError as e:
        p.error(str(e))
    for planned in plan:
        if planned.cmd or planned.package != PKG:
            what = (" ".join(planned.cmd) if planned.cmd
                    else f"{planned.package}/{planned.executable}")
            print(f"not started (needs a full ROS 2 installation: use ros2 launch): {what}",
                  file=sys.stderr)
    stop = threading.Event()
    got: list[int] = []

    def on_signal(sig: int, _frame: Any) -> None:
        got.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    workdir = Path(tempfile.mkdtemp(prefix=f"solarian_{kind}_"))
    nodes = NodeProcesses(workdir, namespace=values.get("namespace", ""), own_domain=False,
                          log_to_files=False)
    try:
        procs = nodes.start_plan(plan)
        print(f"started {', '.join(pr.name for pr in procs)} (Ctrl-C stops them)", flush=True)
        planned = {pr.name: p for pr, p in zip(procs, [
            x for x in plan if not x.cmd and x.package == PKG], strict=True)}
        died: dict[str, float] = {}
        while not stop.wait(0.5):
            ended = [pr for pr in procs if pr.returncode is not None]
            fatal = [pr for pr in ended if not planned[pr.name].respawn]
            for pr in fatal:
                print(f"{pr.name} exited with status {pr.returncode}; stopping the others",
                      file=sys.stderr)
            if fatal:
                break
            procs = [pr for pr in procs if pr.returncode is None] + respawned(
                nodes, ended, planned, died, stop)
    finally:
        codes = nodes.close()
    bad = {n: c for n, c in codes.items() if c != 0}
    for n, c in bad.items():
        print(f"{n}: exit status {c}", file=sys.stderr)
    if bad:
        return 1
    return 130 if got and got[0] == signal.SIGINT else 0


__all__ = ["USAGE", "main_launch", "parse"]
