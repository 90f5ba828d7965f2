"""Data types: DType values, parsing of names such as "float32" or "int8x16", numpy mapping."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ember.errors import DTypeError

_KINDS = ("float", "int", "uint", "bool", "handle")


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
        base = "bool" if self.kind == "bool" else f"{self.kind}{self.bits}"
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
    def storage_bytes(self) -> int:
        """Bytes one element occupies in memory (bool is stored as one byte)."""
        return max(self.bits, 8) // 8

    @property
    def numpy(self) -> np.dtype:
        if self.kind == "bool":
            return np.dtype(np.bool_)
        if self.kind == "handle":
            raise DTypeError("a handle has no numpy dtype")
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

_NAME = re.compile(r"^(float|int|uint|bool|handle)(\d*)(?:x(\d+))?$")


def parse(value: object) -> DType:
    """Turn "float32", "int8x16", numpy dtypes or a DType into a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, type) and issubclass(value, (np.generic, bool, int, float)):
        value = np.dtype(value)
    if isinstance(value, np.dtype):
        if value == np.bool_:
            return bool_
        if value.kind not in "fiu":
            raise DTypeError(f"numpy dtype {value} has no ember equivalent")
        kind = {"f": "float", "i": "int", "u": "uint"}[value.kind]
        return DType(kind, value.itemsize * 8)
    if not isinstance(value, str):
        raise DTypeError(f"expected a dtype name such as 'float32', got {value!r}")
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


def promote(a: DType, b: DType) -> DType:
    """The common type of two integer or two float scalar types (wider wins)."""
    if a == b:
        return a
    if a.lanes != b.lanes:
        raise DTypeError(f"cannot combine {a} and {b}: lane counts differ")
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    if a.is_int and b.is_int:
        # signed wins unless the unsigned type is strictly wider
        return DType("int", max(a.bits, b.bits), a.lanes)
    raise DTypeError(f"cannot combine {a} and {b} implicitly; insert an explicit cast "
                     f"(e.g. x.astype('{a if a.is_float else b}'))")
