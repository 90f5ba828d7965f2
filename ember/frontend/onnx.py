"""ONNX import: an onnx.ModelProto becomes an ember Graph; shape subgraphs are resolved.

    graph = from_onnx("resnet18.onnx", input_shapes={"input": (1, 3, 224, 224)})

Nodes are imported in order, each as ember graph nodes, constant inputs or not. Ops in
ember's table convert generically (attributes by ONNX name); special cases live in
CONVERTERS; an op ember lacks but ONNX defines as a function is expanded into its body.
An input ember needs as an attribute (`attr_inputs`: a Reshape's shape, a Slice's starts,
...) must not depend on graph inputs: Shape/Size read the static types, and the nodes that
compute it from constants (Shape -> Gather -> Concat -> Reshape) are run by ember's own
kernels (the `evaluate` function), so such subgraphs leave only dead nodes behind, which
are dropped. Unsupported ops are collected and reported together in one UnsupportedOpError.
"""

from __future__ import annotations

import os
from collections import ChainMap
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, MutableMapping, NoReturn, Sequence

import numpy as np

from ember.errors import ArgumentError, ModelError, ShapeError, UnsupportedOpError
from ember.graph.ir import Graph, GraphBuilder, Node, Value, constant, tensor_type
from ember.graph.passes.dead_code import eliminate_dead_code
from ember.graph.passes.rewrite import NONDETERMINISTIC
from ember.types import check_shape
from ember.ops.registry import OpDef, all_ops

try:
    import onnx
    from onnx import AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto
    from onnx import helper
except ImportError as _err:  # pragma: no cover - onnx is an optional dependency
    raise ImportError("importing ONNX models needs the onnx package: pip install onnx") from _err

from ember.frontend.onnx_control import CONVERTERS as CONTROL_CONVERTERS
from ember.frontend.onnx_control import MAX_UNROLLED_NODES, count_nodes
from ember.frontend.onnx_compose import CONVERTERS as COMPOSED_CONVERTERS
from ember.frontend.onnx_dynamic import CONVERTERS as DATA_DEPENDENT_CONVERTERS
from ember.frontend.onnx_quant import CONVERTERS as QUANTIZED_CONVERTERS
from ember.frontend.onnx_widen import widened
from ember.frontend.onnx_fold import (as_attr, attribute_value, elem_type, onnx_dtype,
                                      schema_defaults, schema_function, schema_input_types,
                                      supported_array, tensor_array, type_string)
from ember.frontend.onnx_sequence import CONTAINER_OPS, Layout, container_input, container_kind
from ember.frontend.onnx_sequence import CONVERTERS as SEQUENCE_CONVERTERS
from ember.frontend.onnx_sequence import check_declared as check_declared_container
from ember.frontend.onnx_sequence import flatten

MIN_OPSET = 11
MAX_FUNCTION_DEPTH = 16

__all__ = ["from_onnx", "import_onnx", "load_model", "UnsupportedModelError", "CONVERTERS",
           "MIN_OPSET", "Evaluator"]

# runs one node whose inputs are all constants; returns one array per output (the frontend
# does not compile kernels itself: ember.compile and the Backend pass
# ember.lowering.evaluate.evaluate_node, which runs ember's own kernels)
Evaluator = Callable[[Node], Sequence[np.ndarray]]


class UnsupportedModelError(UnsupportedOpError):
    """Every unsupported operator or attribute of a model, reported at once.

    `dynamic_inputs` names the graph inputs that feed an input ember needs as a constant
    (a Reshape's shape, an If's condition, ...); binding them with `constant_inputs` would make
    them constants. `dynamic_values` names the model's own values (graph inputs or outputs of
    top-level nodes) that ember needs as constants: computing those at run time and binding
    them is enough (ember.specialize does so)."""

    def __init__(self, problems: Sequence[str], dynamic_inputs: frozenset[str],
                 dynamic_values: frozenset[str] = frozenset()) -> None:
        self.problems = list(problems)
        self.dynamic_inputs = dynamic_inputs
        self.dynamic_values = dynamic_values or dynamic_inputs
        head = (f"the model uses {len(problems)} unsupported operators or attributes:"
                if len(problems) > 1 else "the model uses an unsupported operator or attribute:")
        super().__init__("\n  ".join([head, *problems]))


_UNKNOWN: Any = Value.__new__(Value)  # a value that could not be imported (see `problems`)


def load_model(model: ModelProto | str | bytes | os.PathLike[str]) -> ModelProto:
    """An onnx.ModelProto from a proto, serialized bytes or a path; ModelError if unreadable."""
    if isinstance(model, ModelProto):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            return onnx.load_model_from_string(bytes(model))
        except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError, ...
            raise ModelError(f"cannot parse {len(model)} bytes as an ONNX model: {err}") from None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ModelError(f"ONNX model file '{path}' does not exist")
        try:
            return onnx.load(path)
        except Exception as err:  # noqa: BLE001 - onnx raises many kinds
            raise ModelError(f"cannot read '{path}' as an ONNX model: {err}") from None
    raise ArgumentError(f"from_onnx: expected an onnx.ModelProto, bytes or a path, got "
                        f"{type(model).__name__}")


def from_onnx(model: ModelProto | str | bytes | os.PathLike[str],
              input_shapes: Mapping[str, Sequence[int]] | None = None,
              constant_inputs: Mapping[str, np.ndarray] | None = None,
              outputs: Sequence[str] | None = None,
              evaluate: Evaluator | None = None) -> Graph:
    """Import an ONNX model as an ember Graph.

    input_shapes: static shapes for graph inputs whose dims are symbolic ("batch"), unknown,
    or declared as -1 or 0 (as some exporters write "unknown"); for a sequence input, a list
    of its elements' shapes (it becomes the graph inputs "name[0]", "name[1]", ...), for an
    optional input None (empty) or its element's shape(s). Sequence and optional outputs are
    flattened into the graph's outputs (import_onnx gives their structure).
    constant_inputs: values fixed by name: graph inputs (they become constants and leave the
    graph's inputs) or outputs of top-level nodes (the nodes computing them are skipped), so
    nodes reading them fold or see them as attributes.
    outputs: names of the model's values to return instead of its graph outputs; only the
    nodes they need are imported (a shape subgraph on its own).
    evaluate: runs one node on constant inputs, for inputs that must be known at import and
    are computed from constants (ember.lowering.evaluate.evaluate_node; ember.compile passes
    it). Without it such an input is an error naming the missing evaluator.

        graph = from_onnx(model_proto, input_shapes={"x": (1, 3, 32, 32)})
    """
    return import_onnx(model, input_shapes, constant_inputs, outputs, evaluate)[0]


