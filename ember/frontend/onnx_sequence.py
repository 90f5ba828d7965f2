"""ONNX sequences and optionals, resolved while importing.

ember's graph holds tensors only. A sequence whose length is known when the model is
imported is a Python tuple of tensor Values (`SequenceValue`), an optional is a Value, a
sequence or nothing (`OptionalValue`); the sequence and optional ops
(SequenceConstruct/At/Insert/Erase/Length/Empty, SplitToSequence, ConcatFromSequence,
SequenceMap, Optional, OptionalHasElement, OptionalGetElement) rearrange those lists at
import time, and only the tensor ops between them reach the graph.

At the model's boundary a sequence is a Python list of arrays and an optional is None or
its element. A sequence input `x` of n tensors is the graph inputs `x[0]` ... `x[n-1]`
(its length and shapes are part of the import, as a tensor input's shape is), and an
output is flattened the same way; `Layout` records the structure so that a run can give
lists back (`unflatten`). Sequence positions (SequenceAt, SequenceInsert, ...) must be
known at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence, Union

import numpy as np

from ember.dtype import DType
from ember.errors import ArgumentError, ModelError, ShapeError, UnsupportedOpError
from ember.graph.ir import GraphBuilder, Value
from ember.types import check_shape
from ember.frontend.onnx_fold import onnx_dtype

if TYPE_CHECKING:
    from onnx import TypeProto

    from ember.frontend.onnx import NodeContext, _Importer


@dataclass(frozen=True, eq=False)
class SequenceValue:
    """An ONNX sequence during import: its tensors in order; `dtype` is the element type
    (known even when the sequence is empty)."""

    items: tuple[Value, ...]
    dtype: DType


@dataclass(frozen=True, eq=False)
class OptionalValue:
    """An ONNX optional during import: its element, or None when it is empty."""

    item: Value | SequenceValue | None


Container = (SequenceValue, OptionalValue)
Imported = Union[Value, SequenceValue, OptionalValue]


# layouts: the structure of a flattened value ---------------------------------------------
@dataclass(frozen=True)
class SeqLayout:
    items: tuple["Layout", ...]


@dataclass(frozen=True)
class OptLayout:
    item: "Layout | None"


TENSOR = "tensor"
Layout = Union[str, SeqLayout, OptLayout]


def flatten(value: Imported) -> tuple[Layout, list[Value]]:
    """The tensors of an imported value in order, and its structure."""
    if isinstance(value, SequenceValue):
        parts = [flatten(v) for v in value.items]
        return SeqLayout(tuple(p[0] for p in parts)), [v for p in parts for v in p[1]]
    if isinstance(value, OptionalValue):
        if value.item is None:
            return OptLayout(None), []
        layout, values = flatten(value.item)
        return OptLayout(layout), values
    return TENSOR, [value]


def unflatten(layout: Layout, arrays: Iterator[np.ndarray]) -> Any:
    """The Python value (array, list of arrays, None) of `layout` from the flat arrays."""
    if isinstance(layout, SeqLayout):
        return [unflatten(item, arrays) for item in layout.items]
    if isinstance(layout, OptLayout):
        return None if layout.item is None else unflatten(layout.item, arrays)
    return next(arrays)


def is_tensor_type(type_proto: TypeProto) -> bool:
    return type_proto.WhichOneof("value") == "tensor_type"


# graph inputs -----------------------------------------------------------------------------
def flatten_feed(name: str, type_proto: TypeProto, value: Any
                 ) -> tuple[Any, dict[str, np.ndarray]]:
    """A run's value for a graph input of type `type_proto`: the shapes to import it with
    (a shape, a list of them for a sequence, None for an empty optional) and its arrays
    under their flat input names."""
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        if not isinstance(value, (list, tuple)):
            raise ArgumentError(f"input '{name}' is a sequence: pass a list of arrays, not "
                                f"{type(value).__name__}")
        shapes, flat = [], {}
        for index, item in enumerate(value):
            shape, part = flatten_feed(f"{name}[{index}]", type_proto.sequence_type.elem_type,
                                       item)
            shapes.append(shape)
            flat.update(part)
        return shapes, flat
    if kind == "optional_type":
        if value is None:
            return None, {}
        return flatten_feed(name, type_proto.optional_type.elem_type, value)
    if kind != "tensor_type":
        raise ArgumentError(f"input '{name}': values of kind {kind} are not supported")
    if isinstance(value, (list, tuple)) or value is None:
        raise ArgumentError(f"input '{name}' is a tensor: pass an array, not "
                            f"{type(value).__name__}")
    array = np.asarray(value, order="C")
    return array.shape, {name: array}


def container_input(builder: GraphBuilder, name: str, type_proto: TypeProto, shapes: Any
                    ) -> Imported:
    """The imported value of a sequence or optional graph input (or a tensor inside one)
    whose run-time structure is `shapes` (as flatten_feed gives it)."""
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        elem = type_proto.sequence_type.elem_type
        if not isinstance(shapes, (list, tuple)) or any(isinstance(s, int) for s in shapes):
            raise ShapeError(f"graph input '{name}' is a sequence: pass input_shapes="
                             f"{{'{name}': [shape, ...]}} (one shape per element)")
        items = [container_input(builder, f"{name}[{i}]", elem, s) for i, s in enumerate(shapes)]
        if any(not isinstance(v, Value) for v in items):
            raise UnsupportedOpError(f"graph input '{name}': sequences of sequences or "
                                     "optionals are not supported")
        return SequenceValue(tuple(items), _elem_dtype(elem, name))  # type: ignore[arg-type]
    if kind == "optional_type":
        if shapes is None:
            return OptionalValue(None)
        item = container_input(builder, name, type_proto.optional_type.elem_type, shapes)
        if isinstance(item, OptionalValue):
            raise UnsupportedOpError(f"graph input '{name}': optionals of optionals are not "
                                     "supported")
        return OptionalValue(item)
    if kind != "tensor_type":
        raise UnsupportedOpError(f"graph input '{name}': values of kind {kind} are not "
                                 "supported")
    dtype = onnx_dtype(type_proto.tensor_type.elem_type, f"graph input '{name}'")
    shape = check_shape(shapes, f"input_shapes['{name}']")
    tensor = type_proto.tensor_type
    if tensor.HasField("shape"):
        dims = tensor.shape.dim
        if len(dims) != len(shape) or any(d.HasField("dim_value") and d.dim_value > 0 and
                                          d.dim_value != s for d, s in zip(dims, shape)):
            raise ShapeError(f"graph input '{name}': shape {shape} does not fit the declared "
                             f"element shape of rank {len(dims)}")
    value = builder.input(name, shape, dtype)
    if value.name != name:
        raise ModelError(f"graph input '{name}': the name is already taken by another value")
    return value


def _elem_dtype(type_proto: TypeProto, where: str) -> DType:
    if not is_tensor_type(type_proto):
        raise UnsupportedOpError(f"'{where}': sequences of {type_proto.WhichOneof('value')} "
                                 "are not supported")
    return onnx_dtype(type_proto.tensor_type.elem_type, f"'{where}'")


def check_declared(name: str, type_proto: TypeProto, value: Imported) -> None:
    """A graph output's declared kind (tensor, sequence, optional) and element type must be
    what the graph computes."""
    kind = type_proto.WhichOneof("value")
    got = ("a sequence" if isinstance(value, SequenceValue) else
           "an optional" if isinstance(value, OptionalValue) else "a tensor")
    want = {"sequence_type": "a sequence", "optional_type": "an optional",
            "tensor_type": "a tensor"}.get(kind or "")
    if want is not None and want != got:
        raise ModelError(f"graph output '{name}' is declared {want} but the graph computes "
                         f"{got}")
    if isinstance(value, SequenceValue):
        elem = type_proto.sequence_type.elem_type
        if is_tensor_type(elem) and elem.tensor_type.elem_type:
            declared = onnx_dtype(elem.tensor_type.elem_type, f"graph output '{name}'")
            if declared != value.dtype:
                raise ModelError(f"graph output '{name}' is declared a sequence of {declared} "
                                 f"but the graph computes one of {value.dtype}")


# converters ---------------------------------------------------------------------------------
MAX_CONCAT_INPUTS = 32      # wider concatenations are built as a tree of Concats


def concat(builder: GraphBuilder, values: Sequence[Value], axis: int, name: str,
           output_name: str = "") -> Value:
    """The values concatenated along `axis`; a long list (an unrolled loop's outputs) as a
    tree of Concats, since one Concat kernel chains a selection per input."""
    values = list(values)
    if len(values) == 1:
        return values[0]
    while len(values) > MAX_CONCAT_INPUTS:
        values = [concat(builder, values[i:i + MAX_CONCAT_INPUTS], axis, f"{name}/part")
                  for i in range(0, len(values), MAX_CONCAT_INPUTS)]
    return builder.add("Concat", values, {"axis": axis}, name=name,
                       output_names=[output_name])[0]


def _sequence(ctx: NodeContext, index: int = 0) -> SequenceValue:
    value = ctx.values[index] if index < len(ctx.values) else None
    if isinstance(value, OptionalValue) and isinstance(value.item, SequenceValue):
        value = value.item
    if not isinstance(value, SequenceValue):
        raise ModelError(f"node '{ctx.label}' ({ctx.op}): input {index} "
                         f"('{ctx.node.input[index] if index < len(ctx.node.input) else ''}') "
                         "must be a sequence")
    return value


def _tensor(ctx: NodeContext, index: int) -> Value:
    value = ctx.values[index] if index < len(ctx.values) else None
    if not isinstance(value, Value):
        raise ModelError(f"node '{ctx.label}' ({ctx.op}): input {index} must be a tensor")
    return value


def _position(imp: _Importer, ctx: NodeContext, index: int, length: int, default: int,
              upper: int) -> int:
    """The position input `index` (known at import), range-checked to [-length, upper]."""
    value = ctx.values[index] if index < len(ctx.values) else None
    if value is None:
        return default
    if not isinstance(value, Value) or value.type.size != 1 or \
            str(value.type.dtype) not in ("int32", "int64"):
        raise ModelError(f"node '{ctx.label}' ({ctx.op}): 'position' must be an int32 or "
                         "int64 scalar")
    position = int(np.asarray(imp._need_constant(ctx, "position", value)).reshape(-1)[0])
    if not -length <= position <= upper:
        raise ShapeError(f"node '{ctx.label}' ({ctx.op}): position {position} is out of range "
                         f"for a sequence of {length} tensors (expected {-length}..{upper})")
    return position + length if position < 0 else position


def _check_element(ctx: NodeContext, seq_dtype: DType, value: Value) -> None:
    if value.type.dtype != seq_dtype:
        raise ModelError(f"node '{ctx.label}' ({ctx.op}): a {value.type.dtype} tensor cannot "
                         f"join a sequence of {seq_dtype}")


def convert_sequence_empty(imp: _Importer, ctx: NodeContext) -> list[Any]:
    dtype = onnx_dtype(int(ctx.attrs.get("dtype", 1)), f"node '{ctx.label}' attribute 'dtype'")
    return [SequenceValue((), dtype)]


def convert_sequence_construct(imp: _Importer, ctx: NodeContext) -> list[Any]:
    items = [_tensor(ctx, i) for i in range(len(ctx.values))]
    if not items:
        raise ModelError(f"node '{ctx.label}' (SequenceConstruct): needs at least one input")
    for item in items[1:]:
        _check_element(ctx, items[0].type.dtype, item)
    return [SequenceValue(tuple(items), items[0].type.dtype)]


def convert_sequence_insert(imp: _Importer, ctx: NodeContext) -> list[Any]:
    seq, tensor = _sequence(ctx), _tensor(ctx, 1)
    _check_element(ctx, seq.dtype, tensor)
    n = len(seq.items)
    at = _position(imp, ctx, 2, n, n, n)
    return [SequenceValue(seq.items[:at] + (tensor,) + seq.items[at:], seq.dtype)]


def convert_sequence_at(imp: _Importer, ctx: NodeContext) -> list[Any]:
    seq = _sequence(ctx)
    n = len(seq.items)
    if ctx.values[1] is None:
        raise ModelError(f"node '{ctx.label}' (SequenceAt): 'position' is required")
    return [seq.items[_position(imp, ctx, 1, n, 0, n - 1)]]


def convert_sequence_erase(imp: _Importer, ctx: NodeContext) -> list[Any]:
    seq = _sequence(ctx)
    n = len(seq.items)
    if n == 0:
        raise ShapeError(f"node '{ctx.label}' (SequenceErase): the sequence is empty")
    at = _position(imp, ctx, 1, n, n - 1, n - 1)
    return [SequenceValue(seq.items[:at] + seq.items[at + 1:], seq.dtype)]


def convert_sequence_length(imp: _Importer, ctx: NodeContext) -> list[Any]:
    return [imp.constant(ctx, np.array(len(_sequence(ctx).items), np.int64))]


def convert_split_to_sequence(imp: _Importer, ctx: NodeContext) -> list[Any]:
    """Pieces along `axis`: of size `split` (a scalar; the last may be smaller), of the
    sizes `split` lists, or of size 1 (squeezed unless keepdims) without `split`."""
    x = _tensor(ctx, 0)
    rank = x.type.ndim
    axis = int(ctx.attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise ShapeError(f"node '{ctx.label}' (SplitToSequence): axis {axis} is out of range "
                         f"for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    dim = x.type.shape[axis]
    split = ctx.values[1] if len(ctx.values) > 1 else None
    squeeze = False
    if split is None:
        sizes = [1] * dim
        squeeze = not int(ctx.attrs.get("keepdims", 1))
    else:
        given = np.asarray(imp._need_constant(ctx, "split", _tensor(ctx, 1)))
        if given.ndim == 0:
            step = int(given)
            if step <= 0:
                raise ShapeError(f"node '{ctx.label}' (SplitToSequence): split {step} must be "
                                 "positive")
            sizes = [min(step, dim - start) for start in range(0, dim, step)]
        else:
            sizes = [int(s) for s in given.reshape(-1)]
            if sum(sizes) != dim or min(sizes, default=0) < 0:
                raise ShapeError(f"node '{ctx.label}' (SplitToSequence): split sizes "
                                 f"{tuple(sizes)} do not add up to dimension {axis} ({dim})")
    items: list[Value] = []
    start = 0
    for index, size in enumerate(sizes):
        (piece,) = imp.builder.add("Slice", [x], {"starts": (start,), "ends": (start + size,),
                                                  "axes": (axis,)},
                                   name=f"{ctx.label}/{index}")
        if squeeze:
            (piece,) = imp.builder.add("Squeeze", [piece], {"axes": (axis,)},
                                       name=f"{ctx.label}/{index}/squeeze")
        items.append(piece)
        start += size
    return [SequenceValue(tuple(items), x.type.dtype)]


def convert_concat_from_sequence(imp: _Importer, ctx: NodeContext) -> list[Any]:
    seq = _sequence(ctx)
    if not seq.items:
        raise ShapeError(f"node '{ctx.label}' (ConcatFromSequence): the sequence is empty")
    axis = int(ctx.attrs.get("axis", 0))
    items = list(seq.items)
    if int(ctx.attrs.get("new_axis", 0)):
        rank = items[0].type.ndim + 1
        if not -rank <= axis < rank:
            raise ShapeError(f"node '{ctx.label}' (ConcatFromSequence): axis {axis} is out of "
                             f"range for new_axis on rank {rank - 1}")
        items = [imp.builder.add("Unsqueeze", [v], {"axes": (axis,)},
                                 name=f"{ctx.label}/unsqueeze")[0] for v in items]
    rank = items[0].type.ndim
    if not -rank <= axis < rank:
        raise ShapeError(f"node '{ctx.label}' (ConcatFromSequence): axis {axis} is out of "
                         f"range for rank {rank}")
    return [concat(imp.builder, items, axis, ctx.label, ctx.node.output[0])]


def convert_sequence_map(imp: _Importer, ctx: NodeContext) -> list[Any]:
    """The body once per position of the sequences (every sequence input has the same
    length; tensor inputs are passed to every iteration as they are)."""
    body = ctx.attrs["body"]
    first = _sequence(ctx)
    n = len(first.items)
    for index, value in enumerate(ctx.values):
        if isinstance(value, SequenceValue) and len(value.items) != n:
            raise ShapeError(f"node '{ctx.label}' (SequenceMap): input {index} has "
                             f"{len(value.items)} tensors, input 0 has {n}")
    imp.count_unrolled(ctx, n, body)
    outputs: list[list[Value]] = [[] for _ in body.output]
    for t in range(n):
        bindings = {formal.name: value.items[t] if isinstance(value, SequenceValue) else value
                    for formal, value in zip(body.input, ctx.values)}
        results = imp.run_graph(ctx, body, f"{ctx.label}/{t}/", bindings)
        if results is None:
            return imp.failed(len(body.output))
        for collected, value in zip(outputs, results):
            if not isinstance(value, Value):
                raise UnsupportedOpError("a body output that is not a tensor is not supported")
            collected.append(value)
    results = []
    for index, (formal, items) in enumerate(zip(body.output, outputs)):
        if items:
            dtype = items[0].type.dtype
        elif is_tensor_type(formal.type) and formal.type.tensor_type.elem_type:
            dtype = onnx_dtype(formal.type.tensor_type.elem_type, f"body output {index}")
        else:
            raise ModelError(f"node '{ctx.label}' (SequenceMap): body output {index} has no "
                             "declared element type, needed for an empty sequence")
        results.append(SequenceValue(tuple(items), dtype))
    return results


def convert_optional(imp: _Importer, ctx: NodeContext) -> list[Any]:
    value = ctx.values[0] if ctx.values else None
    if value is None and "type" not in ctx.attrs:
        raise ModelError(f"node '{ctx.label}' (Optional): without an input it needs the "
                         "'type' attribute")
    if isinstance(value, OptionalValue):
        raise UnsupportedOpError("an optional of an optional is not supported")
    return [OptionalValue(value)]


def convert_optional_has_element(imp: _Importer, ctx: NodeContext) -> list[Any]:
    """A tensor or a sequence holds an element, an absent input or an empty optional not."""
    value = ctx.values[0] if ctx.values else None
    present = value.item is not None if isinstance(value, OptionalValue) else value is not None
    return [imp.constant(ctx, np.array(present))]


def convert_optional_get_element(imp: _Importer, ctx: NodeContext) -> list[Any]:
    value = ctx.values[0] if ctx.values else None
    if isinstance(value, OptionalValue):
        if value.item is None:
            raise ShapeError(f"node '{ctx.label}' (OptionalGetElement): the optional is empty")
        return [value.item]
    if value is None:
        raise ModelError(f"node '{ctx.label}' (OptionalGetElement): the input is missing")
    return [value]


CONVERTERS = {
    "SequenceEmpty": convert_sequence_empty,
    "SequenceConstruct": convert_sequence_construct,
    "SequenceInsert": convert_sequence_insert,
    "SequenceAt": convert_sequence_at,
    "SequenceErase": convert_sequence_erase,
    "SequenceLength": convert_sequence_length,
    "SplitToSequence": convert_split_to_sequence,
    "ConcatFromSequence": convert_concat_from_sequence,
    "SequenceMap": convert_sequence_map,
    "Optional": convert_optional,
    "OptionalHasElement": convert_optional_has_element,
    "OptionalGetElement": convert_optional_get_element,
}

# ops that take or give sequences and optionals (any other op takes tensors only)
CONTAINER_OPS = frozenset(CONVERTERS) | {"Identity", "If", "Loop", "Scan"}


def container_kind(value: Any) -> str | None:
    """'a sequence' / 'an optional' for container values, None for tensors."""
    if isinstance(value, SequenceValue):
        return "a sequence"
    if isinstance(value, OptionalValue):
        return "an optional"
    return None


def flat_names(name: str, layout: Layout) -> list[str]:
    """The flat graph-input names of an input `name` imported with `layout`."""
    if isinstance(layout, SeqLayout):
        return [n for i, item in enumerate(layout.items) for n in flat_names(f"{name}[{i}]",
                                                                             item)]
    if isinstance(layout, OptLayout):
        return [] if layout.item is None else flat_names(name, layout.item)
    return [name]


__all__ = ["SequenceValue", "OptionalValue", "Layout", "SeqLayout", "OptLayout", "TENSOR",
           "flatten", "unflatten", "flatten_feed", "container_input", "check_declared",
           "CONVERTERS", "CONTAINER_OPS", "container_kind", "flat_names"]

