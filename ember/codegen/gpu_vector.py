"""What a GPU dialect offers beyond scalar C: vector loads and stores of contiguous lanes
(OpenCL vloadN / vstoreN, CUDA float4 and friends) and float16 storage (OpenCL vload_half /
vstore_half, CUDA __half), with the checks that decide when the printer may use them.

A vector access is used for a Load or Store whose index is a Ramp of stride 1 (contiguous
lanes) of a 32-bit element type in global memory, with as many lanes as the dialect has a
vector type for. Dialects whose vector accesses need their natural alignment (CUDA: a
float4 load of an address not a multiple of 16 bytes faults) also need the Ramp's base
proved a multiple of the lane count (modular analysis); buffers themselves start at least
ember.lowering.groups.ALIGN (64) bytes aligned, as device allocations and the memory plan's
offsets are. OpenCL's vloadN needs only element alignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ember.arith.modular import modular_set
from ember.tir import expr as E
from ember.tir.function import Buffer

# element types with vector forms in every dialect here (C storage type -> vector stem)
VECTOR_STEMS = {"float": "float", "int32_t": "int", "uint32_t": "uint"}


@dataclass(frozen=True)
class VectorSpec:
    """A dialect's vector accesses: `widths` it has types for; `aligned`: whether an access
    must be proved aligned to its size; how to spell the type, a load, a store, a lane."""

    widths: tuple[int, ...]
    aligned: bool
    type_name: Callable[[str, int], str]              # (stem, lanes) -> "float4"
    load: Callable[[str, str, str], str]               # (type, pointer, index)
    store: Callable[[str, str, str, str], str]         # (type, value, pointer, index)
    field: Callable[[int], str]                        # lane -> ".s0" / ".x"


@dataclass(frozen=True)
class HalfSpec:
    """A dialect's float16 storage: loads widen to float, stores round from float."""

    load: Callable[[str, str], str]                    # (pointer, index) -> float text
    store: Callable[[str, str, str], str]              # (pointer, index, value) -> stmt
    # the prelude defines float ember_half_round(float): a float rounded to half precision


HALF_ROUND = "ember_half_round"


def vector_access(spec: VectorSpec | None, buffer: Buffer, index: E.Expr,
                  storage: str) -> int:
    """Lanes of a vector access of `buffer` at `index` in this dialect, or 0 for none."""
    if spec is None or buffer.scope != "global" or storage not in VECTOR_STEMS:
        return 0
    if not isinstance(index, E.Ramp) or not E.is_const_int(index.stride, 1):
        return 0
    lanes = index.lanes
    if lanes not in spec.widths:
        return 0
    if spec.aligned:
        known = modular_set(index.base)
        if known.coeff % lanes != 0 or known.base % lanes != 0:
            return 0
    return lanes


__all__ = ["HALF_ROUND", "HalfSpec", "VECTOR_STEMS", "VectorSpec", "vector_access"]