def import_onnx(model: ModelProto | str | bytes | os.PathLike[str],
                input_shapes: Mapping[str, Any] | None = None,
                constant_inputs: Mapping[str, np.ndarray] | None = None,
                outputs: Sequence[str] | None = None,
                evaluate: Evaluator | None = None) -> tuple[Graph, tuple[Layout, ...]]:
    """from_onnx, and the structure of each ONNX output (ember.frontend.onnx_sequence): a
    sequence or optional output is flattened into the graph's outputs, in order; the layouts
    say how to regroup them. A sequence input's input_shapes entry lists its elements'
    shapes; an optional input's is None (empty) or its element's."""
    proto = _upgrade(check_model(load_model(model)))

    return _Importer(proto, dict(input_shapes or {}), dict(constant_inputs or {}),
                     outputs, evaluate).run()


def check_model(proto: ModelProto) -> ModelProto:
    """`proto` if it is a well-formed ONNX model (text names, the ONNX checker, tensor graph
    inputs of a supported element type), else a clear error: what from_onnx checks first, for
    callers that import later (shape specialization imports at the first run)."""
    _check_text(proto.graph)
    for kind, values in (("input", proto.graph.input), ("output", proto.graph.output)):
        for index, vi in enumerate(values):  # the checker's message names neither
            if vi.type.WhichOneof("value") is None:
                raise ModelError(f"graph {kind} {index} '{vi.name}' has no type; the ONNX "
                                 "spec requires one (a tensor type: element type and shape)")
    _check(proto)
    initializers = {t.name for t in proto.graph.initializer}
    for index, vi in enumerate(proto.graph.input):
        if vi.name in initializers:
            continue
        kind = vi.type.WhichOneof("value")
        if kind in ("sequence_type", "optional_type"):
            continue        # containers: their elements are checked when they are flattened
        if kind != "tensor_type":
            raise UnsupportedOpError(f"graph input {index} '{vi.name}': only tensor, sequence "
                                     f"and optional inputs are supported, got a {kind}")
        onnx_dtype(vi.type.tensor_type.elem_type, f"graph input '{vi.name}'")
    return proto


def _upgrade(model: ModelProto) -> ModelProto:
    """A model older than MIN_OPSET converted up to it with onnx's version converter.

    When the converter cannot do it, the model is returned unchanged and the importer
    rejects its opset with an explanation.
    """
    version = next((int(o.version) for o in model.opset_import
                    if o.domain in ("", "ai.onnx")), None)
    if version is None or version >= MIN_OPSET:
        return model
    try:
        from onnx import version_converter

        converted = version_converter.convert_version(model, MIN_OPSET)
        onnx.checker.check_model(converted)
        return converted
    except Exception:  # noqa: BLE001 - the converter raises many kinds; report the opset
        return model


def _check_text(graph: GraphProto, where: str = "the graph") -> None:
    """Every name is text: protobuf hands back bytes for a string field that is not valid
    UTF-8 (a damaged file), which no later step expects."""
    def bad(value: Any) -> bool:
        return isinstance(value, bytes)

    for kind, values in (("input", graph.input), ("output", graph.output),
                         ("value_info", graph.value_info), ("initializer", graph.initializer)):
        for index, item in enumerate(values):
            if bad(item.name):
                raise ModelError(f"{where}: the name of {kind} {index} is not valid UTF-8")
    for index, node in enumerate(graph.node):
        fields = [node.name, node.op_type, node.domain, *node.input, *node.output,
                  *(a.name for a in node.attribute)]
        if any(bad(f) for f in fields):
            raise ModelError(f"{where}: node {index} ({node.op_type!r}) has a name, op type, "
                             "input, output or attribute name that is not valid UTF-8")
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                _check_text(attr.g, f"{where}, node {index} attribute '{attr.name}'")


def _check(model: ModelProto) -> None:
    try:
        onnx.checker.check_model(model)
    except Exception as err:  # noqa: BLE001 (ValidationError; UnicodeDecodeError on bad bytes)
        undefined = _first_undefined_input(model.graph)
        if undefined is not None:
            raise undefined from None
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"the model fails the ONNX checker: {first}"
                         f"{_shapeless_values(model.graph)}") from None


def _shapeless_values(graph: GraphProto) -> str:
    """Which graph inputs/outputs have a tensor type without a shape (the checker's
    "Field 'shape' of 'type' is required" names none)."""
    names = [f"{kind} {index} '{vi.name}'"
             for kind, values in (("input", graph.input), ("output", graph.output))
             for index, vi in enumerate(values)
             if vi.type.WhichOneof("value") == "tensor_type"
             and not vi.type.tensor_type.HasField("shape")]
    if not names:
        return ""
    verb = "has" if len(names) == 1 else "have"
    return (f" (graph {', '.join(names)} {verb} a type without a shape; give each a shape, "
            "with dim_param names for unknown dims)")


