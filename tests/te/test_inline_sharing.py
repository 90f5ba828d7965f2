"""Inlining binds a value read more than once (Let) instead of copying it at every read.

A chain of ops that each read their input twice used to inline into a tree of 2^n copies;
the sizes below grow linearly with the chain, checked on the lowered loop program and on the
LLVM IR of a fused graph kernel, with the numbers checked against numpy.
"""

import re

import numpy as np
import pytest

import ember
from ember import te
from ember.codegen.llvm import codegen_llvm
from ember.graph.ir import GraphBuilder
from ember.lowering.compile import lower_kernels
from ember.lowering.groups import fused_groups, optimize
from ember.target import Target
from ember.tir import expr as E
from ember.tir.functor import post_order_visit
from ember.tir.pipeline import run_passes

RNG = np.random.default_rng(7)


def node_count(node) -> int:
    count = [0]
    post_order_visit(node, lambda n: count.__setitem__(0, count[0] + 1))
    return count[0]


def te_chain(n: int, length: int):
    """y <- y * y + relu(y) through two inlined stages per step; all but the last inlined."""
    A = te.placeholder((n,), name="A")
    y = A
    stages = []

    def step(p, k):
        sq = te.compute((n,), lambda i: p[i] * p[i], name=f"sq{k}")
        relu = te.compute((n,), lambda i: te.max(p[i], 0.0), name=f"relu{k}")
        return sq, relu, te.compute((n,), lambda i: te.tanh(sq[i] + relu[i] * relu[i]),
                                    name=f"y{k}")

    for k in range(length):
        sq, relu, y = step(y, k)
        stages += [sq, relu, y]
    s = te.create_schedule(y.op)
    for t in stages[:-1]:
        s[t].compute_inline()
    return s, A, y


def te_reference(x: np.ndarray, length: int) -> np.ndarray:
    y = x.astype(np.float64)
    for _ in range(length):
        r = np.maximum(y, 0)
        y = np.tanh(y * y + r * r)
    return y


@pytest.mark.parametrize("length", [8, 24])
def test_te_chain_numbers(target, length):
    s, A, y = te_chain(64, length)
    f = ember.build(s, [A, y], target=target)
    x = RNG.uniform(-1.5, 1.5, 64).astype("float32")
    out = np.zeros(64, "float32")
    f(x, out)
    np.testing.assert_allclose(out, te_reference(x, length), rtol=2e-5, atol=2e-6)


def te_size(length: int) -> int:
    s, A, y = te_chain(64, length)
    return node_count(ember.lower(s, [A, y]).body)


def test_te_chain_size_is_linear():
    # copying at every read made the tree 4^length nodes: lengths 4 and 8 tell it quickly
    small, medium = te_size(4), te_size(8)
    assert medium < 2.5 * small, (small, medium)
    large = te_size(24)
    assert large < 3 * medium, (medium, large)


def graph_chain(length: int, tanh: bool = True):
    """[Tanh ->] Mul(t, t), repeated: each Mul reads its input twice (one fused kernel)."""
    b = GraphBuilder("chain")
    y = b.input("x", (4, 40), "float32")
    for _ in range(length):
        (t,) = b.add("Tanh", [y]) if tanh else (y,)
        (y,) = b.add("Mul", [t, t])
    return b.finish([y])


def kernel_ir(graph) -> list[str]:
    target = Target("llvm")
    groups = fused_groups(optimize(graph, 3, target))
    return [str(codegen_llvm(lower_kernels(g, target), target)) for g in groups]


def test_fused_chain_ir_is_linear_and_vectorized():
    """Mul(y, y) chains of 4, 8 and 24 nodes: one kernel each, LLVM IR growing linearly."""
    (ir4,), (ir8,) = kernel_ir(graph_chain(4, tanh=False)), kernel_ir(graph_chain(8, tanh=False))
    assert len(ir8) < 2.5 * len(ir4), (len(ir4), len(ir8))   # copies: 16x
    (ir24,) = kernel_ir(graph_chain(24, tanh=False))           # one fused kernel
    assert len(ir24) < 3 * len(ir8), (len(ir8), len(ir24))
    assert len(re.findall(r"fmul contract <\d+ x float>", ir24)) == 24  # vectorized, once each


@pytest.mark.parametrize("length", [3, 16])
def test_fused_chain_numbers(length):
    model = ember.compile(graph_chain(length), cache=False, jobs=1)
    x = RNG.uniform(-2, 2, (4, 40)).astype("float32")
    (got,) = model(x)
    want = x.astype(np.float64)
    for _ in range(length):
        want = np.tanh(want) ** 2
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_diamond_graph_numbers():
    """a = tanh(y); y = a + a * a, repeated (a read three times; groups of up to 32 nodes)."""
    b = GraphBuilder("diamond")
    y = b.input("x", (3, 17), "float32")
    for _ in range(14):
        (a,) = b.add("Tanh", [y])
        (m,) = b.add("Mul", [a, a])
        (y,) = b.add("Add", [a, m])
    model = ember.compile(b.finish([y]), cache=False, jobs=1)
    x = RNG.uniform(-2, 2, (3, 17)).astype("float32")
    want = x.astype(np.float64)
    for _ in range(14):
        a = np.tanh(want)
        want = a + a * a
    np.testing.assert_allclose(model(x)[0], want, rtol=2e-5, atol=1e-6)


