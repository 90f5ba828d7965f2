"""nan, inf, zero divisors and out-of-range indices: the answers onnxruntime (or the documented
rule) gives, on vectorized loops as well as scalar ones."""

import numpy as np
import pytest

from ember.errors import UnsupportedOpError
from ember.lowering.kernel import run_op
from tests.ops.onnx_ref import check_op

rng = np.random.default_rng(11)
SPECIAL = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, -1.5, 2.0], "float32")


def with_specials(*shape: int, dtype: str = "float32") -> np.ndarray:
    """Random values with nan, +-inf and +-0 at random places (inside vector lanes too)."""
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    where = rng.choice(flat.size, size=flat.size // 3, replace=False)
    flat[where] = rng.choice(SPECIAL, size=where.size).astype(dtype)
    return x


@pytest.mark.parametrize("op", ["Relu", "Sign", "Abs", "Sigmoid", "Neg"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_keeps_nan(op: str, dtype: str) -> None:
    x = with_specials(3, 37, dtype=dtype)
    got = check_op(op, [x])[0]
    assert np.isnan(got[np.isnan(x)]).all()


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_propagate_nan_from_either_side(op: str) -> None:
    a, b = with_specials(4, 33), with_specials(4, 33)
    got = check_op(op, [a, b])[0]
    assert np.isnan(got[np.isnan(a) | np.isnan(b)]).all()
    check_op(op, [a, b, with_specials(4, 33)])


def test_integer_max_min_and_relu_unchanged() -> None:
    a = rng.integers(-50, 50, (5, 19)).astype("int32")
    b = rng.integers(-50, 50, (5, 19)).astype("int32")
    check_op("Max", [a, b])
    check_op("Min", [a, b])
    check_op("Relu", [a])


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_integer_division_by_zero_gives_zero(dtype: str) -> None:
    a = rng.integers(-100, 100, (3, 41)).astype(dtype)
    b = rng.integers(-3, 4, (3, 41)).astype(dtype)  # about one divisor in seven is 0
    (div,) = run_op("Div", [a, b])
    want = np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b))).astype(dtype)
    np.testing.assert_array_equal(div, want)
    (mod,) = run_op("Mod", [a, b])
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(mod, np.mod(a, b))  # numpy: x % 0 == 0


def test_reduce_log_sum_exp_with_infinities() -> None:
    x = np.array([[np.inf, 1, 2], [-np.inf, -np.inf, -np.inf], [-np.inf, 0, 1],
                  [np.nan, 0, 1], [3, 4, 5]], "float32")
    (got,) = run_op("ReduceLogSumExp", [x], {"axes": (1,), "keepdims": 0})
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log(np.exp(x.astype("float64")).sum(axis=1))
    np.testing.assert_allclose(got, want.astype("float32"), rtol=1e-6)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[3])


@pytest.mark.parametrize("flag", ["keepdims", "noop_with_empty_axes"])
def test_reduce_flags_must_be_0_or_1(flag: str) -> None:
    with pytest.raises(UnsupportedOpError, match=f"ReduceSum: {flag} must be 0 or 1, got -1"):
        run_op("ReduceSum", [np.ones((2, 3), "float32")], {"axes": (1,), flag: -1})


def test_gather_out_of_range_is_never_a_plausible_row() -> None:
    data = rng.standard_normal((5, 4)).astype("float32")
    idx = np.array([0, 4, -1, -5, 5, -6, 1 << 40], "int64")
    (got,) = run_op("Gather", [data, idx], {"axis": 0})
    ok = (idx >= -5) & (idx < 5)
    np.testing.assert_array_equal(got[ok], data[idx[ok]])
    assert np.isnan(got[~ok]).all()
    ints = rng.integers(0, 9, (5, 4)).astype("int32")
    (got,) = run_op("Gather", [ints, idx], {"axis": 0})
    np.testing.assert_array_equal(got[ok], ints[idx[ok]])
    assert (got[~ok] == np.iinfo("int32").min).all()


def test_gather_elements_and_nd_out_of_range() -> None:
    data = rng.standard_normal((3, 4)).astype("float32")
    idx = np.array([[0, 3, 4, -1], [-4, -5, 2, 9]], "int64")
    (got,) = run_op("GatherElements", [data, idx], {"axis": 1})
    ok = (idx >= -4) & (idx < 4)
    rows = np.arange(2)[:, None].repeat(4, 1)
    np.testing.assert_array_equal(got[ok], data[rows[ok], idx[ok]])
    assert np.isnan(got[~ok]).all()
    nd = np.array([[0, 1], [2, 9], [-3, 0], [3, 0]], "int64")
    (got,) = run_op("GatherND", [data, nd], {"batch_dims": 0})
    np.testing.assert_array_equal(got[:3:2], data[nd[:3:2, 0], nd[:3:2, 1]])
    assert np.isnan(got[[1, 3]]).all()


def test_scatter_drops_out_of_range_updates() -> None:
    data = np.zeros((3, 4), "float32")
    idx = np.array([[1, 7, -1, -9]], "int64")
    upd = np.array([[1, 2, 3, 4]], "float32")
    (got,) = run_op("ScatterElements", [data, idx, upd], {"axis": 1, "reduction": "none"})
    want = data.copy()
    want[0, 1], want[0, 3] = 1, 3
    np.testing.assert_array_equal(got, want)
    nd = np.array([[0], [5], [-1]], "int64")
    rows = np.ones((3, 4), "float32")
    (got,) = run_op("ScatterND", [data, nd, rows], {"reduction": "none"})
    want = data.copy()
    want[0] = want[2] = 1
    np.testing.assert_array_equal(got, want)
