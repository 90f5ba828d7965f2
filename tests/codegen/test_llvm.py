"""LLVM back end: hand-built post-pipeline PrimFuncs run against numpy."""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before libgomp loads; idle threads sleep

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ember.codegen.jit import build_llvm, compile_llvm, emit_assembly, emit_object  # noqa: E402
from ember.errors import CodegenError  # noqa: E402
from ember.target import Target  # noqa: E402
from ember.tir import (  # noqa: E402
    Allocate, Broadcast, Call, Cast, Evaluate, FloorDiv, FloorMod, For, ForKind, IfThenElse,
    IntImm, Let, LetStmt, Load, Max, Min, PrimFunc, Ramp, Select, Store, Var, buffer, const,
    Seq, Stmt, seq,
)
from ember.tir.expr import Div, Expr  # noqa: E402

HOST = Target("llvm")
RNG = np.random.default_rng(0)
N = 64


def ramp(base: Expr, lanes: int, stride: int = 1) -> Ramp:
    return Ramp(base, const(stride, base.dtype), lanes)


def elementwise(fn, in_dtypes, out_dtype, n=N, lanes=1, name="k") -> PrimFunc:
    """out[i] = fn(in0[i], in1[i], ...), `lanes` elements per iteration."""
    ins = [buffer(f"in{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    out = buffer("out", (n,), out_dtype)
    i = Var("i")
    index = i if lanes == 1 else ramp(i * lanes, lanes)
    value = fn(*[Load(b, (index,)) for b in ins])
    return PrimFunc(name, (*ins, out), For(i, const(0), const(n // lanes), ForKind.SERIAL,
                                           Store(out, value, (index,))))


def run(func: PrimFunc, *inputs: np.ndarray, out_dtype=None, n=N) -> np.ndarray:
    dtype = out_dtype or func.params[-1].dtype.numpy
    out = np.zeros(n, dtype=dtype)
    build_llvm(func, HOST)(*inputs, out)
    return out


def rand(dtype: str, n: int = N, low: float = -10, high: float = 10) -> np.ndarray:
    if dtype == "bool":
        return RNG.random(n) < 0.5
    if np.dtype(dtype).kind == "f":
        return RNG.uniform(low, high, n).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(max(low, info.min), min(high, info.max), n, endpoint=True).astype(dtype)


# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "int64",
                                   "uint8"])
@pytest.mark.parametrize("lanes", [1, 16])
def test_elementwise_arithmetic(dtype: str, lanes: int) -> None:
    f = elementwise(lambda a, b: (a + b) * a - b, [dtype, dtype], dtype, lanes=lanes)
    a, b = rand(dtype, low=0, high=9), rand(dtype, low=0, high=9)
    expected = (a + b) * a - b
    out = run(f, a, b)
    if dtype == "float16":
        # numpy rounds after each operation; a CPU with native fp16 arithmetic (AVX512-FP16)
        # contracts the multiply and subtract into one FMA that rounds once. The two exact
        # differences differ by at most half an ulp of the product p (numpy's extra rounding),
        # and each result is then rounded by at most half an ulp of itself: so they differ by
        # at most ulp(p) / 2 + ulp(result), and an fp16 ulp(x) is at most 2^-10 |x|.
        product = np.abs((a.astype("float64") + b) * a)
        error = np.abs(out.astype("float64") - expected.astype("float64"))
        bound = 2.0**-10 * product + 2.0**-9 * np.abs(expected.astype("float64")) + 1e-3
        assert (error <= bound).all(), (error - bound).max()
        return
    np.testing.assert_allclose(out.astype("float64"), expected.astype("float64"), rtol=1e-6)


@pytest.mark.parametrize("cpu,native", [("sapphirerapids", True), ("znver4", False)])
def test_float16_arithmetic_code_paths(cpu: str, native: bool) -> None:
    """Both fp16 code paths compile (asm only: this machine may lack AVX512-FP16): native
    half-precision FMAs where the CPU has them, float32 arithmetic around conversions else."""
    f = elementwise(lambda a, b: (a + b) * a - b, ["float16"] * 2, "float16", lanes=16)
    asm = emit_assembly([f], f"llvm -mtriple=x86_64-unknown-linux-gnu -mcpu={cpu}")
    ops = {line.split()[0] for line in asm.splitlines() if line.strip().startswith("v")}
    if native:  # one rounding for (a + b) * a - b: why the test above allows two ulps
        assert any(op.startswith("vfmsub") and op.endswith("ph") for op in ops), ops
    else:  # every operation rounded back to half, as numpy does
        assert {"vcvtph2ps", "vcvtps2ph", "vmulps", "vsubps"} <= ops, ops


@pytest.mark.parametrize("lanes", [1, 16])
def test_narrow_integers_wrap_like_numpy(lanes: int) -> None:
    f = elementwise(lambda a, b: a * b + a, ["int8", "int8"], "int8", lanes=lanes)
    a, b = rand("int8", low=-128, high=127), rand("int8", low=-128, high=127)
    np.testing.assert_array_equal(run(f, a, b), a * b + a)


def test_vector_fma_uses_zmm_registers() -> None:
    f = elementwise(lambda a, b, c: a * b + c, ["float32"] * 3, "float32", n=1024, lanes=16)
    a, b, c = (rand("float32", 1024) for _ in range(3))
    np.testing.assert_allclose(run(f, a, b, c, n=1024), a * b + c, rtol=1e-5, atol=1e-5)
    if HOST.vector_bits == 512:
        asm = build_llvm(f, HOST).get_source("asm")
        assert any("vfmadd" in line and "zmm" in line for line in asm.splitlines())


def test_gather_and_strided_loads() -> None:
    src = buffer("src", (3 * N,), "float32")
    idx = buffer("idx", (N,), "int32")
    out = buffer("out", (N,), "float32")
    i = Var("i")
    gathered = Load(src, (Load(idx, (ramp(i * 8, 8),)),))
    strided = Load(src, (ramp(i * 24, 8, stride=3),))
    body = For(i, const(0), const(N // 8), ForKind.SERIAL,
               Store(out, gathered + strided, (ramp(i * 8, 8),)))
    s, ix = rand("float32", 3 * N), RNG.integers(0, 3 * N, N).astype("int32")
    result = np.zeros(N, "float32")
    build_llvm(PrimFunc("gather", (src, idx, out), body))(s, ix, result)
    np.testing.assert_allclose(result, s[ix] + s[::3][:N], rtol=1e-6)


def test_scatter_and_broadcast_index() -> None:
    src = buffer("src", (N,), "float32")
    out = buffer("out", (2 * N,), "float32")
    i = Var("i")
    # out[2*j] = src[j] + src[0] for the 8 lanes j of each iteration
    value = Load(src, (ramp(i * 8, 8),)) + Load(src, (Broadcast(const(0), 8),))
    body = For(i, const(0), const(N // 8), ForKind.SERIAL,
               Store(out, value, (ramp(i * 16, 8, stride=2),)))
    s = rand("float32")
    result = np.zeros(2 * N, "float32")
    build_llvm(PrimFunc("scatter", (src, out), body))(s, result)
    np.testing.assert_allclose(result[::2], s + s[0], rtol=1e-6)
    assert not result[1::2].any()


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_comparisons_and_select(lanes: int, dtype: str) -> None:
    ops = {"lt": (lambda a, b: a < b), "le": (lambda a, b: a <= b), "gt": (lambda a, b: a > b),
           "ge": (lambda a, b: a >= b), "eq": (lambda a, b: a == b), "ne": (lambda a, b: a != b)}
    a, b = rand(dtype, low=0, high=5), rand(dtype, low=0, high=5)
    for name, op in ops.items():
        f = elementwise(op, [dtype, dtype], "bool", lanes=lanes, name=name)
        np.testing.assert_array_equal(run(f, a, b), op(a, b), err_msg=name)
    f = elementwise(lambda x, y: Select(x < y, y - x, x - y), [dtype, dtype], dtype, lanes=lanes)
    np.testing.assert_array_equal(run(f, a, b), np.maximum(a, b) - np.minimum(a, b))


def test_bool_logic_in_memory() -> None:
    f = elementwise(lambda a, b: (a & ~b) | (b & ~a), ["bool", "bool"], "bool", lanes=8)
    a, b = rand("bool"), rand("bool")
    np.testing.assert_array_equal(run(f, a, b), a ^ b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int64"])
def test_min_max(dtype: str) -> None:
    f = elementwise(lambda a, b: Max(Min(a, b), Broadcast(const(3, dtype), 16)),
                    [dtype, dtype], dtype, lanes=16)
    a, b = rand(dtype, low=0, high=9), rand(dtype, low=0, high=9)
    np.testing.assert_array_equal(run(f, a, b), np.maximum(np.minimum(a, b), 3))


_CAST_TYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
               "uint32", "bool"]


@pytest.mark.parametrize("src", _CAST_TYPES)
def test_casts(src: str) -> None:
    values = rand(src, low=0, high=100)
    if src != "bool" and np.dtype(src).kind in "fi":
        values[::2] = -values[::2]  # negative values too, where the source has them
    for dst in _CAST_TYPES:
        if np.dtype(dst).kind in "ub" and src != "bool" and np.dtype(src).kind in "fi":
            data = np.abs(values)  # float/int -> unsigned of a negative is not portable
        else:
            data = values
        for lanes in (1, 8):
            f = elementwise(lambda a: a.astype(dst), [src], dst, lanes=lanes, name="cast")
            expected = data.astype(dst)
            np.testing.assert_array_equal(run(f, data), expected, err_msg=f"{src}->{dst}")


def _divisors(dtype: str) -> np.ndarray:
    d = rand(dtype, low=1, high=9)
    d[::3] = -d[::3]
    return d


@pytest.mark.parametrize("lanes", [1, 8])
def test_floordiv_floormod_variable_divisor(lanes: int) -> None:
    a, b = rand("int32", low=-50, high=50), _divisors("int32")
    f = elementwise(lambda x, y: FloorDiv(x, y), ["int32"] * 2, "int32", lanes=lanes)
    np.testing.assert_array_equal(run(f, a, b), a // b)
    f = elementwise(lambda x, y: FloorMod(x, y), ["int32"] * 2, "int32", lanes=lanes)
    np.testing.assert_array_equal(run(f, a, b), a % b)
    f = elementwise(lambda x, y: Div(x, y), ["int32"] * 2, "int32", lanes=lanes)
    np.testing.assert_array_equal(run(f, a, b), np.trunc(a / b).astype("int32"))


@pytest.mark.parametrize("divisor", [8, 7, -3, 1])
@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_floordiv_floormod_constant_divisor(divisor: int, dtype: str) -> None:
    a = rand(dtype, low=-100, high=100)
    for lanes in (1, 8):
        def c(x: Expr) -> Expr:
            return const(divisor, x.dtype)
        f = elementwise(lambda x: FloorDiv(x, c(x)), [dtype], dtype, lanes=lanes)
        np.testing.assert_array_equal(run(f, a), a // divisor)
        f = elementwise(lambda x: FloorMod(x, c(x)), [dtype], dtype, lanes=lanes)
        np.testing.assert_array_equal(run(f, a), a % divisor)


def test_unsigned_floordiv() -> None:
    a, b = rand("uint8", low=0, high=255), rand("uint8", low=1, high=20)
    f = elementwise(lambda x, y: FloorMod(x, y) + FloorDiv(x, y), ["uint8"] * 2, "uint8")
    np.testing.assert_array_equal(run(f, a, b), a % b + a // b)


_erf = np.vectorize(math.erf)
_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": _erf, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "fabs": np.abs, "sin": np.sin, "cos": np.cos, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
_POSITIVE = ("log", "log2", "sqrt", "rsqrt")
_DOMAINS = {"asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 5)}


@pytest.mark.parametrize("name", sorted(_UNARY))
@pytest.mark.parametrize("dtype,lanes", [("float32", 1), ("float32", 16), ("float64", 4),
                                         ("float16", 8)])
def test_unary_intrinsics(name: str, dtype: str, lanes: int) -> None:
    low, high = _DOMAINS.get(name, (0.1, 5) if name in _POSITIVE else (-5, 5))
    x = rand(dtype, low=low, high=high)
    if name == "round":
        x[:4] = np.array([0.5, 1.5, 2.5, -0.5], dtype)  # halves round to even
    f = elementwise(lambda a: Call(a.dtype, name, (a,)), [dtype], dtype, lanes=lanes)
    expected = _UNARY[name](x.astype("float64"))
    tolerance = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(run(f, x).astype("float64"), expected, rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize("name,low,high", [("exp", -104, 89), ("tanh", -12, 12),
                                           ("tanh", -1e-3, 1e-3), ("sigmoid", -90, 90)])
def test_vector_float32_polynomials_are_accurate(name: str, low: float, high: float) -> None:
    n = 1 << 14
    x = np.linspace(low, high, n).astype("float32")
    f = elementwise(lambda a: Call(a.dtype, name, (a,)), ["float32"], "float32", n=n, lanes=16)
    with np.errstate(over="ignore"):
        expected = _UNARY[name](x.astype("float64")).astype("float32")
    np.testing.assert_allclose(run(f, x, n=n), expected, rtol=4e-7, atol=1e-44)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -200, 200, -1e4, 1e4,
                        -104.5, -103.5, -90, 88, -88, -1e-30], "float32")  # around e^x's
    # underflow: subnormal results computed, those below the smallest subnormal 0
    f16 = elementwise(lambda a: Call(a.dtype, name, (a,)), ["float32"], "float32", n=16,
                      lanes=16)
    with np.errstate(over="ignore"):
        expected = _UNARY[name](special.astype("float64")).astype("float32")
    np.testing.assert_allclose(run(f16, special, n=16), expected, rtol=4e-7, atol=1e-40)


@pytest.mark.parametrize("dtype,lanes", [("int8", 16), ("uint32", 8), ("int64", 1),
                                         ("uint64", 4)])
def test_bitwise_ops(dtype: str, lanes: int) -> None:
    from ember.tir.expr import BitwiseAnd, BitwiseOr, BitwiseXor, Not

    info = np.iinfo(dtype)
    a, b = (RNG.integers(info.min, info.max, N, dtype=dtype, endpoint=True) for _ in range(2))
    f = elementwise(lambda x, y: BitwiseXor(BitwiseAnd(x, y), Not(BitwiseOr(x, y))),
                    [dtype] * 2, dtype, lanes=lanes)
    np.testing.assert_array_equal(run(f, a, b), (a & b) ^ ~(a | b))


@pytest.mark.parametrize("lanes", [1, 16])
def test_pow_and_fma(lanes: int) -> None:
    x, y, z = rand("float32", low=0.5, high=3), rand("float32", low=-2, high=2), rand("float32")
    f = elementwise(lambda a, b, c: Call(a.dtype, "pow", (a, b)) + Call(a.dtype, "fma", (a, b, c)),
                    ["float32"] * 3, "float32", lanes=lanes)
    np.testing.assert_allclose(run(f, x, y, z), x ** y + (x * y + z), rtol=1e-5)


def test_intrinsic_arity_is_checked() -> None:
    f = elementwise(lambda a: Call(a.dtype, "exp", (a, a)), ["float32"], "float32")
    with pytest.raises(CodegenError, match="'exp' takes 1 argument"):
        build_llvm(f)


# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [256, 65536])  # stack, then heap
def test_allocate_temporary(n: int) -> None:
    a, b = buffer("A", (n,), "float32"), buffer("B", (n,), "float32")
    t = buffer("T", (n,), "float32", scope="local" if n < 1000 else "global")
    i, j = Var("i"), Var("j")
    body = Allocate(t, seq(
        For(i, const(0), const(n), ForKind.SERIAL, Store(t, Load(a, (i,)) * 2.0, (i,))),
        For(j, const(0), const(n), ForKind.SERIAL,
            Store(b, Load(t, (const(n - 1) - j,)) + 1.0, (j,)))))
    x, out = rand("float32", n), np.zeros(n, "float32")
    mod = build_llvm(PrimFunc("tmp", (a, b), body))
    mod(x, out)
    np.testing.assert_allclose(out, x[::-1] * 2 + 1, rtol=1e-6)
    assert ("ember_alloc" in mod.get_source("ll")) == (n * 4 > 64 * 1024)


@pytest.mark.parametrize("n", [20000, 70000, 30000])  # heap blocks of several sizes
def test_heap_buffers_in_parallel_rows_are_private(n: int) -> None:
    """Every row of a parallel loop takes its own heap buffer from the runtime's block cache
    (reused across calls and kernels); rows must not see each other's data."""
    from ember.runtime import threadpool

    rows = 24
    a, b = buffer("A", (rows * n,), "float32"), buffer("B", (rows * n,), "float32")
    t = buffer("T", (n,), "float32", scope="global")
    i, j, k = Var("i"), Var("j"), Var("k")
    row = Allocate(t, seq(
        For(j, const(0), const(n), ForKind.SERIAL, Store(t, Load(a, (i * n + j,)) * 2.0, (j,))),
        For(k, const(0), const(n), ForKind.SERIAL,
            Store(b, Load(t, (const(n - 1) - k,)) + 1.0, (i * n + k,)))))
    mod = build_llvm(PrimFunc(f"rows{n}", (a, b),
                              For(i, const(0), const(rows), ForKind.PARALLEL, row)))
    x = rand("float32", rows * n)
    want = (x.reshape(rows, n)[:, ::-1] * 2 + 1).reshape(-1)
    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(2)
        for _ in range(3):
            out = np.zeros(rows * n, "float32")
            mod(x, out)
            np.testing.assert_allclose(out, want, rtol=1e-6)
    finally:
        threadpool.set_num_threads(previous)


def test_serial_reduction_with_scalar_param() -> None:
    rows, cols = 16, 33
    a, c = buffer("A", (rows * cols,), "float32"), buffer("C", (rows,), "float32")
    scale = Var("scale", "float32")
    i, k = Var("i"), Var("k")
    body = For(i, const(0), const(rows), ForKind.SERIAL, seq(
        Store(c, const(0.0), (i,)),
        For(k, const(0), const(cols), ForKind.SERIAL,
            Store(c, Load(c, (i,)) + Load(a, (i * cols + k,)) * scale, (i,)))))
    x, out = rand("float32", rows * cols), np.zeros(rows, "float32")
    build_llvm(PrimFunc("rowsum", (a, c, scale), body))(x, out, 0.5)
    np.testing.assert_allclose(out, x.reshape(rows, cols).sum(1) * 0.5, rtol=1e-5, atol=1e-5)


def test_leftover_unrolled_loops_carry_unroll_hints() -> None:
    from ember.codegen.llvm import codegen_llvm

    a = buffer("A", (64,), "float32")
    i, j, k = Var("i"), Var("j"), Var("k")
    body = seq(
        For(i, const(0), const(8), ForKind.SERIAL,
            For(j, const(0), const(8), ForKind.UNROLLED,
                Store(a, Load(a, (i * 8 + j,)) * 2.0, (i * 8 + j,)))),
        For(k, const(0), const(64), ForKind.UNROLLED, Store(a, Load(a, (k,)) + 1.0, (k,))))
    func = PrimFunc("unrolled", (a,), body)
    text = str(codegen_llvm([func], HOST))
    assert text.count("!llvm.loop") == 2 and "llvm.loop.unroll.full" in text
    x = rand("float32")
    expected = x * 2 + 1
    build_llvm(func)(x)
    np.testing.assert_allclose(x, expected, rtol=1e-6)


def test_let_if_then_else_and_predicates() -> None:
    a, b = buffer("A", (N,), "float32"), buffer("B", (N,), "float32")
    i, v = Var("i"), Var("v", "float32")
    body = For(i, const(0), const(N), ForKind.SERIAL, LetStmt(v, Load(a, (i,)) * 3.0, IfThenElse(
        FloorMod(i, const(2)) == 0,
        Store(b, Let(Var("w", "float32"), v, v + 1.0), (i,)),
        Store(b, Load(a, (i,), predicate=i < 40) - v, (i,), predicate=i > 10))))
    x, out = rand("float32"), np.full(N, 7, "float32")
    build_llvm(PrimFunc("branchy", (a, b), body))(x, out)
    idx = np.arange(N)
    expected = np.where(idx % 2 == 0, x * 3 + 1,
                        np.where(idx > 10, np.where(idx < 40, x, 0) - x * 3, 7))
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_masked_vector_load_store() -> None:
    a, b = buffer("A", (N,), "float32"), buffer("B", (N,), "float32")
    i = Var("i")
    index = ramp(i * 8, 8)
    keep = Ramp(i * 8, const(1), 8) < Broadcast(const(N - 5), 8)
    body = For(i, const(0), const(N // 8), ForKind.SERIAL,
               Store(b, Load(a, (index,), predicate=keep) + 1.0, (index,),
                     predicate=Ramp(i * 8, const(1), 8) >= Broadcast(const(3), 8)))
    x, out = rand("float32"), np.zeros(N, "float32")
    build_llvm(PrimFunc("masked", (a, b), body))(x, out)
    idx = np.arange(N)
    expected = np.where(idx >= 3, np.where(idx < N - 5, x, 0) + 1, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


# ---------------------------------------------------------------------------------------
def _thread_ids_kernel(n: int, sleep_us: int = 0) -> PrimFunc:
    out = buffer("tid", (n,), "int32")
    i = Var("i")
    body: Stmt = Store(out, Call(out.dtype, "gettid", ()), (i,))  # the OS thread id (glibc)
    if sleep_us:  # slow iterations: every thread is up before the work is gone
        body = Seq((Evaluate(Call(out.dtype, "usleep", (const(sleep_us, "int32"),))), body))
    return PrimFunc("tids", (out,), For(i, const(0), const(n), ForKind.PARALLEL, body))


def test_parallel_loop_uses_threads() -> None:
    from ember.codegen.llvm_parallel import CHUNKS_PER_THREAD
    from ember.runtime import threadpool

    n = 1000
    a, b, c = (buffer(x, (n,), "float32") for x in "ABC")
    scale = Var("scale", "float32")
    i = Var("i")
    body = For(i, const(0), const(n), ForKind.PARALLEL,
               Store(c, Load(a, (i,)) * scale + Load(b, (i,)), (i,)))
    x, y, out = rand("float32", n), rand("float32", n), np.zeros(n, "float32")
    build_llvm(PrimFunc("axpy", (a, b, c, scale), body))(x, y, out, 2.0)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)

    import ctypes

    me = ctypes.CDLL(None).gettid()
    n = 64
    ids = np.full(n, -1, "int32")
    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(2)
        build_llvm(_thread_ids_kernel(n, sleep_us=1000))(ids)
        assert len(set(ids.tolist())) == 2
        assert me in ids.tolist()  # the caller takes part
        grain = n // (2 * CHUNKS_PER_THREAD)  # contiguous chunks of this many iterations
        assert all(len(set(chunk)) == 1 for chunk in ids.reshape(-1, grain).tolist())
        threadpool.set_num_threads(1)
        build_llvm(_thread_ids_kernel(n))(ids)
        assert set(ids.tolist()) == {me}
    finally:
        threadpool.set_num_threads(previous)


def test_parallel_chunks_pragma() -> None:
    from ember.runtime import threadpool
    from ember.tir.stmt import PARALLEL_CHUNKS

    n = 32
    kernel = _thread_ids_kernel(n, sleep_us=2000)
    loop = kernel.body
    one_share = replace(kernel, body=replace(loop, annotations=((PARALLEL_CHUNKS, const(1)),)))
    ids = np.full(n, -1, "int32")
    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(2)
        build_llvm(one_share)(ids)
        halves = ids.reshape(2, -1).tolist()
        assert all(len(set(h)) == 1 for h in halves) and halves[0][0] != halves[1][0]
        bad = replace(kernel, body=replace(loop, annotations=((PARALLEL_CHUNKS, const(0)),)))
        with pytest.raises(CodegenError, match="parallel_chunks must be a positive integer"):
            build_llvm(bad)
    finally:
        threadpool.set_num_threads(previous)


def test_nested_parallel_with_local_allocation() -> None:
    rows, cols = 8, 40
    a, b = buffer("A", (rows * cols,), "float32"), buffer("B", (rows * cols,), "float32")
    t = buffer("T", (cols,), "float32", scope="local")
    i, j, k = Var("i"), Var("j"), Var("k")
    inner = Allocate(t, seq(
        For(j, const(0), const(cols), ForKind.PARALLEL,
            Store(t, Load(a, (i * cols + j,)) + 1.0, (j,))),
        For(k, const(0), const(cols), ForKind.SERIAL,
            Store(b, Load(t, (const(cols - 1) - k,)), (i * cols + k,)))))
    body = For(i, const(0), const(rows), ForKind.PARALLEL, inner)
    x, out = rand("float32", rows * cols), np.zeros(rows * cols, "float32")
    build_llvm(PrimFunc("nested", (a, b), body))(x, out)
    expected = (x.reshape(rows, cols)[:, ::-1] + 1).ravel()
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_parallel_loop_with_offset_and_int64_index() -> None:
    n = 100
    a = buffer("A", (n,), "int64")
    i = Var("i", "int64")
    body = For(i, IntImm(5, i.dtype), IntImm(90, i.dtype), ForKind.PARALLEL,
               Store(a, i * i, (i,)))
    out = np.zeros(n, "int64")
    build_llvm(PrimFunc("squares", (a,), body))(out)
    expected = np.arange(n) ** 2
    expected[:5] = 0
    expected[95:] = 0
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------------------------------
def test_cache_returns_same_module_per_name() -> None:
    f1 = elementwise(lambda a: a + 1.0, ["float32"], "float32", name="inc")
    f2 = elementwise(lambda a: a + 1.0, ["float32"], "float32", name="inc")
    f3 = elementwise(lambda a: a + 1.0, ["float32"], "float32", name="inc2")
    assert build_llvm(f1) is build_llvm(f2)
    other = build_llvm(f3)
    assert other.name == "inc2" and other is not build_llvm(f1)
    both = compile_llvm([f1, f3])
    assert set(both) == {"inc", "inc2"}
    x = rand("float32")
    out = np.zeros(N, "float32")
    both["inc2"](x, out)
    np.testing.assert_allclose(out, x + 1, rtol=1e-6)


def test_errors_name_the_problem() -> None:
    a2 = buffer("A", (4, 4), "float32")
    i = Var("i")
    unflat = PrimFunc("unflat", (a2,), For(i, const(0), const(4), ForKind.SERIAL,
                                           Store(a2, const(1.0), (i, i))))
    with pytest.raises(CodegenError, match="buffer 'A' has 2 indices"):
        build_llvm(unflat)
    a = buffer("A", (4,), "float32")
    bound = PrimFunc("gpu", (a,), For(i, const(0), const(4), ForKind.THREAD_BINDING,
                                      Store(a, const(1.0), (i,)), thread_tag="threadIdx.x"))
    with pytest.raises(CodegenError, match="GPU thread axis 'threadIdx.x'"):
        build_llvm(bound)
    free = PrimFunc("free", (a,), Store(a, Cast(a.dtype, Var("n")), (const(0),)))
    with pytest.raises(CodegenError, match="variable 'n' is used but not bound"):
        build_llvm(free)
    with pytest.raises(CodegenError, match="cannot run code for"):
        build_llvm(elementwise(lambda x: x, ["float32"], "float32"),
                   "llvm -mtriple=aarch64-linux-gnu")
    dup = elementwise(lambda x: x, ["float32"], "float32", name="same")
    with pytest.raises(CodegenError, match="repeated: same"):
        compile_llvm([dup, elementwise(lambda x: x, ["float32"], "float32", name="same")])


def test_extern_call_statement() -> None:
    a = buffer("A", (4,), "int32")
    body = seq(Evaluate(Call(a.dtype, "abs", (const(-3),))),
               Store(a, Call(a.dtype, "abs", (const(-5),)), (const(0),)))
    out = np.zeros(4, "int32")
    build_llvm(PrimFunc("ext", (a,), body))(out)
    assert out[0] == 5


@pytest.mark.parametrize("target,magic", [
    ("llvm -mtriple=aarch64-linux-gnu -mattr=+neon", b"\x7fELF"),
    ("llvm -mtriple=armv7a-linux-gnueabihf -mattr=+neon", b"\x7fELF"),
    ("wasm", b"\x00asm"),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", b"\x7fELF"),
])
def test_object_emission_for_cross_targets(target: str, magic: bytes) -> None:
    f = elementwise(lambda a, b: a * b + Call(a.dtype, "sqrt", (a,)), ["float32"] * 2,
                    "float32", lanes=4)
    obj = emit_object([f], target)
    assert obj.startswith(magic) and len(obj) > 100


def test_cross_assembly_uses_target_vectors() -> None:
    f = elementwise(lambda a, b, c: a * b + c, ["float32"] * 3, "float32", n=256, lanes=4)
    neon = emit_assembly([f], "llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
    assert "fmla" in neon or "fmadd" in neon
    wasm = emit_assembly([f], "wasm")      # relaxed SIMD by default: one fused multiply-add
    assert "f32x4.relaxed_madd" in wasm and "f32x4.mul" not in wasm
    plain = emit_assembly([f], "wasm -mattr=-relaxed-simd")
    assert "f32x4.mul" in plain and "relaxed" not in plain.split(".section")[0]
    ptx = emit_assembly([elementwise(lambda a: a + 1.0, ["float32"], "float32")], "cuda")
    assert ".version" in ptx and ("add.f32" in ptx or "add.rn.f32" in ptx)


# -- constant-offset vector loads (strided) as contiguous chunks + shuffles ----------------
_PAGE = 4096
_GUARDS: list[object] = []  # keep the guarded mappings alive for the whole test session


def _guarded(values: np.ndarray, at_end: bool) -> np.ndarray:
    """A copy of `values` touching a PROT_NONE page (after it, or before it): reading one
    element outside it faults, so an over-reading load crashes the test."""
    import ctypes
    import mmap

    nbytes = values.nbytes
    pages = -(-nbytes // _PAGE)
    region = mmap.mmap(-1, (pages + 2) * _PAGE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for page in (0, pages + 1):
        assert libc.mprotect(address + page * _PAGE, _PAGE, 0) == 0  # PROT_NONE
    start = _PAGE + (pages * _PAGE - nbytes if at_end else 0)
    array = np.frombuffer(region, values.dtype, values.size, start)
    array[:] = values.ravel()
    _GUARDS.append(region)
    return array


@pytest.mark.parametrize("stride,lanes,dtype", [
    (2, 16, "float32"), (2, 28, "float32"), (3, 8, "float32"), (4, 16, "float32"),
    (8, 16, "float32"), (2, 4, "float64"), (3, 32, "int8"), (-1, 16, "float32"),
    (-2, 8, "int32"), (2, 16, "bool")])
def test_strided_loads_read_only_their_elements(stride: int, lanes: int, dtype: str) -> None:
    # out[j*lanes + l] = src[first + j*step + l*stride]; src ends (or starts) at a guard page
    steps = 5
    span = (lanes - 1) * abs(stride) + 1
    size = span + (steps - 1) * lanes
    first = (lanes - 1) * abs(stride) if stride < 0 else 0
    src, out = buffer("src", (size,), dtype), buffer("out", (steps * lanes,), dtype)
    j = Var("j")
    body = For(j, const(0), const(steps), ForKind.SERIAL,
               Store(out, Load(src, (ramp(j * lanes + first, lanes, stride),)),
                     (ramp(j * lanes, lanes),)))
    func = PrimFunc(f"strided_{stride % 16}_{lanes}_{dtype}", (src, out), body)
    mod = build_llvm(func)
    # chunk loads and a shuffle where the span fits MAX_CHUNKS of the host's vectors (all
    # of these on a 512-bit host; stride 8 x 16 lanes is 16 ymm chunks: a gather on AVX2)
    from ember.codegen.llvm_shuffle import offset_plan
    index = ramp(j * lanes + first, lanes, stride)
    chunked = offset_plan(index, Target("llvm").vector_lanes(dtype), False)
    assert ("gather" not in mod.sources["ll"]) == (chunked is not None)
    values = RNG.integers(-100, 100, size).astype(dtype)
    expected = np.concatenate([values[j * lanes + first + np.arange(lanes) * stride]
                               for j in range(steps)])
    for at_end in (True, False):
        result = np.zeros(steps * lanes, dtype)
        mod(_guarded(values, at_end), result)
        np.testing.assert_array_equal(result, expected)


def test_ramp_plus_broadcast_and_scaled_offsets() -> None:
    # ramp(2i, 1, 8) * 2 + x8(1): the odd elements, written in a non-canonical form
    n = 8 * 6
    src, out = buffer("src", (2 * n,), "float32"), buffer("out", (n,), "float32")
    i = Var("i")
    index = ramp(i * 8, 8) * Broadcast(const(2), 8) + Broadcast(const(1), 8)
    body = For(i, const(0), const(n // 8), ForKind.SERIAL,
               Store(out, Load(src, (index,)), (ramp(i * 8, 8),)))
    mod = build_llvm(PrimFunc("odd_lanes", (src, out), body))
    assert "gather" not in mod.sources["ll"]
    values, result = rand("float32", 2 * n), np.zeros(n, "float32")
    mod(_guarded(values, at_end=True), result)
    np.testing.assert_array_equal(result, values[1::2])


@pytest.mark.parametrize("lanes", [16, 28])
def test_predicated_strided_load_like_padded_pooling(lanes: int) -> None:
    # out[l] = src[2l - 1] where 0 <= 2l - 1 < size, else 0: the first lane reads before src
    size = 2 * lanes - 3
    src, out = buffer("src", (size,), "float32"), buffer("out", (lanes,), "float32")
    position = Ramp(const(-1), const(2), lanes)
    keep = (position >= Broadcast(const(0), lanes)) & (position < Broadcast(const(size), lanes))
    body = Store(out, Load(src, (position,), predicate=keep), (ramp(const(0), lanes),))
    mod = build_llvm(PrimFunc(f"padded_{lanes}", (src, out), body))
    assert "gather" not in mod.sources["ll"]
    values = rand("float32", size)
    expected = np.array([values[p] if 0 <= p < size else 0 for p in 2 * np.arange(lanes) - 1],
                        "float32")
    for at_end in (True, False):
        result = np.full(lanes, 7, "float32")
        mod(_guarded(values, at_end), result)
        np.testing.assert_array_equal(result, expected)


def test_strided_load_assembly_has_no_gather() -> None:
    src, out = buffer("src", (64,), "float32"), buffer("out", (16,), "float32")
    func = PrimFunc("s2", (src, out), Store(out, Load(src, (ramp(const(0), 16, 2),)),
                                             (ramp(const(0), 16),)))
    asm = emit_assembly([func], HOST)
    assert "gather" not in asm
    assert "vperm" in asm or "vshufps" in asm


def test_masked_accesses_to_a_private_stack_buffer_become_blends() -> None:
    # acc (16 lanes, stack) keeps the running max of the first 10 lanes of each row, read and
    # written under a lane mask; the masked store to `out` (a parameter) stays masked
    rows, width = 6, 10
    src, out = buffer("src", (rows * 16,), "float32"), buffer("out", (16,), "float32")
    acc = buffer("acc", (16,), "float32", scope="local")
    r = Var("r")
    keep = Ramp(const(0), const(1), 16) < Broadcast(const(width), 16)
    lanes = ramp(const(0), 16)
    body = Allocate(acc, seq(
        Store(acc, Broadcast(const(-1e30, "float32"), 16), (lanes,), predicate=keep),
        For(r, const(0), const(rows), ForKind.SERIAL,
            Store(acc, Max(Load(acc, (lanes,), predicate=keep),
                           Load(src, (ramp(r * 16, 16),), predicate=keep)), (lanes,),
                  predicate=keep)),
        Store(out, Load(acc, (lanes,), predicate=keep), (lanes,), predicate=keep)))
    mod = build_llvm(PrimFunc("blend", (src, out), body))
    assert mod.sources["ll"].count("llvm.masked.store") >= 1
    assert "alloca" not in mod.sources["ll"]  # promoted to registers
    values, result = rand("float32", rows * 16), np.full(16, 5, "float32")
    mod(values, result)
    expected = np.concatenate([values.reshape(rows, 16)[:, :width].max(axis=0), np.full(6, 5)])
    np.testing.assert_array_equal(result, expected.astype("float32"))
