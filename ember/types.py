"""Types shared by the operator library and the graph: a tensor's static shape and dtype.

Below both ops and graph, so an op's shape rule and a graph Value speak of the same type
without either importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ember import dtype as dt
from ember.dtype import DType


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


def tensor_type(shape: Sequence[int], dtype: str | DType | np.dtype) -> TensorType:
    return TensorType(tuple(int(d) for d in shape), dt.parse(dtype))


__all__ = ["TensorType", "tensor_type"]
