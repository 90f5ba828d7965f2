"""Conversions to and from the storage-only types (bfloat16, float8, float4e2m1, (u)int4,
(u)int2) as integer arithmetic on their bit patterns, following ONNX's Cast.

A storage-only value is held as its bits in an unsigned integer (`DType.storage`; sub-byte
types in the low bits of a byte). Nothing here relies on the CPU knowing the format:

- decoding a float format rebiases the exponent of its pattern into a float32 pattern
  (exact: every value of these formats is a float32), with float8 subnormals scaled by a
  power of two (exact too);
- encoding rounds the source's pattern to nearest, ties to even, with one integer add and
  a shift (the carry moves into the exponent by itself); values below the target's normal
  range are scaled by a power of two (exact) and rounded half to even; overflow, infinity
  and NaN follow the ONNX table (`saturate`: the largest finite value, else inf or NaN);
- float8e8m0 (a bare exponent) rounds up, down or to nearest as `round_mode` says;
- the narrow integers truncate floats toward zero (0 where the value is NaN or out of
  range, as the reference does; ONNX leaves it undefined) and wrap integers.

Only shifts by constants, masks, adds and compares are used, written as multiplication,
floor division and modulo by powers of two on unsigned integers, which compile to shifts
and masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ember import dtype as dt
from ember import te
from ember.dtype import DType
from ember.errors import UnsupportedOpError
from ember.tir.expr import And, Expr, FloatImm, IntImm, Let, Or, Select, Var, const

ROUND_MODES = ("up", "down", "nearest")


@dataclass(frozen=True)
class FloatFormat:
    """A binary float layout: sign, `exponent` bits (biased by `bias`), `mantissa` bits.

    `nan` is "ieee" (all-ones exponent, nonzero mantissa; all-ones exponent and zero
    mantissa is infinity), "fn" (only the all-ones pattern, no infinity), "fnuz" (only
    the pattern of negative zero, no infinity and no -0) or "none"."""

    exponent: int
    mantissa: int
    bias: int
    nan: str
    saturates: bool          # whether ONNX's `saturate` applies (float8) or overflow is inf

    @property
    def width(self) -> int:
        return 1 + self.exponent + self.mantissa

    @property
    def max_code(self) -> int:
        """The pattern of the largest finite magnitude."""
        top = (1 << (self.exponent + self.mantissa)) - 1
        if self.nan == "ieee":
            return top - (1 << self.mantissa)      # exponent all ones is inf / NaN
        if self.nan == "fn":
            return top - 1                        # all ones is NaN
        return top

    @property
    def nan_code(self) -> int:
        """A quiet NaN's pattern (positive), or 0 for a format without NaN."""
        if self.nan == "ieee":
            return ((1 << self.exponent) - 1) << self.mantissa | 1 << (self.mantissa - 1)
        if self.nan == "fn":
            return (1 << (self.exponent + self.mantissa)) - 1
        if self.nan == "fnuz":
            return 1 << (self.exponent + self.mantissa)
        return 0


FORMATS: dict[str, FloatFormat] = {
    "bfloat16": FloatFormat(8, 7, 127, "ieee", saturates=False),
    "float8e4m3fn": FloatFormat(4, 3, 7, "fn", saturates=True),
    "float8e4m3fnuz": FloatFormat(4, 3, 8, "fnuz", saturates=True),
    "float8e5m2": FloatFormat(5, 2, 15, "ieee", saturates=True),
    "float8e5m2fnuz": FloatFormat(5, 2, 16, "fnuz", saturates=True),
    # no inf or NaN: out of range always saturates; NaN becomes 0
    "float4e2m1": FloatFormat(2, 1, 1, "none", saturates=False),
}
# the formats ember computes in, as sources of an encoding
_NATIVE = {32: FloatFormat(8, 23, 127, "ieee", False), 64: FloatFormat(11, 52, 1023, "ieee",
                                                                        False)}


def _u(value: int, bits: int) -> Expr:
    return const(value, f"uint{bits}")


def _pow2(k: int, dtype: DType) -> Expr:
    """2**k as a float constant of `dtype` (exact)."""
    return const(2.0 ** k, dtype)