def test_shared_read_in_branch_stays_guarded(target):
    """A value read twice inside an if_then_else branch is bound inside it: the loads of the
    padding the branch skips are predicated, and the numbers are right."""
    n = 33
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((n,), lambda i: te.if_then_else(i > 0, B[i - 1] * B[i - 1], B[i] + B[i]),
                   name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    func = ember.lower(s, [A, C])
    lets = []
    post_order_visit(func.body, lambda e: lets.append(e) if isinstance(e, E.Let) else None)
    assert len(lets) == 2                                 # one per branch
    for let in lets:
        loads = []
        post_order_visit(let.value, lambda e: loads.append(e) if isinstance(e, E.Load) else None)
        assert loads and all(ld.predicate is not None for ld in loads)
    f = ember.build(s, [A, C], target=target)
    x = RNG.standard_normal(n).astype("float32")
    out = np.zeros(n, "float32")
    f(x, out)
    b = 3.0 * x
    want = np.where(np.arange(n) > 0, np.roll(b, 1) ** 2, 2 * b)
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_shared_read_in_reduction(target):
    """sum_k e * e + e with e = exp(A) inlined: bound inside the reduction's source."""
    A = te.placeholder((6, 20), name="A")
    Ex = te.compute((6, 20), lambda i, k: te.exp(A[i, k]), name="Ex")
    k = te.reduce_axis((0, 20), name="k")
    S = te.compute((6,), lambda i: te.sum(Ex[i, k] * Ex[i, k] + Ex[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    s[Ex].compute_inline()
    f = ember.build(s, [A, S], target=target)
    x = RNG.standard_normal((6, 20)).astype("float32")
    out = np.zeros(6, "float32")
    f(x, out)
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(out, (e * e + e).sum(axis=1), rtol=1e-5)


def test_shared_computed_index(target):
    """An inlined index stage read twice is substituted into each index (bound inference
    reads the indices), while the gathered value read twice is bound."""
    data = te.placeholder((10,), name="data")
    idx = te.placeholder((7,), "int32", name="idx")
    wrapped = te.compute((7,), lambda i: te.if_then_else(idx[i] < 0, idx[i] + 10, idx[i]),
                         name="wrapped")
    gathered = te.compute((7,), lambda i: data[wrapped[i]] * 2.0, name="gathered")
    out = te.compute((7,), lambda i: gathered[i] * gathered[i] + wrapped[i].astype("float32"),
                     name="out")
    s = te.create_schedule(out.op)
    s[wrapped].compute_inline()
    s[gathered].compute_inline()
    f = ember.build(s, [data, idx, out], target=target)
    d = RNG.standard_normal(10).astype("float32")
    ix = RNG.integers(-10, 10, 7).astype("int32")
    res = np.zeros(7, "float32")
    f(d, ix, res)
    w = np.where(ix < 0, ix + 10, ix)
    np.testing.assert_allclose(res, (2 * d[w]) ** 2 + w, rtol=1e-6)


def test_producer_with_its_own_let(target):
    """A producer whose body already holds a Let (as the image ops build) inlined twice."""
    from ember.tir.expr import Let, Var

    A = te.placeholder((16,), name="A")

    def body(i):
        v = Var("v", "int32")
        return Let(v, (i * 3) % 16, A[v] + A[v] * A[v])

    P = te.compute((16,), body, name="P")
    C = te.compute((16,), lambda i: P[i] * P[i] - P[(i + 1) % 16], name="C")
    s = te.create_schedule(C.op)
    s[P].compute_inline()
    f = ember.build(s, [A, C], target=target)
    x = RNG.standard_normal(16).astype("float32")
    out = np.zeros(16, "float32")
    f(x, out)
    j = np.arange(16)
    p = x[(j * 3) % 16] + x[(j * 3) % 16] ** 2
    np.testing.assert_allclose(out, p * p - np.roll(p, -1), rtol=1e-5, atol=1e-6)


def padded_chain(length: int):
    """A chain of `length` inlined y * y stages read only inside an if_then_else branch."""
    n = 24
    A = te.placeholder((n,), name="A")
    y, stages = A, []

    def square(p, k):
        return te.compute((n,), lambda i: p[i] * p[i], name=f"sq{k}")

    for k in range(length):
        y = square(y, k)
        stages.append(y)
    C = te.compute((n + 2,), lambda i: te.if_then_else(te.all(i >= 1, i <= n), y[i - 1], 0.5),
                   name="C")
    s = te.create_schedule(C.op)
    for t in stages:
        s[t].compute_inline()
    return s, A, C


def test_branch_chain_c_source_is_linear(target):
    """In a branch, the C back end keeps the bound values as locals (their loads carry their
    predicates) instead of substituting them at every use."""
    from ember.codegen.c import codegen_c

    def source(length):
        s, A, C = padded_chain(length)
        return codegen_c([run_passes(ember.lower(s, [A, C], simple=False))])

    small, medium, large = source(3), source(6), source(18)
    assert len(medium) < 2 * len(small) and len(large) < 3 * len(medium), \
        (len(small), len(medium), len(large))
    s, A, C = padded_chain(5)
    f = ember.build(s, [A, C], target=target)
    x = RNG.uniform(0.5, 1.5, 24).astype("float32")
    out = np.zeros(26, "float32")
    f(x, out)
    want = np.full(26, 0.5, "float32")
    want[1:25] = x.astype(np.float64) ** 32
    np.testing.assert_allclose(out, want, rtol=1e-5)
