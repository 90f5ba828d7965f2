"""GraphBuilder: write an ONNX graph node by node, with seeded random weights."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ember.errors import EmberError

MIN_OPSET = 11


class ZooError(EmberError, ValueError):
    """A model-zoo name or configuration is unknown or invalid."""


def check_config(model: str, **values: int) -> None:
    """Raise ZooError unless every value is a positive int (bool is not an int here)."""
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ZooError(f"model '{model}': config '{key}' must be a positive int, "
                           f"got {value!r}")


def check_opset(model: str, opset: int) -> None:
    """Raise ZooError unless `opset` is one the builders can write and onnx knows."""
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ZooError(f"model '{model}': opset must be an int in [{MIN_OPSET}, {newest}], "
                       f"got {opset!r}")


class GraphBuilder:
    """Collects inputs, initializers and nodes; `build()` returns the ModelProto.

        b = GraphBuilder("tiny", opset=17, seed=0)
        x = b.input("input", np.float32, [1, 4])
        w = b.weight("fc.weight", b.normal((4, 2), std=0.5))
        y = b.node("MatMul", [x, w], name="fc", output="output")
        b.output(y, np.float32, [1, 2])
        model = b.build()
    """

    def __init__(self, name: str, opset: int = 17, seed: int = 0) -> None:
        check_opset(name, opset)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ZooError(f"model '{name}': seed must be an int >= 0, got {seed!r}")
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._tensor_names: set[str] = set()
        self._node_names: set[str] = set()
        self._op_counts: dict[str, int] = {}
        self._consts: dict[tuple[str, tuple[int, ...], bytes], str] = {}

    # ---- random weights -------------------------------------------------------------------

    def normal(self, shape: Sequence[int], std: float, mean: float = 0.0) -> np.ndarray:
        """float32 samples of N(mean, std^2)."""
        sample = self.rng.standard_normal(tuple(shape), dtype=np.float32)
        sample *= np.float32(std)
        if mean:
            sample += np.float32(mean)
        return sample

    def uniform(self, shape: Sequence[int], low: float, high: float) -> np.ndarray:
        """float32 samples of U(low, high)."""
        sample = self.rng.random(tuple(shape), dtype=np.float32)
        sample *= np.float32(high - low)
        sample += np.float32(low)
        return sample

    # ---- graph pieces ---------------------------------------------------------------------

    def _claim(self, name: str) -> str:
        assert name not in self._tensor_names, f"tensor name '{name}' used twice"
        self._tensor_names.add(name)
        return name

    def input(self, name: str, dtype: type | np.dtype, shape: Sequence[int]) -> str:
        """Declare a graph input and return its name."""
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.inputs.append(helper.make_tensor_value_info(self._claim(name), elem, list(shape)))
        return name

    def output(self, name: str, dtype: type | np.dtype, shape: Sequence[int]) -> None:
        """Declare the tensor `name` (already produced by a node) as a graph output."""
        assert name in self._tensor_names, f"output '{name}' is produced by no node"
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.outputs.append(helper.make_tensor_value_info(name, elem, list(shape)))

    def weight(self, name: str, array: np.ndarray) -> str:
        """Add `array` as an initializer called `name` and return the name."""
        self.initializers.append(numpy_helper.from_array(np.asarray(array, order="C"),
                                                         self._claim(name)))
        return name

    def const(self, value: object, dtype: type | np.dtype = np.float32) -> str:
        """A small constant initializer (shared between uses of equal value)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.weight(f"const_{len(self._consts)}", array)
        return self._consts[key]

    def node(self, op: str, inputs: Sequence[str], name: str | None = None,
             output: str | None = None, **attrs: object) -> str:
        """Append one node with a single output; returns the output tensor's name.

        The output tensor is called `output` if given, else like the node; an input
        written "" is an omitted optional input.
        """
        if name is None:
            count = self._op_counts.get(op, 0)
            self._op_counts[op] = count + 1
            name = f"{op}_{count}"
        assert name not in self._node_names, f"node name '{name}' used twice"
        self._node_names.add(name)
        for x in inputs:
            assert x == "" or x in self._tensor_names, f"node '{name}': no tensor '{x}'"
        out = self._claim(output or name)
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=name, **attrs))
        return out

    # ---- ops whose spelling changed between opsets ----------------------------------------

    def unsqueeze(self, x: str, axes: Sequence[int], name: str | None = None) -> str:
        """Unsqueeze: axes an attribute before opset 13, an input from 13."""
        if self.opset < 13:
            return self.node("Unsqueeze", [x], name=name, axes=list(axes))
        return self.node("Unsqueeze", [x, self.const(list(axes), np.int64)], name=name)

    def squeeze(self, x: str, axes: Sequence[int], name: str | None = None) -> str:
        """Squeeze: axes an attribute before opset 13, an input from 13."""
        if self.opset < 13:
            return self.node("Squeeze", [x], name=name, axes=list(axes))
        return self.node("Squeeze", [x, self.const(list(axes), np.int64)], name=name)

    def reduce_mean(self, x: str, axes: Sequence[int], name: str | None = None) -> str:
        """ReduceMean keeping dims: axes an attribute before opset 18, an input from 18."""
        if self.opset < 18:
            return self.node("ReduceMean", [x], name=name, axes=list(axes), keepdims=1)
        return self.node("ReduceMean", [x, self.const(list(axes), np.int64)], name=name,
                         keepdims=1)

    def clip(self, x: str, low: float, high: float, name: str | None = None) -> str:
        """Clip to [low, high]; bounds are inputs (opset >= 11)."""
        return self.node("Clip", [x, self.const(low), self.const(high)], name=name)

    def layer_norm(self, x: str, gamma: str, beta: str, epsilon: float, name: str,
                   output: str | None = None) -> str:
        """LayerNormalization over the last axis; decomposed before opset 17."""
        if self.opset >= 17:
            return self.node("LayerNormalization", [x, gamma, beta], name=name,
                             output=output, axis=-1, epsilon=epsilon)
        mean = self.reduce_mean(x, [-1], name=f"{name}.mean")
        centered = self.node("Sub", [x, mean], name=f"{name}.sub")
        square = self.node("Pow", [centered, self.const(2.0)], name=f"{name}.pow")
        var = self.reduce_mean(square, [-1], name=f"{name}.var")
        std = self.node("Sqrt", [self.node("Add", [var, self.const(epsilon)],
                                           name=f"{name}.add_eps")], name=f"{name}.sqrt")
        normed = self.node("Div", [centered, std], name=f"{name}.div")
        scaled = self.node("Mul", [normed, gamma], name=f"{name}.mul")
        return self.node("Add", [scaled, beta], name=f"{name}.add", output=output)

    # ---- the model ------------------------------------------------------------------------

    def build(self, doc: str = "", metadata: dict[str, str] | None = None) -> onnx.ModelProto:
        """The finished ModelProto (IR version the lowest that allows the opset)."""
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                  initializer=self.initializers, doc_string=doc)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="ember.zoo",
                                  ir_version=helper.find_min_ir_version_for(opsets))
        model.doc_string = doc
        for key, value in (metadata or {}).items():
            prop = model.metadata_props.add()
            prop.key, prop.value = key, value
        return model
