"""Real-rclpy test helpers: the ROS set-up check, and re-exports of the package's own process
owner (:mod:`solarian_agent.ros.processes`: the graph's nodes as processes, each its own
process group, killed with the test) and probe node (:mod:`solarian_agent.ros.probe`; imported
only once rclpy is known to import).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from solarian_agent.ros.processes import NodeProcesses, Proc, free_domain  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / "build" / "ros" / "install"


def ros_required() -> bool:
    """Under CI (or ``make test``) a missing or broken ROS set-up fails, never skips."""
    return (os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
            or os.environ.get("SOLARIAN_REQUIRE_ROS") == "1")


def prepare_environment() -> None:
    """Before rclpy initialises: the package's interfaces on AMENT_PREFIX_PATH (``make ros``
    builds them into build/ros/install) and discovery kept on this host."""
    parts = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for p in (str(PREFIX), sys.prefix):
        if p not in parts:
            parts.append(p)
    os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join(parts)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ["RCUTILS_COLORIZED_OUTPUT"] = "0"
    from solarian_agent.ros.processes import with_dds_profile

    with_dds_profile(os.environ)  # type: ignore[arg-type]  # as the graph's nodes get it


def ros_problem() -> str | None:
    """Why real rclpy and the package's interfaces cannot be used here (None: they can)."""
    prepare_environment()
    try:
        import rclpy  # noqa: F401

        from solarian_agent.ros.ros_types import interface_class

        interface_class("solarian_agent/action/Skill")
        interface_class("solarian_agent/msg/AgentState")
    except Exception as e:
        return (f"real rclpy or the package's interfaces do not import: {type(e).__name__}: "
                f"{e} (run `make ros`)")
    return None


def video_file(path: Path, size: tuple[int, int], frames: int = 60, step: int = 5) -> str:
    """A short MJPG video of changing grey frames (a camera node's source)."""
    import cv2
    import numpy as np

    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
    for i in range(frames):
        w.write(np.full((size[1], size[0], 3), (i * step) % 255, np.uint8))
    w.release()
    return str(path)


SIM_NODES = ("sim_world", "skills", "monitor", "planner")


@contextmanager
def graph_up(g: NodeProcesses, nodes: Sequence[str], ready: tuple[str, str],
             timeout_s: float = 90.0) -> Iterator[Any]:
    """A probe on ``g``'s graph once ``nodes`` (names in ``g``'s namespace) are in the graph
    and node ``ready[0]`` said ``ready[1]``; at the end the probe closes and ``g`` stops (its
    nodes SIGINTed, then their process groups killed)."""
    from solarian_agent.ros.probe import Probe

    ns = f"/{g.namespace.strip('/')}/" if g.namespace.strip("/") else "/"
    probe = Probe(g.domain)
    try:
        missing = probe.wait_for_nodes([ns + n for n in nodes], timeout_s)
        assert not missing, f"nodes missing: {missing}\n{g.outputs()}"
        key = f"{g.namespace.strip('/')}/{ready[0]}" if g.namespace.strip("/") else ready[0]
        assert g.procs[key].wait_for_output(ready[1], timeout_s), g.outputs()
        yield probe
    finally:
        probe.close()
        g.close()


@contextmanager
def sim_graph(tmp: Path, namespace: str, args: Mapping[str, str]) -> Iterator[Any]:
    """``sim.launch.py``'s nodes (the package's, from :func:`launch_plan.sim_plan` with
    ``args`` and ``namespace:=``) as processes, running once the planner says so: yields the
    graph and a probe on it."""
    from solarian_agent.ros import launch_plan
    from solarian_agent.ros.components import share_dir

    g = NodeProcesses(tmp, namespace=namespace)
    g.start_plan(launch_plan.sim_plan({**args, "namespace": namespace}, share_dir()))
    with graph_up(g, SIM_NODES, ("planner", "planner running")) as probe:
        yield g, probe


def __getattr__(name: str) -> Any:
    """Probe, qos, ros_type, wait_until: from solarian_agent.ros.probe (imports rclpy)."""
    if name in ("Probe", "qos", "ros_type", "wait_until"):
        from solarian_agent.ros import probe

        return getattr(probe, name)
    raise AttributeError(name)
