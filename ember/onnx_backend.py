"""An onnx.backend.base.Backend over ember, so ONNX's conformance suite can test ember.

    from ember import onnx_backend
    rep = onnx_backend.prepare(model)          # compiles
    outputs = rep.run([x])                     # list of numpy arrays, graph-output order

Models with symbolic input dims compile at the first run, for the shapes fed. Values that
ember needs as constants (a Reshape's `shape` fed as a graph input or computed from one, an
If's condition, ...) are computed and bound at run time: the model compiles once per
distinct value of them (ember.specialize).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from ember.errors import ArgumentError, UnsupportedOpError
from ember.frontend.onnx import load_model
from ember.specialize import SpecializedModel

class EmberRep(BackendRep):
    """A prepared model: compiled now when its shapes are static, else at the first run,
    once per distinct run-time shape decision (ember.specialize)."""

    def __init__(self, model: ModelProto, target: str = "llvm") -> None:
        import ember

        self.model = model
        self.target = target
        for vi in model.graph.input:
            kind = vi.type.WhichOneof("value")
            if kind not in ("tensor_type", "sequence_type", "optional_type"):
                raise UnsupportedOpError(f"graph input '{vi.name}': only tensor, sequence and "
                                         f"optional inputs are supported, got a {kind}")
        self.specialized = SpecializedModel(model, lambda g: ember.compile(g, target=target))
        self.input_names = self.specialized.input_names
        self.specialized.prepare()

    def _feeds(self, inputs: Any) -> list[np.ndarray]:
        if isinstance(inputs, Mapping):
            arrays = [inputs[n] for n in self.input_names if n in inputs]
            if len(arrays) != len(self.input_names):
                raise ArgumentError(f"model inputs are {self.input_names}; got {list(inputs)}")
            return arrays
        arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
        every = [vi.name for vi in self.model.graph.input]
        if len(arrays) == len(every) != len(self.input_names):
            # inputs backed by initializers were fed too: they must equal the initializer
            initial = {t.name: t for t in self.model.graph.initializer}
            for name, array in zip(every, arrays):
                if name in initial and not np.array_equal(
                        np.asarray(array), onnx.numpy_helper.to_array(initial[name])):
                    raise ArgumentError(f"input '{name}' has an initializer, which ember "
                                        "compiles in as a constant; it cannot be overridden")
            arrays = [a for name, a in zip(every, arrays) if name not in initial]
        return arrays

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:  # type: ignore[override]
        return tuple(self.specialized.run(self._feeds(inputs)))


class EmberBackend(Backend):
    """ONNX backend API over ember (CPU only)."""

    @classmethod
    def is_compatible(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: ModelProto | str | bytes, device: str = "CPU",  # type: ignore[override]
                **kwargs: Any) -> EmberRep:
        if not cls.supports_device(device):
            raise ArgumentError(f"ember's ONNX backend runs on CPU, not {device!r}")
        return EmberRep(load_model(model), target=kwargs.get("target", "llvm"))

    @classmethod
    def run_model(cls, model: ModelProto, inputs: Any, device: str = "CPU",  # type: ignore
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: NodeProto, inputs: Any, device: str = "CPU",  # type: ignore
                 outputs_info: Sequence[tuple[Any, Any]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node on numpy inputs (a one-node model at the newest opset)."""
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input if n]
        graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
            a.dtype), list(a.shape)) for n, a in zip(names, arrays)]
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        types = {vi.name: vi.type for vi in graph_inputs}
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
            types.update(onnx.shape_inference.infer_node_outputs(schema, node, types))
        except Exception:  # noqa: BLE001, S110 - unknown op: from_onnx reports it better
            pass
        graph_outputs = [helper.make_value_info(n, types[n]) if n in types else
                         helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                         for n in node.output if n]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = EmberBackend.prepare
run_model = EmberBackend.run_model
run_node = EmberBackend.run_node
supports_device = EmberBackend.supports_device
is_compatible = EmberBackend.is_compatible
run = run_model
