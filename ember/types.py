"""Types shared by the operator library and the graph: a tensor's static shape and dtype.

Below both ops and graph, so an op's shape rule and a graph Value speak of the same type
without either importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ember import dtype as dt
from ember.dtype import DType
from ember.errors import ShapeError


@dataclass(frozen=True)
class TensorType:
    """Static shape and dtype of a tensor."""

    shape: tuple[int, ...]
    dtype: DType

    def __post_init__(self) -> None:
        assert all(isinstance(d, int) and d >= 0 for d in self.shape), self.shape

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.storage_bytes


# kernels index tensors with 32-bit integers: larger tensors are refused, never wrapped
MAX_ELEMENTS = 2**31 - 1


def check_shape(shape: Sequence[Any], what: str) -> tuple[int, ...]:
    """`shape` as a tuple of ints, or ShapeError naming `what`: every dim an integer
    (not a bool or a float such as 1.5), >= 0, and at most MAX_ELEMENTS elements in all."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence | np.ndarray):
        raise ShapeError(f"{what}: expected a sequence of ints as the shape, got {shape!r}")
    dims = []
    for index, d in enumerate(shape):
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise ShapeError(f"{what}: dimension {index} must be an int, got "
                             f"{type(d).__name__} {d!r}")
        if d < 0:
            raise ShapeError(f"{what}: dimension {index} is negative ({int(d)})")
        dims.append(int(d))
    size = 1
    for d in dims:
        size *= d
    if size > MAX_ELEMENTS:
        raise ShapeError(f"{what}: shape {tuple(dims)} has {size} elements; ember's kernels "
                         f"index with 32 bits and support at most {MAX_ELEMENTS}")
    return tuple(dims)


def tensor_type(shape: Sequence[int], dtype: str | DType | np.dtype,
                what: str = "tensor") -> TensorType:
    return TensorType(check_shape(shape, what), dt.parse(dtype))


__all__ = ["MAX_ELEMENTS", "TensorType", "check_shape", "tensor_type"]