# decoding ---------------------------------------------------------------------------------
def _decode_float(bits: Expr, fmt: FloatFormat) -> Expr:
    """The float32 value of a pattern of `fmt` (held in an unsigned integer)."""
    b = bits.astype("uint32")
    if fmt.bias == 127:          # bfloat16: the upper half of a float32, whatever the value
        return te.reinterpret(b * (1 << 16), "float32")
    body = fmt.exponent + fmt.mantissa
    sign = b // (1 << body)
    mag = b % (1 << body)
    exponent = mag // (1 << fmt.mantissa)
    mantissa = mag % (1 << fmt.mantissa)
    # normal: the pattern shifted into float32's mantissa, exponent rebiased by an add
    normal = mag * (1 << (23 - fmt.mantissa)) + ((127 - fmt.bias) << 23)
    # subnormal: mantissa * 2**(1 - bias - M), exact in float32
    tiny = mantissa.astype("float32") * _pow2(1 - fmt.bias - fmt.mantissa, dt.float32)
    magnitude = Select(exponent == _u(0, 32), te.reinterpret(tiny, "uint32"), normal)
    quiet_nan = _u(0x7FC00000, 32)
    if fmt.nan == "ieee":
        top = (1 << fmt.exponent) - 1
        special = Select(mantissa == _u(0, 32), _u(0x7F800000, 32), quiet_nan)
        magnitude = Select(exponent == _u(top, 32), special, magnitude)
    elif fmt.nan == "fn":
        magnitude = Select(mag == _u((1 << body) - 1, 32), quiet_nan, magnitude)
    pattern = sign * (1 << 31) + magnitude
    if fmt.nan == "fnuz":        # 0x80 (the place of -0) is the NaN
        pattern = Select(b == _u(1 << body, 32), quiet_nan, pattern)
    return te.reinterpret(pattern, "float32")


def _decode_e8m0(bits: Expr) -> Expr:
    """2**(e - 127) as float32; 255 is NaN, 0 is 2**-127 (a float32 subnormal)."""
    e = bits.astype("uint32")
    pattern = Select(e == _u(0, 32), _u(0x00400000, 32), e * (1 << 23))
    pattern = Select(e == _u(255, 32), _u(0x7FC00000, 32), pattern)
    return te.reinterpret(pattern, "float32")


def _decode_int(bits: Expr, dtype: DType) -> Expr:
    """The value of a (u)int4 / (u)int2 pattern as int8 / uint8."""
    if dtype.kind == "uint":
        return bits.astype("uint8")
    wide = bits.astype("int16")
    half = 1 << (dtype.bits - 1)
    return Select(wide >= const(half, "int16"), wide - const(2 * half, "int16"),
                  wide).astype("int8")


def decode(x: Expr) -> Expr:
    """A storage-only value as its compute type (float32, int8 or uint8), exactly."""
    source = x.dtype.element
    bits = te.reinterpret(x, source.storage)
    if source.kind in ("int", "uint"):
        return _decode_int(bits, source)
    if source == dt.float8e8m0:
        return _decode_e8m0(bits)
    return _decode_float(bits, FORMATS[str(source)])


