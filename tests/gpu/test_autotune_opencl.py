"""The auto-tuner on a GPU target (OpenCL): candidates built for the device, timed with its
events in spawned workers, checked against the default schedule; the best records applied
by ember.compile(target="opencl", tuning_db=...)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ember  # noqa: E402
from ember.autotune import (  # noqa: E402
    LocalRunner,
    MeasureSettings,
    TuningDatabase,
    extract_tasks,
    tune,
)
from ember.errors import TuningError  # noqa: E402


def _matmul_relu_model():
    """x [8, 24] @ w [24, 40] -> relu -> * 0.5."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((24, 40)).astype(np.float32), "w")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["r"]),
             helper.make_node("Mul", ["r", "half"], ["y"])]
    graph = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [8, 24])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [8, 40])], [w, half])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_gpu_candidate_runs_on_the_device_and_is_timed_by_its_events(opencl):
    (task,) = extract_tasks(_matmul_relu_model(), "opencl")
    assert task.family == "GpuMatmulKnobs" and task.space().size > 1
    kernel = task.build({"tile": 8}, seed=3)
    kernel.run()
    # the group's inputs (seeded as the runner seeds them): x, the weight, the scale
    x, w, half = _inputs(task, 3)
    want = np.maximum(x @ w, 0) * half
    np.testing.assert_allclose(kernel.outputs[0], want, rtol=1e-4, atol=1e-4)
    assert kernel.timed(3) > 0.0


def _inputs(task, seed):
    from ember.autotune.lowering import random_inputs

    return random_inputs(task.group, seed)


def test_tune_a_model_on_opencl_then_compile_with_its_records(opencl, tmp_path):
    model = _matmul_relu_model()
    path = tmp_path / "tune.sqlite"
    settings = MeasureSettings(repeat=2, timeout=120, min_run_seconds=0.002)
    with TuningDatabase(path) as db, LocalRunner(settings) as runner:
        states = tune(model, db, runner, trials=3, search="random", batch=3, seed=1,
                      target="opencl")
        records = db.records()
    (state,) = states
    assert state.errors == 0 and np.isfinite(state.default_cost)
    assert np.isfinite(state.best_cost) and state.best_cost <= state.default_cost
    assert {r.target for r in records} == {"opencl"} and all(r.ok for r in records)
    compiled = ember.compile(model, target="opencl", tuning_db=str(path), cache=False)
    x = np.random.default_rng(5).standard_normal((8, 24)).astype(np.float32)
    w = numpy_helper.to_array(model.graph.initializer[0])
    (got,) = compiled.run({"x": x})
    np.testing.assert_allclose(got, np.maximum(x @ w, 0) * 0.5, rtol=1e-4, atol=1e-4)


def test_tune_refuses_tasks_of_another_target(tmp_path):
    tasks = extract_tasks(_matmul_relu_model(), "llvm -num-cores=1")
    with TuningDatabase(tmp_path / "t.sqlite") as db:
        with pytest.raises(TuningError, match="target 'opencl' given, but tasks"):
            tune(tasks, db, trials=1, target="opencl")


def test_local_runner_refuses_an_unknown_start_method():
    with pytest.raises(TuningError, match="start 'teleport' is not a start method"):
        LocalRunner(start="teleport")
