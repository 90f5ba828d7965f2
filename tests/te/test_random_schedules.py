"""Any legal schedule gives the same numbers: random primitive sequences on matmul and conv2d."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember import te
from ember.tir.expr import IterKind

from ember.testing import conv2d_nchw
from ember.testing import conv2d_reference as conv_reference

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def apply_random(draw, s, stage, steps=4):
    """Apply a random sequence of legal loop primitives to `stage`."""
    for _ in range(steps):
        leaves = list(stage.leaf_iter_vars)
        action = draw(st.sampled_from(["split", "split", "reorder", "fuse", "none"]))
        if action == "split":
            iv = draw(st.sampled_from(leaves))
            if draw(st.booleans()):
                stage.split(iv, factor=draw(st.integers(1, 9)))
            else:
                stage.split(iv, nparts=draw(st.integers(1, 5)))
        elif action == "reorder":
            stage.reorder(*draw(st.permutations(leaves)))
        elif action == "fuse" and len(leaves) > 1:
            p = draw(st.integers(0, len(leaves) - 2))
            if leaves[p].kind == leaves[p + 1].kind:
                stage.fuse(leaves[p], leaves[p + 1])
    leaves = list(stage.leaf_iter_vars)
    inner = leaves[-1]
    if inner.kind != IterKind.REDUCE and draw(st.booleans()):
        stage.vectorize(inner)
    outer = leaves[0]
    if outer.kind != IterKind.REDUCE and draw(st.booleans()) and outer is not inner:
        stage.parallel(outer)
    if len(leaves) > 2 and draw(st.booleans()):
        middle = leaves[len(leaves) // 2]
        if middle is not inner and middle is not outer:
            stage.unroll(middle)


@st.composite
def matmul_case(draw):
    M, N, K = 13, 20, 11
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    apply_random(draw, s, s[C])
    target = draw(st.sampled_from(["llvm", "c"]))
    return s, (A, B, C), (M, N, K), target


@SETTINGS
@given(matmul_case())
def test_random_matmul_schedules(case):
    s, args, (M, N, K), target = case
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    ember.build(s, list(args), target=target)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@st.composite
def conv_case(draw):
    X, W, Xp, Y = conv2d_nchw(1, 2, 7, 6, 4, 3, 1)
    s = te.create_schedule(Y.op)
    apply_random(draw, s, s[Y], steps=3)
    where = draw(st.sampled_from(["root", "inline", "at"]))
    if where == "inline":
        s[Xp].compute_inline()
    elif where == "at":
        spatial = [iv for iv in s[Y].leaf_iter_vars]
        s[Xp].compute_at(s[Y], draw(st.sampled_from(spatial)))
    target = draw(st.sampled_from(["llvm", "c"]))
    return s, (X, W, Y), target


@SETTINGS
@given(conv_case())
def test_random_conv2d_schedules(case):
    s, args, target = case
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 7, 6)).astype("float32")
    w = rng.standard_normal((4, 2, 3, 3)).astype("float32")
    y = np.zeros((1, 4, 7, 6), "float32")
    ember.build(s, list(args), target=target)(x, w, y)
    np.testing.assert_allclose(y, conv_reference(x, w, 1), rtol=1e-4, atol=1e-4)
