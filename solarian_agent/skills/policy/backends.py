"""Policy backends behind one Protocol: named float arrays in, named float arrays out.

* ``onnx``: an ONNX file run by onnxruntime on the CPU (light inference).
* ``lerobot``: a LeRobot ``pretrained_model`` directory (``config.json`` +
  ``model.safetensors``) run by the ``lerobot`` package (``pip install
  solarian_agent[lerobot]``), imported only when such a policy is loaded.

:func:`open_backend` loads the configured policy and checks, at start-up, that its inputs and
outputs are the ones the config builds and reads (names, feature counts, chunk shape); a
missing backend package, a missing file or a mismatch raises :class:`PolicyLoadError` naming
the reason and the YAML path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ...core.errors import ConfigError
from .config import PolicyConfig


class PolicyLoadError(ConfigError):
    """The policy cannot be used with this config: the reason names what and where."""


class PolicyBackend(Protocol):
    """``run`` maps input name -> float32 array (batch of 1) to output name -> array; it is
    called on the inference thread only, one call at a time."""

    name: str

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def close(self) -> None: ...


def expected_inputs(cfg: PolicyConfig) -> dict[str, tuple[int, ...]]:
    """Input name -> shape without the batch axis, as the config builds them."""
    out: dict[str, tuple[int, ...]] = {cfg.state.input: (cfg.state.size,)}
    for im in cfg.images:
        out[im.input] = (3, im.size[1], im.size[0])
    if cfg.mask is not None:
        out[cfg.mask.input] = (1, cfg.mask.size[1], cfg.mask.size[0])
    return out


def _dim_ok(got: Any, want: int) -> bool:
    return not isinstance(got, int) or got <= 0 or got == want  # symbolic dims accept any


class OnnxBackend:
    name = "onnx"

    def __init__(self, cfg: PolicyConfig) -> None:
        where = cfg.where("policy.backend")
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise PolicyLoadError(where, f"the onnx backend needs onnxruntime ({e}); "
                                         "pip install onnxruntime") from None
        if not cfg.file.is_file():
            raise PolicyLoadError(cfg.where("policy.file"), f"{cfg.file} is not a file")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(cfg.file), sess_options=opts,
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # not an ONNX model, or one onnxruntime cannot run
            raise PolicyLoadError(cfg.where("policy.file"),
                                  f"{cfg.file.name} is not a usable ONNX model: {e}") from None
        self._lock = threading.Lock()
        self.check(cfg)

    def check(self, cfg: PolicyConfig) -> None:
        ins = {i.name: i for i in self.session.get_inputs()}
        want = expected_inputs(cfg)
        for name, shape in want.items():
            if name not in ins:
                raise PolicyLoadError(cfg.where("observation"),
                                      f"the model has no input {name!r}; its inputs: "
                                      f"{', '.join(ins)}")
            got = list(ins[name].shape)
            if len(got) != len(shape) + 1 or not all(
                    _dim_ok(g, w) for g, w in zip(got[1:], shape, strict=True)):
                raise PolicyLoadError(cfg.where("observation"),
                                      f"input {name!r} has shape {got}; the config builds "
                                      f"[batch, {', '.join(map(str, shape))}]")
        extra = sorted(set(ins) - set(want))
        if extra:
            raise PolicyLoadError(cfg.where("observation"),
                                  f"the model also needs input {extra[0]!r}, which the config "
                                  "does not build")
        outs = {o.name: o for o in self.session.get_outputs()}
        a = cfg.action.output
        if a not in outs:
            raise PolicyLoadError(cfg.where("action.output"),
                                  f"the model has no output {a!r}; its outputs: "
                                  f"{', '.join(outs)}")
        check_action_shape(cfg, list(outs[a].shape), symbolic_ok=True)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self._lock:
            names = [o.name for o in self.session.get_outputs()]
            res = self.session.run(names, {k: np.asarray(v, np.float32)
                                           for k, v in feeds.items()})
        return {n: np.asarray(r) for n, r in zip(names, res, strict=True)}

    def close(self) -> None:
        pass


def check_action_shape(cfg: PolicyConfig, shape: list[Any], symbolic_ok: bool = False) -> None:
    """The output carries ``chunk_length`` actions of ``len(action.joints)`` values:
    ``[batch, chunk, joints]`` or ``[batch, chunk * joints]`` (``[batch, joints]`` for a chunk
    of one)."""
    n, k = len(cfg.action.joints), cfg.chunking.chunk_length
    body = shape[1:]
    ok = False
    if len(body) == 2:
        ok = _dim_ok(body[0], k) and _dim_ok(body[1], n) if symbolic_ok else body == [k, n]
    elif len(body) == 1:
        ok = _dim_ok(body[0], k * n) if symbolic_ok else body == [k * n]
    if not ok:
        raise PolicyLoadError(cfg.where("action"),
                              f"output {cfg.action.output!r} has shape {shape}; the config "
                              f"reads [batch, {k}, {n}] (chunking.chunk_length {k} actions of "
                              f"{n} joints) or [batch, {k * n}]")


def actions_from_output(cfg: PolicyConfig, out: np.ndarray) -> np.ndarray:
    """The model's output as a (chunk_length, joints) array (raises naming a bad shape)."""
    arr = np.asarray(out, dtype=np.float64)
    check_action_shape(cfg, list(arr.shape))
    return arr.reshape(cfg.chunking.chunk_length, len(cfg.action.joints))


