"""Core ATen operators as ember ops: ATEN maps an operator's name to its converter.

A converter gets the importer and the Call (arguments bound by the operator's schema, tensors
already ember Values) and returns the output Value, or a tuple for multi-output operators
(None where an output is only computed for training). Elementwise operators follow torch's
type promotion: tensor operands are cast to the dtype torch.export recorded for the output.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember import dtype as dt
from ember.errors import UnsupportedOpError
from ember.frontend.torch import Call, Converter, _Importer
from ember.graph.ir import Value

Result = Any


# elementwise --------------------------------------------------------------------------------
def _operand(imp: _Importer, value: Any, dtype: dt.DType) -> Value:
    """A tensor operand cast to `dtype`, or a Python scalar as a constant of `dtype`."""
    if isinstance(value, Value):
        return imp.cast(value, dtype)
    return imp.scalar(value, dtype)


def _common_dtype(values: Sequence[Any]) -> dt.DType:
    """torch's result type: the highest category (bool < int < float) wins; within it, the
    widest dtype among dimensioned tensors, then 0-d tensors, then the default dtypes."""
    def category(d: Any) -> int:
        if isinstance(d, dt.DType):
            return 2 if d.is_float else 1 if d.is_int else 0
        return 0 if isinstance(d, bool) else 2 if isinstance(d, float) else 1

    top = max(category(v.type.dtype if isinstance(v, Value) else v) for v in values)
    for rank_wanted in (True, False):
        found = [v.type.dtype for v in values if isinstance(v, Value)
                 and bool(v.type.ndim) == rank_wanted and category(v.type.dtype) == top]
        if found:
            return max(found, key=lambda d: d.bits)
    return {0: dt.parse("bool"), 1: dt.parse("int64"), 2: dt.parse("float32")}[top]


def unary(op: str) -> Converter:
    def convert(imp: _Importer, call: Call) -> Result:
        return imp.add1(op, [_operand(imp, call["self"], call.out_dtype)])
    return convert


def binary(op: str, compare: bool = False, negate: bool = False) -> Converter:
    """A broadcasting binary op; comparisons compute in the operands' common dtype."""
    def convert(imp: _Importer, call: Call) -> Result:
        a, b = call["self"], call["other"]
        dtype = _common_dtype([a, b]) if compare else call.out_dtype
        if call.args.get("alpha") not in (None, 1):       # add/sub: a + alpha * b
            b = imp.add1("Mul", [_operand(imp, b, dtype), imp.scalar(call["alpha"], dtype)])
        out = imp.add1(op, [_operand(imp, a, dtype), _operand(imp, b, dtype)])
        return imp.add1("Not", [out]) if negate else out
    return convert


def convert_div(imp: _Importer, call: Call) -> Result:
    mode = call.args.get("rounding_mode")
    dtype = call.out_dtype
    if mode is not None and not dtype.is_float:
        raise UnsupportedOpError(f"rounding_mode='{mode}' on integers is not supported")
    out = imp.add1("Div", [_operand(imp, call["self"], dtype),
                           _operand(imp, call["other"], dtype)])
    if mode == "floor":
        return imp.add1("Floor", [out])
    if mode == "trunc":   # toward zero: floor for positive quotients, ceil for negative
        negative = imp.add1("Less", [out, imp.scalar(0, dtype)])
        return imp.add1("Where", [negative, imp.add1("Ceil", [out]), imp.add1("Floor", [out])])
    return out


def convert_pow(imp: _Importer, call: Call) -> Result:
    dtype = call.out_dtype
    x, y = call["self"], call["exponent"]
    if isinstance(y, (int, float)) and isinstance(x, Value):
        x = imp.cast(x, dtype)
        if y == 2:
            return imp.add1("Mul", [x, x])
        if y == 0.5 and dtype.is_float:
            return imp.add1("Sqrt", [x])
    return imp.add1("Pow", [_operand(imp, x, dtype), _operand(imp, y, dtype)])


def convert_rsqrt(imp: _Importer, call: Call) -> Result:
    x = _operand(imp, call["self"], call.out_dtype)
    return imp.add1("Reciprocal", [imp.add1("Sqrt", [x])])


def convert_silu(imp: _Importer, call: Call) -> Result:
    x = _operand(imp, call["self"], call.out_dtype)
    return imp.add1("Mul", [x, imp.add1("Sigmoid", [x])])


def _with_scalar(op: str, offset: float, after: bool) -> Converter:
    """expm1 (exp(x) - 1) and log1p (log(1 + x))."""
    def convert(imp: _Importer, call: Call) -> Result:
        x = _operand(imp, call["self"], call.out_dtype)
        if after:
            return imp.add1("Sub", [imp.add1(op, [x]), imp.scalar(offset, call.out_dtype)])
        return imp.add1(op, [imp.add1("Add", [x, imp.scalar(offset, call.out_dtype)])])
    return convert


