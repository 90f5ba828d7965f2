"""Ops on storage-only types (bfloat16, float8, int4, ...) computed in a wider type.

ember stores these types but computes only conversions on them. Any other op whose inputs
include one is imported as Cast(inputs to their compute type: float32, int8 or uint8), the
op, and Cast(outputs back): each output whose ONNX type constraint is that of a
storage-only input gets that input's type again. Rounding happens once per op, as in
onnxruntime, which also computes bfloat16 ops in float32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import onnx

from ember.dtype import DType
from ember.frontend.onnx_fold import elem_type
from ember.graph.ir import Value

if TYPE_CHECKING:
    from ember.frontend.onnx import NodeContext, _Importer

# ops that read storage-only values as they are: conversions, and ops reading only the type
CONVERSIONS = frozenset({"Cast", "CastLike", "BitCast", "QuantizeLinear", "DequantizeLinear",
                         "Identity", "Shape", "Size"})


def _type_params(op: str, opset: int, domain: str) -> tuple[list[str], list[str]] | None:
    """The type-constraint names (e.g. "T") of `op`'s inputs and outputs; None without a
    schema."""
    try:
        schema = onnx.defs.get_schema(op, opset, domain)
    except onnx.defs.SchemaError:
        return None
    return [f.type_str for f in schema.inputs], [f.type_str for f in schema.outputs]


def widened(imp: _Importer, ctx: NodeContext,
            convert: Callable[[NodeContext], Sequence[Value | None]]
            ) -> Sequence[Value | None] | None:
    """`ctx`'s node computed in wider types, or None when it needs no widening."""
    narrow = {i: v.type.dtype for i, v in enumerate(ctx.values)   # tensors (not sequences)
              if isinstance(v, Value) and v.type.dtype.is_storage_only}
    if not narrow or ctx.op in CONVERSIONS:
        return None
    from ember.frontend.onnx import _UNKNOWN, NodeContext

    values: list[Value | None] = []
    for i, v in enumerate(ctx.values):
        if i in narrow and v is not None:
            wide = _cast(imp, v, v.type.dtype.compute, f"{ctx.label}/widen{i}")
            if v in imp.deps:        # the graph inputs it comes from, for specialization
                imp.deps[wide] = imp.deps[v]
            v = wide
        values.append(v)
    outputs = list(convert(NodeContext(ctx.node, ctx.label, ctx.opsets, values, ctx.env,
                                       ctx.attrs)))
    params = _type_params(ctx.op, ctx.opset, ctx.node.domain)
    for k, out in enumerate(outputs):
        if out is None or out is _UNKNOWN:   # not imported: the problem is recorded
            continue
        target = _output_type(k, out, narrow, params)
        if target is not None:
            outputs[k] = _cast(imp, out, target, f"{ctx.label}/narrow{k}")
    return outputs


def _output_type(k: int, out: Value, narrow: dict[int, DType],
                 params: tuple[list[str], list[str]] | None) -> DType | None:
    """The storage-only type output `k` has in ONNX, or None when it keeps its type."""
    if params is None:   # no schema: an output in the compute type of a narrow input
        same = [d for d in narrow.values() if d.compute == out.type.dtype]
        return same[0] if same else None
    inputs, outputs = params
    if k >= len(outputs) or not inputs:
        return None
    for i, dtype in narrow.items():
        formal = inputs[min(i, len(inputs) - 1)]
        if formal == outputs[k] and out.type.dtype == dtype.compute:
            return dtype
    return None


def _cast(imp: _Importer, v: Value, dtype: DType, name: str) -> Value:
    return imp.builder.add("Cast", [v], {"to": elem_type(dtype)}, name=name)[0]
