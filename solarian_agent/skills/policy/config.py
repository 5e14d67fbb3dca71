"""The policy config yaml a :class:`~.skill.PolicySkill` is bound to (``config/skills/
pick_policy.yaml``): which policy, on which backend, how its observations are built, how its
actions become joint targets, how its chunks are executed, and the ``agent:`` block the skill's
tool spec comes from (a learned skill's description, parameters and monitor questions live with
its policy, not in code).  Typed frozen dataclasses, validated on load; an error names the
YAML path (``<file>:observation.images[0].size``).

::

    policy:
      backend: onnx                 # onnx | lerobot
      file: pick_policy.onnx        # beside this yaml, else in the package's data/policies/
    observation:
      state:                        # one float vector: joints, velocities, then the goal
        input: state                # the model's input name
        joints: [shoulder_pan, ..., gripper]
        velocities: [gripper]       # optional: joint velocities (rad/s; m/s), from joint_states
        goal: point                 # none | point | tracker_centroid (table x, y in metres)
        normalise: {mean: [...], std: [...]}   # optional, per feature
      images:                       # optional, one input per camera
        - {input: wrist, camera: wrist, size: [64, 48], normalise: unit}  # unit | imagenet
      mask: {input: target_mask, camera: overhead, size: [32, 24]}        # optional
    action:
      output: action                # the model's output name: (chunk, joints) or flat
      joints: [shoulder_pan, ..., gripper]
      mode: absolute                # absolute targets | delta from the observed joints
      unnormalise: {mean: [...], std: [...]}   # optional: target = out * std + mean
    chunking:
      period_s: 0.1                 # time between two actions of a chunk
      chunk_length: 4               # actions per chunk (what the model outputs)
      execution_horizon: 2          # actions executed before the next chunk takes over
      late_chunk: hold              # hold | finish_chunk
    agent: {description, parameters, image_points, camera, examples, max_duration_s,
            max_target_area, monitor}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...arm.kinematics import JOINT_NAMES
from ...core.config import read_yaml
from ...core.errors import ConfigError

BACKENDS = ("onnx", "lerobot")
GOALS = ("none", "point", "tracker_centroid")
IMAGE_NORMS = ("unit", "imagenet")
ACTION_MODES = ("absolute", "delta")
LATE_CHUNK = ("hold", "finish_chunk")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def policy_data_dir() -> Path:
    """Where the package ships its policy files (``solarian_agent/data/policies``)."""
    return Path(__file__).resolve().parents[2] / "data" / "policies"


@dataclass(frozen=True)
class Affine:
    """Per-feature ``(x - mean) / std`` (observations) or ``x * std + mean`` (actions)."""

    mean: tuple[float, ...]
    std: tuple[float, ...]


@dataclass(frozen=True)
class StateSpec:
    input: str
    joints: tuple[str, ...]
    goal: str = "none"
    goal_camera: str = "overhead"
    normalise: Affine | None = None
    velocities: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.joints) + len(self.velocities) + (2 if self.goal != "none" else 0)


@dataclass(frozen=True)
class ImageSpec:
    input: str
    camera: str
    size: tuple[int, int]  # width, height
    normalise: str = "unit"


@dataclass(frozen=True)
class MaskSpec:
    input: str
    camera: str
    size: tuple[int, int]


@dataclass(frozen=True)
class ActionSpec:
    output: str
    joints: tuple[str, ...]
    mode: str = "absolute"
    unnormalise: Affine | None = None


@dataclass(frozen=True)
class ChunkSpec:
    period_s: float = 0.1
    chunk_length: int = 1
    execution_horizon: int = 1
    late_chunk: str = "hold"


@dataclass(frozen=True)
class AgentBlock:
    description: str
    parameters: dict[str, Any]
    image_points: tuple[str, ...] = ()
    camera: str | None = None
    examples: tuple[dict[str, Any], ...] = ()
    max_duration_s: float = 30.0
    max_target_area: float | None = None
    monitor: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class PolicyConfig:
    path: Path  # the yaml
    backend: str
    file: Path  # resolved: the .onnx file or the pretrained_model directory
    state: StateSpec
    action: ActionSpec
    chunking: ChunkSpec
    agent: AgentBlock
    images: tuple[ImageSpec, ...] = ()
    mask: MaskSpec | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def where(self, key: str) -> str:
        return f"{self.path}:{key}"


# -------------------------------------------------------------------------------------------
def _map(v: Any, where: str, allowed: Sequence[str], required: Sequence[str] = ()
         ) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(where, f"must be a mapping, got {type(v).__name__}")
    unknown = sorted(set(v) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}",
                          f"unknown key; allowed: {', '.join(sorted(allowed))}")
    for k in required:
        if k not in v:
            raise ConfigError(f"{where}.{k}", "is required")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ConfigError(where, f"must be a non-empty string, got {v!r}")
    return v


def _choice(v: Any, where: str, allowed: Sequence[str]) -> str:
    if v not in allowed:
        raise ConfigError(where, f"{v!r} is not allowed; allowed values: {', '.join(allowed)}")
    return str(v)


def _number(v: Any, where: str, lo: float | None = None, strict: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(where, f"must be a finite number, got {v!r}")
    if lo is not None and (v <= lo if strict else v < lo):
        raise ConfigError(where, f"must be {'>' if strict else '>='} {lo:g}, got {v!r}")
    return float(v)


def _int(v: Any, where: str, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(where, f"must be a whole number >= {lo}, got {v!r}")
    return int(v)


def _joints(v: Any, where: str) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)) or not v:
        raise ConfigError(where, f"must be a non-empty list of joint names, got {v!r}")
    for i, j in enumerate(v):
        if j not in JOINT_NAMES:
            raise ConfigError(f"{where}[{i}]", f"{j!r} is not a joint of the arm; joints: "
                                               f"{', '.join(JOINT_NAMES)}")
    if len(set(v)) != len(v):
        raise ConfigError(where, "names a joint twice")
    return tuple(v)


def _affine(v: Any, where: str, n: int) -> Affine | None:
    if v is None or v == "none":
        return None
    m = _map(v, where, ("mean", "std"), ("mean", "std"))
    out = []
    for key in ("mean", "std"):
        xs = m[key]
        if not isinstance(xs, (list, tuple)) or len(xs) != n:
            raise ConfigError(f"{where}.{key}", f"must be a list of {n} numbers (one per "
                                                f"feature), got {xs!r}")
        out.append(tuple(_number(x, f"{where}.{key}[{i}]") for i, x in enumerate(xs)))
    for i, s in enumerate(out[1]):
        if s <= 0:
            raise ConfigError(f"{where}.std[{i}]", f"must be > 0, got {s!r}")
    return Affine(out[0], out[1])


def _size(v: Any, where: str) -> tuple[int, int]:
    if not (isinstance(v, (list, tuple)) and len(v) == 2):
        raise ConfigError(where, f"must be [width, height] in pixels, got {v!r}")
    return (_int(v[0], f"{where}[0]"), _int(v[1], f"{where}[1]"))


def _resolve_file(raw: str, yaml_path: Path, where: str) -> Path:
    p = Path(raw).expanduser()
    if p.is_absolute():
        cands = [p]
    else:
        cands = [yaml_path.parent / p, policy_data_dir() / p]
    for c in cands:
        if c.exists():
            return c
    raise ConfigError(where, f"policy file {raw!r} not found (looked in "
                             f"{', '.join(str(c.parent) for c in cands)})")


def _agent(raw: Any, where: str) -> AgentBlock:
    m = _map(raw, where, ("description", "parameters", "image_points", "camera", "examples",
                          "max_duration_s", "max_target_area", "monitor"),
             ("description", "max_duration_s"))
    params = m.get("parameters", {"type": "object", "properties": {},
                                  "additionalProperties": False})
    if not isinstance(params, Mapping) or params.get("type") != "object":
        raise ConfigError(f"{where}.parameters", "must be a JSON schema with type: object")
    pts = m.get("image_points", ())
    if not isinstance(pts, (list, tuple)) or not all(isinstance(p, str) for p in pts):
        raise ConfigError(f"{where}.image_points", f"must be a list of parameter names, "
                                                   f"got {pts!r}")
    props = params.get("properties") or {}
    for i, p in enumerate(pts):
        if p not in props:
            raise ConfigError(f"{where}.image_points[{i}]", f"{p!r} is not a parameter")
    mon = m.get("monitor", ())
    if not isinstance(mon, (list, tuple)) or not all(isinstance(q, Mapping) for q in mon):
        raise ConfigError(f"{where}.monitor", "must be a list of monitor questions")
    ex = m.get("examples", ())
    if not isinstance(ex, (list, tuple)) or not all(isinstance(e, Mapping) for e in ex):
        raise ConfigError(f"{where}.examples", "must be a list of mappings")
    area = m.get("max_target_area")
    cam = m.get("camera")
    return AgentBlock(
        description=_str(m["description"], f"{where}.description"),
        parameters=dict(params), image_points=tuple(pts),
        camera=None if cam is None else _str(cam, f"{where}.camera"),
        examples=tuple(dict(e) for e in ex),
        max_duration_s=_number(m["max_duration_s"], f"{where}.max_duration_s", 0, strict=True),
        max_target_area=None if area is None else _number(area, f"{where}.max_target_area", 0,
                                                          strict=True),
        monitor=tuple(dict(q) for q in mon))


def parse_policy_config(doc: Any, path: Path) -> PolicyConfig:
    w = str(path)
    top = _map(doc, w, ("policy", "observation", "action", "chunking", "agent"),
               ("policy", "observation", "action", "agent"))
    pol = _map(top["policy"], f"{w}:policy", ("backend", "file"), ("backend", "file"))
    backend = _choice(pol["backend"], f"{w}:policy.backend", BACKENDS)
    file = _resolve_file(_str(pol["file"], f"{w}:policy.file"), path, f"{w}:policy.file")
    obs = _map(top["observation"], f"{w}:observation", ("state", "images", "mask"), ("state",))
    sw = f"{w}:observation.state"
    st = _map(obs["state"], sw, ("input", "joints", "velocities", "goal", "goal_camera",
                                 "normalise"), ("input", "joints"))
    joints = _joints(st["joints"], f"{sw}.joints")
    vel = _joints(st["velocities"], f"{sw}.velocities") if st.get("velocities") else ()
    goal = _choice(st.get("goal", "none"), f"{sw}.goal", GOALS)
    n_state = len(joints) + len(vel) + (2 if goal != "none" else 0)
    state = StateSpec(_str(st["input"], f"{sw}.input"), joints, goal,
                      _str(st.get("goal_camera", "overhead"), f"{sw}.goal_camera"),
                      _affine(st.get("normalise"), f"{sw}.normalise", n_state), vel)
    images: list[ImageSpec] = []
    raw_images = obs.get("images") or []
    if not isinstance(raw_images, (list, tuple)):
        raise ConfigError(f"{w}:observation.images", "must be a list")
    for i, im in enumerate(raw_images):
        iw = f"{w}:observation.images[{i}]"
        m = _map(im, iw, ("input", "camera", "size", "normalise"), ("input", "camera", "size"))
        images.append(ImageSpec(_str(m["input"], f"{iw}.input"), _str(m["camera"], f"{iw}.camera"),
                                _size(m["size"], f"{iw}.size"),
                                _choice(m.get("normalise", "unit"), f"{iw}.normalise",
                                        IMAGE_NORMS)))
    mask = None
    if obs.get("mask") is not None:
        mw = f"{w}:observation.mask"
        m = _map(obs["mask"], mw, ("input", "camera", "size"), ("input", "camera", "size"))
        mask = MaskSpec(_str(m["input"], f"{mw}.input"), _str(m["camera"], f"{mw}.camera"),
                        _size(m["size"], f"{mw}.size"))
    names = [state.input, *(i.input for i in images), *([mask.input] if mask else [])]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{w}:observation", f"input {dup[0]!r} is fed twice")
    aw = f"{w}:action"
    a = _map(top["action"], aw, ("output", "joints", "mode", "unnormalise"), ("output", "joints"))
    ajoints = _joints(a["joints"], f"{aw}.joints")
    action = ActionSpec(_str(a["output"], f"{aw}.output"), ajoints,
                        _choice(a.get("mode", "absolute"), f"{aw}.mode", ACTION_MODES),
                        _affine(a.get("unnormalise"), f"{aw}.unnormalise", len(ajoints)))
    if action.mode == "delta" and not set(ajoints) <= set(joints):
        raise ConfigError(f"{aw}.mode", "delta actions need every action joint in "
                                        "observation.state.joints")
    cw = f"{w}:chunking"
    c = _map(top.get("chunking") or {}, cw, ("period_s", "chunk_length", "execution_horizon",
                                             "late_chunk"))
    chunk = ChunkSpec(_number(c.get("period_s", 0.1), f"{cw}.period_s", 0, strict=True),
                      _int(c.get("chunk_length", 1), f"{cw}.chunk_length"),
                      _int(c.get("execution_horizon", 1), f"{cw}.execution_horizon"),
                      _choice(c.get("late_chunk", "hold"), f"{cw}.late_chunk", LATE_CHUNK))
    if chunk.execution_horizon > chunk.chunk_length:
        raise ConfigError(f"{cw}.execution_horizon", f"must be at most chunk_length "
                                                     f"({chunk.chunk_length}), got "
                                                     f"{chunk.execution_horizon}")
    agent = _agent(top["agent"], f"{w}:agent")
    if goal != "none" and "point" not in agent.image_points:
        raise ConfigError(f"{sw}.goal", f"goal {goal!r} needs an image point named 'point' "
                                        "in agent.image_points")
    return PolicyConfig(path, backend, file, state, action, chunk, agent, tuple(images), mask)


def load_policy_config(path: str | Path) -> PolicyConfig:
    p = Path(path).expanduser()
    return parse_policy_config(read_yaml(p, "policy config not found"), p)


def default_policy_config_path(name: str = "pick_policy.yaml") -> Path:
    from ...arm.kinematics import default_urdf_path

    return default_urdf_path().parent.parent / "config" / "skills" / name
