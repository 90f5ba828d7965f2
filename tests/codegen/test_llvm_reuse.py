"""LLVM back end: equal pure integer expressions are emitted once per basic block, and only
where that is sound (same variable values, same block)."""

from __future__ import annotations

import numpy as np

from ember.codegen.llvm import codegen_llvm
from ember.codegen.jit import build_llvm
from ember.target import Target
from ember.tir import For, ForKind, LetStmt, Load, PrimFunc, Store, Var, buffer, const, seq

HOST = Target("llvm")


def _unrolled(copies: int) -> PrimFunc:
    """out[i * 7 % 5 + c] = in[i * 7 % 5 + c] * (c + 1) for c < copies: each copy builds its
    own (equal) `i * 7 % 5` as a fresh expression, as an unrolled tile does."""
    src, out = buffer("src", (16 * 7,), "float32"), buffer("out", (16 * 7,), "float32")
    i = Var("i")
    body = seq(*[Store(out, Load(src, ((i * 7) % 5 + i * 5 + c,)) * const(float(c + 1), "float32"),
                       ((i * 7) % 5 + i * 5 + c,)) for c in range(copies)])
    return PrimFunc("reuse", (src, out), For(i, const(0), const(16), ForKind.SERIAL, body))


def _instructions(func: PrimFunc, opcode: str) -> int:
    text = str(codegen_llvm([func], HOST))
    return sum(1 for line in text.splitlines() if f"= {opcode} " in line)


def test_equal_index_arithmetic_is_emitted_once_per_block() -> None:
    # one `i * 7` and one `i * 5` per iteration, whatever the number of copies
    assert _instructions(_unrolled(1), "mul") == _instructions(_unrolled(6), "mul") == 2
    src = np.arange(16 * 7, dtype="float32")
    out = np.zeros_like(src)
    build_llvm(_unrolled(6), HOST)(src, out)
    want = np.zeros_like(src)
    for i in range(16):
        for c in range(6):
            k = (i * 7) % 5 + i * 5 + c
            want[k] = src[k] * (c + 1)
    np.testing.assert_array_equal(out, want)


def test_a_rebound_variable_gets_its_own_value() -> None:
    """The same expression object under two bindings of one variable (unrolled copies of a
    let share their body) must not reuse the first binding's value."""
    out = buffer("out", (4,), "int32")
    x = Var("x")
    body = Store(out, x * 3 + 1, (x,))   # one body object, bound twice in the same block
    func = PrimFunc("rebind", (out,), seq(LetStmt(x, const(1), body),
                                          LetStmt(x, const(2), body)))
    result = np.zeros(4, "int32")
    build_llvm(func, HOST)(result)
    np.testing.assert_array_equal(result, [0, 4, 7, 0])