def _check_declared(vi: onnx.ValueInfoProto, value: Value, kind: str = "graph output"
                    ) -> None:
    """A graph output's declared element type must be what ember computes (onnxruntime
    refuses such a model too): else the caller gets another type than the model promises."""
    if vi.type.WhichOneof("value") != "tensor_type":
        return
    tensor = vi.type.tensor_type
    if not tensor.elem_type and kind == "graph output":
        raise ModelError(f"graph output '{vi.name}' has element type 0 (UNDEFINED); declare "
                         f"its type ({value.type.dtype} here)")
    if tensor.elem_type:
        try:
            declared = onnx_dtype(tensor.elem_type, f"{kind} '{vi.name}'")
        except UnsupportedOpError:
            if kind == "value_info":
                return  # a type ember lacks, on a value it computed anyway
            raise
        if declared != value.type.dtype:
            raise ModelError(f"{kind} '{vi.name}' is declared {declared} but the graph "
                             f"computes {value.type.dtype}")
    # a declared shape that differs is only a warning in onnxruntime, and the ONNX backend
    # compiles one model for several fed shape inputs: not checked


def _check_input_types(ctx: NodeContext) -> None:
    """Each input's type must be one the op's ONNX schema allows (onnxruntime refuses the
    model otherwise): a double Reshape shape or a float Gather index is a broken model."""
    if ctx.node.domain not in ("", "ai.onnx") or (ctx.op not in CONVERTERS
                                                  and ctx.op not in all_ops()):
        return  # an op ember lacks is reported as unsupported, with the others
    formals = schema_input_types(ctx.op, ctx.opset)
    if not formals:
        return
    for index, value in enumerate(ctx.values):
        if value is None or value is _UNKNOWN or not isinstance(value, Value):
            continue
        name, allowed, variadic = formals[min(index, len(formals) - 1)]
        if index >= len(formals) and not variadic:
            return  # more inputs than the schema has: the converter reports it
        got = type_string(value.type.dtype)
        if any(a.startswith("tensor(") for a in allowed) and got not in allowed:
            raise ModelError(f"node '{ctx.label}' ({ctx.op}): input {index} ('{name}') has "
                             f"type {got}; the ONNX schema allows "
                             f"{', '.join(sorted(allowed))}")


def _first_undefined_input(graph: GraphProto) -> ModelError | None:
    known = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for index, node in enumerate(graph.node):
        for name in node.input:
            if name and name not in known:
                label = node.name or f"{node.op_type.lower()}_{index}"
                return ModelError(f"node '{label}' ({node.op_type}): input '{name}' is not "
                                  "defined: no graph input, initializer or earlier node output "
                                  "has that name (a missing initializer?)")
        known.update(node.output)
    return None


@dataclass
class NodeContext:
    """One ONNX node being converted: its inputs resolved to Values, attributes as Python."""

    node: NodeProto
    label: str                       # node name for messages and the builder
    opsets: Mapping[str, int]
    values: list[Value | None]
    env: MutableMapping[str, Value | None]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def op(self) -> str:
        return self.node.op_type

    @property
    def opset(self) -> int:
        return self.opsets.get("", 0)


Converter = Callable[["_Importer", NodeContext], "list[Value | None] | None"]


