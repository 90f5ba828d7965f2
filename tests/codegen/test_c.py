"""Tests of the C back end: generated C compiled with the system compiler, checked vs numpy."""

from __future__ import annotations

import numpy as np
import pytest

from ember import dtype as dt
from ember.codegen.c import codegen_c
from ember.codegen.cbuild import build_c, compile_shared
from ember.errors import CodegenError
from ember.tir import (
    Allocate, Broadcast, Call, Cast, FloorDiv, FloorMod, For, ForKind, IfThenElse, Let, LetStmt,
    Load, Max, Min, PrimFunc, Ramp, Select, Store, Var, buffer, const, seq,
)
from ember.tir.expr import Expr
from ember.tir.function import Buffer

N = 64
rng = np.random.default_rng(0)


def loop(var: Var, extent: int, body, kind: ForKind = ForKind.SERIAL) -> For:
    return For(var, const(0, var.dtype), const(extent, var.dtype), kind, body)


def ld(buf: Buffer, index: Expr) -> Expr:
    return Load(buf, (index,))


def st(buf: Buffer, value: Expr, index: Expr) -> Store:
    return Store(buf, value, (index,))


def elementwise(fcompute, in_dtypes: list[str], out_dtype: str, n: int = N) -> PrimFunc:
    """out[i] = fcompute(in0[i], in1[i], ...)."""
    ins = [buffer(f"in{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    out = buffer("out", (n,), out_dtype)
    i = Var("i")
    body = loop(i, n, st(out, fcompute(*[ld(b, i) for b in ins]), i))
    return PrimFunc("elementwise", (*ins, out), body)


def run(func: PrimFunc, *inputs: np.ndarray, out_dtype: str | None = None) -> np.ndarray:
    """Call `func` on inputs; its last parameter is the output."""
    out_param = func.params[-1]
    assert isinstance(out_param, Buffer)
    out = np.zeros([d.value for d in out_param.shape], out_dtype or out_param.dtype.numpy)
    build_c(func)(*inputs, out)
    return out


def rand(dtype: str, n: int = N, low: float = -100, high: float = 100) -> np.ndarray:
    np_dtype = np.dtype(dtype)
    if np_dtype == np.bool_:
        return rng.random(n) < 0.5
    if np_dtype.kind == "f":
        with np.errstate(over="ignore"):
            return rng.uniform(low, high, n).astype(np_dtype)
    info = np.iinfo(np_dtype)
    return rng.integers(max(info.min, low), min(info.max, high), n, dtype=np_dtype, endpoint=True)


# ------------------------------------------------------------------------------------------
# arithmetic and types
def test_elementwise_float32() -> None:
    f = elementwise(lambda a, b: (a * b + a) / (b - 200.0), ["float32", "float32"], "float32")
    a, b = rand("float32"), rand("float32")
    np.testing.assert_allclose(run(f, a, b), (a * b + a) / (b - np.float32(200)), rtol=1e-6)


def test_float64_elementwise_and_math() -> None:
    f = elementwise(lambda a, b: Call(dt.float64, "sqrt", (a * a + b * b,)) - Min(a, b),
                    ["float64", "float64"], "float64")
    a, b = rand("float64"), rand("float64")
    np.testing.assert_allclose(run(f, a, b), np.sqrt(a * a + b * b) - np.minimum(a, b),
                               rtol=1e-15)


def test_float16_matches_numpy_exactly() -> None:
    f = elementwise(lambda a, b: (a * b + a) / b - Max(a, b), ["float16", "float16"], "float16")
    a, b = rand("float16", low=-10, high=10), rand("float16", low=0.5, high=10)
    expected = (a * b + a) / b - np.maximum(a, b)
    np.testing.assert_array_equal(run(f, a, b), expected)


def test_float16_conversion_of_special_values() -> None:
    values = np.array([0.0, -0.0, 1e-8, 6e-8, 3e-5, 65504, 65519, 65520, 1e6, -1e6, np.inf,
                       -np.inf, 0.1, 1 / 3, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14],
                      np.float32)
    values = np.concatenate([values, rand("float32", 46, -2, 2) * 1e-4])
    f = elementwise(lambda a: a.astype("float16"), ["float32"], "float16")
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16)
    np.testing.assert_array_equal(run(f, values).view(np.uint16), expected.view(np.uint16))
    back = elementwise(lambda a: a.astype("float32"), ["float16"], "float32")
    np.testing.assert_array_equal(run(back, expected), expected.astype(np.float32))


_CAST_TYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
               "uint16", "uint32", "uint64", "bool"]


