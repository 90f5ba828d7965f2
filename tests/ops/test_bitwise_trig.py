"""Bitwise ops, inverse trigonometric / hyperbolic functions and Shrink against numpy."""

import numpy as np
import pytest

from ember.errors import ShapeError
from ember.graph.ir import GraphBuilder
from tests.ops.onnx_ref import ember_run

rng = np.random.default_rng(11)

INVERSE = {"Asin": (np.arcsin, -1, 1), "Acos": (np.arccos, -1, 1), "Atan": (np.arctan, -9, 9),
           "Asinh": (np.arcsinh, -9, 9), "Acosh": (np.arccosh, 1, 9),
           "Atanh": (np.arctanh, -0.99, 0.99)}


@pytest.mark.parametrize("op", sorted(INVERSE))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inverse_trig_matches_numpy(op: str, dtype: str) -> None:
    reference, low, high = INVERSE[op]
    x = rng.uniform(low, high, (3, 37)).astype(dtype)  # 37: a vector main part and a tail
    (got,) = ember_run(op, [x])
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got, reference(x.astype("float64")),
                               rtol=2e-6 if dtype == "float32" else 1e-13, atol=1e-7)


def test_inverse_trig_outside_the_domain_is_nan() -> None:
    x = np.array([-2.0, 2.0, 0.5], "float32")
    for op in ("Asin", "Acos", "Atanh"):
        (got,) = ember_run(op, [x])
        assert np.isnan(got[:2]).all() and np.isfinite(got[2]), op
    (got,) = ember_run("Atanh", [np.array([1.0, -1.0], "float32")])
    np.testing.assert_array_equal(got, [np.inf, -np.inf])


BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
           "BitwiseXor": np.bitwise_xor}


def _ints(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("op", sorted(BITWISE))
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "int64",
                                   "uint64"])
def test_bitwise_binary_matches_numpy(op: str, dtype: str) -> None:
    a, b = _ints((2, 3, 21), dtype), _ints((3, 1), dtype)  # broadcast over the last axis
    (got,) = ember_run(op, [a, b])
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, BITWISE[op](a, b))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint64"])
def test_bitwise_not_matches_numpy(dtype: str) -> None:
    x = _ints((4, 19), dtype)
    (got,) = ember_run("BitwiseNot", [x])
    np.testing.assert_array_equal(got, np.invert(x))


def test_bitwise_of_constants_folds_exactly() -> None:
    # the same kernels with constant operands exercise the simplifier's folding
    from ember.arith.const_fold import fold_binary
    from ember.tir.expr import BitwiseAnd, BitwiseOr, BitwiseXor, Expr, Not, const

    def c(v: int, d: str = "int8") -> Expr:
        return const(v, d)

    assert fold_binary(BitwiseAnd(c(-6), c(13)), -6, 13).value == -6 & 13  # type: ignore
    assert fold_binary(BitwiseOr(c(-128), c(1)), -128, 1).value == -127  # type: ignore
    assert fold_binary(BitwiseXor(c(200, "uint8"), c(255, "uint8")), 200, 255).value == 55  # type: ignore
    from ember.arith import simplify

    assert simplify(Not(c(200, "uint8"))).value == 55  # type: ignore[attr-defined]
    assert simplify(Not(c(5, "int16"))).value == -6  # type: ignore[attr-defined]


@pytest.mark.parametrize("lambd,bias", [(0.5, 0.0), (1.5, 1.5), (0.0, -0.25)])
def test_shrink_matches_numpy(lambd: float, bias: float) -> None:
    x = (rng.standard_normal((5, 23)) * 3).astype("float32")
    x[0, :3] = [lambd, -lambd, 0.0]  # the boundary is not shrunk: |x| must exceed lambd
    (got,) = ember_run("Shrink", [x], {"lambd": lambd, "bias": bias})
    expected = np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)).astype("float32")
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_shrink_integers() -> None:
    x = np.arange(-5, 6, dtype="int32")
    (got,) = ember_run("Shrink", [x], {"lambd": 1.5, "bias": 1.5})
    expected = np.where(x < -1.5, x + 1.5, np.where(x > 1.5, x - 1.5, 0)).astype("int32")
    np.testing.assert_array_equal(got, expected)


def test_bad_input_types_are_named() -> None:
    b = GraphBuilder("g")
    f = b.input("f", (2, 3), "float32")
    i = b.input("i", (2, 3), "int32")
    with pytest.raises(ShapeError, match=r"BitwiseAnd.*needs int/uint inputs, got float32"):
        b.add("BitwiseAnd", [f, f])
    with pytest.raises(ShapeError, match=r"BitwiseNot.*needs int/uint inputs"):
        b.add("BitwiseNot", [b.input("m", (2,), "bool")])
    with pytest.raises(ShapeError, match=r"BitwiseXor.*types differ"):
        b.add("BitwiseXor", [i, b.input("j", (2, 3), "int64")])
    with pytest.raises(ShapeError, match=r"Acosh.*needs float inputs, got int32"):
        b.add("Acosh", [i])
    with pytest.raises(ShapeError, match=r"Shrink.*needs float/int/uint inputs, got bool"):
        b.add("Shrink", [b.input("k", (2,), "bool")])
