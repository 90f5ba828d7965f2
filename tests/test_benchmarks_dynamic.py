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