@pytest.mark.parametrize("source", _CAST_TYPES)
def test_casts(source: str) -> None:
    """One function casts `source` values to every other type."""
    targets = [t for t in _CAST_TYPES if t != source]
    is_float = np.dtype(source).kind == "f"
    values = rand(source, low=-100, high=120 if is_float else 10**6)
    positive = np.abs(values) if is_float else values  # float -> unsigned of x < 0 is UB
    x, xu = buffer("x", (N,), source), buffer("xu", (N,), source)
    outs = [buffer(f"out_{t}", (N,), t) for t in targets]
    i = Var("i")
    stores = [st(o, Cast(o.dtype, ld(xu if o.dtype.kind == "uint" else x, i)), i) for o in outs]
    results = [np.zeros(N, t) for t in targets]
    build_c(PrimFunc("casts", (x, xu, *outs), loop(i, N, seq(*stores))))(values, positive,
                                                                            *results)
    for target, result in zip(targets, results):
        with np.errstate(over="ignore"):
            expected = (positive if target.startswith("uint") else values).astype(target)
        np.testing.assert_array_equal(result, expected, err_msg=f"{source}->{target}")


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
def test_floordiv_floormod_match_python(dtype: str) -> None:
    a = rand(dtype, low=-1000, high=1000)
    b = rand(dtype, low=-9, high=9)
    b[b == 0] = 3
    for node, reference in ((FloorDiv, np.floor_divide), (FloorMod, np.mod)):
        f = elementwise(lambda x, y: node(x, y), [dtype, dtype], dtype)
        np.testing.assert_array_equal(run(f, a, b), reference(a, b), err_msg=node.__name__)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint16", "int16"])
