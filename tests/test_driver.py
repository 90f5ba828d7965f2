"""ember.compile on small graphs: numbers vs numpy, input checks, kernel dedup, disk cache."""

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError
from ember.graph.ir import GraphBuilder
from ember.lowering.cache import KernelCache
from ember.lowering.saved import load_compiled, save_compiled

SHAPE = (3, 50)


def _graph():
    """x -> relu -> add w -> relu -> add (reuse relu) ; outputs: final, relu, x, final."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("net")
    x = b.input("x", SHAPE, "float32")
    s = b.input("s", SHAPE, "float32")
    w = b.constant("w", rng.standard_normal(SHAPE).astype("float32"))
    y, = b.add("Relu", [x])
    z, = b.add("Add", [y, w])
    q, = b.add("Relu", [z])
    r, = b.add("Add", [q, y])
    t, = b.add("Add", [r, s])
    return b.finish([t, y, x, t]), w.data


def _reference(x, s, w):
    y = np.maximum(x, 0)
    t = np.maximum(y + w, 0) + y + s
    return [t, y, x, t]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    graph, w = _graph()
    cache = KernelCache(tmp_path_factory.mktemp("cache"))
    return ember.compile(graph, cache=cache), w, cache


def _inputs(seed=1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(SHAPE).astype("float32"),
            rng.standard_normal(SHAPE).astype("float32"))


def test_run_matches_numpy(compiled):
    model, w, _ = compiled
    x, s = _inputs()
    outs = model.run({"x": x, "s": s})
    for got, want in zip(outs, _reference(x, s, w)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert outs[0] is not outs[3]
    # positional forms give the same numbers; results are fresh arrays each run
    again = model(x, s)
    np.testing.assert_array_equal(again[0], outs[0])
    x2, s2 = _inputs(2)
    third = model.run([x2, s2])
    np.testing.assert_allclose(third[0], _reference(x2, s2, w)[0], rtol=1e-6)
    np.testing.assert_array_equal(again[0], outs[0])


def test_names_and_fused_graph(compiled):
    model, _, _ = compiled
    assert model.input_names == ["x", "s"]
    assert len(model.output_names) == 4
    text = str(model.graph)
    fused = [n for n in model.graph.nodes if n.op == "Fused"]
    assert len(fused) == len(model.graph.nodes) == model.stats["groups"]
    assert text.count("Fused(") == len(fused) and "Relu" in text


def test_identical_kernels_compile_once():
    graph, w = _graph()
    model = ember.compile(graph, opt_level=0, cache=False)  # one group per op
    assert model.stats["groups"] == 5
    # the two Relu share a kernel, and so do the three Adds (a constant is a parameter too)
    assert model.stats["kernels"] == model.stats["compiled"] == 2
    x, s = _inputs()
    for got, want in zip(model(x, s), _reference(x, s, w)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_input_errors(compiled):
    model, _, _ = compiled
    x, s = _inputs()
    with pytest.raises(ArgumentError, match=r"expects inputs \['x', 's'\].*unknown: \['y'\]"):
        model.run({"x": x, "y": s})
    with pytest.raises(ArgumentError, match=r"missing: \['s'\]"):
        model.run({"x": x})
    with pytest.raises(ArgumentError, match="takes 2 inputs"):
        model(x)
    with pytest.raises(ArgumentError, match=r"input 's': expected shape \(3, 50\), got \(50, 3\)"):
        model(x, s.T.copy())
    with pytest.raises(ArgumentError, match="input 'x': expected dtype float32, got float64"):
        model(x.astype("float64"), s)
    with pytest.raises(ArgumentError, match="input 'x': expected a numpy array, got object"):
        model(object(), s)


def test_non_contiguous_input_is_accepted(compiled):
    model, w, _ = compiled
    x, s = _inputs()
    wide = np.zeros((SHAPE[0], SHAPE[1] * 2), "float32")
    wide[:, ::2] = x
    out = model(wide[:, ::2], s)
    np.testing.assert_allclose(out[0], _reference(x, s, w)[0], rtol=1e-6)


def test_profile_has_one_row_per_group(compiled):
    model, _, _ = compiled
    table = model.profile(dict(zip(model.input_names, _inputs())), repeat=3)
    assert len(table.rows) == len(model.plan.calls) == model.stats["groups"]
    assert sorted(r.group for r in table.rows) == sorted(c.group for c in model.plan.calls)
    seconds = [r.seconds for r in table.rows]
    assert seconds == sorted(seconds, reverse=True)
    assert abs(sum(r.percent for r in table.rows) - 100.0) < 1e-6
    text = str(table)
    assert all(r.group in text for r in table.rows) and "whole model" in text
    assert table.cached_seconds is None and "cached" not in text


def test_profile_times_groups_cached_too(compiled):
    model, _, _ = compiled
    table = model.profile(dict(zip(model.input_names, _inputs())), repeat=3, cached=True)
    assert len(table.rows) == len(model.plan.calls)
    assert all(r.cached_seconds is not None and r.cached_seconds > 0 for r in table.rows)
    assert table.cached_seconds == sum(r.cached_seconds for r in table.rows)
    text = str(table)
    assert "cached (us)" in text and all(r.group in text for r in table.rows)


def test_second_compile_hits_the_cache(compiled, tmp_path):
    _, _, cache = compiled
    graph, _ = _graph()
    again = ember.compile(graph, cache=KernelCache(cache.directory))
    assert again.stats["compiled"] == 0
    assert again.stats["cached"] == again.stats["kernels"]


def test_corrupted_cache_entry_is_rebuilt(tmp_path):
    graph, w = _graph()
    first = ember.compile(graph, cache=KernelCache(tmp_path))
    files = sorted(tmp_path.rglob("*.obj"))
    assert len(files) == first.stats["kernels"]
    files[0].write_bytes(files[0].read_bytes()[:100])          # truncated
    files[1].write_bytes(b"garbage")                            # not even a header
    cache = KernelCache(tmp_path)
    second = ember.compile(graph, cache=cache)
    assert cache.corrupted == 2 and second.stats["compiled"] == 2
    x, s = _inputs()
    np.testing.assert_allclose(second(x, s)[0], _reference(x, s, w)[0], rtol=1e-6)
    third_cache = KernelCache(tmp_path)
    ember.compile(graph, cache=third_cache)
    assert third_cache.corrupted == 0 and third_cache.hits == first.stats["kernels"]


def test_save_and_load_without_recompiling(compiled, tmp_path):
    model, w, _ = compiled
    out = save_compiled(model, tmp_path / "net.ember")
    loaded = load_compiled(out)
    x, s = _inputs(3)
    for got, want in zip(loaded.run({"x": x, "s": s}), _reference(x, s, w)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert loaded.input_names == model.input_names
    with pytest.raises(ArgumentError, match="is not a compiled ember model"):
        load_compiled(tmp_path)


def test_compile_rejects_bad_models(tmp_path):
    with pytest.raises(ArgumentError, match="does not exist"):
        ember.compile(tmp_path / "missing.onnx")
    with pytest.raises(ArgumentError, match="expected a path, an onnx.ModelProto, a "
                                            "torch.nn.Module or an ember Graph, got int"):
        ember.compile(42)
    graph, _ = _graph()
    with pytest.raises(ArgumentError, match="opt_level"):
        ember.compile(graph, opt_level=7)


def test_onnx_model_against_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    w = np.random.default_rng(4).standard_normal((2, 8)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "w"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [onnx.numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = ember.compile(model, cache=False)
    x = np.random.default_rng(5).standard_normal((2, 8)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(compiled.run({"x": x})[0], want[0], rtol=1e-6)


def test_parallel_compile_in_worker_processes():
    b = GraphBuilder("wide")
    xs, outs = [], []
    for i in range(8):  # eight distinct kernels: different shapes
        x = b.input(f"x{i}", (2, 16 + i), "float32")
        w = b.constant(f"w{i}", np.full((2, 16 + i), i, "float32"))
        y, = b.add("Add", [x, w])
        xs.append(x)
        outs.append(b.add("Relu", [y])[0])
    model = ember.compile(b.finish(outs), cache=False, jobs=2)
    assert model.stats["compiled"] == 8
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(x.type.shape).astype("float32") for x in xs]
    for i, (got, a) in enumerate(zip(model(*arrays), arrays)):
        np.testing.assert_allclose(got, np.maximum(a + i, 0), rtol=1e-6)


def test_graph_without_kernels_and_constant_outputs():
    b = GraphBuilder("trivial")
    x = b.input("x", (2, 3), "float32")
    c = b.constant("c", np.arange(6, dtype="int64").reshape(2, 3))
    model = ember.compile(b.finish([x, c]), cache=False)
    assert model.stats["groups"] == 0 and model.plan.calls == ()
    a = np.ones((2, 3), "float32")
    got_x, got_c = model(a)
    np.testing.assert_array_equal(got_x, a)
    np.testing.assert_array_equal(got_c, c.data)
    assert got_x is not a


def test_fire_module_concat_is_assembled_in_place():
    """A squeezenet fire module: two conv branches concatenated on channels (blocked layout)
    are written straight into the concatenation; numbers match onnxruntime."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    rng = np.random.default_rng(6)
    weights = {"s": (16, 32, 1, 1), "e1": (32, 16, 1, 1), "e3": (32, 16, 3, 3),
               "after": (8, 64, 3, 3)}
    inits = [onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype("float32"),
                                          f"w_{k}") for k, s in weights.items()]
    nodes = [helper.make_node("Conv", ["x", "w_s"], ["sq"]),
             helper.make_node("Relu", ["sq"], ["sqr"]),
             helper.make_node("Conv", ["sqr", "w_e1"], ["e1"]),
             helper.make_node("Relu", ["e1"], ["e1r"]),
             helper.make_node("Conv", ["sqr", "w_e3"], ["e3"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["e3"], ["e3r"]),
             helper.make_node("Concat", ["e1r", "e3r"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w_after"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "fire", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 9, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 9, 11])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compiled = ember.compile(model, opt_level=3, cache=False)
    assert compiled.memory_plan.assembled  # the Concat kernel is gone from the plan
    assert not any(c.anchor == "Concat" or "concat" in c.group.lower()
                   for c in compiled.plan.calls)
    x = rng.standard_normal((1, 32, 9, 11)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(compiled.run({"x": x})[0], want[0], rtol=1e-4, atol=1e-4)


def test_host_target_carries_the_thread_count_into_the_cache_key(tmp_path):
    from ember.driver import resolve_target
    from ember.runtime import threadpool

    previous = threadpool.num_threads()
    try:
        threadpool.set_num_threads(1)
        one = resolve_target("llvm")
        threadpool.set_num_threads(2)
        two = resolve_target("llvm")
    finally:
        threadpool.set_num_threads(previous)
    assert one.num_cores == 1 and two.num_cores == 2 and str(one) != str(two)
    assert resolve_target("llvm -num-cores=3").num_cores == 3  # given: kept
    assert "num-cores" not in str(resolve_target("llvm -mtriple=aarch64-linux-gnu"))
    graph, _ = _graph()
    cache = KernelCache(tmp_path)
    a = ember.compile(graph, target=str(one), cache=cache)
    b = ember.compile(graph, target=str(two), cache=cache)  # not the 1-thread kernels
    again = ember.compile(graph, target=str(two), cache=cache)
    assert a.stats["compiled"] >= 1 and b.stats["compiled"] == a.stats["compiled"]
    assert again.stats["compiled"] == 0
