"""insert_barriers: synchronize a GPU block around the writes of every shared-memory buffer.

The threads of a block fill a shared buffer together and then read what others wrote, so a
barrier must separate the filling statement from the statements that read it. When the
buffer is filled again on the next iteration of an enclosing loop (a tile of the reduction
axis), a second barrier before the fill keeps fast threads from overwriting values that
slow ones still read.
"""

from __future__ import annotations

from dataclasses import replace

from ember.tir import expr as E
from ember.tir import stmt as S
from ember.tir.function import PrimFunc
from ember.tir.functor import Mutator, Visitor


def insert_barriers(func: PrimFunc) -> PrimFunc:
    """Put Barrier("shared") after each statement that writes a shared buffer a later
    statement of the same sequence reads, and before it inside a loop.

        for ko in range(8):              ->  for ko in range(8):
          A_sh[tx] = A[ko * 16 + tx]           barrier; A_sh[tx] = A[ko * 16 + tx]; barrier
          acc += A_sh[...]                     acc += A_sh[...]
    """
    body = _Insert().visit(func.body)
    return func if body is func.body else replace(func, body=body)


class _Accesses(Visitor):
    def __init__(self, data: E.Var) -> None:
        self.data = data
        self.reads = False
        self.writes = False

    def visit_Load(self, node: E.Load) -> None:
        self.reads = self.reads or node.buffer.data is self.data
        self.generic_visit(node)

    def visit_Store(self, node: S.Store) -> None:
        self.writes = self.writes or node.buffer.data is self.data
        self.generic_visit(node)


def _accesses(stmt: S.Stmt, data: E.Var) -> tuple[bool, bool]:
    found = _Accesses(data)
    found.visit(stmt)
    return found.reads, found.writes


def _sync(stmt: S.Stmt, data: E.Var, reused: bool) -> S.Stmt:
    """Barriers for buffer `data` in the first sequence under `stmt` (through wrappers)."""
    match stmt:
        case S.Allocate(buffer, body):
            return S.Allocate(buffer, _sync(body, data, reused))
        case S.LetStmt(var, value, body):
            return S.LetStmt(var, value, _sync(body, data, reused))
        case S.AttrStmt(key, value, body):
            return S.AttrStmt(key, value, _sync(body, data, reused))
        case S.Seq(items):
            out: list[S.Stmt] = []
            for position, item in enumerate(items):
                _, writes = _accesses(item, data)
                later = any(_accesses(rest, data)[0] for rest in items[position + 1:])
                if writes and later:
                    if reused:
                        out.append(S.Barrier("shared"))
                    out += [item, S.Barrier("shared")]
                else:
                    out.append(item)
            return S.Seq(tuple(_dedupe(out)))
    return stmt


def _dedupe(items: list[S.Stmt]) -> list[S.Stmt]:
    out: list[S.Stmt] = []
    for item in items:
        if isinstance(item, S.Barrier) and out and isinstance(out[-1], S.Barrier):
            continue
        out.append(item)
    return out


class _Insert(Mutator):
    def __init__(self) -> None:
        self.loops = 0  # enclosing loops that are not thread axes

    def visit_For(self, loop: S.For) -> S.Stmt:
        counted = int(loop.kind != S.ForKind.THREAD_BINDING)
        self.loops += counted
        body = self.visit(loop.body)
        self.loops -= counted
        return loop if body is loop.body else replace(loop, body=body)

    def visit_Allocate(self, node: S.Allocate) -> S.Stmt:
        body = self.visit(node.body)
        if node.buffer.scope == "shared":
            body = _sync(body, node.buffer.data, self.loops > 0)
        return node if body is node.body else S.Allocate(node.buffer, body)
