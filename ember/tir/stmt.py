"""Statement nodes of the loop IR: For, Store, Allocate, IfThenElse, Seq, LetStmt, Evaluate."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from ember.tir.expr import Expr, Var

if TYPE_CHECKING:
    from ember.tir.function import Buffer


class Stmt:
    """Base of every statement; subclasses are frozen dataclasses."""

    def __str__(self) -> str:
        from ember.tir.printer import stmt_to_str

        return stmt_to_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>\n{self}"


class ForKind(Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


# For annotation: how many chunks per thread a PARALLEL loop is cut into (an int constant)
PARALLEL_CHUNKS = "parallel_chunks"


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    """`for var in [begin, begin + extent)`; `thread_tag` names the GPU axis when bound.

    `annotations` carries schedule pragmas as (key, value) pairs; code generators read
    PARALLEL_CHUNKS (chunks per thread of a PARALLEL loop).
    """

    var: Var
    begin: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    thread_tag: str = ""
    annotations: tuple[tuple[str, Expr], ...] = ()


@dataclass(frozen=True, eq=False, repr=False)
class Store(Stmt):
    """`buffer[indices] = value`; a vector index (Ramp) writes a vector."""

    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]
    predicate: Expr | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    """Allocate `buffer` (in its memory scope) for the duration of `body`."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    """Evaluate an expression for its side effect (e.g. an extern call)."""

    value: Expr


@dataclass(frozen=True, eq=False, repr=False)
class AttrStmt(Stmt):
    """Attach a (key, value) attribute, e.g. a pragma, to the region `body`."""

    key: str
    value: Expr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class Barrier(Stmt):
    """Synchronize the threads of a GPU block (scope "shared") or a warp."""

    scope: str = "shared"


def seq(*stmts: Stmt | None) -> Stmt:
    """Build a sequence, dropping None and flattening nested sequences."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))
