"""Shape specialization: an ONNX model whose shapes are decided at run time, compiled per
distinct decision and cached.

    model = ember.compile("bert.onnx")            # batch and sequence symbolic
    model.run({"input_ids": ids_2x8, ...})       # compiles for (2, 8), runs
    model.run({"input_ids": ids_4x16, ...})      # compiles for (4, 16), runs
    model.run({"input_ids": ids_2x8, ...})       # cached: no compile

ember's kernels have static shapes. What decides them at run time is of two kinds:
  - the input shapes (symbolic or unknown dims): they are part of every cache key;
  - values the importer needs as constants (a Reshape's shape or a Range's limit computed
    from input data, an If's condition, ...). The importer names them
    (`UnsupportedModelError.dynamic_values`); a *shape program* (the nodes computing those
    values, compiled like any model) computes them from the actual inputs, and the main
    program is compiled with them bound as constants. Shape programs may themselves need
    bound values: each step of the chain is keyed by everything it was specialized on.

A run: for each step, look up (input shapes and dtypes, values bound so far); run that
step's shape program and bind its outputs, until the step is the main program. Only the
taken branch of an If is imported, compiled or run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember.errors import ArgumentError, ShapeError
from ember.frontend.onnx import UnsupportedModelError, check_model, import_onnx, load_model

from ember.frontend.onnx_dynamic import HOST_OPS
from ember.frontend.onnx_fold import attribute_value
from ember.frontend.onnx_sequence import Layout, flatten_feed, is_tensor_type, unflatten
from ember.graph.ir import Graph, Value
from ember.lowering.evaluate import evaluate_node

MAX_STEPS = 8            # chained shape programs before giving up (a cycle is a bug)
MAX_PROGRAMS = 64        # compiled specializations kept; the least recently used go first

Compiler = Callable[[Graph], Any]    # Graph -> CompiledModel


class Program:
    """One compiled specialization: a graph and its CompiledModel (None: nothing to run;
    every output is a constant or a graph input)."""

    def __init__(self, graph: Graph, compile_graph: Compiler) -> None:
        self.graph = graph
        self.computed: list[Value] = []
        for v in graph.outputs:
            if not v.is_constant and v not in graph.inputs and v not in self.computed:
                self.computed.append(v)
        self.compiled = None
        if self.computed:
            sub = Graph(graph.name, graph.inputs, tuple(self.computed), graph.nodes)
            self.compiled = compile_graph(sub)

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        results: dict[Value, np.ndarray] = {}
        if self.compiled is not None:
            arrays = [feeds[v.name] for v in self.graph.inputs]
            results = dict(zip(self.computed, self.compiled.run(arrays)))
        outputs = []
        for v in self.graph.outputs:
            if v.is_constant:
                outputs.append(np.array(v.data))
            elif v in results:
                outputs.append(results[v])
            else:
                outputs.append(np.array(feeds[v.name]))
        return outputs


@dataclass(frozen=True)
class _Step:
    """Either a shape program computing `names` (to bind) or, with names == (), the main
    program. A shape program computes `fetch`; `host` nodes (data-dependent ops, in order)
    then compute the rest of `names` from those on the host."""

    names: tuple[str, ...]
    program: Program
    fetch: tuple[str, ...] = ()
    host: tuple[Any, ...] = ()          # onnx NodeProtos
    layouts: tuple[Layout, ...] = ()    # the main program's outputs' structure

    def outputs(self, feeds: Mapping[str, np.ndarray]) -> list[Any]:
        """The main program's outputs, sequences regrouped into lists (optionals: None or
        their element)."""
        flat = iter(self.program.run(feeds))
        return [unflatten(layout, flat) for layout in self.layouts]

    def values(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The values of `names` for these inputs."""
        known = dict(zip(self.fetch, self.program.run(feeds)))
        for node in self.host:
            arrays = [known[n] if n else None for n in node.input]
            attrs = {a.name: attribute_value(a, node.op_type) for a in node.attribute}
            known.update(zip([o for o in node.output if o], HOST_OPS[node.op_type](attrs,
                                                                                   arrays)))
        return {n: known[n] for n in self.names}


