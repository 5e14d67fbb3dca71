"""Shared pieces of the policy-skill tests: a policy yaml written to a temporary folder, tiny
ONNX models with known weights, a fake arm and cameras, and a worker the test releases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from solarian_agent.arm.kinematics import JOINT_NAMES
from solarian_agent.core.messages import Image, JointState
from solarian_agent.skills.policy.onnx_export import write_mlp
from solarian_agent.skills.policy.runner import Inference

AGENT = {"description": "Run the test policy.", "max_duration_s": 5.0,
         "parameters": {"type": "object", "properties": {"point": {
             "type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}},
             "additionalProperties": False},
         "image_points": ["point"], "camera": "overhead"}


def policy_yaml(tmp: Path, *, model: str = "m.onnx", chunk: int = 2, horizon: int = 1,
                late: str = "hold", goal: str = "none", agent: dict[str, Any] | None = None,
                **extra: Any) -> Path:
    doc: dict[str, Any] = {
        "policy": {"backend": "onnx", "file": model},
        "observation": {"state": {"input": "state", "joints": list(JOINT_NAMES),
                                  "goal": goal}},
        "action": {"output": "action", "joints": list(JOINT_NAMES)},
        "chunking": {"period_s": 0.1, "chunk_length": chunk, "execution_horizon": horizon,
                     "late_chunk": late},
        "agent": agent or AGENT,
    }
    for k, v in extra.items():
        section, key = k.split("__")
        doc[section][key] = v
    p = tmp / "policy.yaml"
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return p


def linear_model(path: Path, n_in: int, chunk: int, joints: int = 6, seed: int = 0,
                 scale: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """out = x W + b, reshaped (chunk, joints); returns (W, b)."""
    rng = np.random.default_rng(seed)
    w = (rng.normal(0, scale, (n_in, chunk * joints))).astype(np.float32)
    b = (rng.normal(0, scale, chunk * joints)).astype(np.float32)
    write_mlp(path, [(w, b)], input_name="state", output_name="action", chunk=chunk,
              joints=joints)
    return w, b


def constant_model(path: Path, n_in: int, rows: np.ndarray) -> None:
    """Ignores its input: every chunk is ``rows`` (chunk, joints)."""
    chunk, joints = rows.shape
    w = np.zeros((n_in, chunk * joints), np.float32)
    write_mlp(path, [(w, rows.astype(np.float32).ravel())], input_name="state",
              output_name="action", chunk=chunk, joints=joints)


class FakeArm:
    """The arm port's surface a policy uses: state, command, keep_alive, hold."""

    def __init__(self, clock: Any, q: tuple[float, ...] = (0.1, -0.2, 0.3, 0.4, 0.5, 0.02),
                 velocity: tuple[float, ...] = ()) -> None:
        self.clock = clock
        self.q = q
        self.velocity = velocity
        self.commands: list[tuple[float, dict[str, float]]] = []
        self.holds: list[float] = []
        self.keep_alives: list[float] = []

    def state(self) -> JointState:
        return JointState(self.clock.now(), JOINT_NAMES, self.q, self.velocity)

    def command(self, target: dict[str, float], max_velocity: float = 0.0) -> dict[str, float]:
        import math

        from solarian_agent.core.errors import SkillFailed

        for k, v in target.items():
            if not math.isfinite(v):
                raise SkillFailed(f"refusing a non-finite target for {k}")
        self.commands.append((self.clock.now(), dict(target)))
        return target

    def keep_alive(self) -> None:
        self.keep_alives.append(self.clock.now())

    def hold(self) -> None:
        self.holds.append(self.clock.now())


class FakeCameras:
    """unproject: table metres = pixels / 1000; frames set by the test."""

    def __init__(self) -> None:
        self.frames: dict[str, Image] = {}

    def unproject(self, camera: str, u: float, v: float, z: float = 0.0) -> np.ndarray:
        return np.array([u / 1000.0, v / 1000.0, z])

    def frame(self, camera: str) -> Image | None:
        return self.frames.get(camera)


class ManualWorker:
    """A worker whose calls finish when the test says: ``release()`` runs the backend."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.job: tuple[Any, dict[str, float], float] | None = None
        self.done: Inference | None = None
        self.submits: list[float] = []
        self.closed = False

    @property
    def busy(self) -> bool:
        return self.job is not None

    def submit(self, feeds: Any, observed: dict[str, float], now: float) -> bool:
        if self.job is not None:
            return False
        self.job = (feeds, observed, now)
        self.submits.append(now)
        return True

    def release(self) -> None:
        assert self.job is not None, "nothing was asked"
        feeds, observed, now = self.job
        self.job = None
        self.done = Inference(self.backend.run(feeds), "", observed, now, 0.0)

    def poll(self) -> Inference | None:
        d, self.done = self.done, None
        return d

    def close(self) -> None:
        self.closed = True
