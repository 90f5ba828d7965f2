"""te computations under several schedules, built for llvm and c, checked against numpy."""

import numpy as np
import pytest

import ember
from ember import te
from ember.testing import conv2d_nchw
from ember.testing import conv2d_reference as conv_reference

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run(s, args, arrays, target):
    f = ember.build(s, args, target=target)
    f(*arrays)
    return arrays


def test_elementwise_vectorized(target):
    n = 1000
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + te.exp(B[i]), name="C")
    s = te.create_schedule(C.op)
    o, i = s[C].split(C.op.axis[0], 16)
    s[C].vectorize(i)
    s[C].parallel(o)
    a, b = rand(n), rand(n)
    c = np.zeros(n, "float32")
    run(s, [A, B, C], [a, b, c], target)
    np.testing.assert_allclose(c, a * 2 + np.exp(b), rtol=1e-5, atol=1e-6)


def test_broadcast_add(target):
    A = te.placeholder((8, 30), name="A")
    B = te.placeholder((30,), name="B")
    C = te.compute((8, 30), lambda i, j: A[i, j] + B[j], name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], 8)
    s[C].vectorize(ji)
    a, b = rand(8, 30), rand(30)
    c = np.zeros((8, 30), "float32")
    run(s, [A, B, C], [a, b, c], target)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


@pytest.mark.parametrize("schedule", ["default", "tiled", "reordered", "fused"])
def test_matmul_schedules(target, schedule):
    M, N, K = 37, 45, 29
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    if schedule == "tiled":
        io, jo, ii, ji = s[C].tile(i, j, 8, 16)
        ko, ki = s[C].split(k, 4)
        s[C].reorder(io, jo, ko, ii, ki, ji)
        s[C].vectorize(ji)
        s[C].parallel(io)
    elif schedule == "reordered":
        s[C].reorder(k, j, i)
    elif schedule == "fused":
        f = s[C].fuse(i, j)
        fo, fi = s[C].split(f, 7)
        s[C].parallel(fo)
        s[C].unroll(fi)
    a, b = rand(M, K), rand(K, N)
    c = np.zeros((M, N), "float32")
    run(s, [A, B, C], [a, b, c], target)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_reductions_max_min(target):
    A = te.placeholder((10, 33), name="A")
    k = te.reduce_axis((0, 33), name="k")
    Mx = te.compute((10,), lambda i: te.max(A[i, k], axis=k), name="Mx")
    k2 = te.reduce_axis((0, 33), name="k2")
    Mn = te.compute((10,), lambda i: te.min(A[i, k2], axis=k2), name="Mn")
    s = te.create_schedule([Mx.op, Mn.op])
    a = rand(10, 33)
    mx, mn = np.zeros(10, "float32"), np.zeros(10, "float32")
    run(s, [A, Mx, Mn], [a, mx, mn], target)
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_array_equal(mn, a.min(axis=1))


def test_argmax_comm_reducer(target):
    argmax = te.comm_reducer(
        lambda x, y: (te.if_then_else(x[1] >= y[1], x[0], y[0]), te.max(x[1], y[1])),
        lambda idx_t, val_t: (te.const(-1, idx_t), te.min_value(val_t)), name="argmax")
    A = te.placeholder((6, 17), name="A")
    k = te.reduce_axis((0, 17), name="k")
    idx, val = te.compute((6,), lambda i: argmax((k, A[i, k]), axis=k), name="am")
    s = te.create_schedule(idx.op)
    a = rand(6, 17)
    out_i, out_v = np.zeros(6, "int32"), np.zeros(6, "float32")
    run(s, [A, idx, val], [a, out_i, out_v], target)
    np.testing.assert_array_equal(out_i, a.argmax(axis=1))
    np.testing.assert_array_equal(out_v, a.max(axis=1))


