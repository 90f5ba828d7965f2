"""float16 MatMul, Conv and Softmax sum in float32 and round once: the result is within one
unit in the last place of the exact value (a float16 accumulator drifts by several)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.lowering.kernel import run_op

RNG = np.random.default_rng(16)


def half(*shape: int) -> np.ndarray:
    return RNG.uniform(0.0, 1.0, shape).astype(np.float16)


def assert_within_one_ulp(got: np.ndarray, exact: np.ndarray) -> None:
    assert got.dtype == np.float16
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact)
    assert (err <= ulp).all(), f"max error {float((err / ulp).max()):.2f} ulp"


@pytest.mark.parametrize("m", [4, 32])      # the dot-product and the packed-panel computes
def test_matmul_float16(m: int) -> None:
    a, b = half(m, 512), half(512, 32)
    (got,) = run_op("MatMul", [a, b])
    assert_within_one_ulp(got, a.astype(np.float64) @ b.astype(np.float64))


def test_conv_float16() -> None:
    x, w, bias = half(1, 32, 6, 6), half(8, 32, 3, 3), half(8)
    (got,) = run_op("Conv", [x, w, bias], {"kernel_shape": [3, 3]})
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    exact = np.zeros((1, 8, 4, 4))
    for i in range(4):
        for j in range(4):
            exact[0, :, i, j] = np.einsum("chw,ochw->o", xd[0, :, i:i + 3, j:j + 3], wd)
    assert_within_one_ulp(got, exact + bias.astype(np.float64)[None, :, None, None])


def test_softmax_float16() -> None:
    x = (half(3, 1024) * 4).astype(np.float16)
    (got,) = run_op("Softmax", [x], {"axis": -1})
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    assert_within_one_ulp(got, e / e.sum(-1, keepdims=True))
