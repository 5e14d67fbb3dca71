"""``camera_node``: one camera through OpenCV (a device or a video file), publishing
``<camera>/image_raw`` with sensor-data QoS and ``<camera>/camera_info`` (transient local,
from ``calibration_file`` when given).  Run one per camera (``camera:=overhead``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.node import Node

from ..core.errors import ConfigError
from . import common, components
from .bridge import Bridge


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    node = Node("camera")
    try:
        camera = str(common.declare(node, "camera", "overhead", "topic prefix"))
        source: int | str = str(common.declare(node, "source", "0",
                                               "device index, /dev/video* or a video file"))
        if str(source).isdigit():
            source = int(source)
        k = [float(v) for v in common.declare(node, "k", [0.0], "3x3 intrinsics, row-major")]
        d = [float(v) for v in common.declare(node, "d", [0.0], "distortion (plumb_bob)")]
        core = components.build_camera_core(
            common.RosClock(node), camera, source,
            width=int(common.declare(node, "width", 0)),
            height=int(common.declare(node, "height", 0)),
            fps=float(common.declare(node, "fps", 0.0)),
            frame_id=str(common.declare(node, "frame_id", f"{camera}_camera_optical")),
            k=k if len(k) == 9 else (), d=d if any(d) else (),
            calibration_file=str(common.declare(
                node, "calibration_file", "",
                "the camera's calibration YAML (calibrate-camera); '' = k / d or a guess")))
    except (ConfigError, ValueError) as e:
        return common.config_error_exit(node, e)
    bridge = Bridge(node, core.bus)
    bridge.add(core.spec.endpoints)
    return common.run(node, core, bridge, stop=stop)


if __name__ == "__main__":
    sys.exit(main())