# -------------------------------------------------------------------------------------------
# LeRobot
# -------------------------------------------------------------------------------------------
def lerobot_features(cfg: PolicyConfig) -> dict[str, str]:
    """Config input name -> the LeRobot feature it must be (``observation.state``,
    ``observation.images.<camera>``)."""
    out = {cfg.state.input: "observation.state"}
    for im in cfg.images:
        out[im.input] = f"observation.images.{im.camera}"
    return out


def check_lerobot_config(cfg: PolicyConfig, doc: Any) -> None:
    """A ``pretrained_model/config.json`` against the configured observations and actions
    (no torch needed): every input feature the policy reads is one the config builds, with
    its shape, and its action has as many values as the config's joints."""
    where = cfg.where("observation")
    feats = doc.get("input_features") if isinstance(doc, Mapping) else None
    if not isinstance(feats, Mapping):
        raise PolicyLoadError(cfg.where("policy.file"),
                              "config.json has no input_features: not a LeRobot policy config")
    want = expected_inputs(cfg)
    by_feature = {f: (name, want[name]) for name, f in lerobot_features(cfg).items()}
    for feat, spec in feats.items():
        if feat not in by_feature:
            raise PolicyLoadError(where, f"the policy reads input feature {feat!r}, which the "
                                         f"config does not build (it builds "
                                         f"{', '.join(sorted(by_feature))})")
        shape = list(spec.get("shape", [])) if isinstance(spec, Mapping) else []
        name, need = by_feature[feat]
        if shape != list(need):
            raise PolicyLoadError(where, f"input feature {feat!r} has shape {shape}; the "
                                         f"config builds {list(need)} for {name!r}")
    size = doc.get("chunk_size")
    if isinstance(size, int) and size < cfg.chunking.chunk_length:
        raise PolicyLoadError(cfg.where("chunking.chunk_length"),
                              f"the policy predicts chunks of {size} actions; the config "
                              f"reads {cfg.chunking.chunk_length}")
    missing = sorted(set(by_feature) - set(feats))
    if missing:
        raise PolicyLoadError(where, f"the config builds {missing[0]!r}, which the policy does "
                                     "not read")
    outs = doc.get("output_features") or {}
    act = outs.get("action") if isinstance(outs, Mapping) else None
    shape = list(act.get("shape", [])) if isinstance(act, Mapping) else []
    if shape != [len(cfg.action.joints)]:
        raise PolicyLoadError(cfg.where("action.joints"),
                              f"the policy's action has shape {shape}; the config maps "
                              f"{len(cfg.action.joints)} joints")


class LeRobotBackend:
    """A LeRobot policy from a local ``pretrained_model`` directory.  Each call resets the
    policy's own action queue and asks it for a whole chunk (``predict_action_chunk``), so the
    skill's chunking is the only one.  Normalisation is the policy's own (lerobot versions
    whose policies normalise inside the model); a checkpoint that keeps it in separate
    processor files needs those statistics in the yaml's ``normalise`` / ``unnormalise``."""

    name = "lerobot"

    def __init__(self, cfg: PolicyConfig) -> None:
        d = Path(cfg.file)
        where = cfg.where("policy.file")
        if not d.is_dir():
            raise PolicyLoadError(where, f"{d} is not a LeRobot pretrained_model directory")
        for f in ("config.json", "model.safetensors"):
            if not (d / f).is_file():
                raise PolicyLoadError(where, f"{d} has no {f}")
        try:
            doc = json.loads((d / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise PolicyLoadError(where, f"{d / 'config.json'} is not JSON: {e}") from None
        check_lerobot_config(cfg, doc)
        try:
            import torch

            try:
                from lerobot.policies.factory import get_policy_class
            except ImportError:  # lerobot before 0.3 kept its modules under lerobot.common
                from lerobot.common.policies.factory import get_policy_class
        except ImportError as e:
            raise PolicyLoadError(cfg.where("policy.backend"),
                                  f"the lerobot backend needs the lerobot package ({e}); "
                                  "pip install 'solarian_agent[lerobot]'") from None
        kind = str(doc.get("type", ""))
        try:
            self.policy = get_policy_class(kind).from_pretrained(str(d))
        except Exception as e:
            raise PolicyLoadError(where, f"lerobot could not load the {kind!r} policy: "
                                         f"{e}") from None
        self.policy.eval()
        self.torch = torch
        self.features = lerobot_features(cfg)
        self.output = cfg.action.output
        self.chunk_length = cfg.chunking.chunk_length
        self._lock = threading.Lock()

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self.torch
        batch = {self.features[k]: torch.from_numpy(np.asarray(v, np.float32))
                 for k, v in feeds.items()}
        with self._lock, torch.no_grad():
            self.policy.reset()
            chunk = self.policy.predict_action_chunk(batch)
        k = self.chunk_length
        return {self.output: chunk.detach().cpu().numpy()[:, :k]}

    def close(self) -> None:
        pass


def open_backend(cfg: PolicyConfig) -> PolicyBackend:
    if cfg.backend == "onnx":
        return OnnxBackend(cfg)
    if cfg.backend == "lerobot":
        return LeRobotBackend(cfg)
    raise PolicyLoadError(cfg.where("policy.backend"), f"unknown backend {cfg.backend!r}")
