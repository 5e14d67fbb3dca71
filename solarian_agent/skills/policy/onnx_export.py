"""A multilayer perceptron as an ONNX graph, built with ``onnx.helper`` (no torch).

:func:`mlp_model` writes ``input -> (x - in_mean) / in_std -> [Gemm -> tanh]* -> Gemm ->
y * out_std + out_mean -> reshape (batch, chunk, joints)``; the normalisation lives inside the
graph, so the model reads raw observations and returns raw joint targets.  Used by
``scripts/train_pick_policy.py`` and by the tests' models with known weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def mlp_model(layers: Sequence[tuple[np.ndarray, np.ndarray]], *, input_name: str,
              output_name: str, chunk: int, joints: int,
              in_mean: np.ndarray | None = None, in_std: np.ndarray | None = None,
              out_mean: np.ndarray | None = None, out_std: np.ndarray | None = None,
              doc: str = "") -> bytes:
    """The serialized model.  ``layers``: (W of shape (in, out), b of shape (out,)); tanh
    between layers; the last layer's width must be ``chunk * joints``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n_in = int(layers[0][0].shape[0])
    n_out = int(layers[-1][0].shape[1])
    if n_out != chunk * joints:
        raise ValueError(f"the last layer has {n_out} outputs, not chunk {chunk} x joints "
                         f"{joints}")
    inits = []
    nodes = []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    x = input_name
    if in_mean is not None and in_std is not None:
        nodes.append(helper.make_node("Sub", [x, const("in_mean", in_mean)], ["x_c"]))
        nodes.append(helper.make_node("Div", ["x_c", const("in_std", in_std)], ["x_n"]))
        x = "x_n"
    for i, (w, b) in enumerate(layers):
        y = f"h{i}"
        nodes.append(helper.make_node("Gemm", [x, const(f"W{i}", w), const(f"b{i}", b)], [y]))
        x = y
        if i < len(layers) - 1:
            nodes.append(helper.make_node("Tanh", [x], [f"a{i}"]))
            x = f"a{i}"
    if out_mean is not None and out_std is not None:
        reps = chunk
        nodes.append(helper.make_node("Mul", [x, const("out_std", np.tile(out_std, reps))],
                                      ["y_s"]))
        nodes.append(helper.make_node("Add", ["y_s", const("out_mean", np.tile(out_mean, reps))],
                                      ["y_d"]))
        x = "y_d"
    nodes.append(helper.make_node("Reshape", [x, const_int64(inits, "shape",
                                                              [-1, chunk, joints])],
                                  [output_name]))
    graph = helper.make_graph(
        nodes, "policy",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT,
                                       ["batch", chunk, joints])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="solarian_agent", doc_string=doc)
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def const_int64(inits: list, name: str, values: Sequence[int]) -> str:  # type: ignore[type-arg]
    from onnx import numpy_helper

    inits.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
    return name


def write_mlp(path: str | Path, layers: Sequence[tuple[np.ndarray, np.ndarray]], **kw: object
              ) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(mlp_model(layers, **kw))  # type: ignore[arg-type]
    return p