def test_narrow_integers_wrap_around(dtype: str) -> None:
    f = elementwise(lambda a, b: (a * b + a) // (b + b), [dtype, dtype], dtype)
    a, b = rand(dtype, low=-(10**6), high=10**6), rand(dtype, low=1, high=10**6)
    b[b + b == 0] = 1  # 2 * 128 wraps to 0 in uint8
    expected = (a * b + a) // (b + b)  # numpy wraps around too
    np.testing.assert_array_equal(run(f, a, b), expected)


def test_int64_constants_beyond_int32() -> None:
    big = const(100000, "int64")
    f = elementwise(lambda a: big * big + a * const(3, "int64") - const(2**40, "int64"),
                    ["int64"], "int64")
    a = rand("int64", low=-(10**12), high=10**12)
    np.testing.assert_array_equal(run(f, a), 100000 * 100000 + a * 3 - 2**40)
    assert "INT64_C(100000) * INT64_C(100000) + in0[i] * 3" in codegen_c([f])


def test_bool_stores_and_loads() -> None:
    f = elementwise(lambda a, b: (a < b) & ~(a == b) | (a > 90.0), ["float32", "float32"], "bool")
    a, b = rand("float32"), rand("float32")
    b[:8] = a[:8]
    np.testing.assert_array_equal(run(f, a, b), ((a < b) & ~(a == b)) | (a > 90))
    g = elementwise(lambda m, x: Select(m, x, -x), ["bool", "int32"], "int32")
    m, x = rand("bool"), rand("int32")
    np.testing.assert_array_equal(run(g, m, x), np.where(m, x, -x))


_INTRINSICS = {
    "exp": (np.exp, (-5, 5)), "exp2": (np.exp2, (-5, 5)), "log": (np.log, (0.01, 100)),
    "log2": (np.log2, (0.01, 100)), "sqrt": (np.sqrt, (0, 100)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100)), "tanh": (np.tanh, (-5, 5)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-20, 20)), "floor": (np.floor, (-9, 9)),
    "ceil": (np.ceil, (-9, 9)), "trunc": (np.trunc, (-9, 9)), "fabs": (np.abs, (-9, 9)),
    "sin": (np.sin, (-5, 5)), "cos": (np.cos, (-5, 5)), "round": (np.round, (-9, 9)),
    "asin": (np.arcsin, (-1, 1)), "acos": (np.arccos, (-1, 1)), "atan": (np.arctan, (-9, 9)),
    "asinh": (np.arcsinh, (-9, 9)), "acosh": (np.arccosh, (1, 9)),
    "atanh": (np.arctanh, (-0.99, 0.99)),
}


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint64"])
def test_bitwise_ops_match_numpy(dtype: str) -> None:
    from ember.tir.expr import BitwiseAnd, BitwiseOr, BitwiseXor, Not

    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    a, b = (rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True) for _ in range(2))
    # nested, so the printer's parentheses matter: (a & b) ^ ~(a | b) == ~(a ^ b) & ...
    f = elementwise(lambda x, y: BitwiseXor(BitwiseAnd(x, y), Not(BitwiseOr(x, y))),
                    [dtype] * 2, dtype)
    np.testing.assert_array_equal(run(f, a, b), (a & b) ^ ~(a | b))
    g = elementwise(lambda x, y: BitwiseAnd(x, y) == BitwiseOr(x, y), [dtype] * 2, "bool")
    np.testing.assert_array_equal(run(g, a, b), (a & b) == (a | b))
    with pytest.raises(CodegenError, match="bitwise '&' on float32"):
        codegen_c([elementwise(lambda x, y: BitwiseAnd(x, y), ["float32"] * 2, "float32")])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_intrinsics_match_numpy(dtype: str) -> None:
    import math

    for name, (reference, (low, high)) in _INTRINSICS.items():
        x = rand(dtype, low=low, high=high)
        x[:6] = [0.5, 1.5, 2.5, -0.5, -2.5, 3.5] if name == "round" else x[:6]
        f = elementwise(lambda a: Call(dt.parse(dtype), name, (a,)), [dtype], dtype)
        np.testing.assert_allclose(run(f, x), reference(x), rtol=2e-6, atol=1e-6, err_msg=name)
    x = rand(dtype, low=-3, high=3)
    erf = elementwise(lambda a: Call(dt.parse(dtype), "erf", (a,)), [dtype], dtype)
    np.testing.assert_allclose(run(erf, x), [math.erf(v) for v in x], rtol=2e-6, atol=1e-7)
    a, b, c = rand(dtype, low=0.1, high=3), rand(dtype, low=-2, high=2), rand(dtype)
    power = elementwise(lambda p, q: Call(dt.parse(dtype), "pow", (p, q)), [dtype] * 2, dtype)
    np.testing.assert_allclose(run(power, a, b), np.power(a, b), rtol=2e-6)
    fma = elementwise(lambda p, q, r: Call(dt.parse(dtype), "fma", (p, q, r)), [dtype] * 3,
                      dtype)
    np.testing.assert_allclose(run(fma, a, b, c), a * b + c, rtol=1e-5, atol=1e-5)


def test_float16_intrinsics() -> None:
    x = rand("float16", low=-3, high=3)
    for name in ("exp", "tanh", "sigmoid", "rsqrt"):
        f = elementwise(lambda a: Call(dt.float16, name, (Call(dt.float16, "fabs", (a,)),)),
                        ["float16"], "float16")
        reference = _INTRINSICS[name][0](np.abs(x).astype(np.float32)).astype(np.float16)
        np.testing.assert_allclose(run(f, x), reference, rtol=1e-3, err_msg=name)