def test_softmax(target):
    n, m = 4, 50
    X = te.placeholder((n, m), name="X")
    k1 = te.reduce_axis((0, m), name="k1")
    mx = te.compute((n,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    e = te.compute((n, m), lambda i, j: te.exp(X[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, m), name="k2")
    sm = te.compute((n,), lambda i: te.sum(e[i, k2], axis=k2), name="sm")
    out = te.compute((n, m), lambda i, j: e[i, j] / sm[i], name="out")
    s = te.create_schedule(out.op)
    s[mx].compute_at(s[out], out.op.axis[0])
    s[e].compute_at(s[out], out.op.axis[0])
    s[sm].compute_at(s[out], out.op.axis[0])
    s[out].parallel(out.op.axis[0])
    x = rand(n, m)
    y = np.zeros((n, m), "float32")
    run(s, [X, out], [x, y], target)
    ex = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, ex / ex.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("schedule", ["inline", "compute_at", "blocked"])
def test_conv2d(target, schedule):
    X, Wt, Xp, Y = conv2d_nchw(1, 3, 10, 11, 8, 3, 1)
    s = te.create_schedule(Y.op)
    n, f, y, x = Y.op.axis
    if schedule == "inline":
        s[Xp].compute_inline()
    elif schedule == "compute_at":
        s[Xp].compute_at(s[Y], y)
    else:
        s[Xp].compute_inline()
        fo, fi = s[Y].split(f, 4)
        xo, xi = s[Y].split(x, 4)
        rc, ry, rx = s[Y].op.reduce_axis
        s[Y].reorder(n, fo, y, xo, rc, ry, rx, fi, xi)
        s[Y].vectorize(xi)
        s[Y].parallel(fo)
    xv, wv = rand(1, 3, 10, 11), rand(8, 3, 3, 3)
    out = np.zeros((1, 8, 10, 11), "float32")
    run(s, [X, Wt, Y], [xv, wv, out], target)
    np.testing.assert_allclose(out, conv_reference(xv, wv, 1), rtol=1e-4, atol=1e-4)


def test_scan_cumsum(target):
    T, n = 7, 5
    X = te.placeholder((T, n), name="X")
    state = te.placeholder((T, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((T, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    res = te.scan(init, update, state, name="cumsum")
    s = te.create_schedule(res.op)
    x = rand(T, n)
    out = np.zeros((T, n), "float32")
    run(s, [X, res], [x, out], target)
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


def test_scan_rnn_with_matmul_body(target):
    """h[t] = tanh(h[t-1] @ W + X[t]): the update needs a reduction inside the time loop."""
    T, n = 6, 8
    X = te.placeholder((T, n), name="X")
    W = te.placeholder((n, n), name="W")
    h = te.placeholder((T, n), name="h")
    init = te.compute((1, n), lambda _, i: te.tanh(X[0, i]), name="h0")
    k = te.reduce_axis((0, n), name="k")
    mm = te.compute((T, n), lambda t, j: te.sum(h[t - 1, k] * W[k, j], axis=k), name="mm")
    update = te.compute((T, n), lambda t, j: te.tanh(mm[t, j] + X[t, j]), name="upd")
    res = te.scan(init, update, h, name="rnn")
    s = te.create_schedule(res.op)
    x, w = rand(T, n), rand(n, n) * 0.3
    out = np.zeros((T, n), "float32")
    run(s, [X, W, res], [x, w, out], target)
    ref = np.zeros((T, n), "float32")
    ref[0] = np.tanh(x[0])
    for t in range(1, T):
        ref[t] = np.tanh(ref[t - 1] @ w + x[t])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_extern_loop_body(target):
    from ember import tir

    n = 20
    A = te.placeholder((n,), name="A")

    def body(ins, outs):
        i = tir.Var("i")
        return tir.For(i, tir.const(0), tir.const(n), tir.ForKind.SERIAL,
                       tir.Store(outs[0], ins[0].load(i) * 3.0 + 1.0, (i,)))

    B = te.extern((n,), [A], body, name="triple")
    C = te.compute((n,), lambda i: B[i] - 1.0, name="C")
    s = te.create_schedule(C.op)
    a = rand(n)
    c = np.zeros(n, "float32")
    run(s, [A, C], [a, c], target)
    np.testing.assert_allclose(c, a * 3.0, rtol=1e-6, atol=1e-6)


def test_cache_read_write_and_rfactor(target):
    M, N, K = 16, 32, 64
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    AA = s.cache_read(A, "local", [CC])
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].vectorize(cj)
    s[AA].compute_at(s[CC], ck)
    s[C].vectorize(ji)
    a, b = rand(M, K), rand(K, N)
    c = np.zeros((M, N), "float32")
    run(s, [A, B, C], [a, b, c], target)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

    # rfactor a row sum and vectorize the factored axis
    X = te.placeholder((8, 100), name="X")
    r = te.reduce_axis((0, 100), name="r")
    S = te.compute((8,), lambda i: te.sum(X[i, r], axis=r), name="S")
    s2 = te.create_schedule(S.op)
    ro, ri = s2[S].split(r, 16)
    SF = s2.rfactor(S, ri)
    s2[SF].vectorize(s2[SF].op.axis[0])
    x = rand(8, 100)
    out = np.zeros(8, "float32")
    run(s2, [X, S], [x, out], target)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_storage_align_and_pragma(target):
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 32, 1)
    s[C].pragma(C.op.axis[0], "auto_unroll_max_step", 16)
    a = rand(16, 16)
    c = np.zeros((16, 16), "float32")
    run(s, [A, C], [a, c], target)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    text = str(ember.lower(s, [A, C]))
    assert "auto_unroll_max_step" in text


@pytest.mark.parametrize("dtype", ["float64", "int32", "int8", "uint8", "int64", "float16"])
def test_dtypes(target, dtype):
    n = 40
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    C = te.compute((n,), lambda i: te.max(A[i], B[i]) + A[i], name="C")
    s = te.create_schedule(C.op)
    o, i = s[C].split(C.op.axis[0], 8)
    s[C].vectorize(i)
    if np.dtype(dtype).kind == "f":
        a, b = rand(n, dtype=dtype), rand(n, dtype=dtype)
    else:
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -50), min(info.max, 50)
        a = RNG.integers(lo, hi, n).astype(dtype)
        b = RNG.integers(lo, hi, n).astype(dtype)
    c = np.zeros(n, dtype)
    run(s, [A, B, C], [a, b, c], target)
    np.testing.assert_allclose(c.astype("float64"), (np.maximum(a, b) + a).astype("float64"),
                               rtol=1e-3)


def test_integer_floor_div_mod(target):
    n = 64
    A = te.placeholder((n,), "int32", name="A")
    C = te.compute((n,), lambda i: A[i] // 7 + A[i] % 5 * 100 + (i - 30) // 4 * 10000,
                   name="C")
    s = te.create_schedule(C.op)
    a = RNG.integers(-1000, 1000, n).astype("int32")
    c = np.zeros(n, "int32")
    run(s, [A, C], [a, c], target)
    i = np.arange(n)
    np.testing.assert_array_equal(c, a // 7 + a % 5 * 100 + (i - 30) // 4 * 10000)


def test_math_intrinsics(target):
    n = 64
    A = te.placeholder((n,), name="A")
    fns = {
        "exp": (te.exp, np.exp), "tanh": (te.tanh, np.tanh),
        "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        "sqrt_abs": (lambda x: te.sqrt(te.abs(x)), lambda x: np.sqrt(np.abs(x))),
        "floor": (te.floor, np.floor), "round": (te.round, np.round),
        "log_abs": (lambda x: te.log(te.abs(x) + 1.0), lambda x: np.log(np.abs(x) + 1)),
    }
    for name, (fn, ref) in fns.items():
        C = te.compute((n,), lambda i: fn(A[i]), name=name)
        s = te.create_schedule(C.op)
        o, i = s[C].split(C.op.axis[0], 16)
        s[C].vectorize(i)
        a = rand(n) * 3
        c = np.zeros(n, "float32")
        run(s, [A, C], [a, c], target)
        np.testing.assert_allclose(c, ref(a), rtol=2e-5, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint16", "int64"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_integer_division_by_zero_does_not_trap(target, dtype, vectorize):
    """x // 0 and x % 0 give 0 and INT_MIN // -1 wraps, like numpy, instead of SIGFPE."""
    n = 37  # a vector tail too
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    Q = te.compute((n,), lambda i: A[i] // B[i], name="Q")
    R = te.compute((n,), lambda i: A[i] % B[i], name="R")
    s = te.create_schedule([Q.op, R.op])
    if vectorize:
        for T in (Q, R):
            o, i = s[T].split(T.op.axis[0], 8)
            s[T].vectorize(i)
    info = np.iinfo(dtype)
    a = RNG.integers(max(info.min, -100), min(info.max, 100), n).astype(dtype)
    b = RNG.integers(max(info.min, -5), 6, n).astype(dtype)
    b[::4] = 0
    if info.min < 0:
        a[1], b[1] = info.min, -1
    q, r = np.zeros(n, dtype), np.zeros(n, dtype)
    ember.build(s, [A, B, Q, R], target=target)(a, b, q, r)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)
