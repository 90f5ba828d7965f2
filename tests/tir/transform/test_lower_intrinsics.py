"""lower_intrinsics: float32 expansions agree with numpy to ~1e-6 relative, scalar and vector."""

import math

import numpy as np
import pytest

from ember import dtype as dt
from ember.tir import Call, For, ForKind, PrimFunc, Store, Var, Visitor, buffer, const
from ember.tir.transform.lower_intrinsics import ALL_NAMES, lower_intrinsics
from ember.errors import EmberError
from ember.tir.transform.vectorize import vectorize_loops
from ember.tir.verify import verify
from tests.tir import interp

_REFERENCE = {
    "exp": np.exp,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "erf": np.vectorize(math.erf),
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}
_DOMAIN = {"exp": (-100, 100), "sigmoid": (-100, 100), "tanh": (-20, 20), "erf": (-6, 6),
           "rsqrt": (1e-6, 1e6)}


def _calls(stmt):
    names = []

    class _Find(Visitor):
        def visit_Call(self, e):
            names.append(e.name)
            self.generic_visit(e)

    _Find().visit(stmt)
    return names


def _func(name, n, dtype="float32", kind=ForKind.SERIAL):
    A, B = buffer("A", (n,), dtype), buffer("B", (n,), dtype)
    i = Var("i")
    return PrimFunc(name, (A, B), For(i, const(0), const(n), kind,
                    Store(B, Call(dt.parse(dtype), name, (A.load(i),)), (i,))))


def _inputs(name):
    lo, hi = _DOMAIN[name]
    rng = np.random.default_rng(0)
    if name == "rsqrt":
        grid = np.geomspace(lo, hi, 2000)
    else:
        grid = np.concatenate([np.linspace(lo, hi, 1500), rng.uniform(-1, 1, 300),
                               np.linspace(-1e-3, 1e-3, 100), [0.0, 0.25, -0.25, 0.5, -0.5]])
    return grid.astype("float32")


@pytest.mark.parametrize("name", sorted(_REFERENCE))
@pytest.mark.parametrize("vector", [False, True])
def test_expansion_accuracy(name, vector):
    x = _inputs(name)
    if not vector:  # the interpreter runs scalar loops slowly; vector mode sees every point
        x = x[::7]
    n = (len(x) // 16) * 16
    x = x[:n]
    kind = ForKind.VECTORIZED if vector else ForKind.SERIAL
    func = lower_intrinsics(_func(name, n, kind=kind), ALL_NAMES)
    if vector:
        func = lower_intrinsics(vectorize_loops(_func(name, n, kind=kind)), ALL_NAMES)
        # no serial fallback: the expansion is vector code
        assert func.body.value.dtype.lanes == n
    verify(func)
    assert name not in _calls(func.body)
    out = np.zeros_like(x)
    interp.run(func, x, out)
    ref = _REFERENCE[name](x.astype(np.float64))
    ref = np.where(np.abs(ref) > np.finfo(np.float32).max, np.copysign(np.inf, ref), ref)
    tiny = np.finfo(np.float32).tiny
    with np.errstate(invalid="ignore"):
        err = np.abs(out.astype(np.float64) - ref) / np.maximum(np.abs(ref), tiny)
    ok = (err <= 2e-6) | (np.abs(ref) < tiny) | (out == ref)
    worst = int(np.argmax(np.where(ok, 0, err)))
    assert ok.all(), f"{name}({x[worst]}) = {out[worst]}, expected {ref[worst]}"


def test_exp_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 88.72, 88.8, -87.0, -103.0, 0.0], "float32")
    func = lower_intrinsics(_func("exp", len(x)), ALL_NAMES)
    out = np.zeros_like(x)
    interp.run(func, x, out)
    assert out[0] == np.inf and out[1] == 0.0 and np.isnan(out[2])
    np.testing.assert_allclose(out[3], np.exp(np.float64(88.72)), rtol=2e-6)
    assert out[4] == np.inf and out[7] == 1.0
    np.testing.assert_allclose(out[5], np.exp(-87.0), rtol=2e-6)
    assert 0.0 <= out[6] < 1e-37


def test_tanh_sigmoid_saturate_without_nan():
    x = np.array([-1e30, -500.0, 500.0, 1e30], "float32")
    for name, expected in (("tanh", [-1, -1, 1, 1]), ("sigmoid", [0, 0, 1, 1]),
                           ("erf", [-1, -1, 1, 1])):
        out = np.zeros_like(x)
        interp.run(lower_intrinsics(_func(name, len(x)), ALL_NAMES), x, out)
        np.testing.assert_array_equal(out, np.array(expected, "float32"))


def test_other_dtypes_and_intrinsics_are_left_alone():
    f64 = _func("exp", 8, "float64")
    assert lower_intrinsics(f64, ALL_NAMES) is f64
    f32 = _func("exp", 8)
    assert lower_intrinsics(f32) is f32  # exp is left to the back ends by default
    assert "erf" not in _calls(lower_intrinsics(_func("erf", 8)).body)
    with pytest.raises(EmberError, match=r"no expansion for \['log'\]"):
        lower_intrinsics(f32, ["log"])
    log = _func("log", 8)
    assert lower_intrinsics(log) is log


def test_vector_erf_is_one_rational_function():
    x = np.concatenate([[-1e30, -500.0, 500.0, 1e30, -np.inf, np.inf, 3.91, -3.93, np.nan],
                        _inputs("erf")])
    x = x[:len(x) // 16 * 16].astype("float32")
    func = lower_intrinsics(vectorize_loops(_func("erf", len(x), kind=ForKind.VECTORIZED)))
    assert [c for c in _calls(func.body) if c != "sqrt"] == []  # no exp: one division
    # compiled by the LLVM back end, 16 lanes at a time
    from ember import te
    from ember.lowering.build import build
    from ember.target import Target

    a = te.placeholder((len(x),), "float32", name="a")
    b = te.compute((len(x),), lambda i: te.erf(a[i]), name="b")
    s = te.create_schedule([b.op])
    s[b].vectorize(s[b].split(b.op.axis[0], 16)[1])
    out = np.zeros_like(x)
    build(s, [a, b], Target("llvm"), name="erf_vec")(x, out)
    ref = _REFERENCE["erf"](x.astype(np.float64))
    assert np.isnan(out[8]) and np.isnan(x).sum() == 1  # NaN stays NaN
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-7)
    assert np.array_equal(out[np.abs(x) >= 3.92], np.sign(x[np.abs(x) >= 3.92]))
