"""Random ops (RandomUniform, RandomNormal, their *Like forms, Bernoulli): no reference can
match a random tensor, so these check what must hold: ranges, moments and the whole
distribution (Kolmogorov-Smirnov distance), reproducibility per seed across builds and
thread counts, independence of neighbours and of seeds, and clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import ember
from ember.errors import EmberError

N = (200, 500)  # 100,000 draws: a KS distance above 2.5 / sqrt(n) has p < 1e-5
KS_LIMIT = 2.5 / math.sqrt(N[0] * N[1])


def model(node, inputs=(), dtype=T.FLOAT, shape=N):
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "random", [vi(n, T.FLOAT, shape) for n in inputs],
                              [vi("y", dtype, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(node, feeds=None, target="llvm", **kwargs):
    feeds = feeds or {}
    compiled = ember.compile(model(node, tuple(feeds), **kwargs), target=target)
    return compiled.run(feeds)[0]


def ks_distance(sample: np.ndarray, cdf) -> float:
    xs = np.sort(sample.ravel().astype(np.float64))
    n = xs.size
    f = cdf(xs)
    return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))


def normal_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2)).astype(np.float64))


def test_uniform_range_moments_and_distribution():
    y = run(helper.make_node("RandomUniform", [], ["y"], shape=list(N), low=-2.0, high=3.0,
                             seed=7.0))
    assert y.shape == N and y.dtype == np.float32
    assert y.min() >= -2.0 and y.max() < 3.0
    sigma = 5 / math.sqrt(12)
    assert abs(y.mean() - 0.5) < 5 * sigma / math.sqrt(y.size)
    assert abs(y.std() - sigma) < 0.01
    assert ks_distance(y, lambda x: (x + 2) / 5) < KS_LIMIT
    # neighbours are independent: lag-1 correlation within noise
    flat = y.ravel() - y.mean()
    assert abs(np.dot(flat[:-1], flat[1:]) / np.dot(flat, flat)) < 5 / math.sqrt(y.size)


def test_normal_like_follows_its_input_and_the_gaussian():
    x = np.zeros(N, np.float32)
    y = run(helper.make_node("RandomNormalLike", ["x"], ["y"], mean=1.0, scale=2.0),
            {"x": x})
    assert y.shape == N and y.dtype == np.float32 and np.isfinite(y).all()
    assert abs(y.mean() - 1.0) < 5 * 2 / math.sqrt(y.size)
    assert abs(y.std() - 2.0) < 0.02
    assert ks_distance((y - 1) / 2, normal_cdf) < KS_LIMIT


def test_seeds_reproduce_across_builds_and_threads_and_differ_between_seeds():
    def draw(seed, cores):
        node = helper.make_node("RandomUniformLike", ["x"], ["y"], seed=seed)
        return run(node, {"x": np.zeros(N, np.float32)}, target=f"llvm -num-cores={cores}")

    a, b = draw(3.0, 1), draw(3.0, 2)
    np.testing.assert_array_equal(a, b)
    c = draw(4.0, 2)
    assert not np.array_equal(a, c)
    centered = (a - 0.5).ravel(), (c - 0.5).ravel()
    correlation = np.dot(*centered) / np.sqrt(np.dot(centered[0], centered[0])
                                              * np.dot(centered[1], centered[1]))
    assert abs(correlation) < 5 / math.sqrt(a.size)


def test_float64_has_more_than_24_bits():
    y = run(helper.make_node("RandomUniform", [], ["y"], shape=[1000], dtype=T.DOUBLE),
            dtype=T.DOUBLE, shape=(1000,))
    assert y.dtype == np.float64 and 0 <= y.min() and y.max() < 1
    assert np.any(y * 2**24 != np.floor(y * 2**24))  # not float32's grid


def test_bernoulli_frequencies_and_certain_outcomes():
    p = np.empty(N, np.float32)
    p[:50], p[50:100], p[100:] = 0.0, 1.0, 0.3
    y = run(helper.make_node("Bernoulli", ["p"], ["y"], seed=1.0), {"p": p})
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert (y[:50] == 0).all() and (y[50:100] == 1).all()
    rest = y[100:]
    assert abs(rest.mean() - 0.3) < 5 * math.sqrt(0.3 * 0.7 / rest.size)


def test_bad_attributes_are_refused():
    with pytest.raises(EmberError, match="RandomUniform: dtype must be a float type"):
        run(helper.make_node("RandomUniform", [], ["y"], shape=[4], dtype=T.INT32),
            dtype=T.INT32, shape=(4,))
    with pytest.raises(EmberError, match="negative dimension"):
        run(helper.make_node("RandomNormal", [], ["y"], shape=[-1, 4]), shape=(2, 4))
