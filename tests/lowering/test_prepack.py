"""Weight stages computed at compile time: which stages move, the numbers, the driver plumbing."""

import numpy as np
import pytest

import ember
from ember import te
from ember.errors import EmberError
from ember.graph.ir import GraphBuilder, Value, tensor_type
from ember.lowering.kernel import run_op, split_constant_stages
from ember.lowering.cache import KernelCache
from ember.lowering.prepack import PackJob, run_pack_jobs
from ember.lowering.saved import load_compiled, save_compiled


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_only_weight_stages_move():
    x = te.placeholder((256, 16), "float32", name="x")
    w = te.placeholder((16,), "float32", name="w")
    v = te.placeholder((16, 16), "float32", name="v")
    doubled = te.compute((16,), lambda j: w[j] * 2.0, name="doubled")
    small = te.compute((16,), lambda j: doubled[j] + 1.0, name="small")       # frontier
    spread = te.compute((256, 16), lambda i, j: w[j] * 3.0, name="spread")    # 256x larger
    flip = te.compute((16, 16), lambda i, j: v[j, i], name="flip")             # frontier
    out = te.compute((256, 16), lambda i, j: x[i, j] * small[j] + spread[i, j] + flip[j, i % 16],
                     name="out")
    split = split_constant_stages([x, w, v], [out], [False, True, True])
    assert [t.op.name for t in split.sources] == ["small", "flip"]
    assert split.pack_inputs == (1, 2)
    assert split.main_inputs == (0, 1)  # w is still read by `spread`; v is not
    assert [tuple(int(d.value) for d in t.shape) for t in split.packed] == [(16,), (16, 16)]
    # nothing constant: nothing moves
    none = split_constant_stages([x, w, v], [out], [False, False, False])
    assert none.empty and none.outputs[0] is out and none.main_inputs == (0, 1, 2)


def test_split_numbers_match(tmp_path):
    rng = _rng(1)
    a = rng.standard_normal((40, 24), dtype=np.float32)
    b = rng.standard_normal((24, 70), dtype=np.float32)
    c = rng.standard_normal((70,), dtype=np.float32)
    got = run_op("Gemm", [a, b, c], {"alpha": 0.5}, constant=[1, 2])[0]
    np.testing.assert_allclose(got, 0.5 * a @ b + c, rtol=1e-5, atol=1e-5)


def test_lstm_prepacked_matches_inline():
    rng = _rng(2)
    x = rng.standard_normal((6, 2, 20), dtype=np.float32)
    w = (rng.standard_normal((2, 64, 20)) * 0.3).astype(np.float32)
    r = (rng.standard_normal((2, 64, 16)) * 0.3).astype(np.float32)
    b = (rng.standard_normal((2, 128)) * 0.1).astype(np.float32)
    attrs = {"hidden_size": 16, "direction": "bidirectional"}
    plain = run_op("LSTM", [x, w, r, b], attrs)
    packed = run_op("LSTM", [x, w, r, b], attrs, constant=[1, 2, 3])
    for p, q in zip(plain, packed):
        np.testing.assert_allclose(q, p, rtol=1e-5, atol=1e-6)


def _graph(seed=3):
    """x -> MatMul W -> Relu -> MatMul W (the same weight again) -> Relu; and bias + x."""
    rng = _rng(seed)
    bld = GraphBuilder("dense2")
    x = bld.input("x", (20, 64), "float32")
    w = bld.constant("w", rng.standard_normal((64, 64)).astype("float32") * 0.2)
    bias = bld.constant("bias", rng.standard_normal((20, 64)).astype("float32"))
    h, = bld.add("MatMul", [x, w])
    h, = bld.add("Relu", [h])
    h, = bld.add("MatMul", [h, w])
    y, = bld.add("Relu", [h])
    z, = bld.add("Add", [bias, x])
    return bld.finish([y, z]), w.data, bias.data


def _reference(x, w, bias):
    return [np.maximum(np.maximum(x @ w, 0) @ w, 0), x + bias]


def test_compile_prepacks_and_drops_the_original(tmp_path):
    graph, w, bias = _graph()
    x = _rng(4).standard_normal((20, 64), dtype=np.float32)
    cache = KernelCache(tmp_path / "cache")
    on = ember.compile(graph, cache=cache, prepack=True)
    off = ember.compile(graph, cache=False, prepack=False)
    want = _reference(x, w, bias)
    for model in (on, off):
        for got, ref in zip(model(x), want):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    # both MatMul groups have one kernel and read the same weight: one pack job
    assert on.stats["prepacked"] == 1 and off.stats["prepacked"] == 0
    assert on.stats["kernels"] < on.stats["groups"]
    names = {n for c in on.plan.calls for n in c.arg_names}
    assert "w" not in names and "w" in {n for c in off.plan.calls for n in c.arg_names}
    # the packed panels take the weight's place: no copy of the original stays in the blob
    assert on.plan.constant_bytes == off.plan.constant_bytes
    # a warm compile reuses the cached objects and runs the pack kernels again
    warm = ember.compile(graph, cache=cache, prepack=True)
    assert warm.stats["cached"] == warm.stats["kernels"]
    np.testing.assert_array_equal(warm(x)[0], on(x)[0])
    np.testing.assert_array_equal(warm(x)[1], on(x)[1])
    # the packed blob is saved and loaded as is
    loaded = load_compiled(save_compiled(on, tmp_path / "m.ember"))
    np.testing.assert_array_equal(loaded(x)[0], on(x)[0])


def test_env_switch(monkeypatch):
    graph, _, _ = _graph(5)
    monkeypatch.setenv("EMBER_PREPACK", "0")
    model = ember.compile(graph, cache=False)
    assert model.stats["prepacked"] == 0


def test_pack_job_must_fit_the_blob():
    weight = Value("w", tensor_type((4,), "float32"), np.ones(4, np.float32))
    packed = Value("p", tensor_type((64,), "float32"))
    job = PackJob("nothing_pack", (weight,), (packed,))
    blob = np.zeros(64, np.uint8)
    with pytest.raises(EmberError, match="does not fit the constant blob"):
        run_pack_jobs([job], lambda symbol: 0, blob, {packed: 0})
