"""rviz markers (visualization_msgs/MarkerArray) to and from the core's marker dicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core import names
from .codec import Codec, header, time_from_ros

# rviz markers ------------------------------------------------------------------------------
MARKER_TYPES = {"arrow": 0, "cube": 1, "sphere": 2, "cylinder": 3, "line_strip": 4,
                "line_list": 5, "sphere_list": 7, "points": 8, "text": 9}
_MARKER_NAMES = {v: k for k, v in MARKER_TYPES.items()}


def markers_to_ros(c: Codec, markers: Sequence[Mapping[str, Any]]) -> Any:
    """A list of marker dicts (``ns, id, type`` (a :data:`MARKER_TYPES` name), ``frame_id``,
    ``stamp``, ``position`` xyz, ``scale`` xyz, ``color`` rgba, ``text``, ``points`` [xyz],
    ``lifetime_s``, ``delete_all``) -> visualization_msgs/MarkerArray."""
    out = []
    for m in markers:
        def point(p: Sequence[float]) -> Any:
            return c.new("geometry_msgs/msg/Point", x=float(p[0]), y=float(p[1]),
                         z=float(p[2]) if len(p) > 2 else 0.0)

        pos = m.get("position", (0.0, 0.0, 0.0))
        sx, sy, sz = (float(v) for v in m.get("scale", (0.02, 0.02, 0.02)))
        r, g, b, a = (float(v) for v in m.get("color", (1.0, 1.0, 1.0, 1.0)))
        life = float(m.get("lifetime_s", 0.0))
        out.append(c.new(
            "visualization_msgs/msg/Marker",
            header=header(c, float(m.get("stamp", 0.0)), str(m.get("frame_id", "base_link"))),
            ns=str(m.get("ns", "")), id=int(m.get("id", 0)),
            type=MARKER_TYPES[str(m.get("type", "sphere"))],
            action=3 if m.get("delete_all") else 0,
            pose=c.new("geometry_msgs/msg/Pose", position=point(pos),
                       orientation=c.new("geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=0.0,
                                         w=1.0)),
            scale=c.new("geometry_msgs/msg/Vector3", x=sx, y=sy, z=sz),
            color=c.new("std_msgs/msg/ColorRGBA", r=r, g=g, b=b, a=a),
            lifetime=c.new("builtin_interfaces/msg/Duration", sec=int(life),
                           nanosec=int(round((life - int(life)) * 1e9))),
            points=[point(p) for p in m.get("points", ())], text=str(m.get("text", ""))))
    return c.new(names.T_MARKERS, markers=out)


def markers_from_ros(msg: Any) -> list[dict[str, Any]]:
    out = []
    for m in msg.markers:
        p = m.pose.position
        d: dict[str, Any] = {
            "ns": str(m.ns), "id": int(m.id), "type": _MARKER_NAMES.get(int(m.type), "sphere"),
            "frame_id": str(m.header.frame_id), "stamp": time_from_ros(m.header.stamp),
            "position": (float(p.x), float(p.y), float(p.z)),
            "scale": (float(m.scale.x), float(m.scale.y), float(m.scale.z)),
            "color": (float(m.color.r), float(m.color.g), float(m.color.b), float(m.color.a)),
            "text": str(m.text), "points": [(float(q.x), float(q.y), float(q.z))
                                            for q in m.points],
            "lifetime_s": float(m.lifetime.sec) + float(m.lifetime.nanosec) * 1e-9,
        }
        if int(m.action) == 3:
            d["delete_all"] = True
        out.append(d)
    return out


__all__ = ["MARKER_TYPES", "markers_from_ros", "markers_to_ros"]