class _Importer:
    """The state of one import: the builder, names in scope, problems found so far."""

    def __init__(self, model: ModelProto, input_shapes: dict[str, Sequence[int]],
                 constant_inputs: dict[str, np.ndarray],
                 outputs: Sequence[str] | None = None,
                 evaluate: Evaluator | None = None) -> None:
        self.model = model
        self.input_shapes = input_shapes
        self.constant_inputs = constant_inputs
        self.wanted = None if outputs is None else list(outputs)
        self.top_names: dict[Value, str] = {}   # values under their top-level ONNX name
        self.dynamic_values: set[str] = set()
        self.nesting = 0                        # > 0 inside function bodies and subgraphs
        self.evaluate = evaluate
        self.builder = GraphBuilder(model.graph.name or "onnx_model")
        self.functions = {(f.domain, f.name): f for f in model.functions}
        self.problems: list[str] = []
        self.dynamic: set[str] = set()
        self.deps: dict[Value, frozenset[str]] = {}
        self.depth = 0
        # what constant_value learned: values computed from constants, values that vary
        self.known: dict[Value, np.ndarray] = {}
        self.varying: set[Value] = set()
        self.producer: dict[Value, Node] = {}
        self._indexed = 0                       # builder.nodes already in `producer`
        self.unrolled = 0                       # loop body nodes copied so far

    # graph level ------------------------------------------------------------------------
    def run(self) -> tuple[Graph, tuple[Layout, ...]]:
        graph = self.model.graph
        opsets = self._opsets()
        env: dict[str, Any] = {}
        self._inputs(graph, env)
        names = [vi.name for vi in graph.output] if self.wanted is None else self.wanted
        # only what the outputs need, cut at values the caller bound
        nodes = _needed_nodes(graph, names, set(self.constant_inputs))
        self._convert_nodes(nodes, env, opsets, "")
        outputs: list[Any] = []
        if not graph.output:
            raise ModelError("the model's graph declares no outputs; ONNX requires at least one")
        declared = {vi.name: vi for vi in graph.output}
        for index, name in enumerate(names):
            if name not in env or env[name] is None:
                label = f"'{name}'" if name else f"{index} (unnamed)"
                raise ModelError(f"graph output {label} is not produced by any node, input "
                                 "or initializer")
            value = env[name]
            if not self.problems and value is not None and name in declared:
                check_declared_container(name, declared[name].type, value)
                if isinstance(value, Value):
                    _check_declared(declared[name], value)
            outputs.append(value)
        if not self.problems:
            for vi in graph.value_info:  # declared types of intermediates, as for outputs
                value = env.get(vi.name)
                if isinstance(value, Value) and value is not _UNKNOWN:
                    _check_declared(vi, value, "value_info")
        if self.problems:
            raise UnsupportedModelError(self.problems, frozenset(self.dynamic),
                                        frozenset(self.dynamic_values))
        layouts, flat = [], []
        for value in outputs:
            layout, values = flatten(value)
            layouts.append(layout)
            flat += values
        # nodes that only computed attributes (shape subgraphs) are dead now
        return eliminate_dead_code(self.builder.finish(flat)), tuple(layouts)

    def _opsets(self) -> dict[str, int]:
        opsets = {("" if o.domain == "ai.onnx" else o.domain): int(o.version)
                  for o in self.model.opset_import}
        newest = onnx.defs.onnx_opset_version()
        version = opsets.get("")
        if version is None:
            if any(n.domain in ("", "ai.onnx") for n in self.model.graph.node):
                raise ModelError("the model has no opset import for the default ONNX domain")
        elif not MIN_OPSET <= version <= newest:
            raise UnsupportedOpError(
                f"the model uses ONNX opset {version}; ember supports opsets {MIN_OPSET} to "
                f"{newest} (convert it first: onnx.version_converter.convert_version(model, "
                f"{max(MIN_OPSET, min(version, newest))}))")
        return opsets

    def _inputs(self, graph: GraphProto, env: dict[str, Any]) -> None:
        initializers = {t.name: t for t in graph.initializer}
        names = [vi.name for vi in graph.input if vi.name not in initializers]
        produced = {o for n in graph.node for o in n.output if o}
        for what, given, known in (("input_shapes", self.input_shapes, set(names)),
                                   ("constant_inputs", self.constant_inputs,
                                    set(names) | produced)):
            unknown = sorted(set(given) - known)
            if unknown:
                also = " or node outputs" if what == "constant_inputs" else ""
                raise ArgumentError(f"{what} names {unknown}, which are not graph inputs{also} "
                                    f"of the model (its inputs: {names})")
        missing = [w for w in self.wanted or () if w not in produced and w not in initializers
                   and w not in {vi.name for vi in graph.input}]
        if missing:
            raise ArgumentError(f"outputs names {missing}, which are not values of the model")
        for vi in graph.input:
            if vi.name in initializers:
                continue
            kind = vi.type.WhichOneof("value")
            if kind in ("sequence_type", "optional_type"):
                if vi.name in self.constant_inputs:
                    raise ArgumentError(f"constant_inputs: graph input '{vi.name}' is a "
                                        f"{kind.split('_')[0]}; only tensors can be bound")
                if vi.name not in self.input_shapes:
                    raise ShapeError(f"graph input '{vi.name}' is a {kind.split('_')[0]}: "
                                     f"pass input_shapes={{'{vi.name}': ...}} (a list of "
                                     "element shapes; None for an empty optional)")
                env[vi.name] = container_input(self.builder, vi.name, vi.type,
                                               self.input_shapes[vi.name])
                continue
            if vi.name in self.constant_inputs:
                env[vi.name] = self._constant(vi.name, np.asarray(self.constant_inputs[vi.name]))
                continue
            dtype, shape = self._input_type(vi)
            value = self.builder.input(vi.name, shape, dtype)
            self.deps[value] = frozenset([vi.name])
            self.top_names[value] = vi.name
            env[vi.name] = value
        for name, tensor in initializers.items():
            env[name] = self._initializer(name, tensor)
        if graph.sparse_initializer:
            names = [s.values.name for s in graph.sparse_initializer]
            self.problems.append(f"sparse initializers {names} are not supported")
            for name in names:
                env[name] = _UNKNOWN

    def _initializer(self, name: str, tensor: onnx.TensorProto) -> Value:
        try:
            onnx_dtype(tensor.data_type, f"initializer '{name}'")
        except UnsupportedOpError as err:
            self.problems.append(str(err))
            return _UNKNOWN
        return self._constant(name, tensor_array(tensor, f"initializer '{name}'"))

    def _input_type(self, vi: onnx.ValueInfoProto) -> tuple[Any, tuple[int, ...]]:
        name = vi.name
        if vi.type.WhichOneof("value") != "tensor_type":
            raise UnsupportedOpError(f"graph input '{name}': only tensor inputs are supported, "
                                     f"got a {vi.type.WhichOneof('value')}")
        tensor = vi.type.tensor_type
        dtype = onnx_dtype(tensor.elem_type, f"graph input '{name}'")
        dims = list(tensor.shape.dim) if tensor.HasField("shape") else None
        if name in self.input_shapes:
            shape = check_shape(self.input_shapes[name], f"input_shapes['{name}']")
            if dims is not None:
                declared = [d.dim_value if _known_dim(d) else None for d in dims]
                if len(declared) != len(shape) or any(
                        d is not None and d != s for d, s in zip(declared, shape)):
                    raise ShapeError(f"input_shapes['{name}'] = {shape} does not fit the "
                                     f"model's shape {_dims_text(dims)} for graph input '{name}'")
            return dtype, shape
        if dims is None:
            raise ShapeError(f"graph input '{name}' has no shape in the model; pass "
                             f"input_shapes={{'{name}': (...)}} to from_onnx/ember.compile")
        for index, d in enumerate(dims):
            if not _known_dim(d):
                symbol = f"'{d.dim_param}'" if d.dim_param else "unknown"
                example = tuple(d.dim_value if _known_dim(d) else 1 for d in dims)
                raise ShapeError(f"graph input '{name}': dimension {index} is symbolic "
                                 f"({symbol}); ember compiles static shapes: pass "
                                 f"input_shapes={{'{name}': {example}}} (your sizes) to "
                                 "from_onnx/ember.compile")
        return dtype, check_shape([int(d.dim_value) for d in dims], f"graph input '{name}'")

    # nodes ------------------------------------------------------------------------------
    def _convert_nodes(self, nodes: Sequence[NodeProto], env: MutableMapping[str, Value | None],
                       opsets: Mapping[str, int], prefix: str) -> None:
        if prefix:
            self.nesting += 1
        try:
            for index, node in enumerate(nodes):
                label = prefix + (node.name or f"{node.op_type.lower()}_{index}")
                if prefix:
                    self._convert(node, label, env, opsets)
                else:
                    self._convert_top(node, label, env, opsets)
        finally:
            if prefix:
                self.nesting -= 1

    def _convert_top(self, node: NodeProto, label: str, env: MutableMapping[str, Value | None],
                     opsets: Mapping[str, int]) -> None:
        """A node of the model's graph: skipped when the caller bound its outputs; its
        outputs are remembered by name (the names run-time bindings use)."""
        outs = [o for o in node.output if o]
        if outs and all(o in self.constant_inputs for o in outs):
            for o in outs:
                env[o] = self._constant(o, np.asarray(self.constant_inputs[o]))
            return
        self._convert(node, label, env, opsets)
        for o in outs:
            if o in self.constant_inputs:      # some outputs bound: those are constants
                env[o] = self._constant(o, np.asarray(self.constant_inputs[o]))
            value = env.get(o)
            if isinstance(value, Value) and value is not _UNKNOWN and not value.is_constant:
                self.top_names.setdefault(value, o)

    def _convert(self, node: NodeProto, label: str, env: MutableMapping[str, Value | None],
                 opsets: Mapping[str, int]) -> None:
        values: list[Value | None] = []
        for name in node.input:
            if not name:
                values.append(None)
            elif name not in env:
                raise ModelError(f"node '{label}' ({node.op_type}): input '{name}' is not "
                                 "defined: no graph input, initializer or earlier node output "
                                 "has that name (a missing initializer?)")
            else:
                values.append(env[name])
        ctx = NodeContext(node, label, opsets, values, env)
        _check_input_types(ctx)
        outputs: Sequence[Value | None] | None = None
        if any(v is _UNKNOWN for v in values):
            self._check_known(ctx)
        else:
            try:
                outputs = self._dispatch(ctx)
                for index, name in enumerate(node.output):
                    if name and (index >= len(outputs) or outputs[index] is None):
                        raise UnsupportedOpError(f"output {index} ('{name}') is not supported")
            except UnsupportedOpError as err:
                self._problem(ctx, err)
                outputs = None
        depends = frozenset().union(*(self.deps.get(v, frozenset()) for v in values
                                      if v is not None))
        for index, name in enumerate(node.output):
            if not name:
                continue
            value = _UNKNOWN if outputs is None else outputs[index]
            env[name] = value
            if isinstance(value, Value) and value is not _UNKNOWN and not value.is_constant \
                    and value not in self.deps:
                self.deps[value] = depends

    def _problem(self, ctx: NodeContext, err: Exception) -> None:
        message = str(err)
        if not message.startswith("node '"):
            where = ctx.op if not ctx.node.domain else f"{ctx.node.domain}:{ctx.op}"
            message = f"node '{ctx.label}' ({where}, opset {ctx.opset}): {message}"
        self.problems.append(message)

    def _check_known(self, ctx: NodeContext) -> None:
        """Record a node downstream of a failure if it would fail on its own as well."""
        op, domain = ctx.op, ctx.node.domain
        if (domain, op) in self.functions or op in CONVERTERS or op in all_ops():
            return
        if domain in ("", "ai.onnx") and onnx.defs.has(op, ""):
            try:
                if onnx.defs.get_schema(op, ctx.opset, "").has_function:
                    return
            except onnx.defs.SchemaError:
                pass
        self._problem(ctx, UnsupportedOpError(_unsupported_text(ctx)))

    def _dispatch(self, ctx: NodeContext) -> Sequence[Value | None]:
        node = ctx.node
        local = self.functions.get((node.domain, node.op_type))
        if local is not None:
            return self._expand(ctx, local, {a.name: a for a in local.attribute_proto
                                             if a.type != AttributeProto.UNDEFINED})
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(_unsupported_text(ctx))
        if ctx.op not in CONTAINER_OPS:
            for index, value in enumerate(ctx.values):
                kind = container_kind(value)
                if kind is not None:
                    raise ModelError(f"node '{ctx.label}' ({ctx.op}): input {index} "
                                     f"('{node.input[index]}') is {kind}; {ctx.op} takes "
                                     "tensors")
        where = f"node '{ctx.label}' ({ctx.op})"
        ctx.attrs = {a.name: attribute_value(a, where) for a in node.attribute}
        wide = widened(self, ctx, self._convert_op)
        return self._convert_op(ctx) if wide is None else wide

    def _convert_op(self, ctx: NodeContext) -> Sequence[Value | None]:
        """Convert with the op's converter, else through the op table or its function."""
        converter = CONVERTERS.get(ctx.op)
        if converter is not None:
            result = converter(self, ctx)
            if result is not None:
                return result
        return self._default(ctx)

    def _default(self, ctx: NodeContext) -> Sequence[Value | None]:
        """Convert through the op table, or expand ONNX's function body, in that order."""
        table = all_ops()
        if ctx.op in table:
            return self._generic(ctx, table[ctx.op])
        types = [None if v is None else (v.type.dtype, v.type.shape) for v in ctx.values]
        func = schema_function(ctx.op, ctx.opset, ctx.node, types)
        if func is not None:
            return self._expand(ctx, func, schema_defaults(ctx.op, ctx.opset))
        raise UnsupportedOpError(_unsupported_text(ctx))

    def _generic(self, ctx: NodeContext, opdef: OpDef) -> Sequence[Value | None]:
        attrs = dict(ctx.attrs)
        for key, value in attrs.items():
            if isinstance(value, GraphProto):
                raise UnsupportedOpError(f"attribute '{key}' (a subgraph) is not supported")
        inputs: list[Value | None] = []
        for index, value in enumerate(ctx.values):
            formal = opdef.inputs[min(index, len(opdef.inputs) - 1)] if opdef.inputs else ""
            if formal not in opdef.attr_inputs:
                inputs.append(value)
            elif value is not None:
                attrs[formal] = as_attr(self._need_constant(ctx, formal, value))
        data_inputs = [n for n in opdef.inputs if n not in opdef.attr_inputs]
        inputs.extend([None] * (len(data_inputs) - len(inputs)))
        if "num_outputs" in opdef.attrs and attrs.get("num_outputs") is None \
                and attrs.get("split") is None:
            if ctx.op == "Split" and ctx.opset >= 18:  # older opsets split evenly by outputs
                raise ModelError(f"node '{ctx.label}' (Split, opset {ctx.opset}): give either "
                                 "the 'split' input or the 'num_outputs' attribute (ONNX "
                                 "requires one from opset 18)")
            attrs["num_outputs"] = len(ctx.node.output)
        return self.add(ctx, ctx.op, inputs, attrs)

    def _need_constant(self, ctx: NodeContext, formal: str, value: Value) -> np.ndarray:
        array = self.constant_value(value)
        if array is not None:
            return array
        sources = self.deps.get(value, frozenset())
        if not sources and self.evaluate is None and self._from_constants(value):
            raise UnsupportedOpError(f"input '{formal}' must be a constant (it decides shapes or "
                                     "layout); it is computed from constants, but from_onnx "
                                     "was given no evaluator to compute it (pass evaluate="
                                     "ember.lowering.evaluate.evaluate_node, as ember.compile "
                                     "does)")
        self.dynamic.update(sources)
        self.dynamic_values.update([self.top_names[value]] if value in self.top_names
                                   else sources)
        origin = (f"it is computed at run time from graph input(s) {sorted(sources)}"
                  if sources else "it is computed at run time")
        raise UnsupportedOpError(f"input '{formal}' must be a constant (it decides shapes or "
                                 f"layout), but {origin}; make it an initializer or pass "
                                 "constant_inputs")

    def need_output_values(self, ctx: NodeContext, source: Value) -> NoReturn:
        """Raise for a node whose output shapes depend on the values of `source`, computed
        at run time (NonZero, ...): naming its outputs as values to bind, when the node is
        in the model's graph, else the graph inputs `source` comes from."""
        sources = self.deps.get(source, frozenset())
        self.dynamic.update(sources)
        if self.nesting == 0:
            self.dynamic_values.update(o for o in ctx.node.output if o)
        else:
            self.dynamic_values.update(sources)
        raise UnsupportedOpError("its output shape depends on the values of its input, which "
                                 "are computed at run time; ember.compile computes it on the "
                                 "host at run time (from_onnx: bind its outputs with "
                                 "constant_inputs)")

    def constant_value(self, value: Value) -> np.ndarray | None:
        """The array `value` holds if it does not vary at run time, else None.

        A constant's data; for a node output, what `evaluate` (ember's kernels) computes for
        the nodes producing it from constants, each node once. Values reached from graph
        inputs or random ops vary."""
        if value.is_constant:
            return value.data
        for node in self.builder.nodes[self._indexed:]:
            self.producer.update((v, node) for v in node.outputs)
        self._indexed = len(self.builder.nodes)

        def settled(v: Value) -> bool:
            return v.is_constant or v in self.known or v in self.varying

        stack = [value]
        while stack:
            v = stack[-1]
            node = self.producer.get(v)
            if settled(v):
                stack.pop()
            elif node is None or node.op in NONDETERMINISTIC or self.deps.get(v):
                self.varying.add(v)
                stack.pop()
            elif pending := [u for u in node.inputs if u is not None and not settled(u)]:
                stack.extend(pending)
            elif any(u in self.varying for u in node.inputs if u is not None):
                self.varying.update(node.outputs)
                stack.pop()
            else:
                self._evaluate(node)
                stack.pop()
        return self.known.get(value)

    def _from_constants(self, value: Value) -> bool:
        """Whether `value` is a node output that constant_value could not compute only for
        want of an evaluator."""
        return value in self.producer and value in self.varying and not self.deps.get(value) \
            and self.producer[value].op not in NONDETERMINISTIC

    def _evaluate(self, node: Node) -> None:
        """Run `node` (whose inputs are all settled constants) with `evaluate`."""
        if self.evaluate is None:
            self.varying.update(node.outputs)
            return
        inputs = tuple(None if u is None else u if u.is_constant else
                       constant(u.name, self.known[u]) for u in node.inputs)
        arrays = self.evaluate(Node(node.op, node.name, inputs, node.outputs, node.attrs))
        for out, array in zip(node.outputs, arrays):
            array = np.asarray(array, out.type.dtype.numpy)
            if array.shape != out.type.shape:
                raise ShapeError(f"node '{node.name}' ({node.op}): evaluating it on constants "
                                 f"gave shape {array.shape}, its type says {out.type.shape}")
            self.known[out] = array

    def add(self, ctx: NodeContext, op: str, inputs: Sequence[Value | None],
            attrs: Mapping[str, Any]) -> tuple[Value, ...]:
        """Add one ember node for `ctx` (named after the ONNX node and its outputs)."""
        names = [n for n in ctx.node.output]
        outputs = self.builder.add(op, inputs, attrs, name=ctx.label, output_names=names)
        wanted = len(ctx.node.output)
        if wanted > len(outputs):
            raise UnsupportedOpError(f"{wanted} outputs requested; ember's {op} has "
                                     f"{len(outputs)}")
        return outputs

    def _constant(self, name: str, array: np.ndarray) -> Value:
        if not supported_array(array):
            raise UnsupportedOpError(f"constant '{name}': data type {array.dtype} is not "
                                     "supported (supported: float16/32/64, (u)int8/16/32/64, "
                                     "bool, bfloat16, float8*, float4e2m1, (u)int4, (u)int2)")
        # not builder.constant: np.ascontiguousarray turns 0-d arrays into 1-d ones
        data = np.array(array, order="C", copy=True)
        data.setflags(write=False)
        return Value(self.builder.unique(name), tensor_type(data.shape, data.dtype), data)

    def constant(self, ctx: NodeContext, array: np.ndarray, index: int = 0) -> Value:
        name = ctx.node.output[index] if index < len(ctx.node.output) else ""
        return self._constant(name or f"{ctx.label}:{index}", array)

    # functions and subgraphs -------------------------------------------------------------
    def _expand(self, ctx: NodeContext, func: FunctionProto,
                defaults: Mapping[str, AttributeProto]) -> list[Value | None]:
        """Convert the nodes of `func` with its formal parameters bound to the node's values."""
        if self.depth >= MAX_FUNCTION_DEPTH:
            raise UnsupportedOpError(f"function expansion deeper than {MAX_FUNCTION_DEPTH}")
        env: dict[str, Value | None] = {}
        for index, formal in enumerate(func.input):
            env[formal] = ctx.values[index] if index < len(ctx.values) else None
        given = {a.name: a for a in ctx.node.attribute}
        for name, default in defaults.items():
            given.setdefault(name, default)
        opsets = dict(ctx.opsets)
        opsets.update({("" if o.domain == "ai.onnx" else o.domain): int(o.version)
                       for o in func.opset_import})
        self.depth += 1
        try:
            self._convert_nodes([_bind_attributes(n, given) for n in func.node], env, opsets,
                                ctx.label + "/")
        finally:
            self.depth -= 1
        results: list[Value | None] = []
        for index, formal in enumerate(func.output):
            wanted = index < len(ctx.node.output) and ctx.node.output[index]
            if wanted and formal not in env:
                raise ModelError(f"node '{ctx.label}' ({ctx.op}): its function body does not "
                                 f"define output '{formal}'")
            results.append(env[formal] if wanted else None)
        return results

    def inline_graph(self, ctx: NodeContext, graph: GraphProto, prefix: str
                     ) -> list[Value | None]:
        """Convert a subgraph that sees the enclosing scope (an If branch) in place."""
        results = self.run_graph(ctx, graph, prefix, {})
        return [_UNKNOWN] * len(graph.output) if results is None else results

    def run_graph(self, ctx: NodeContext, graph: GraphProto, prefix: str,
                  bindings: Mapping[str, Any]) -> list[Any] | None:
        """Convert a subgraph in place, its inputs bound to `bindings` (by formal name), the
        enclosing scope visible; its outputs, or None when a node in it was unsupported (the
        problem is recorded)."""
        env: ChainMap[str, Any] = ChainMap(dict(bindings), ctx.env)
        for tensor in graph.initializer:
            env[tensor.name] = self._initializer(tensor.name, tensor)
        before = len(self.problems)
        self._convert_nodes(graph.node, env, ctx.opsets, prefix)
        if len(self.problems) > before:
            return None
        for out in graph.output:
            if out.name not in env:
                raise ModelError(f"node '{ctx.label}' ({ctx.op}): its subgraph does not "
                                 f"define its output '{out.name}'")
        return [env[o.name] for o in graph.output]

    def failed(self, count: int) -> list[Any]:
        """Outputs for a node whose subgraph failed to import (the problem is recorded)."""
        return [_UNKNOWN] * count

    def count_unrolled(self, ctx: NodeContext, iterations: int, body: GraphProto) -> None:
        """Count `iterations` copies of `body` against MAX_UNROLLED_NODES."""
        self.unrolled += iterations * count_nodes(body)
        if self.unrolled > MAX_UNROLLED_NODES:
            raise UnsupportedOpError(f"unrolling loops would copy more than "
                                     f"{MAX_UNROLLED_NODES} nodes ({self.unrolled} so far); "
                                     "ember unrolls Loop and Scan, so the model is too large "
                                     "for it")


