"""``solarian-agent``: demo | bench | chat | eval-monitor | label-ticks | view-episode |
attach-logs | launch | bag-repair | arm | calibrate-camera.  Subcommands import their modules
lazily, so ``--help`` is instant."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _bench(argv: Sequence[str]) -> int:
    from . import benchmarks

    p = argparse.ArgumentParser(prog="solarian-agent bench",
                                description="Run benchmarks and print a table.")
    p.add_argument("suites", nargs="*", help=f"suites (default all): "
                                              f"{', '.join(benchmarks.SUITES)}")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (for CI smoke)")
    p.add_argument("--sim", choices=("2d", "mujoco", "all"), default="all",
                   help="simulator backends of the sim and tidy suites (default all: side by "
                        "side)")
    a = p.parse_args(list(argv))
    sims = ("2d", "mujoco") if a.sim == "all" else (a.sim,)
    rows = benchmarks.run(a.suites or None, quick=a.quick, sims=sims)
    print(benchmarks.format_table(rows))
    return 0


def _demo(argv: Sequence[str]) -> int:
    from .demo import main

    return main(argv)


def _lazy(module: str, func: str):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str]) -> int:
        import importlib

        mod = importlib.import_module(module)
        return int(getattr(mod, func)(list(argv)) or 0)

    return run


COMMANDS = {
    "demo": (_demo, "tidy the simulated table end to end (offline by default)"),
    "bench": (_bench, "run the benchmarks and print a table"),
    "chat": (_lazy("solarian_agent.ui.chat", "main_chat"), "terminal chat with the agent"),
    "panel": (_lazy("solarian_agent.demo", "main_panel"),
              "serve the operator panel over an embedded simulated robot"),
    "eval-monitor": (_lazy("solarian_agent.monitor_eval", "main_eval"),
                     "evaluate monitor questions on labelled ticks"),
    "label-ticks": (_lazy("solarian_agent.monitor_eval", "main_label"),
                    "label recorded monitor ticks"),
    "view-episode": (_lazy("solarian_agent.ui.viewer", "main_view_episode"),
                     "write an HTML viewer for an episode"),
    "attach-logs": (_lazy("solarian_agent.ui.attach_logs", "main_attach_logs"),
                    "copy controller logs in beside a robot recording"),
    "launch": (_lazy("solarian_agent.ros.launcher", "main_launch"),
               "start a launch file's nodes without ros2 launch (ROS 2 from PyPI)"),
    "bag-repair": (_lazy("solarian_agent.ros.bag_repair", "main_bag_repair"),
                   "recover a rosbag2 bag's unclosed last file and write its metadata"),
    "arm": (_lazy("solarian_agent.hw.feetech.cli", "main"),
            "first-day arm tools: find-port, setup-motors, ping, calibrate, import-lerobot, "
            "teleop"),
    "calibrate-camera": (_lazy("solarian_agent.hw.camera.calibrate_cli", "main"),
                         "calibrate a camera: intrinsics, then its pose relative to the arm"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: solarian-agent COMMAND [ARGS]\n\ncommands:")
        for name, (_, help_) in COMMANDS.items():
            print(f"  {name:<17} {help_}")
        return 0 if args else 2
    cmd = COMMANDS.get(args[0])
    if cmd is None:
        print(f"solarian-agent: unknown command {args[0]!r}; commands: "
              f"{', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return cmd[0](args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
