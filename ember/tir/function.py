"""Buffer (a typed, shaped region of memory) and PrimFunc (a function over buffers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ember import dtype as dt
from ember.dtype import DType
from ember.tir.expr import Expr, Var, const, convert
from ember.tir.stmt import Stmt

SCOPES = ("global", "shared", "local")


@dataclass(frozen=True, eq=False, repr=False)
class Buffer:
    """A multi-dimensional array in memory; identity, not name, tells two buffers apart.

    `strides` is empty for a compact row-major buffer; storage_align sets it.
    """

    name: str
    shape: tuple[Expr, ...]
    dtype: DType
    data: Var = field(default=None)  # type: ignore[assignment]
    strides: tuple[Expr, ...] = ()
    scope: str = "global"

    def __post_init__(self) -> None:
        assert self.scope in SCOPES, self.scope
        if self.data is None:
            object.__setattr__(self, "data", Var(self.name, dt.handle))

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"Buffer({self.name}: {self.dtype}[{dims}], {self.scope})"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def load(self, *indices: object) -> Expr:
        from ember.tir.expr import Load

        return Load(self, tuple(convert(i) for i in indices))

    def element_strides(self) -> tuple[Expr, ...]:
        """Strides in elements, row-major unless set explicitly."""
        if self.strides:
            return self.strides
        strides: list[Expr] = []
        running: Expr = const(1, self.shape[-1].dtype if self.shape else dt.int32)
        for extent in reversed(self.shape):
            strides.append(running)
            running = running * extent
        return tuple(reversed(strides))


def buffer(name: str, shape: tuple[int | Expr, ...], dtype: str | DType = "float32",
           scope: str = "global") -> Buffer:
    """Declare a buffer: `buffer("A", (16, 16), "float32")`."""
    return Buffer(name, tuple(convert(s) for s in shape), dt.parse(dtype), scope=scope)


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc:
    """A function whose parameters are buffers (and scalar vars) and whose body is a Stmt."""

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        from ember.tir.printer import func_to_str

        return func_to_str(self)

    def __repr__(self) -> str:
        return str(self)
