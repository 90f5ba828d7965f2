"""PyTorch import: a torch.nn.Module, through torch.export, becomes an ember Graph.

    graph = from_torch(model.eval(), (torch.randn(1, 3, 224, 224),))

The module is exported with `torch.export.export` and decomposed to the core ATen operator
set; each ATen call is converted by the table in `torch_ops.ATEN` into ember ops (which
follow ONNX). Parameters, buffers and lifted constants become graph constants; user inputs
become graph inputs, named as torch.export names them (the forward's argument names).
Every unsupported ATen operator is collected, with the source line torch.export recorded
for it, and reported at once in one UnsupportedOperatorsError.

ember compiles static shapes: symbolic dims declared with `dynamic_shapes` are exported
symbolically but specialized to the example inputs' sizes in the ember graph.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ember import dtype as dt
from ember.errors import ArgumentError, EmberError, ModelError, ShapeError, UnsupportedOpError
from ember.frontend.report import UnsupportedOperatorsError
from ember.graph.ir import Graph, GraphBuilder, Value, constant

try:
    import torch
    import torch.fx
except ImportError as _err:  # pragma: no cover - torch is an optional dependency
    raise ImportError("importing PyTorch models needs torch: pip install 'ember[torch]'"
                      ) from _err

__all__ = ["from_torch", "from_exported_program", "UnsupportedOperatorsError", "torch_dtype"]

_TORCH_DTYPES: dict[Any, str] = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool",
}


def torch_dtype(value: Any, where: str) -> dt.DType:
    """The ember dtype of a torch.dtype; UnsupportedOpError naming `where` otherwise."""
    if value not in _TORCH_DTYPES:
        raise UnsupportedOpError(f"{where}: data type {value} is not supported (supported: "
                                 f"{', '.join(_TORCH_DTYPES.values())})")
    return dt.parse(_TORCH_DTYPES[value])


def from_torch(module: Any, example_inputs: Sequence[Any] | Any,
               dynamic_shapes: Any = None) -> Graph:
    """Export `module` (a torch.nn.Module, put in eval mode by the caller) with torch.export
    on `example_inputs` and import it as an ember Graph.

        graph = from_torch(net.eval(), (torch.randn(1, 3, 32, 32),))
    """
    if not isinstance(module, torch.nn.Module):
        raise ArgumentError(f"from_torch: expected a torch.nn.Module, got "
                            f"{type(module).__name__}")
    args = _example_tuple(example_inputs)
    try:
        program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
    except Exception as err:  # noqa: BLE001 - export raises many kinds; report its reason
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"torch.export could not capture {type(module).__name__}: "
                         f"{type(err).__name__}: {first}") from err
    return from_exported_program(program, args, name=type(module).__name__)


def _example_tuple(example_inputs: Any) -> tuple[Any, ...]:
    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) \
        else (example_inputs,)
    for index, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            raise ArgumentError(f"from_torch: example input {index} is a "
                                f"{type(arg).__name__}; only tensors are supported")
    return args


def from_exported_program(program: Any, example_inputs: Sequence[Any] = (),
                          constant_inputs: Mapping[int, np.ndarray] | None = None,
                          name: str = "torch_model") -> Graph:
    """Import a torch.export ExportedProgram (decomposed to core ATen here).

    example_inputs: the user inputs' tensors, which fix sizes left symbolic in the program;
    constant_inputs: user inputs (by position) whose values are fixed, made constants."""
    program = program.run_decompositions(_decompositions())
    return _Importer(program, list(example_inputs), dict(constant_inputs or {}), name).run()


def _decompositions() -> Any:
    """torch.export's core ATen table, keeping the operators ember converts as a whole
    (attention: its decomposition retraces views that some models cannot replay)."""
    table = torch.export.default_decompositions()
    for op in (torch.ops.aten.scaled_dot_product_attention.default,):
        table.pop(op, None)
    return table


_UNKNOWN: Any = Value.__new__(Value)  # a value that could not be imported (see `problems`)


@dataclass
class Call:
    """One ATen call being converted: its node, bound arguments and where it came from."""

    node: torch.fx.Node
    label: str
    target: str                       # "aten.convolution.default"
    args: dict[str, Any]              # schema name -> ember Value, python value or list

    def __getitem__(self, key: str) -> Any:
        return self.args[key]

    @property
    def out_dtype(self) -> dt.DType:
        """The dtype torch.export recorded for the (first) output."""
        val = self.node.meta.get("val")
        if isinstance(val, (list, tuple)):
            val = val[0]
        if not isinstance(val, torch.Tensor):
            raise UnsupportedOpError("torch.export recorded no tensor type for the output")
        return torch_dtype(val.dtype, f"node '{self.label}' ({self.target})")


Converter = Callable[["_Importer", Call], "Value | Sequence[Value | None] | None"]


class _Importer:
    """The state of one import: the builder, fx node -> value, problems found so far."""

    def __init__(self, program: Any, examples: list[Any], constant_inputs: dict[int, np.ndarray],
                 name: str) -> None:
        self.program = program
        self.examples = examples
        self.constant_inputs = constant_inputs
        self.builder = GraphBuilder(name)
        self.env: dict[torch.fx.Node, Any] = {}
        self.problems: list[str] = []
        self.call: Call | None = None

    def run(self) -> Graph:
        from ember.frontend.torch_ops import ATEN

        self._placeholders()
        outputs: list[Value] = []
        for node in self.program.graph.nodes:
            if node.op == "call_function":
                self._convert(node, ATEN)
            elif node.op == "output":
                outputs = self._outputs(node)
        if self.problems:
            raise UnsupportedOperatorsError("PyTorch", self.problems)
        return self.builder.finish(outputs)

    # graph level ------------------------------------------------------------------------
    def _placeholders(self) -> None:
        from torch.export.graph_signature import InputKind

        program = self.program
        nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
        user_index = 0
        for spec in program.graph_signature.input_specs:
            node = nodes[spec.arg.name]
            if spec.kind == InputKind.USER_INPUT:
                self.env[node] = self._user_input(node, user_index)
                user_index += 1
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER,
                               InputKind.CONSTANT_TENSOR):
                tensor = (program.state_dict.get(spec.target) if spec.target in
                          program.state_dict else program.constants.get(spec.target))
                self.env[node] = self._weight(spec.target, tensor)
            else:
                self.problems.append(f"input '{spec.arg.name}' of kind {spec.kind.name} is "
                                     "not supported")
                self.env[node] = _UNKNOWN
        if self.examples and user_index != len(self.examples):
            raise ArgumentError(f"the exported program has {user_index} tensor inputs but "
                                f"{len(self.examples)} example inputs were given")

    def _user_input(self, node: torch.fx.Node, index: int) -> Value:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise UnsupportedOpError(f"input '{node.name}': only tensor inputs are supported, "
                                     f"got {type(val).__name__}")
        if index in self.constant_inputs:
            return self.constant(node.name, np.asarray(self.constant_inputs[index]))
        dtype = torch_dtype(val.dtype, f"input '{node.name}'")
        if index < len(self.examples):
            shape = tuple(int(d) for d in self.examples[index].shape)
        elif all(isinstance(d, int) for d in val.shape):
            shape = tuple(int(d) for d in val.shape)
        else:
            raise ShapeError(f"input '{node.name}' has symbolic dims {tuple(val.shape)}; pass "
                             "example inputs to fix its sizes (ember compiles static shapes)")
        return self.builder.input(node.name, shape, dtype)

    def _weight(self, target: str, tensor: Any) -> Value:
        if not isinstance(tensor, torch.Tensor):
            self.problems.append(f"constant '{target}': a {type(tensor).__name__} (only "
                                 "tensors are supported)")
            return _UNKNOWN
        try:
            torch_dtype(tensor.dtype, f"parameter '{target}'")
        except UnsupportedOpError as err:
            self.problems.append(str(err))
            return _UNKNOWN
        return self.constant(target, tensor.detach().cpu().contiguous().numpy())

    def _outputs(self, node: torch.fx.Node) -> list[Value]:
        from torch.export.graph_signature import OutputKind

        results = node.args[0]
        outputs: list[Value] = []
        for spec, value in zip(self.program.graph_signature.output_specs, results):
            if spec.kind != OutputKind.USER_OUTPUT:
                self.problems.append(f"output '{spec.arg.name}' of kind {spec.kind.name} "
                                     "(the model mutates a buffer or input) is not supported")
                continue
            item = self.env.get(value) if isinstance(value, torch.fx.Node) else value
            if item is _UNKNOWN:
                continue
            if not isinstance(item, Value):
                self.problems.append(f"output '{spec.arg.name}' is a {type(item).__name__}; "
                                     "only tensor outputs are supported")
                continue
            outputs.append(item)
        return outputs

    # nodes ------------------------------------------------------------------------------
    def _convert(self, node: torch.fx.Node, table: Mapping[str, Converter]) -> None:
        target = node.target
        if target is operator.getitem:
            self.env[node] = self._getitem(node)
            return
        if target in _PYTHON_OPS:                    # arithmetic on (specialized) sizes
            args = [self._arg(a) for a in node.args]
            self.env[node] = _PYTHON_OPS[target](*args)
            return
        name = str(target)
        if not isinstance(target, torch._ops.OpOverload):
            self._problem(node, name, f"call of {name} is not an ATen operator")
            return
        args = self._bind(node, target)
        packet = target.overloadpacket.__name__
        converter = table.get(packet) if target.namespace == "aten" else None
        if converter is None:
            self._problem(node, name, f"operator {name} is not supported")
            return
        if any(_has_unknown(a) for a in args.values()):
            self.env[node] = _UNKNOWN                 # its cause is already reported
            return
        self.call = Call(node, node.name, name, args)
        try:
            result = converter(self, self.call)
            self.env[node] = result
            self._check_shape(node, result)
        except UnsupportedOpError as err:
            self._problem(node, name, str(err))

    def _bind(self, node: torch.fx.Node, target: Any) -> dict[str, Any]:
        """The call's arguments by schema name, defaults filled, fx nodes resolved."""
        bound: dict[str, Any] = {}
        for index, formal in enumerate(target._schema.arguments):
            if index < len(node.args):
                value = node.args[index]
            elif formal.name in node.kwargs:
                value = node.kwargs[formal.name]
            elif formal.has_default_value():
                value = formal.default_value
            else:
                value = None
            bound[formal.name] = self._arg(value)
        return bound

    def _arg(self, value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return self.env.get(value, _UNKNOWN)
        if isinstance(value, (list, tuple)):
            return [self._arg(v) for v in value]
        return value

    def _getitem(self, node: torch.fx.Node) -> Any:
        source, index = node.args
        items = self.env.get(source, _UNKNOWN)
        if items is _UNKNOWN:
            return _UNKNOWN
        item = items[index]
        if item is None:
            self._problem(node, str(source.target),
                          f"output {index} of {source.target} is not supported (it is only "
                          "computed for training: indices, saved statistics)")
            return _UNKNOWN
        return item

    def _check_shape(self, node: torch.fx.Node, result: Any) -> None:
        """The converted output's shape must be the one torch.export recorded (a converter
        bug otherwise); symbolic dims are not checked."""
        val = node.meta.get("val")
        if isinstance(result, Value) and isinstance(val, torch.Tensor) \
                and all(isinstance(d, int) for d in val.shape) \
                and tuple(val.shape) != result.type.shape:
            raise EmberError(f"node '{node.name}' ({node.target}): converted to shape "
                             f"{result.type.shape}, but torch.export recorded "
                             f"{tuple(val.shape)}")

    def _problem(self, node: torch.fx.Node, target: str, message: str) -> None:
        where = source_location(node)
        line = f"node '{node.name}' ({target}): {message}"
        self.problems.append(line + (f"\n      at {where}" if where else ""))
        self.env[node] = _UNKNOWN

    # building blocks for converters -----------------------------------------------------
    def add(self, op: str, inputs: Sequence[Value | None], attrs: Mapping[str, Any] | None = None
            ) -> tuple[Value, ...]:
        """Add one ember node named after the ATen call being converted."""
        label = self.call.label if self.call is not None else op.lower()
        return self.builder.add(op, list(inputs), dict(attrs or {}), name=label)

    def add1(self, op: str, inputs: Sequence[Value | None],
             attrs: Mapping[str, Any] | None = None) -> Value:
        return self.add(op, inputs, attrs)[0]

    def constant(self, name: str, array: np.ndarray) -> Value:
        if array.dtype.name not in _TORCH_DTYPES.values():
            raise UnsupportedOpError(f"constant '{name}': data type {array.dtype} is not "
                                     "supported")
        return constant(self.builder.unique(name), array)

    def scalar(self, value: float | int | bool, dtype: dt.DType) -> Value:
        label = self.call.label if self.call is not None else "scalar"
        return self.constant(f"{label}:scalar", np.array(value, dtype.numpy))

    def cast(self, value: Value, dtype: dt.DType) -> Value:
        if value.type.dtype == dtype:
            return value
        from ember.ops.elementwise import ONNX_DTYPES

        code = next(k for k, v in ONNX_DTYPES.items() if v == dtype)
        return self.add1("Cast", [value], {"to": code})


def _has_unknown(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return value is _UNKNOWN


def source_location(node: torch.fx.Node) -> str:
    """The innermost user frame torch.export recorded for `node`: 'file:line in fn: code'."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines()]
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith("File "):
            code = lines[index + 1] if index + 1 < len(lines) else ""
            return lines[index][5:] + (f": {code}" if code else "")
    return ""


# arithmetic on sizes, which stay Python ints once symbolic dims are specialized
_PYTHON_OPS: dict[Any, Callable[..., Any]] = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: operator.floordiv, operator.truediv: operator.truediv,
    operator.mod: operator.mod, operator.neg: operator.neg,
}