# ------------------------------------------------------------------------------------------
# statements
def _matvec(rows: int, cols: int, kind: ForKind) -> PrimFunc:
    """C[i] = sum_k A[i * cols + k] * B[k], accumulated in an allocated temporary."""
    a, b, c = buffer("A", (rows * cols,)), buffer("B", (cols,)), buffer("C", (rows,))
    acc = buffer("acc", (1,), scope="local")
    i, k = Var("i"), Var("k")
    zero = const(0, "int32")
    body = Allocate(acc, seq(
        st(acc, const(0.0), zero),
        loop(k, cols, st(acc, ld(acc, zero) + ld(a, i * cols + k) * ld(b, k), zero)),
        st(c, ld(acc, zero), i)))
    return PrimFunc("matvec", (a, b, c), loop(i, rows, body, kind))


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.PARALLEL])
def test_reduction_with_local_accumulator(kind: ForKind) -> None:
    f = _matvec(40, 33, kind)
    a, b = rand("float32", 40 * 33), rand("float32", 33)
    np.testing.assert_allclose(run(f, a, b), a.reshape(40, 33) @ b, rtol=1e-4, atol=1e-3)
    source = codegen_c([f])
    assert "float acc[1];" in source
    assert ("#pragma omp parallel for" in source) == (kind == ForKind.PARALLEL)


def _temporary(size: int, parallel: bool, rows: int = 3) -> PrimFunc:
    """tmp = 2 * A; B = tmp + reversed(tmp), row by row, with tmp allocated per row."""
    a, b = buffer("A", (rows * size,)), buffer("B", (rows * size,))
    tmp = buffer("tmp", (size,))
    r, i, j = Var("r"), Var("i"), Var("j")
    body = Allocate(tmp, seq(
        loop(i, size, st(tmp, ld(a, r * size + i) * 2.0, i)),
        loop(j, size, st(b, ld(tmp, j) + ld(tmp, size - 1 - j), r * size + j))))
    kind = ForKind.PARALLEL if parallel else ForKind.SERIAL
    return PrimFunc(f"temp_{size}_{int(parallel)}", (a, b), loop(r, rows, body, kind))


@pytest.mark.parametrize("size,parallel", [(16, False), (5000, False), (5000, True)])
def test_allocated_temporary(size: int, parallel: bool) -> None:
    """Small temporaries live on the stack, big ones on the heap (also inside parallel loops)."""
    rows = 3
    f = _temporary(size, parallel, rows)
    x = rand("float32", rows * size)
    t = (x * 2).reshape(rows, size)
    np.testing.assert_allclose(run(f, x), (t + t[:, ::-1]).ravel(), rtol=1e-6)
    source = codegen_c([f])
    assert ("ember_alloc(" in source) == (size > 256)
    assert ("ember_free(tmp);" in source) == (size > 256)
    assert ("status = -1;" in source) == parallel


def test_nested_heap_buffers_report_failure_through_a_status() -> None:
    size = 2000
    a, b = buffer("A", (size,)), buffer("B", (size,))
    t1, t2 = buffer("t1", (size,)), buffer("t2", (size,))
    i, j, k = Var("i"), Var("j"), Var("k")
    body = Allocate(t1, seq(
        loop(i, size, st(t1, ld(a, i) * 2.0, i)),
        Allocate(t2, seq(loop(j, size, st(t2, ld(t1, j) + 1.0, j)),
                         loop(k, size, st(b, ld(t2, k), k))))))
    f = PrimFunc("nested", (a, b), body)
    source = codegen_c([f])
    assert "return -1;" in source  # t1: nothing to release yet
    assert "status = -1;" in source and "return status;" in source  # t2 must free t1
    x = rand("float32", size)
    np.testing.assert_allclose(run(f, x), x * 2 + 1, rtol=1e-6)


