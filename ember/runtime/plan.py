"""ExecPlan: what the executor runs — kernel calls with argument slots, memory sizes, specs.

A Slot says where one kernel argument lives: graph input `i`, graph output `i`, a byte offset
into the workspace, or a byte offset into the constant blob. The plan is plain data (JSON),
so a compiled model can be stored next to its kernel objects and loaded without recompiling.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SLOT_KINDS = ("input", "output", "workspace", "constant")


@dataclass(frozen=True)
class Slot:
    """One memory location: ("input", i), ("output", i), ("workspace", byte offset), ..."""

    kind: str
    index: int

    def __post_init__(self) -> None:
        assert self.kind in SLOT_KINDS, self.kind


@dataclass(frozen=True)
class TensorSpec:
    """Name, static shape and dtype of a graph input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class KernelCall:
    """Call kernel `symbol` for fused group `group` with pointers to `args` (inputs, outputs)."""

    group: str
    symbol: str
    args: tuple[Slot, ...]
    arg_dtypes: tuple[str, ...]
    arg_shapes: tuple[tuple[int, ...], ...]
    anchor: str = ""
    pattern: str = ""
    arg_names: tuple[str, ...] = ()  # value names, for tracing and messages
    num_inputs: int = 0             # args[:num_inputs] are read, the rest written


@dataclass(frozen=True)
class ExecPlan:
    """Everything the executor needs besides the kernel code and the constant bytes."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    output_sources: tuple[Slot, ...]  # Slot("output", i) at index i: a kernel writes it
    calls: tuple[KernelCall, ...]
    workspace_bytes: int
    constant_bytes: int
    naive_bytes: int = 0
    peak_live_bytes: int = 0

    @property
    def symbols(self) -> list[str]:
        """Distinct kernel symbols in first-call order."""
        return list(dict.fromkeys(c.symbol for c in self.calls))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @staticmethod
    def from_json(text: str) -> ExecPlan:
        data: dict[str, Any] = json.loads(text)

        def spec(d: dict[str, Any]) -> TensorSpec:
            return TensorSpec(d["name"], tuple(d["shape"]), d["dtype"])

        def slot(d: dict[str, Any]) -> Slot:
            return Slot(d["kind"], int(d["index"]))

        def call(c: dict[str, Any]) -> KernelCall:
            return KernelCall(c["group"], c["symbol"], tuple(slot(a) for a in c["args"]),
                              tuple(c["arg_dtypes"]), tuple(tuple(a) for a in c["arg_shapes"]),
                              c["anchor"], c["pattern"], tuple(c.get("arg_names", ())),
                              int(c.get("num_inputs", 0)))

        calls = tuple(call(c) for c in data["calls"])
        return ExecPlan(data["name"], tuple(spec(s) for s in data["inputs"]),
                        tuple(spec(s) for s in data["outputs"]),
                        tuple(slot(s) for s in data["output_sources"]), calls,
                        int(data["workspace_bytes"]), int(data["constant_bytes"]),
                        int(data["naive_bytes"]), int(data["peak_live_bytes"]))