# encoding ---------------------------------------------------------------------------------
def _encode_float(x: Expr, fmt: FloatFormat, saturate: bool) -> Expr:
    """Round a float32 / float64 value to `fmt`, as the pattern (uint of the source width)."""
    src_bits = 64 if x.dtype.bits == 64 else 32
    if x.dtype.bits < src_bits:
        x = x.astype(f"float{src_bits}")    # float16 -> float32 is exact
    src = _NATIVE[src_bits]
    fdtype = DType("float", src_bits)

    def u(value: int) -> Expr:
        return _u(value, src_bits)

    pattern = te.reinterpret(x, f"uint{src_bits}")
    sign = pattern // (1 << (src_bits - 1))
    a = pattern % (1 << (src_bits - 1))              # |x| as a pattern
    inf = ((1 << src.exponent) - 1) << src.mantissa
    shift = src.mantissa - fmt.mantissa
    # normal range: rebias (the subtraction wraps where unused) and round to nearest even
    t = a - u((src.bias - fmt.bias) << src.mantissa)
    rounded = (t + u((1 << (shift - 1)) - 1) + (t // (1 << shift)) % 2) // (1 << shift)
    min_normal = (src.bias + 1 - fmt.bias) << src.mantissa
    if fmt.bias < src.bias:   # (bfloat16 from float32: one range, the add rounds all)
        # below the normal range: |x| * 2**(bias - 1 + M) < 2**M is exact; round it half
        # to even; a result of 2**M is the smallest normal, whose pattern is that number
        scaled = te.reinterpret(a, fdtype) * _pow2(fmt.bias - 1 + fmt.mantissa, fdtype)
        tiny = te.round(scaled).astype(f"uint{src_bits}")
        rounded = Select(a >= u(min_normal), rounded, tiny)
    nan = a > u(inf)
    overflow = rounded > u(fmt.max_code)             # includes infinities
    if (saturate and fmt.saturates) or fmt.nan == "none":
        big = u(fmt.max_code)
    elif fmt.nan == "ieee":
        big = u(((1 << fmt.exponent) - 1) << fmt.mantissa)     # infinity
    else:
        big = u(fmt.nan_code)
    code = Select(overflow, big, rounded)
    body = fmt.exponent + fmt.mantissa
    if fmt.nan == "fnuz":
        # no negative zero; NaN (and non-saturated overflow) is the pattern 0x80 itself
        signed = Select(Or(code == u(0), code == u(fmt.nan_code)), code,
                        code + sign * (1 << body))
        result = Select(nan, u(fmt.nan_code), signed)
    else:
        result = Select(nan, u(fmt.nan_code), code) + sign * (1 << body)
        if fmt.nan == "none":            # NaN -> +0
            result = Select(nan, u(0), result)
    return result.astype(f"uint{max(fmt.width, 8)}")


def _encode_e8m0(x: Expr, saturate: bool, round_mode: str) -> Expr:
    """float8e8m0 from float32 (onnx's rule: the biased exponent, rounded by `round_mode`;
    NaN and infinity become 255; negative values are undefined and use |x|)."""
    pattern = te.reinterpret(x.astype("float32"), "uint32")
    exponent = (pattern // (1 << 23)) % 256
    fraction = pattern % (1 << 23)
    special = exponent == _u(255, 32)
    if round_mode == "up":
        up = fraction > _u(0, 32)
    elif round_mode == "nearest":
        guard = (fraction // (1 << 22)) % 2 == _u(1, 32)
        rest = (fraction // (1 << 21)) % 2 == _u(1, 32)
        sticky = fraction % (1 << 21) > _u(0, 32)
        up = And(guard, Or(Or(rest, sticky), exponent > _u(0, 32)))
    elif round_mode == "down":
        up = None
    else:
        raise UnsupportedOpError(f"Cast: round_mode={round_mode!r} is not supported (one of "
                                 f"{', '.join(ROUND_MODES)})")
    if up is not None:
        if saturate:
            up = And(up, exponent != _u(254, 32))
        exponent = Select(up, exponent + _u(1, 32), exponent)
    return Select(special, _u(255, 32), exponent).astype("uint8")


def _encode_int(x: Expr, dtype: DType) -> Expr:
    """A (u)int4 / (u)int2 pattern: floats truncate toward zero (0 when NaN or out of range),
    integers and bools keep their low bits (ONNX: discard the higher bits)."""
    span = 1 << dtype.bits
    lo, hi = (-(span // 2), span // 2 - 1) if dtype.kind == "int" else (0, span - 1)
    source = x.dtype.element
    if source.is_float:
        wide = x.astype("float64") if source.bits == 64 else x.astype("float32")
        whole = te.trunc(wide)
        inside = And(whole >= const(float(lo), wide.dtype), whole <= const(float(hi),
                                                                          wide.dtype))
        value = Select(inside, whole, const(0.0, wide.dtype)).astype("int32")
    elif source.is_bool:
        value = x.astype("int32")
    else:
        value = x.astype("int64")
    return (value % span).astype("uint8")


def encode(x: Expr, to: DType, saturate: bool = True, round_mode: str = "up") -> Expr:
    """A computable value (float, integer or bool) converted to storage-only `to`, as ONNX's
    Cast does, held as `to`."""
    source = x.dtype.element
    if to.kind in ("int", "uint"):
        bits = _encode_int(x, to)
    else:
        if source.is_bool:
            x = x.astype("float32")
        elif source.is_int:           # exact in float64 up to 2**53 (float32: 16-bit ints)
            x = x.astype("float32" if source.bits <= 16 else "float64")
        if to == dt.float8e8m0:
            bits = _encode_e8m0(x, saturate, round_mode)
        else:
            bits = _encode_float(x, FORMATS[str(to)], saturate)
    return te.reinterpret(bits.astype(str(to.storage)), to)


def native_cast(x: Expr, to: DType) -> Expr:
    """ONNX Cast between computable types (bool: nonzero is true)."""
    if to.is_bool and not x.dtype.is_bool:
        zero = const(0.0 if x.dtype.is_float else 0, x.dtype.element)
        return x != zero
    return x.astype(to)


def _once(value: Expr, body: Callable[[Expr], Expr]) -> Expr:
    """body(v) with `value` evaluated once (`let v = value`): the formulas read their input
    several times, and a chain of inlined conversions would otherwise grow exponentially."""
    if isinstance(value, (Var, IntImm, FloatImm)):
        return body(value)
    var = Var("v", value.dtype)
    return Let(var, value, body(var))


def convert(x: Expr, to: DType, saturate: bool = True, round_mode: str = "up") -> Expr:
    """ONNX Cast(x, to) where either side may be a storage-only type."""
    if x.dtype.element != to.element and (x.dtype.is_storage_only or to.is_storage_only):
        return _once(x, lambda v: _convert(v, to, saturate, round_mode))
    return _convert(x, to, saturate, round_mode)


def _convert(x: Expr, to: DType, saturate: bool, round_mode: str) -> Expr:
    source = x.dtype.element
    to = to.element
    if source == to:
        return x
    if source.is_storage_only:
        x = decode(x)
        if to.is_storage_only:
            return _once(x, lambda v: encode(v, to, saturate, round_mode))
        return native_cast(x, to)
    if to.is_storage_only:
        return encode(x, to, saturate, round_mode)
    return native_cast(x, to)
