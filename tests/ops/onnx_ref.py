"""Reference results from onnxruntime for one ONNX node, and the ember side to compare with.

    ref = onnx_run("Softmax", [x], {"axis": -1})           # onnxruntime outputs
    got = ember_run("Softmax", [x], {"axis": -1})           # ember.lowering.kernel.run_op
    check_op("Softmax", [x], {"axis": -1}, rtol=1e-5)        # both, compared

Inputs that ember treats as attributes (`attr_inputs`, e.g. Reduce*.axes, Clip.min) are
given to `onnx_run` as `const_inputs` (name -> numpy array, fed as initializers) and to
ember as attributes; `check_op` converts them itself.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

_ONNX_TYPES = {
    "float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7,
    "bool": 9, "float16": 10, "float64": 11, "uint32": 12, "uint64": 13,
}


def onnx_type(dtype: np.dtype | str) -> int:
    """The TensorProto data type number of a numpy dtype."""
    return _ONNX_TYPES[str(np.dtype(dtype))]


def onnx_run(op: str, inputs: Sequence[np.ndarray | None], attrs: Mapping[str, Any] | None = None,
             num_outputs: int = 1, opset: int = 21,
             const_inputs: Mapping[int, np.ndarray | None] | None = None,
             domain: str = "") -> list[np.ndarray]:
    """Run a one-node ONNX model with onnxruntime.

    `inputs` are the node's runtime inputs in order (None = absent optional input);
    `const_inputs` maps an input position to an initializer value (None = absent), and
    those positions are inserted among `inputs`.
    """
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    consts = dict(const_inputs or {})
    names: list[str] = []
    graph_inputs = []
    initializers = []
    feeds: dict[str, np.ndarray] = {}
    runtime = iter(inputs)
    total = len(inputs) + len(consts)
    for pos in range(total):
        if pos in consts:
            value = consts[pos]
            if value is None:
                names.append("")
                continue
            name = f"c{pos}"
            initializers.append(numpy_helper.from_array(np.asarray(value), name))
            names.append(name)
            continue
        array = next(runtime)
        if array is None:
            names.append("")
            continue
        name = f"x{pos}"
        graph_inputs.append(helper.make_tensor_value_info(name, onnx_type(array.dtype),
                                                          list(array.shape)))
        feeds[name] = array
        names.append(name)
    while names and names[-1] == "":
        names.pop()
    out_names = [f"y{i}" for i in range(num_outputs)]
    node = helper.make_node(op, names, out_names, domain=domain, **dict(attrs or {}))
    outputs = [onnx.ValueInfoProto(name=n) for n in out_names]
    graph = helper.make_graph([node], "g", graph_inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return [np.asarray(r) for r in session.run(out_names, feeds)]


def ember_run(op: str, inputs: Sequence[np.ndarray | None],
              attrs: Mapping[str, Any] | None = None) -> list[np.ndarray]:
    """Compile and run one ember op (attr-inputs already in `attrs`)."""
    from ember.lowering.kernel import run_op

    return run_op(op, list(inputs), dict(attrs or {}))


def as_attr(value: np.ndarray | None) -> Any:
    """An initializer value as ember receives it: tuples of Python numbers or a number."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    return tuple(array.reshape(-1).tolist())


def check_op(op: str, inputs: Sequence[np.ndarray | None], attrs: Mapping[str, Any] | None = None,
             *, const_inputs: Mapping[int, np.ndarray | None] | None = None,
             attr_names: Mapping[int, str] | None = None, num_outputs: int = 1,
             opset: int = 21, rtol: float = 1e-5, atol: float = 1e-6,
             ember_attrs: Mapping[str, Any] | None = None) -> list[np.ndarray]:
    """Compare ember with onnxruntime on one node; returns ember's outputs.

    `attr_names` names the ember attribute of each `const_inputs` position (e.g. {1: "axes"}).
    `ember_attrs` overrides attributes for ember only (e.g. a string enum spelled differently).
    """
    ref = onnx_run(op, inputs, attrs, num_outputs, opset, const_inputs)
    eattrs = dict(attrs or {})
    for pos, value in (const_inputs or {}).items():
        if value is not None:
            eattrs[(attr_names or {})[pos]] = as_attr(value)
    eattrs.update(ember_attrs or {})
    got = ember_run(op, inputs, eattrs)
    assert len(got) >= num_outputs, (len(got), num_outputs)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape, f"output {i}: shape {g.shape} != onnxruntime {r.shape}"
        assert g.dtype == r.dtype, f"output {i}: dtype {g.dtype} != onnxruntime {r.dtype}"
        if r.dtype.kind in "fc":
            np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, r, err_msg=f"output {i}")
    return got
