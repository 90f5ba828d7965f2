"""benchmarks/conv2d.py: ResNet-50's conv shapes, a tiny end-to-end run, totals, failures."""

import os
from collections import Counter

import pytest

from tests.benchmark_modules import load_benchmark

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

conv2d = load_benchmark("conv2d")

TINY = ["--shape", "16", "32", "3", "2", "9", "--repeat", "3", "--gap", "0", "--json"]


def test_layers_are_resnet50_convs() -> None:
    import onnx

    from ember import zoo

    model = onnx.shape_inference.infer_shapes(zoo.build_model("resnet50"))
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*model.graph.input, *model.graph.value_info]}
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    seen: Counter[tuple[int, ...]] = Counter()
    for node in model.graph.node:
        if node.op_type == "Conv":
            attrs = {a.name: list(a.ints) for a in node.attribute}
            cout, cin, k, _ = weights[node.input[1]]
            assert attrs["pads"] == [k // 2] * 4
            seen[(cin, cout, k, attrs["strides"][0], dims[node.input[0]][2])] += 1
    table = {(x.cin, x.cout, x.kernel, x.stride, x.size): x.uses for x in conv2d.LAYERS}
    assert table == dict(seen)
    assert sum(table.values()) == 53
    assert len({x.name for x in conv2d.LAYERS}) == len(conv2d.LAYERS)


def test_tiny_conv_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    rows = conv2d.main([*TINY, "--threads", "2", "1", "--peak-gflops", "50",
                        "--wait-quiet", "0.6"])
    capsys.readouterr()
    assert [r["threads"] for r in rows] == [2, 1]
    for r in rows:
        assert r["max_rel_error"] <= 1e-4
        assert r["runs"] == 3
        assert r["ember_ms"] > 0 and r["onnxruntime_ms"] > 0 and r["kernel_ms"] > 0
        assert r["edges_ms"] >= 0
        assert 0 <= r["other_load"] <= os.cpu_count() and 0 <= r["waited_s"] <= 1.2
        flops = 2 * 32 * 5 * 5 * 16 * 9  # 9x9 input, stride 2, pad 1 -> 5x5 output
        assert r["gflop"] == pytest.approx(flops / 1e9, rel=1e-3)
        assert r["ember_gflops"] == pytest.approx(flops / r["ember_ms"] / 1e6, rel=0.05, abs=0.01)
        assert r["ratio"] == pytest.approx(r["ember_ms"] / r["onnxruntime_ms"], rel=0.01)
        assert r["peak_gflops"] == 50 * r["threads"]
        assert r["ember_peak_fraction"] == pytest.approx(r["ember_gflops"] / (50 * r["threads"]),
                                                         rel=0.05, abs=1e-3)


def test_table_and_weighted_totals() -> None:
    base = {"shape": "s", "ember_gflops": 1.0, "ember_peak_fraction": 0.5,
            "kernel_gflops": 1.0, "kernel_peak_fraction": 0.5, "peak_gflops": 100.0,
            "other_load": 0.0}
    rows = [dict(base, layer="a", uses=3, threads=2, ember_ms=1.0, onnxruntime_ms=2.0,
                 kernel_ms=0.5, gflop=0.1, ratio=0.5),
            dict(base, layer="b", uses=1, threads=2, ember_ms=4.0, onnxruntime_ms=2.0,
                 kernel_ms=3.0, gflop=0.2, ratio=2.0)]
    (total,) = conv2d.totals(rows)
    assert total["convs"] == 4
    assert total["ember_ms"] == pytest.approx(7.0)
    assert total["onnxruntime_ms"] == pytest.approx(8.0)
    assert total["kernel_ms"] == pytest.approx(4.5)
    assert total["ratio"] == pytest.approx(7 / 8)
    assert total["ember_gflops"] == pytest.approx(0.5 / 7e-3)
    text = conv2d.table(rows)
    assert "| a | s | 3 | 2 |" in text and "| sum | 2 | 4 | 7.00 | 8.00 | 0.88 |" in text


def test_wrong_output_fails_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(conv2d.MismatchError, match="custom3x3s2"):
        conv2d.main([*TINY, "--threads", "1", "--rtol", "-1"])
    with pytest.raises(SystemExit, match="unknown layer"):
        conv2d.main(["--layers", "res9.3x3"])
    capsys.readouterr()
