"""benchmarks/op_profile.py: how onnxruntime's nodes are paired with ember's groups."""

import pytest

from tests.benchmark_modules import load_benchmark

op_profile = load_benchmark("op_profile")


def test_onnxruntime_nodes_count_in_the_group_with_the_latest_anchor_before_them():
    # graph order: conv1, bn1.relu, conv2, add, relu2; ember anchors its groups on the convs,
    # onnxruntime names its fused nodes after their last node (and adds layout reorders)
    order = {"conv1": 0, "bn1.relu": 1, "conv2": 2, "add": 3, "relu2": 4}
    ember = [{"name": "conv1", "op": "OUT_FUSABLE", "seconds": 2e-3},
             {"name": "conv2", "op": "OUT_FUSABLE", "seconds": 1e-3}]
    ort = [{"name": "bn1.relu_nchwc", "op": "Conv", "seconds": 3e-3},
           {"name": "relu2", "op": "Conv", "seconds": 0.5e-3},
           {"name": "add", "op": "Add", "seconds": 0.25e-3},
           {"name": "ReorderOutput_0", "op": "ReorderOutput", "seconds": 1e-4}]
    pairs, ort_only = op_profile.compare(order, ember, ort)
    by_name = {p["name"]: p for p in pairs}
    assert by_name["conv1"]["ort_ms"] == pytest.approx(3.0)
    assert by_name["conv2"]["ort_ms"] == pytest.approx(0.75)
    assert by_name["conv2"]["ort_ops"] == ["Conv", "Add"]
    assert ort_only == {"ReorderOutput": pytest.approx(1e-4)}
    # largest ember - onnxruntime first: conv2 is 0.25 ms slower, conv1 1 ms faster
    assert [p["name"] for p in pairs] == ["conv2", "conv1"]


def test_a_node_before_every_anchor_is_onnxruntimes_own():
    pairs, ort_only = op_profile.compare(
        {"input_cast": 0, "conv": 1}, [{"name": "conv", "op": "X", "seconds": 1e-3}],
        [{"name": "input_cast", "op": "Cast", "seconds": 2e-3}])
    assert pairs[0]["ort_ms"] == 0.0 and ort_only == {"Cast": pytest.approx(2e-3)}