def _bind_attributes(node: NodeProto, given: Mapping[str, AttributeProto]) -> NodeProto:
    """A copy of a function-body node with attribute references replaced by the caller's."""
    if not any(a.ref_attr_name for a in node.attribute):
        return node
    bound = NodeProto()
    bound.CopyFrom(node)
    del bound.attribute[:]
    for attr in node.attribute:
        if not attr.ref_attr_name:
            bound.attribute.append(attr)
        elif attr.ref_attr_name in given:
            value = AttributeProto()
            value.CopyFrom(given[attr.ref_attr_name])
            value.name = attr.name
            bound.attribute.append(value)
    return bound


def _known_dim(d: Any) -> bool:
    """A dim with a size: dim_value > 0 (exporters write -1 or 0 for "unknown")."""
    return d.HasField("dim_value") and d.dim_value > 0


def _needed_nodes(graph: GraphProto, names: Sequence[str], bound: set[str]
                  ) -> list[NodeProto]:
    """The nodes of `graph` that `names` depend on, in order (subgraphs' outer reads count),
    not looking past `bound` values."""
    wanted = set(names)
    keep: list[NodeProto] = []
    for node in reversed(graph.node):
        outs = [o for o in node.output if o]
        if not any(o in wanted for o in outs):
            continue
        keep.append(node)
        if not all(o in bound for o in outs):
            wanted.update(_reads(node))
    return keep[::-1]