def convert_clamp(imp: _Importer, call: Call) -> Result:
    x = imp.cast(call["self"], call.out_dtype)
    low = call.args.get("min", call.args.get("min_val"))
    high = call.args.get("max", call.args.get("max_val"))
    if isinstance(low, Value) or isinstance(high, Value):        # clamp.Tensor
        if low is not None:
            x = imp.add1("Max", [x, _operand(imp, low, call.out_dtype)])
        if high is not None:
            x = imp.add1("Min", [x, _operand(imp, high, call.out_dtype)])
        return x
    return imp.add1("Clip", [x], {"min": low, "max": high})


def convert_hardtanh(imp: _Importer, call: Call) -> Result:
    return imp.add1("Clip", [call["self"]], {"min": float(call["min_val"]),
                                             "max": float(call["max_val"])})


def convert_leaky_relu(imp: _Importer, call: Call) -> Result:
    return imp.add1("LeakyRelu", [call["self"]], {"alpha": float(call["negative_slope"])})


def convert_elu(imp: _Importer, call: Call) -> Result:
    if call["scale"] != 1 or call["input_scale"] != 1:
        raise UnsupportedOpError("elu with scale or input_scale other than 1 is not supported")
    return imp.add1("Elu", [call["self"]], {"alpha": float(call["alpha"])})


def convert_gelu(imp: _Importer, call: Call) -> Result:
    return imp.add1("Gelu", [call["self"]], {"approximate": call["approximate"]})


def convert_hardsigmoid(imp: _Importer, call: Call) -> Result:
    return imp.add1("HardSigmoid", [call["self"]], {"alpha": 1.0 / 6.0, "beta": 0.5})


def convert_softplus(imp: _Importer, call: Call) -> Result:
    # torch returns x itself where beta * x > threshold; softplus equals x there to rounding
    x, beta = call["self"], float(call["beta"])
    if beta == 1.0:
        return imp.add1("Softplus", [x])
    scaled = imp.add1("Mul", [x, imp.scalar(beta, x.type.dtype)])
    return imp.add1("Div", [imp.add1("Softplus", [scaled]), imp.scalar(beta, x.type.dtype)])


def convert_prelu(imp: _Importer, call: Call) -> Result:
    x, weight = call["self"], call["weight"]
    if x.type.ndim >= 2 and weight.type.size > 1:   # one slope per channel (dim 1)
        shape = (weight.type.size,) + (1,) * (x.type.ndim - 2)
        weight = imp.add1("Reshape", [weight], {"shape": shape})
    return imp.add1("PRelu", [x, weight])


def convert_where(imp: _Importer, call: Call) -> Result:
    dtype = call.out_dtype
    cond = imp.cast(call["condition"], dt.parse("bool"))
    return imp.add1("Where", [cond, _operand(imp, call["self"], dtype),
                              _operand(imp, call["other"], dtype)])


def convert_to_copy(imp: _Importer, call: Call) -> Result:
    return imp.cast(call["self"], call.out_dtype)


def convert_identity(imp: _Importer, call: Call) -> Result:
    return call["self"]


def convert_copy(imp: _Importer, call: Call) -> Result:
    """copy(self, src): src broadcast to self's shape, in self's dtype."""
    target, src = call["self"], call["src"]
    src = imp.cast(src, target.type.dtype)
    if src.type.shape == target.type.shape:
        return src
    return imp.add1("Expand", [src], {"shape": target.type.shape})


def convert_nothing(imp: _Importer, call: Call) -> Result:
    """Run-time assertions torch.export inserts: nothing to compute."""
    return None


# creation -----------------------------------------------------------------------------------
def _creation_dtype(call: Call) -> np.dtype:
    return call.out_dtype.numpy


def convert_full(imp: _Importer, call: Call) -> Result:
    shape = tuple(int(s) for s in call["size"])
    return imp.constant(call.label, np.full(shape, call["fill_value"], _creation_dtype(call)))


def convert_full_like(imp: _Importer, call: Call) -> Result:
    shape = call["self"].type.shape
    fill = {"full_like": call.args.get("fill_value"), "zeros_like": 0, "ones_like": 1,
            "empty_like": 0}[call.target.split(".")[1]]
    return imp.constant(call.label, np.full(shape, fill, _creation_dtype(call)))


def convert_empty(imp: _Importer, call: Call) -> Result:
    # uninitialized memory in torch; any value is correct, zeros are reproducible
    shape = tuple(int(s) for s in call["size"])
    return imp.constant(call.label, np.zeros(shape, _creation_dtype(call)))


def convert_scalar_tensor(imp: _Importer, call: Call) -> Result:
    return imp.constant(call.label, np.array(call["s"], _creation_dtype(call)))


