"""Data types: DType values, parsing of names such as "float32" or "int8x16", numpy mapping."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from ember.errors import DTypeError

_KINDS = ("float", "int", "uint", "bool", "handle", "bfloat", "float8e4m3fn", "float8e4m3fnuz",
          "float8e5m2", "float8e5m2fnuz", "float8e8m0", "float4e2m1")

# Formats ember stores but does not compute in: bfloat16, the 8-bit floats, the 4-bit float
# and the 4- and 2-bit integers. Kernels hold them as their bit pattern in an unsigned
# integer (`DType.storage`) and convert with integer operations (ember.ops.lowp); every
# other op computes in `DType.compute` (float32 or an 8-bit integer).
_FORMAT_KINDS = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0",
                 "float4e2m1")
# the numpy container of each such format: ml_dtypes' dtype of the same bit layout (sub-byte
# types one element per byte, in its low bits, as numpy and onnx's numpy_helper hold them)
_CONTAINERS = {"bfloat16": "bfloat16", "float8e4m3fn": "float8_e4m3fn",
               "float8e4m3fnuz": "float8_e4m3fnuz", "float8e5m2": "float8_e5m2",
               "float8e5m2fnuz": "float8_e5m2fnuz", "float8e8m0": "float8_e8m0fnu",
               "float4e2m1": "float4_e2m1fn", "int4": "int4", "uint4": "uint4", "int2": "int2",
               "uint2": "uint2"}


@dataclass(frozen=True)
class DType:
    """A scalar or vector element type, e.g. DType("float", 32, 8) is float32x8."""

    kind: str
    bits: int
    lanes: int = 1

    def __post_init__(self) -> None:
        assert self.kind in _KINDS, self.kind
        assert self.lanes >= 1, self.lanes

    def __str__(self) -> str:
        base = "bool" if self.kind == "bool" else \
            self.kind if self.kind in _FORMAT_KINDS else f"{self.kind}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    def __repr__(self) -> str:
        return f"DType({str(self)!r})"

    def with_lanes(self, lanes: int) -> DType:
        return DType(self.kind, self.bits, lanes)

    @property
    def element(self) -> DType:
        return DType(self.kind, self.bits, 1)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_handle(self) -> bool:
        return self.kind == "handle"

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def is_storage_only(self) -> bool:
        """True for the formats kernels only store and convert: bfloat16, float8*, float4e2m1,
        (u)int4 and (u)int2."""
        return self.kind == "bfloat" or self.kind in _FORMAT_KINDS or \
            (self.kind in ("int", "uint") and self.bits < 8)

    @property
    def storage(self) -> DType:
        """The type kernels hold this one in: its bit pattern as uint8 or uint16 (sub-byte
        types in the low bits of a byte); the type itself for computable types."""
        if not self.is_storage_only:
            return self
        return DType("uint", max(self.bits, 8), self.lanes)

    @property
    def compute(self) -> DType:
        """The type ops other than conversions compute a storage-only type in: float32 for
        the floating formats, int8 / uint8 for the narrow integers."""
        if not self.is_storage_only:
            return self
        if self.kind in ("int", "uint"):
            return DType(self.kind, 8, self.lanes)
        return DType("float", 32, self.lanes)

    @property
    def storage_bytes(self) -> int:
        """Bytes one element occupies in memory (bool and sub-byte types take one byte)."""
        return max(self.bits, 8) // 8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of arrays of this type; storage-only types use ml_dtypes' dtypes
        as containers (their bits are what kernels read and write), or the storage integer
        when ml_dtypes is not installed."""
        if self.kind == "bool":
            return np.dtype(np.bool_)
        if self.kind == "handle":
            raise DTypeError("a handle has no numpy dtype")
        if self.is_storage_only:
            return _container(self.element)
        return np.dtype(f"{self.kind}{self.bits}")

    def min_value(self) -> int | float:
        if self.is_float:
            return -float("inf")
        if self.kind == "uint" or self.kind == "bool":
            return 0
        return -(1 << (self.bits - 1))

    def max_value(self) -> int | float:
        if self.is_float:
            return float("inf")
        if self.kind == "bool":
            return 1
        if self.kind == "uint":
            return (1 << self.bits) - 1
        return (1 << (self.bits - 1)) - 1