class SpecializedModel:
    """An ONNX model compiled per distinct run-time shape decision (see the module doc).

    `input_shapes` fixes some inputs' shapes; the others come from each run's arrays.
    `compile_graph` compiles one ember Graph (ember.compile with the caller's options).
    At most `max_programs` specializations are kept (least recently used dropped first)."""

    def __init__(self, model: Any, compile_graph: Compiler,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 max_programs: int = MAX_PROGRAMS) -> None:
        self.model = check_model(load_model(model))  # a broken model fails here, not at run
        self.max_programs = max(1, int(max_programs))
        self.compile_graph = compile_graph
        initializers = {t.name for t in self.model.graph.initializer}
        self.inputs = [vi for vi in self.model.graph.input if vi.name not in initializers]
        self.input_names = [vi.name for vi in self.inputs]
        containers = sorted(vi.name for vi in self.inputs if not is_tensor_type(vi.type)
                            and vi.name in (input_shapes or {}))
        if containers:
            raise ArgumentError(f"input_shapes names {containers}, which are sequence or "
                                "optional inputs: their shapes come from each run's values")
        self.input_shapes = {k: tuple(int(d) for d in v) for k, v in (input_shapes or {}).items()}
        unknown = sorted(set(self.input_shapes) - set(self.input_names))
        if unknown:
            raise ArgumentError(f"input_shapes names {unknown}, which are not graph inputs of "
                                f"the model (its inputs: {self.input_names})")
        self._steps: dict[Any, _Step] = {}
        self._declared = {vi.name for vi in self.inputs if vi.name not in self.input_shapes
                          and _declared_shape(vi) is not None}
        # per input: the dims each run's shape must fit (None: any), read from the proto
        # once, since every run checks them
        self._fits = {vi.name: _declared_dims(vi) for vi in self.inputs}
        # sequence and optional inputs: their structure (element shapes) is part of each key
        self._containers = {vi.name: vi.type for vi in self.inputs
                            if not is_tensor_type(vi.type)}
        self._structure: dict[str, Any] = {}      # of the current run's container inputs
        self.compiles = 0          # programs compiled so far (tests and users can watch it)

    def prepare(self) -> None:
        """Compile now what the declared shapes decide (all inputs static): the first step,
        so that an unsupported model fails here rather than at its first run."""
        feeds = {}
        for vi in self.inputs:
            shape = self.input_shapes.get(vi.name)
            shape = _declared_shape(vi) if shape is None else shape
            if shape is None:
                return
            dtype = _numpy_dtype(vi.type.tensor_type.elem_type)
            if dtype is None:
                return
            feeds[vi.name] = np.zeros(shape, dtype)
        key = (self._shape_key(feeds), ())
        if key not in self._steps:
            self._steps[key] = self._make_step(feeds, {})

    def _shape_key(self, feeds: Mapping[str, np.ndarray]) -> Any:
        return tuple((n, repr(self._structure.get(n)), tuple(
            (name, feeds[name].shape, feeds[name].dtype.str) for name in
            (self._flat_names(n, feeds) if n in self._containers else [n])))
            for n in self.input_names)

    @staticmethod
    def _flat_names(name: str, feeds: Mapping[str, np.ndarray]) -> list[str]:
        """The flat input names a container input's elements run under."""
        return [n for n in feeds if n == name or n.startswith(name + "[")]

    # running ---------------------------------------------------------------------------
    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[Any]:
        """Outputs in graph-output order, for inputs by name (dict) or position (list).

        A sequence input is a list of arrays (an optional one: None or its element); a
        sequence output comes back as a list of arrays, an optional one as None or its
        element."""
        feeds = self.feeds(inputs)
        shapes = self._shape_key(feeds)
        bound: dict[str, np.ndarray] = {}
        for _ in range(MAX_STEPS):
            key = (shapes, tuple((n, a.dtype.str, a.shape, a.tobytes())
                                 for n, a in sorted(bound.items())))
            step = self._steps.pop(key, None)
            if step is None:
                step = self._make_step(feeds, bound)
                while len(self._steps) >= self.max_programs:
                    self._steps.pop(next(iter(self._steps)))
            self._steps[key] = step                  # most recently used last
            if not step.names:
                return step.outputs(self._unbound(feeds, bound))
            bound.update(step.values(self._unbound(feeds, bound)))
        raise UnsupportedModelError([f"more than {MAX_STEPS} chained shape programs (values "
                                     f"bound so far: {sorted(bound)})"], frozenset(bound))

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        return self.run(list(arrays))

    def feeds(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """The inputs by name as arrays, checked against the model's declared dims."""
        if isinstance(inputs, Mapping):
            extra = sorted(set(inputs) - set(self.input_names))
            missing = [n for n in self.input_names if n not in inputs]
            if extra or missing:
                raise ArgumentError(f"model inputs are {self.input_names}; missing {missing}, "
                                    f"unknown {extra}")
            arrays = [inputs[n] for n in self.input_names]
        else:
            arrays = list(inputs)
            if len(arrays) != len(self.input_names):
                raise ArgumentError(f"the model takes {len(self.input_names)} inputs "
                                    f"{self.input_names}, got {len(arrays)}")
        # np.asarray, not np.ascontiguousarray, which makes 0-d arrays 1-d
        feeds: dict[str, np.ndarray] = {}
        self._structure = {}
        for n, a in zip(self.input_names, arrays):
            if n in self._containers:
                self._structure[n], flat = flatten_feed(n, self._containers[n], a)
                feeds.update(flat)
            else:
                feeds[n] = np.asarray(a, order="C")
        for vi in self.inputs:
            if vi.name not in self._containers:
                self._check_shape(vi, feeds[vi.name].shape)
        return feeds

    def _check_shape(self, vi: Any, shape: tuple[int, ...]) -> None:
        fixed = self.input_shapes.get(vi.name)
        if fixed is not None:
            if tuple(shape) != fixed:
                raise ArgumentError(f"input '{vi.name}': shape {tuple(shape)}, but the model "
                                    f"was compiled with input_shapes {fixed}")
            return
        declared = self._fits[vi.name]
        if declared is None:
            return
        if len(declared) != len(shape) or any(d is not None and d != s
                                              for d, s in zip(declared, shape)):
            text = "(" + ", ".join("?" if d is None else str(d) for d in declared) + ")"
            raise ArgumentError(f"input '{vi.name}': shape {tuple(shape)} does not fit the "
                                f"model's {text}")

    # specializing ----------------------------------------------------------------------
    def _make_step(self, feeds: Mapping[str, np.ndarray], bound: Mapping[str, np.ndarray]
                   ) -> _Step:
        """The next step for these input shapes and bound values: the main program if
        the model imports with them, else a shape program for values it still needs."""
        names: list[str] | None = None          # None: the whole model
        fetch: list[str] | None = None
        host: list[Any] = []
        for _ in range(MAX_STEPS):
            try:
                graph, layouts = self._import(feeds, bound, fetch)
            except UnsupportedModelError as err:
                needed = sorted(set(err.dynamic_values) - set(bound) - set(fetch or ()))
                if not needed:
                    raise
                names = needed                  # compute these first (they come earlier)
                fetch, host = self._host_split(names, bound)
                continue
            self.compiles += 1
            return _Step(tuple(names or ()), Program(graph, self.compile_graph),
                         tuple(fetch or ()), tuple(host), layouts)
        raise UnsupportedModelError([f"values needed as constants keep growing after "
                                     f"{MAX_STEPS} rounds: {names}"], frozenset(names or ()))

    def _host_split(self, names: Sequence[str], bound: Mapping[str, np.ndarray]
                    ) -> tuple[list[str], list[Any]]:
        """What a shape program must compute for `names` when the data-dependent nodes
        producing some of them (and those they read, recursively) run on the host."""
        nodes = list(self.model.graph.node)
        producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
        host: set[int] = set()
        fetch: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            index = producer.get(name)
            if index is not None and nodes[index].op_type in HOST_OPS and name not in bound:
                if index not in host:
                    host.add(index)
                    todo += [i for i in nodes[index].input if i]
            else:
                fetch.add(name)
        return sorted(fetch), [nodes[i] for i in sorted(host)]

    def _import(self, feeds: Mapping[str, np.ndarray], bound: Mapping[str, np.ndarray],
                names: list[str] | None) -> tuple[Graph, tuple[Layout, ...]]:
        # only the shapes the model leaves open: a declared shape stays the model's own
        shapes: dict[str, Any] = {n: feeds[n].shape for n in self.input_names
                                  if n not in bound and n not in self._declared
                                  and n not in self._containers}
        shapes.update(self._structure)
        try:
            return import_onnx(self.model, shapes, dict(bound), outputs=names,
                               evaluate=evaluate_node)
        except ShapeError as err:
            raise ShapeError(f"for input shapes { {n: tuple(s) for n, s in shapes.items()} }: "
                             f"{err}") from None

    def _unbound(self, feeds: Mapping[str, np.ndarray], bound: Mapping[str, np.ndarray]
                 ) -> dict[str, np.ndarray]:
        return {n: a for n, a in feeds.items() if n not in bound}


def needs_specialization(model: Any, input_shapes: Mapping[str, Sequence[int]] | None
                         ) -> bool:
    """Whether an ONNX model has input dims that input_shapes leave undecided (symbolic,
    unknown, or declared -1 / 0), or sequence or optional inputs or outputs."""
    proto = load_model(model)
    given = input_shapes or {}
    initializers = {t.name for t in proto.graph.initializer}
    if any(not is_tensor_type(vi.type) for vi in [*proto.graph.input, *proto.graph.output]
           if vi.name not in initializers):
        return True             # sequences and optionals: structure from each run's values
    for vi in proto.graph.input:
        if vi.name in initializers or vi.name in given:
            continue
        tensor = vi.type.tensor_type
        if vi.type.WhichOneof("value") != "tensor_type" or not tensor.HasField("shape"):
            return True
        if any(not (d.HasField("dim_value") and d.dim_value > 0) for d in tensor.shape.dim):
            return True
    return False


def _declared_dims(vi: Any) -> tuple[int | None, ...] | None:
    """The input's dims, None for each one left open (symbolic, unknown, <= 0); None when
    the input declares no shape."""
    tensor = vi.type.tensor_type
    if vi.type.WhichOneof("value") != "tensor_type" or not tensor.HasField("shape"):
        return None
    return tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
                 for d in tensor.shape.dim)


def _declared_shape(vi: Any) -> tuple[int, ...] | None:
    """The input's shape when the model declares every dim (> 0), else None."""
    tensor = vi.type.tensor_type
    if vi.type.WhichOneof("value") != "tensor_type" or not tensor.HasField("shape"):
        return None
    dims = tensor.shape.dim
    if any(not (d.HasField("dim_value") and d.dim_value > 0) for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def _numpy_dtype(code: int) -> np.dtype | None:
    from ember.frontend.onnx_fold import onnx_dtype
    from ember.errors import UnsupportedOpError

    try:
        return np.dtype(onnx_dtype(code, "input").numpy)
    except UnsupportedOpError:
        return None
