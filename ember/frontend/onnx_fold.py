"""ONNX import helpers: dtypes and attributes as Python values, and the function bodies ONNX
defines for composite operators.

Nothing here computes a tensor: values of constant subgraphs are computed by ember's own
kernels (see `from_onnx`'s `evaluate`).
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, helper, numpy_helper

from ember import dtype as dt
from ember.dtype import DType
from ember.errors import ModelError, UnsupportedOpError

# the ONNX TensorProto data types ember holds, by number
_ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
               16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
               20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1",
               24: "float8e8m0", 25: "uint2", 26: "int2"}
_CODES = {name: code for code, name in _ONNX_TYPES.items()}
# numpy arrays of these dtypes (ml_dtypes' for the storage-only types) are held as they are
_NUMPY_TYPES = frozenset(dt.parse(n).numpy for n in _ONNX_TYPES.values())


def onnx_dtype(code: int, what: str) -> DType:
    """The ember dtype of ONNX TensorProto data type `code`; `what` names the value for errors."""
    if code not in _ONNX_TYPES:
        known = onnx.TensorProto.DataType.values()
        name = onnx.TensorProto.DataType.Name(code) if code in known else str(code)
        raise UnsupportedOpError(f"{what}: data type {name} is not supported (supported: "
                                 "float16/32/64, (u)int8/16/32/64, bool, bfloat16, float8*, "
                                 "float4e2m1, (u)int4, (u)int2)")
    return dt.parse(_ONNX_TYPES[code])


def elem_type(dtype: DType) -> int:
    """The ONNX TensorProto data type number of an ember dtype."""
    try:
        return _CODES[str(dtype.element)]
    except KeyError:
        raise UnsupportedOpError(f"data type {dtype} has no ONNX equivalent") from None


def supported_array(array: Any) -> bool:
    """Whether `array` is a numpy array of a dtype ember can hold."""
    return isinstance(array, np.ndarray) and array.dtype in _NUMPY_TYPES


def tensor_array(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    """The numpy value of a TensorProto; ModelError (naming `where` and the tensor) when its
    dims are negative or its data does not fill them (raw_data too short or too long)."""
    dims = tuple(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{where}: tensor '{tensor.name}' has negative dims {dims}")
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError, MemoryError) as error:
        raise ModelError(f"{where}: the data of tensor '{tensor.name}' does not match its dims "
                         f"{dims} and data type {tensor.data_type} ({error})") from None


def attribute_value(attr: AttributeProto, where: str) -> Any:
    """An ONNX attribute as a Python value: ints, floats, str, numpy arrays, tuples of those.

    Graph attributes stay GraphProtos (only converters that inline them accept them), type
    attributes TypeProtos."""
    kind = attr.type
    if kind == AttributeProto.INT:
        return int(attr.i)
    if kind == AttributeProto.FLOAT:
        return float(attr.f)
    if kind == AttributeProto.STRING:
        return attr.s.decode("utf-8", errors="replace")
    if kind == AttributeProto.TENSOR:
        return tensor_array(attr.t, f"{where}: attribute '{attr.name}'")
    if kind == AttributeProto.GRAPH:
        return attr.g
    if kind == AttributeProto.TYPE_PROTO:
        return attr.tp
    if kind == AttributeProto.INTS:
        return tuple(int(v) for v in attr.ints)
    if kind == AttributeProto.FLOATS:
        return tuple(float(v) for v in attr.floats)
    if kind == AttributeProto.STRINGS:
        return tuple(s.decode("utf-8", errors="replace") for s in attr.strings)
    if kind == AttributeProto.TENSORS:
        return tuple(tensor_array(t, f"{where}: attribute '{attr.name}'") for t in attr.tensors)
    kind_name = AttributeProto.AttributeType.Name(kind)
    raise UnsupportedOpError(f"{where}: attribute '{attr.name}' of kind {kind_name} is not "
                             "supported")


def as_attr(array: np.ndarray) -> Any:
    """A constant input passed as an attribute: a Python number (0-d) or a tuple (n-d)."""
    if array.ndim == 0:
        return array.item()
    return tuple(_plain(v) for v in array.tolist())


def _plain(value: Any) -> Any:
    return tuple(_plain(v) for v in value) if isinstance(value, list) else value


def schema_function(op: str, opset: int, node: NodeProto,
                    input_types: Sequence[tuple[DType, tuple[int, ...]] | None]
                    ) -> FunctionProto | None:
    """The function body ONNX defines for `op` at `opset` (None when it defines none)."""
    try:
        schema = onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None
    raw = b""
    plain = [v for v in schema.function_opset_versions if v <= opset]
    context = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if plain:
        raw = schema.get_function_with_opset_version(max(plain))
    elif context:
        types = []
        for t in input_types:
            proto = onnx.TypeProto() if t is None else \
                helper.make_tensor_type_proto(elem_type(t[0]), list(t[1]))
            types.append(proto.SerializeToString())
        try:
            raw = schema.get_context_dependent_function_with_opset_version(
                max(context), node.SerializeToString(), types)
        except Exception:  # noqa: BLE001 - the builder rejects this node: no function
            return None
    if not raw:
        return None
    func = FunctionProto()
    func.ParseFromString(raw)
    return func if len(func.node) else None


@functools.cache
def schema_input_types(op: str, opset: int, domain: str = "") -> tuple[tuple[str, frozenset[str],
                                                                           bool], ...] | None:
    """Per formal input of `op` at `opset`: (name, allowed type strings such as
    "tensor(float)", variadic?); None when onnx has no schema for it."""
    try:
        schema = onnx.defs.get_schema(op, opset, domain)
    except onnx.defs.SchemaError:
        return None
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs)
                   for c in schema.type_constraints}
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    return tuple((f.name, constraints.get(f.type_str, frozenset([f.type_str])),
                  f.option == variadic) for f in schema.inputs)


def type_string(dtype: DType) -> str:
    """ONNX's name of a tensor type: float32 -> "tensor(float)"."""
    names = {"float32": "float", "float64": "double", "float16": "float16",
             "bfloat16": "bfloat16", "bool": "bool"}
    text = str(dtype)
    return f"tensor({names.get(text, text)})"


def schema_defaults(op: str, opset: int) -> dict[str, AttributeProto]:
    """Default values of `op`'s attributes at `opset` (for function attribute references)."""
    try:
        schema = onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return {}
    out = {}
    for name, attr in schema.attributes.items():
        default = attr.default_value
        if default is not None and default.type != AttributeProto.UNDEFINED:
            out[name] = default
    return out