float16 = DType("float", 16)
float32 = DType("float", 32)
float64 = DType("float", 64)
int8 = DType("int", 8)
int16 = DType("int", 16)
int32 = DType("int", 32)
int64 = DType("int", 64)
uint8 = DType("uint", 8)
uint16 = DType("uint", 16)
uint32 = DType("uint", 32)
uint64 = DType("uint", 64)
bool_ = DType("bool", 1)
handle = DType("handle", 64)
bfloat16 = DType("bfloat", 16)
float8e4m3fn = DType("float8e4m3fn", 8)
float8e4m3fnuz = DType("float8e4m3fnuz", 8)
float8e5m2 = DType("float8e5m2", 8)
float8e5m2fnuz = DType("float8e5m2fnuz", 8)
float8e8m0 = DType("float8e8m0", 8)
float4e2m1 = DType("float4e2m1", 4)
int4 = DType("int", 4)
uint4 = DType("uint", 4)
int2 = DType("int", 2)
uint2 = DType("uint", 2)

_STORAGE_ONLY = {str(d): d for d in (bfloat16, float8e4m3fn, float8e4m3fnuz, float8e5m2,
                                     float8e5m2fnuz, float8e8m0, float4e2m1, int4, uint4, int2,
                                     uint2)}
_BY_CONTAINER = {container: _STORAGE_ONLY[name] for name, container in _CONTAINERS.items()}


def _container(dtype: DType) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:  # no container: arrays hold the bit patterns
        return np.dtype(f"uint{max(dtype.bits, 8)}")
    return np.dtype(getattr(ml_dtypes, _CONTAINERS[str(dtype)]))

_NAME = re.compile(r"^(float|int|uint|bool|handle)(\d*)(?:x(\d+))?$")


def parse(value: object) -> DType:
    """Turn "float32", "int8x16", numpy dtypes or a DType into a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, type) and issubclass(value, (np.generic, bool, int, float)):
        value = np.dtype(value)
    if isinstance(value, np.dtype):
        if value.name in _BY_CONTAINER:      # ml_dtypes' bfloat16, float8_e4m3fn, int4, ...
            return _BY_CONTAINER[value.name]
        if value == np.bool_:
            return bool_
        if value.kind not in "fiu":
            raise DTypeError(f"numpy dtype {value} has no ember equivalent")
        kind = {"f": "float", "i": "int", "u": "uint"}[value.kind]
        return DType(kind, value.itemsize * 8)
    if not isinstance(value, str):
        raise DTypeError(f"expected a dtype name such as 'float32', got {value!r}")
    special = re.match(r"^([a-z0-9]+?)(?:x(\d+))?$", value.strip())
    if special is not None and special.group(1) in _STORAGE_ONLY:
        return _STORAGE_ONLY[special.group(1)].with_lanes(int(special.group(2) or 1))
    match = _NAME.match(value.strip())
    if match is None:
        raise DTypeError(f"unknown dtype {value!r}; expected e.g. 'float32', 'int8', 'bool'")
    kind, bits_text, lanes_text = match.groups()
    if kind == "bool":
        bits = 1
    elif kind == "handle":
        bits = 64
    else:
        bits = int(bits_text) if bits_text else 32
    valid = {"float": (16, 32, 64), "int": (8, 16, 32, 64), "uint": (8, 16, 32, 64)}
    if kind in valid and bits not in valid[kind]:
        raise DTypeError(f"unknown dtype {value!r}: {kind} has no {bits}-bit variant")
    return DType(kind, bits, int(lanes_text) if lanes_text else 1)


@functools.lru_cache(maxsize=256)
def numpy_dtype(name: str | np.dtype) -> np.dtype:
    """The numpy dtype of an ember dtype name ("float32", "bfloat16", "float8e4m3fn", ...)."""
    if isinstance(name, np.dtype):
        return name
    return parse(name).numpy


def promote(a: DType, b: DType) -> DType:
    """The common type of two integer or two float scalar types (wider wins)."""
    if a == b:
        return a
    if a.is_storage_only or b.is_storage_only:
        raise DTypeError(f"cannot combine {a} and {b}: {a if a.is_storage_only else b} is a "
                         "storage type; convert it first (e.g. x.astype('float32'))")
    if a.lanes != b.lanes:
        raise DTypeError(f"cannot combine {a} and {b}: lane counts differ")
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    if a.is_int and b.is_int:
        # signed wins unless the unsigned type is strictly wider
        return DType("int", max(a.bits, b.bits), a.lanes)
    raise DTypeError(f"cannot combine {a} and {b} implicitly; insert an explicit cast "
                     f"(e.g. x.astype('{a if a.is_float else b}'))")