def _reads(node: NodeProto) -> set[str]:
    """Every name a node reads, including those its subgraphs read from the enclosing scope."""
    names = {i for i in node.input if i}
    for attr in node.attribute:
        for sub in ([attr.g] if attr.type == AttributeProto.GRAPH else
                    list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []):
            for inner in sub.node:
                names |= _reads(inner)
    return names


def _unsupported_text(ctx: NodeContext) -> str:
    domain = ctx.node.domain
    if domain not in ("", "ai.onnx"):
        return f"operator '{ctx.op}' of domain '{domain}' is not supported"
    return f"operator '{ctx.op}' is not supported"


def _dims_text(dims: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else
                           (d.dim_param or "?") for d in dims) + ")"


# converters for ops that need more than the generic rule -----------------------------------
def convert_constant(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    attrs = ctx.attrs
    if "value" in attrs:
        array = np.asarray(attrs["value"])
    elif "value_float" in attrs:
        array = np.array(attrs["value_float"], np.float32)
    elif "value_floats" in attrs:
        array = np.array(attrs["value_floats"], np.float32)
    elif "value_int" in attrs:
        array = np.array(attrs["value_int"], np.int64)
    elif "value_ints" in attrs:
        array = np.array(attrs["value_ints"], np.int64)
    else:
        kind = next(iter(attrs), "none")
        raise UnsupportedOpError(f"attribute '{kind}' is not supported (string and sparse "
                                 "constants cannot be held)")
    return [imp.constant(ctx, array)]


def convert_identity(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    return [ctx.values[0]]                                  # an alias: no node


def convert_dropout(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """Inference-mode Dropout is the identity; its mask is all true."""
    training = ctx.values[2] if len(ctx.values) > 2 else None
    if training is not None:
        mode = imp.constant_value(training)
        if mode is None:
            raise UnsupportedOpError("training_mode computed at run time is not supported "
                                     "(inference only)")
        if bool(np.asarray(mode).reshape(-1)[0]):
            raise UnsupportedOpError("training mode (training_mode=1) is not supported; "
                                     "export the model in inference mode")
    x = ctx.values[0]
    assert x is not None
    outputs: list[Value | None] = [x]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        outputs.append(imp.constant(ctx, np.ones(x.type.shape, np.bool_), 1))
    return outputs


def convert_cast_like(imp: _Importer, ctx: NodeContext) -> list[Value | None] | None:
    """CastLike(x, like) is Cast(x, to=dtype of like): `like` is only read for its type."""
    like = ctx.values[1] if len(ctx.values) > 1 else None
    if like is None:
        return None
    cast = helper.make_node("Cast", [ctx.node.input[0]], list(ctx.node.output),
                            name=ctx.node.name, to=elem_type(like.type.dtype))
    cast.attribute.extend(a for a in ctx.node.attribute if a.name == "saturate")
    attrs = {"to": elem_type(like.type.dtype)}
    attrs.update({k: v for k, v in ctx.attrs.items() if k == "saturate"})
    return imp._default(NodeContext(cast, ctx.label, ctx.opsets, ctx.values[:1], ctx.env, attrs))


def convert_cast(imp: _Importer, ctx: NodeContext) -> list[Value | None] | None:
    """A Cast to the type the input already has is an alias."""
    x = ctx.values[0]
    to = ctx.attrs.get("to")
    if x is not None and isinstance(to, int) and to == elem_type(x.type.dtype):
        return [x]
    return None


def convert_softmax(imp: _Importer, ctx: NodeContext) -> list[Value | None] | None:
    """Before opset 13, Softmax, LogSoftmax and Hardmax flatten the input to 2-D at `axis`
    (default 1) and normalize each row; from 13 on they normalize along `axis` only."""
    x = ctx.values[0]
    if ctx.opset >= 13 or x is None:
        return None
    rank = x.type.ndim
    axis = int(ctx.attrs.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    if ctx.op not in all_ops():
        return None
    if axis >= rank - 1:                     # one trailing axis: both definitions agree
        return list(imp.add(ctx, ctx.op, [x], {"axis": -1}))
    rows = int(np.prod(x.type.shape[:axis], dtype=np.int64))
    flat = imp.builder.add("Reshape", [x], {"shape": (rows, -1)}, name=f"{ctx.label}/flatten")
    (y,) = imp.builder.add(ctx.op, flat, {"axis": 1}, name=ctx.label)
    return list(imp.add(ctx, "Reshape", [y], {"shape": x.type.shape}))


def convert_shape(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """Shape of a statically typed tensor is a constant (with opset 15's start/end)."""
    x = ctx.values[0]
    assert x is not None
    rank = x.type.ndim
    start = int(ctx.attrs.get("start", 0))
    end = int(ctx.attrs.get("end", rank))
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return [imp.constant(ctx, np.array(x.type.shape[start:end], np.int64))]


def convert_size(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    x = ctx.values[0]
    assert x is not None
    return [imp.constant(ctx, np.array(x.type.size, np.int64))]


def convert_if(imp: _Importer, ctx: NodeContext) -> list[Value | None]:
    """If with a constant condition: the chosen branch is inlined, the other is never
    imported. A condition computed at run time must be bound first (ember.specialize computes
    it from the inputs at run time and compiles the taken branch only): the untaken branch may
    not even have valid shapes, and running both would double the work."""
    cond = ctx.values[0]
    assert cond is not None
    then_graph, else_graph = ctx.attrs["then_branch"], ctx.attrs["else_branch"]
    if cond.type.size != 1:
        raise UnsupportedOpError(f"the condition has {cond.type.size} elements, expected 1")
    known = imp._need_constant(ctx, "cond", cond)       # raises when computed at run time
    taken = bool(np.asarray(known).reshape(-1)[0])
    return imp.inline_graph(ctx, then_graph if taken else else_graph, ctx.label + "/")


def convert_range(imp: _Importer, ctx: NodeContext) -> list[Value | None] | None:
    """Range's start/limit/delta become attributes (Python numbers): keep their type."""
    start = ctx.values[0] if ctx.values else None
    if start is not None:
        ctx.attrs["dtype"] = str(start.type.dtype)
    return None


def convert_dft(imp: _Importer, ctx: NodeContext) -> None:
    """DFT before opset 20 has `axis` as an attribute defaulting to 1 (then an input, -2)."""
    if ctx.opset < 20:
        ctx.attrs.setdefault("axis", 1)


def convert_roi_align(imp: _Importer, ctx: NodeContext) -> None:
    """RoiAlign before opset 16 has no coordinate_transformation_mode; it behaves as
    output_half_pixel (opset 16's default is half_pixel)."""
    if ctx.opset < 16:
        ctx.attrs.setdefault("coordinate_transformation_mode", "output_half_pixel")


CONVERTERS: dict[str, Converter] = {
    "DFT": convert_dft,
    "RoiAlign": convert_roi_align,
    "Constant": convert_constant,
    "Identity": convert_identity,
    "Dropout": convert_dropout,
    "Cast": convert_cast,
    "CastLike": convert_cast_like,
    "Shape": convert_shape,
    "Softmax": convert_softmax,
    "LogSoftmax": convert_softmax,
    "Hardmax": convert_softmax,
    "Size": convert_size,
    "If": convert_if,
    "Range": convert_range,
}
CONVERTERS.update(QUANTIZED_CONVERTERS)
CONVERTERS.update(DATA_DEPENDENT_CONVERTERS)
CONVERTERS.update(COMPOSED_CONVERTERS)
CONVERTERS.update(SEQUENCE_CONVERTERS)
CONVERTERS.update(CONTROL_CONVERTERS)