def convert_arange(imp: _Importer, call: Call) -> Result:
    start = call.args.get("start", 0)
    step = call.args.get("step", 1)
    values = np.arange(start, call["end"], step).astype(_creation_dtype(call))
    return imp.constant(call.label, values)


def convert_sym_size(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    dim = int(call["dim"])
    return x.type.shape[dim + x.type.ndim if dim < 0 else dim]


def convert_sym_numel(imp: _Importer, call: Call) -> Result:
    return call["self"].type.size


def _table(entries: dict[str, Converter], names: dict[str, str],
           make: Callable[[str], Converter]) -> None:
    for aten, op in names.items():
        entries[aten] = make(op)


ELEMENTWISE: dict[str, Converter] = {
    "div": convert_div, "pow": convert_pow, "rsqrt": convert_rsqrt, "silu": convert_silu,
    "expm1": _with_scalar("Exp", 1.0, after=True), "log1p": _with_scalar("Log", 1.0, False),
    "clamp": convert_clamp, "clamp_min": convert_clamp, "clamp_max": convert_clamp,
    "hardtanh": convert_hardtanh, "leaky_relu": convert_leaky_relu, "elu": convert_elu,
    "gelu": convert_gelu, "hardsigmoid": convert_hardsigmoid, "softplus": convert_softplus,
    "_prelu_kernel": convert_prelu, "prelu": convert_prelu, "where": convert_where,
    "_to_copy": convert_to_copy, "clone": convert_identity, "alias": convert_identity,
    "detach": convert_identity, "lift_fresh_copy": convert_identity,
    "contiguous": convert_identity, "copy": convert_copy,
    "_assert_tensor_metadata": convert_nothing, "_assert_scalar": convert_nothing,
    "sym_constrain_range_for_size": convert_nothing, "sym_constrain_range": convert_nothing,
    "full": convert_full, "full_like": convert_full_like, "zeros_like": convert_full_like,
    "ones_like": convert_full_like, "empty_like": convert_full_like,
    "empty": convert_empty, "scalar_tensor": convert_scalar_tensor, "arange": convert_arange,
    "sym_size": convert_sym_size, "sym_numel": convert_sym_numel,
}
_table(ELEMENTWISE, {
    "relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
    "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs", "erf": "Erf", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "sinh": "Sinh", "cosh": "Cosh", "floor": "Floor", "ceil": "Ceil",
    "round": "Round", "reciprocal": "Reciprocal", "sign": "Sign", "logical_not": "Not",
    "bitwise_not": "Not", "isnan": "IsNaN", "hardswish": "HardSwish", "mish": "Mish",
}, unary)
_table(ELEMENTWISE, {
    "add": "Add", "sub": "Sub", "mul": "Mul", "maximum": "Max", "minimum": "Min",
}, binary)
_table(ELEMENTWISE, {
    "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
    "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
    "bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor",
}, lambda op: binary(op, compare=True))
ELEMENTWISE["ne"] = binary("Equal", compare=True, negate=True)


def _logical_cast(convert: Converter) -> Converter:
    """logical_*/bitwise_* on bools: operands read as bools."""
    def wrapped(imp: _Importer, call: Call) -> Result:
        for key in ("self", "other"):
            value = call.args.get(key)
            if isinstance(value, Value) and call.target.startswith("aten.logical"):
                call.args[key] = imp.cast(value, dt.parse("bool"))
            elif isinstance(value, Value) and not value.type.dtype.is_bool:
                raise UnsupportedOpError("bitwise operators on integers are not supported")
        return convert(imp, call)
    return wrapped


for _name in ("logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
              "bitwise_xor", "logical_not", "bitwise_not"):
    ELEMENTWISE[_name] = _logical_cast(ELEMENTWISE[_name])


def convert_remainder(imp: _Importer, call: Call) -> Result:
    dtype = call.out_dtype
    fmod = int(call.target.startswith("aten.fmod") or dtype.is_float)
    a = _operand(imp, call["self"], dtype)
    b = _operand(imp, call["other"], dtype)
    if call.target.startswith("aten.fmod") or not dtype.is_float:
        return imp.add1("Mod", [a, b], {"fmod": fmod})
    # Python's remainder on floats (the sign of the divisor): a - floor(a / b) * b
    quotient = imp.add1("Floor", [imp.add1("Div", [a, b])])
    return imp.add1("Sub", [a, imp.add1("Mul", [quotient, b])])


ELEMENTWISE["remainder"] = convert_remainder
ELEMENTWISE["fmod"] = convert_remainder


def _all_tables() -> dict[str, Converter]:
    from ember.frontend.torch_nn import NN
    from ember.frontend.torch_shape import SHAPE

    table = dict(ELEMENTWISE)
    for part in (SHAPE, NN):
        overlap = set(table) & set(part)
        assert not overlap, overlap
        table.update(part)
    return table


ATEN: dict[str, Converter] = _all_tables()
