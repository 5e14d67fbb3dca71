"""Real-rclpy test helpers: the ROS set-up check, and re-exports of the package's own process
owner (:mod:`solarian_agent.ros.processes`: the graph's nodes as processes, each its own
process group, killed with the test) and probe node (:mod:`solarian_agent.ros.probe`; imported
only once rclpy is known to import).
"""

from __future__ import annotations

import os
import sys
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


def __getattr__(name: str) -> Any:
    """Probe, qos, ros_type, wait_until: from solarian_agent.ros.probe (imports rclpy)."""
    if name in ("Probe", "qos", "ros_type", "wait_until"):
        from solarian_agent.ros import probe

        return getattr(probe, name)
    raise AttributeError(name)
