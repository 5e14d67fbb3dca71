"""The ground-truth record of a world, either backend's.  Only tests, the ideal controller and
benchmarks may read it; the agent sees the world through the cameras and ``joint_states``
only."""

from __future__ import annotations

from typing import Any


def truth_record(world: Any, objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ground-truth record of either backend's world, with ``objects`` (name -> its
    record with a ``location``) as that world judges them."""
    _, pitch, yaw = world.arm.fk(world.q)
    return {
        "t": world.t,
        "seed": world.seed,
        "objects": objects,
        "receptacles": {n: r.as_dict() for n, r in world.receptacles.items()},
        "held": world.held.name if world.held is not None else None,
        "in_tray": [n for n, o in objects.items() if o["location"] == "tray"],
        "in_bin": [n for n, o in objects.items() if o["location"] == "bin"],
        "joints": world.joint_positions(),
        "targets": {n: float(v) for n, v in zip(world.joint_names, world.target, strict=True)},
        "tip": [float(v) for v in world.tip_xyz],
        "pitch": pitch,
        "yaw": yaw,
        "gripper": float(world.q[5]),
        "at_home": world.at_home(),
        "task_complete": world.task_complete(),
        "success": world.success(),
        "path_length": world.path_length,
        "steps": world.steps,
        "events": [{"t": e.t, "kind": e.kind, **e.detail} for e in world.events],
        "faults": world.faults.summary(),
    }