def test_vector_ramp_load_store_and_broadcast() -> None:
    a, b, c = buffer("A", (N,)), buffer("B", (N,)), buffer("C", (N,))
    i = Var("i")
    vec = Ramp(i * 8, const(1), 8)
    value = ld(a, vec) * Broadcast(const(2.0), 8) + ld(b, Ramp(i * 8, const(1), 8))
    f = PrimFunc("vec", (a, b, c), loop(i, N // 8, st(c, value, vec)))
    x, y = rand("float32"), rand("float32")
    np.testing.assert_allclose(run(f, x, y), x * 2 + y, rtol=1e-6)
    assert "C[i * 8 + lane] = A[i * 8 + lane] * 2.0f + B[i * 8 + lane];" in codegen_c([f])


def test_vector_gather_scatter_select_cast_and_vector_let() -> None:
    """Strided scatter of a gathered, selected, casted vector bound by a vector LetStmt."""
    a, index, c = buffer("A", (N,), "int32"), buffer("I", (N,), "int32"), buffer("C", (N,))
    i = Var("i")
    v = Var("v", dt.parse("int32x4"))
    gathered = Load(a, (Load(index, (Ramp(i * 4, const(1), 4),)),))
    value = Select(v > Broadcast(const(0), 4), Cast(dt.parse("float32x4"), v),
                   Broadcast(const(-1.0), 4))
    scatter = Ramp(i, const(N // 4), 4)  # lane l of block i goes to l * 16 + i
    f = PrimFunc("gather", (a, index, c), loop(i, N // 4, LetStmt(v, gathered, st(c, value,
                                                                                 scatter))))
    x = rand("int32")
    perm = rng.permutation(N).astype(np.int32)
    g = x[perm].reshape(N // 4, 4)
    expected = np.where(g > 0, g, -1).astype(np.float32).T.ravel()
    np.testing.assert_array_equal(run(f, x, perm), expected)


def test_let_if_else_chain_and_scalar_params() -> None:
    a, c = buffer("A", (N,), "int32"), buffer("C", (N,), "int32")
    scale, i, t = Var("scale"), Var("i"), Var("t")
    x = ld(a, i)
    chain = IfThenElse(x < 0, st(c, const(-1), i),
                       IfThenElse(x < 50, st(c, Let(t, x * scale, t + t), i),
                                  st(c, Min(x, scale) + Max(x, scale), i)))
    f = PrimFunc("branches", (a, scale, c), loop(i, N, LetStmt(Var("unused"), x, chain)))
    values = rand("int32")
    out = np.zeros(N, np.int32)
    build_c(f)(values, 7, out)
    expected = np.where(values < 0, -1, np.where(values < 50, values * 14,
                                                 np.minimum(values, 7) + np.maximum(values, 7)))
    np.testing.assert_array_equal(out, expected)
    source = codegen_c([f])
    assert "} else if (A[i] < 50) {" in source
    assert "const int32_t t = A[i] * scale;" in source
    assert "unused" not in source


def test_let_under_a_guard_is_not_hoisted() -> None:
    """select(i < 60, let t = A[i + 4] in t * t, 0) must not read A[i + 4] when i >= 60."""
    t = Var("t", dt.float32)
    c = buffer("C", (N,))
    a = buffer("A", (N,))
    i = Var("i")
    value = Select(i < N - 4, Let(t, ld(a, i + 4), t * t), const(0.0))
    f = PrimFunc("guarded", (a, c), loop(i, N, st(c, value, i)))
    source = codegen_c([f])
    assert "C[i] = i < 60 ? A[i + 4] * A[i + 4] : 0.0f;" in source
    x = rand("float32")
    np.testing.assert_allclose(run(f, x), np.concatenate([x[4:] ** 2, np.zeros(4)]), rtol=1e-6)


def test_always_true_predicates_and_selects_vanish() -> None:
    a, c = buffer("A", (N,)), buffer("C", (N,))
    i = Var("i")
    vec = Ramp(i * 4, const(1), 4)
    true4 = Broadcast(const(True), 4)
    value = Select(const(True), Load(a, (vec,), predicate=true4), Broadcast(const(0.0), 4))
    f = PrimFunc("plain", (a, c), loop(i, N // 4, Store(c, value, (vec,), predicate=true4)))
    assert "C[i * 4 + lane] = A[i * 4 + lane];" in codegen_c([f])
    x = rand("float32")
    np.testing.assert_array_equal(run(f, x), x)


def test_schedule_through_pipeline_to_c() -> None:
    """A tiled, packed, vectorized, parallel matmul lowered by the pipeline, built as C."""
    import ember
    from ember.ops.matmul import matmul, schedule_matmul_x86

    a_t, b_t, packed, c_t = matmul(64, 64, 64)
    module = ember.build(schedule_matmul_x86(c_t, packed), [a_t, b_t, c_t], target="c")
    a, b = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 64), np.float32)
    c = np.zeros((64, 64), np.float32)
    module(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert "#pragma omp parallel for" in module.get_source("c")


def test_predicated_accesses_and_unrolled_loop() -> None:
    a, c = buffer("A", (N,)), buffer("C", (N,))
    i, j = Var("i"), Var("j")
    index = i * 4 + j
    body = loop(j, 4, Store(c, Load(a, (index,), predicate=index < 50) + 1.0, (index,),
                            predicate=index < 60), ForKind.UNROLLED)
    f = PrimFunc("predicated", (a, c), loop(i, N // 4, body))
    x = rand("float32")
    k = np.arange(N)
    np.testing.assert_allclose(run(f, x), np.where(k < 60, np.where(k < 50, x, 0) + 1, 0))
    assert "#pragma GCC unroll 4" in codegen_c([f])


def test_colliding_names_stay_distinct() -> None:
    """Two loop variables named i, a buffer named like a C keyword, a param named status."""
    a, out = buffer("int", (8 * 8,)), buffer("status", (8 * 8,))
    outer, inner = Var("i"), Var("i")
    body = loop(outer, 8, loop(inner, 8, st(out, ld(a, outer * 8 + inner) + 1.0,
                                            outer * 8 + inner)))
    f = PrimFunc("names", (a, out), body)
    x = rand("float32", 64)
    np.testing.assert_allclose(run(f, x), x + 1)
    source = codegen_c([f])
    assert "int_1[i * 8 + i_1]" in source


# ------------------------------------------------------------------------------------------
# text and portability
GOLDEN = """\
/* scale(A: float32[8], B: int8[8]) */
int32_t scale(void* restrict A_data, void* restrict B_data) {
    float* restrict A = (float*)A_data;
    int8_t* restrict B = (int8_t*)B_data;
    for (int32_t i = 0; i < 8; ++i) {
        B[i] = (int8_t)((int8_t)ember_floordiv_i32((int32_t)A[i], 3) * 2);
    }
    return 0;
}
"""


def test_golden_text() -> None:
    a, b = buffer("A", (8,)), buffer("B", (8,), "int8")
    i = Var("i")
    value = Cast(dt.int8, FloorDiv(Cast(dt.int32, ld(a, i)), const(3))) * const(2, "int8")
    source = codegen_c([PrimFunc("scale", (a, b), loop(i, 8, st(b, value, i)))])
    assert source.startswith("/* Generated by ember")
    assert "#include <stdint.h>" in source
    assert "static inline int32_t ember_floordiv_i32(int32_t a, int32_t b)" in source
    assert source.endswith(GOLDEN)


def test_source_compiles_strictly() -> None:
    """Everything the printer emits is warning-free, pedantic C99."""
    funcs = [_matvec(4, 4, ForKind.PARALLEL)]
    a, b = buffer("A", (N,), "float16"), buffer("B", (N,), "int64")
    big = buffer("big", (4096,), "uint8")
    i, t, j = Var("i", dt.int64), Var("t"), Var("j")
    vec = Ramp(i * 4, const(1, "int64"), 4)
    half = ld(a, vec) * Broadcast(Let(t, const(3), Cast(dt.float16, t)), 4)
    funcs.append(PrimFunc("mixed", (a, b, Var("n", dt.int64)), seq(
        loop(i, N // 4, seq(st(a, Call(dt.parse("float16x4"), "exp", (half,)), vec),
                            st(b, FloorMod(ld(b, vec), Broadcast(const(-5, "int64"), 4)), vec)),
             ForKind.PARALLEL),
        loop(j, 2, Allocate(big, st(big, const(1, "uint8"), j)), ForKind.UNROLLED))))
    funcs.append(_temporary(5000, True))
    source = codegen_c(funcs)
    strict = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
    compile_shared(source, strict, openmp=False)
    compile_shared(source, strict, openmp=True)


# ------------------------------------------------------------------------------------------
# errors
def _one_store(value: Expr, index: Expr | None = None) -> PrimFunc:
    c = buffer("C", (N,))
    i = Var("i")
    return PrimFunc("bad", (c,), loop(i, N, st(c, value, i if index is None else index)))


def test_errors_for_unsupported_constructs() -> None:
    i = Var("i")
    c = buffer("C", (N,))
    with pytest.raises(CodegenError, match="call of unknown function 'frobnicate'"):
        codegen_c([_one_store(Call(dt.float32, "frobnicate", (const(1.0),)))])
    with pytest.raises(CodegenError, match="intrinsic 'pow' takes 2 argument"):
        codegen_c([_one_store(Call(dt.float32, "pow", (const(1.0),)))])
    with pytest.raises(CodegenError, match="variable 'x' .* is used but not defined"):
        codegen_c([_one_store(Var("x", dt.float32))])
    with pytest.raises(CodegenError, match="load of buffer 'C', which is neither a param"):
        codegen_c([_one_store(Load(c, (i,)))])
    with pytest.raises(CodegenError, match="access to 'C' has 2 indices.*flatten_buffers"):
        codegen_c([PrimFunc("f", (c,), loop(i, N, st(c, Load(c, (i, i)), i)))])
    with pytest.raises(CodegenError, match="bound to GPU thread 'threadIdx.x'"):
        codegen_c([PrimFunc("gpu", (c,), For(i, const(0), const(N), ForKind.THREAD_BINDING,
                                             st(c, const(1.0), i), thread_tag="threadIdx.x"))])
    shared = buffer("s", (4,), scope="shared")
    with pytest.raises(CodegenError, match="'s' is in GPU shared memory"):
        codegen_c([PrimFunc("sh", (c,), Allocate(shared, st(c, const(1.0), const(0))))])
    with pytest.raises(CodegenError, match="writes 4 lane\\(s\\) at an index of 1"):
        codegen_c([_one_store(Broadcast(const(1.0), 4))])
    with pytest.raises(CodegenError, match="store of a int32 value into 'C'"):
        codegen_c([_one_store(const(1))])
    with pytest.raises(CodegenError, match="scalar parameter 'h' .* float16"):
        codegen_c([PrimFunc("p", (c, Var("h", dt.float16)), st(c, const(1.0), const(0)))])
    with pytest.raises(CodegenError, match="'f' and 'f' both become the C function 'f'"):
        codegen_c([PrimFunc("f", (c,), st(c, const(1.0), const(0)))] * 2)


def test_compiler_errors_and_missing_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = "int32_t f(void) {\n    return undefined_name;\n}\n"
    with pytest.raises(CodegenError, match=r"(?s)compiler failed.*undefined_name.*>\s+3 \|"):
        compile_shared("#include <stdint.h>\n" + bad)
    monkeypatch.setenv("CC", "/nonexistent/ember-cc")
    with pytest.raises(CodegenError, match="CC='/nonexistent/ember-cc' was not found"):
        build_c(_one_store(const(1.0)))
    monkeypatch.setenv("CC", "")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CodegenError, match="no C compiler found"):
        compile_shared("int x;\n")
