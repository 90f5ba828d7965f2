"""An onnx.backend.base.Backend over ember, so ONNX's conformance suite can test ember.

    from ember import onnx_backend
    rep = onnx_backend.prepare(model)          # compiles
    outputs = rep.run([x])                     # list of numpy arrays, graph-output order

Models with symbolic input dims compile at the first run, for the shapes fed. Inputs that
ember needs as constants (a Reshape's `shape` fed as a graph input, ...) are bound at run
time: the model compiles once per distinct value of those inputs.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from ember.errors import ArgumentError, UnsupportedOpError
from ember.frontend.onnx import UnsupportedModelError, from_onnx, load_model
from ember.graph.ir import Graph, Value
from ember.lowering.evaluate import evaluate_node

MAX_SPECIALIZE_ROUNDS = 4


class _Program:
    """One compiled specialization: the graph, its CompiledModel (None: nothing to run)."""

    def __init__(self, graph: Graph, target: str) -> None:
        import ember

        self.graph = graph
        computed: list[Value] = []
        for v in graph.outputs:
            if not v.is_constant and v not in graph.inputs and v not in computed:
                computed.append(v)
        self.compiled = None
        if computed:
            sub = Graph(graph.name, graph.inputs, tuple(computed), graph.nodes)
            self.compiled = ember.compile(sub, target=target)
        self.computed = computed

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        results: dict[Value, np.ndarray] = {}
        if self.compiled is not None:
            arrays = [feeds[v.name] for v in self.graph.inputs]
            for v, array in zip(self.computed, self.compiled.run(arrays)):
                results[v] = array
        outputs = []
        for v in self.graph.outputs:
            if v.is_constant:
                outputs.append(np.array(v.data))
            elif v in results:
                outputs.append(results[v])
            else:
                outputs.append(np.array(feeds[v.name]))
        return outputs


class EmberRep(BackendRep):
    """A prepared model: compiled now when its shapes are static, else at the first run."""

    def __init__(self, model: ModelProto, target: str = "llvm") -> None:
        self.model = model
        self.target = target
        initializers = {t.name for t in model.graph.initializer}
        self.inputs = [vi for vi in model.graph.input if vi.name not in initializers]
        self.input_names = [vi.name for vi in self.inputs]
        self.bound: frozenset[str] = frozenset()       # inputs compiled in as constants
        self._programs: dict[Any, _Program] = {}
        for vi in self.inputs:
            kind = vi.type.WhichOneof("value")
            if kind != "tensor_type":
                raise UnsupportedOpError(f"graph input '{vi.name}': only tensor inputs are "
                                         f"supported, got a {kind}")
        if all(_static(vi) for vi in self.inputs):
            self._prepare_static()

    def _prepare_static(self) -> None:
        try:
            self._programs[self._key({})] = _Program(from_onnx(self.model, evaluate=evaluate_node),
                                                      self.target)
        except UnsupportedModelError as err:
            if not _only_dynamic(err):
                raise
            self.bound = err.dynamic_inputs

    def _key(self, feeds: Mapping[str, np.ndarray]) -> Any:
        shapes = tuple((n, tuple(feeds[n].shape), str(feeds[n].dtype)) for n in sorted(feeds)
                       if n not in self.bound)
        values = tuple((n, str(feeds[n].dtype), feeds[n].shape, feeds[n].tobytes())
                       for n in sorted(self.bound))
        return (shapes, values)

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, Mapping):
            arrays = [inputs[n] for n in self.input_names if n in inputs]
            if len(arrays) != len(self.input_names):
                raise ArgumentError(f"model inputs are {self.input_names}; got {list(inputs)}")
        elif isinstance(inputs, np.ndarray):
            arrays = [inputs]
        else:
            arrays = list(inputs)
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
        if len(arrays) != len(self.input_names):
            raise ArgumentError(f"the model takes {len(self.input_names)} inputs "
                                f"{self.input_names}, got {len(arrays)}")
        # np.asarray, not np.ascontiguousarray, which makes 0-d arrays 1-d
        return {n: np.asarray(a, order="C") for n, a in zip(self.input_names, arrays)}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:  # type: ignore[override]
        feeds = self._feeds(inputs)
        key = self._key(feeds)
        program = self._programs.get(key)
        if program is None:
            program = self._specialize(feeds)
            self._programs[self._key(feeds)] = program
        return tuple(program.run(feeds))

    def _specialize(self, feeds: Mapping[str, np.ndarray]) -> _Program:
        shapes = {vi.name: feeds[vi.name].shape for vi in self.inputs if not _static(vi)}
        for _ in range(MAX_SPECIALIZE_ROUNDS):
            bound = {n: feeds[n] for n in self.bound}
            try:
                graph = from_onnx(self.model, {n: s for n, s in shapes.items() if n not in bound},
                                  bound, evaluate=evaluate_node)
                return _Program(graph, self.target)
            except UnsupportedModelError as err:
                if not _only_dynamic(err) or err.dynamic_inputs <= self.bound:
                    raise
                self.bound = self.bound | err.dynamic_inputs
        raise UnsupportedModelError([f"inputs {sorted(self.bound)} still leave shapes unknown"],
                                    self.bound)


def _static(vi: onnx.ValueInfoProto) -> bool:
    if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
        return False
    return all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)


def _only_dynamic(err: UnsupportedModelError) -> bool:
    """Whether binding graph inputs may fix the problems: some input must be a constant (the
    other problems may follow from it, e.g. an If whose branches' shapes depend on it)."""
    return bool(err.dynamic_inputs)


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
