"""``ros2 run solarian_agent calibrate_camera --camera overhead``: the touch calibration of a
camera's pose against the running robot graph.

The arm node owns the servo bus and the camera node the camera, so here the tool point comes
from ``joint_states`` (through the URDF) and the frame from ``<camera>/image_raw``; jog the tip
onto each mark with teleop or the operator panel (the arm keeps its torque and its limits), press
Enter, then move the arm out of view for the frame.  The same procedure and refusals as
``solarian-agent calibrate-camera touch`` (:mod:`solarian_agent.hw.camera.touch`), and the
same file.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.utilities import remove_ros_args

from ..core import names
from ..core.errors import ConfigError
from ..core.transport import Bus, QoS
from ..hw.errors import HardwareError
from ..rosmsg import graph
from . import common
from .bridge import Bridge


class _Fresh:
    """The newest message of a bus topic, and a bounded wait for one received after a time
    (the monotonic clock: when it arrived here, whatever clock stamped it)."""

    def __init__(self, bus: Bus, topic: str, msg_type: str, qos: QoS) -> None:
        self._cond = threading.Condition()
        self.msg: Any = None
        self.received = -math.inf
        bus.subscribe(topic, msg_type, self._on, qos, node="calibrate_camera")

    def _on(self, msg: Any) -> None:
        with self._cond:
            self.msg = msg
            self.received = time.monotonic()
            self._cond.notify_all()

    def after(self, t: float, timeout_s: float, what: str) -> Any:
        with self._cond:
            if not self._cond.wait_for(lambda: self.received > t, timeout_s):
                raise HardwareError(f"no {what} within {timeout_s:g} s: is the robot graph "
                                    "running (robot.launch.py) in this ROS domain?")
            return self.msg


def main(args: Sequence[str] | None = None) -> int:
    from ..hw.camera.calibrate_cli import TerminalTouchUI, _clicks, intrinsics_file, save_touch
    from ..hw.camera.touch import arm_tip_source, touch_calibration

    argv = list(sys.argv if args is None else args)
    ap = argparse.ArgumentParser(prog="ros2 run solarian_agent calibrate_camera")
    ap.add_argument("--camera", required=True)
    ap.add_argument("--dir", default="", help="calibration directory")
    ap.add_argument("--clicks", type=_clicks, default=None)
    ap.add_argument("--max-error", type=float, default=3.0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a message")
    opts = ap.parse_args(remove_ros_args(argv)[1:])
    try:
        path, intr = intrinsics_file(opts.camera, opts.dir)
    except (HardwareError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    stop = common.init(argv)
    node = Node("calibrate_camera")
    bus = Bus()
    bridge = Bridge(node, bus)
    bridge.add(graph.calibrate_camera_node(opts.camera).endpoints)
    joints = _Fresh(bus, names.JOINT_STATES, names.T_JOINT_STATE, QoS(depth=1))
    frames = _Fresh(bus, names.image_topic(opts.camera), names.T_IMAGE, QoS(depth=1))
    spinner = common.Spinner(node, stop, bridge=bridge).start()
    try:
        def positions() -> dict[str, float]:
            # a reading that arrived after the user said the tip is on the mark (one from
            # before could still be the arm on its way there)
            js = joints.after(time.monotonic(), opts.timeout, "joint_states")
            return dict(zip(js.name, js.position, strict=True))

        def grab() -> np.ndarray:  # a frame that arrived after the user said so
            img = frames.after(time.monotonic(), opts.timeout,
                               f"{opts.camera}/image_raw frame")
            return np.asarray(img.data)

        print("jog the tool point (the fixed jaw's inner face, just above its tip) onto each "
              "mark with teleop or the panel")
        ui = TerminalTouchUI(opts.clicks, save_dir=path.parent)
        result = touch_calibration(intr, arm_tip_source(positions), grab, ui,
                                   max_rms_px=opts.max_error)
        save_touch(result, path)
        return 0
    except (HardwareError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        spinner.close()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
