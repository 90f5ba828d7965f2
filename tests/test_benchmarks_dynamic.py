"""benchmarks/dynamic_batch.py: the symbolic-batch model it builds needs specialization and
runs two batches from one compiled model like the static model does."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.specialize import needs_specialization

from .benchmark_modules import load_benchmark


def test_symbolic_batch_model_runs_like_the_static_one():
    bench = load_benchmark("dynamic_batch")
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)).astype(
        np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                              [w])
    static = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model = bench.symbolic_batch(onnx.ModelProto.FromString(static.SerializeToString()))
    assert not needs_specialization(static, None) and needs_specialization(model, None)
    dynamic = ember.compile(model)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        (got,) = dynamic.run({"x": x})
        np.testing.assert_allclose(got, x @ numpy_helper.to_array(w), rtol=1e-5, atol=1e-6)
    assert dynamic.compiles == 2


def test_zoo_bert_made_symbolic_runs_any_batch():
    """The zoo's BERT copies batch and sequence in its Reshapes (0), so the benchmark can
    make its batch symbolic: batch 2 of the symbolic model equals the batch-2 build."""
    bench = load_benchmark("dynamic_batch")
    config = {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "seq_len": 8,
              "vocab": 50}
    from ember.zoo import build_model

    symbolic = bench.symbolic_batch(build_model("bert-tiny", batch=1, **config))
    dynamic = ember.compile(symbolic)
    static = ember.compile(build_model("bert-tiny", batch=2, **config))
    rng = np.random.default_rng(1)
    mask = np.ones((2, 8), np.int64)
    mask[1, 5:] = 0
    feeds = {"input_ids": rng.integers(0, 50, (2, 8)).astype(np.int64), "attention_mask": mask}
    np.testing.assert_allclose(dynamic.run(feeds)[0], static.run(feeds)[0], rtol=1e-5,
                               atol=1e-5)
    (one,) = dynamic.run(bench.feeds_for(symbolic, 1, seed=0))
    assert one.shape == (1, 8, 32) and dynamic.compiles == 2


def test_symbolic_model_runs_the_static_builds_kernels():
    """At each batch the symbolic model's program has the static build's kernels (same
    object code, called in the same order), and programs for different batches differ."""
    bench = load_benchmark("dynamic_batch")
    from ember.zoo import build_model

    config = {"image_size": 32, "num_classes": 4}
    dynamic = ember.compile(bench.symbolic_batch(build_model("resnet18", batch=1, **config)))
    digests = {}
    for batch in (1, 2):
        static_proto = build_model("resnet18", batch=batch, **config)
        feeds = bench.feeds_for(static_proto, batch, seed=batch)
        (got,) = dynamic.run(feeds)
        static = ember.compile(static_proto)
        np.testing.assert_allclose(got, static.run(feeds)[0], rtol=1e-5, atol=1e-5)
        digests[batch] = bench.kernels_digest(bench.program_for(dynamic, feeds))
        assert digests[batch] == bench.kernels_digest(static)
    assert digests[1] != digests[2]
