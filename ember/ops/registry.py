"""The operator table: every op declared once as an OpDef, collected into OPS by name.

Op names and attribute names follow ONNX. Inputs that decide shapes (Reshape's `shape`,
Slice's `starts`, Reduce's `axes`, ...) are listed in `attr_inputs`: the frontend requires
them to be constants and passes them as attributes of the same name, so ops never see
them as tensors.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ember.errors import UnsupportedOpError

if TYPE_CHECKING:
    from ember import te
    from ember.types import TensorType
    from ember.target import Target
    from ember.ops.knobs import Knobs
    from ember.te.schedule import Schedule


class Pattern(IntEnum):
    """How an op fuses with its neighbours (lower fuses more freely)."""

    ELEMWISE = 0      # out[i] = f(in[i])
    BROADCAST = 1     # out[i] = f(in[broadcast(i)])
    INJECTIVE = 2     # each output element reads a few input elements (transpose, pad, ...)
    REDUCTION = 3     # reduces over some axes
    OUT_FUSABLE = 4   # conv, dense, matmul: elementwise consumers fuse into its output
    OPAQUE = 8        # fuses with nothing


Attrs = Mapping[str, Any]
InferFn = Callable[[Attrs, Sequence["TensorType | None"]], list["TensorType"]]
ComputeFn = Callable[[Attrs, Sequence["te.Tensor | None"]], list["te.Tensor"]]
ScheduleFn = Callable[[Sequence["te.Tensor"], "Target", "Knobs | None"], "Schedule"]


@dataclass(frozen=True)
class OpDef:
    """Everything about one operator.

    infer(attrs, input_types) -> output types (raise ShapeError on bad shapes);
    compute(attrs, input_tensors) -> output te tensors (tag the main stage with the op name);
    schedule(outputs, target, knobs) -> Schedule for a fused group whose anchor is this op
    (None: the generic schedule for the op's pattern), with knobs of the family `knobs`
    (None: the family's default for the group).
    """

    name: str
    inputs: tuple[str, ...]                 # ONNX input names, in order
    infer: InferFn
    compute: ComputeFn
    pattern: Pattern
    schedule: ScheduleFn | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)   # defaults; REQUIRED = no default
    attr_inputs: tuple[str, ...] = ()       # inputs that must be constants -> attributes
    num_outputs: int = 1
    knobs: type[Knobs] | None = None        # the schedule's knob family (None: the generic
                                            # schedule's, by pattern; see knob_family)

    def knob_family(self) -> type[Knobs]:
        """The knob class of this op's schedule: `knobs`, else the generic schedule's."""
        from ember.ops.generic import InjectiveKnobs, ReductionKnobs
        from ember.ops.knobs import NoKnobs

        if self.knobs is not None:
            return self.knobs
        if self.schedule is None and self.pattern <= Pattern.INJECTIVE:
            return InjectiveKnobs
        if self.schedule is None and self.pattern == Pattern.REDUCTION:
            return ReductionKnobs
        return NoKnobs

    def complete_attrs(self, attrs: Mapping[str, Any], node: str = "") -> dict[str, Any]:
        """Fill defaults; reject unknown attributes and missing required ones."""
        out: dict[str, Any] = {}
        for key, value in attrs.items():
            if key not in self.attrs:
                raise UnsupportedOpError(f"node '{node}' ({self.name}): attribute '{key}' is "
                                         f"not supported (known: {sorted(self.attrs)})")
            out[key] = value
        for key, default in self.attrs.items():
            if key not in out:
                if default is REQUIRED:
                    raise UnsupportedOpError(f"node '{node}' ({self.name}): required attribute "
                                             f"'{key}' is missing")
                out[key] = default
        return out


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# the modules that declare ops; each defines OPS: dict[str, OpDef]
FAMILIES = ("elementwise", "reduction", "normalization", "transform", "nn", "dense", "rnn",
            "image", "sort", "sampling",
            "spectral", "indexing", "roi", "patches", "deform", "linalg", "random")

_TABLE: dict[str, OpDef] = {}


def all_ops() -> dict[str, OpDef]:
    """The op table, loaded on first use from every family module (each defines OPS)."""
    if not _TABLE:
        for family in FAMILIES:
            module = importlib.import_module(f"ember.ops.{family}")
            for name, opdef in module.OPS.items():
                assert name not in _TABLE, f"op {name} declared twice"
                _TABLE[name] = opdef
    return _TABLE


def get_op(name: str) -> OpDef:
    table = all_ops()
    if name not in table:
        raise UnsupportedOpError(f"operator '{name}' is not supported")
    return table[name]
