"""convert_layout: the same numbers before and after, transforms only at the edges."""

import numpy as np
import pytest

import ember
from ember.graph.ir import Graph, GraphBuilder
from ember.graph.passes.layout import LayoutRule, block_of, convert_layout

RNG = np.random.default_rng(11)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype("float32")


def conv(b: GraphBuilder, x, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
         bias: bool = True):
    w = b.constant("w", rand(cout, cin // group, k, k, scale=1.0 / np.sqrt(cin // group * k * k)))
    inputs = [x, w] + ([b.constant("b", rand(cout, scale=0.1))] if bias else [])
    (y,) = b.add("Conv", inputs, {"pads": [k // 2] * 4, "strides": [stride, stride],
                                 "group": group})
    return y


def block_net() -> Graph:
    """conv/relu/residual add/pool/depthwise/clip/concat/per-channel mul, then a global pool."""
    b = GraphBuilder("net")
    x = b.input("x", (1, 3, 18, 17), "float32")
    (a,) = b.add("Relu", [conv(b, x, 3, 32, 3, stride=2)])
    (c,) = b.add("Relu", [conv(b, a, 32, 32, 1)])
    (r,) = b.add("Add", [conv(b, c, 32, 32, 3), a])
    (p,) = b.add("MaxPool", [r], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4})[:1]
    (d,) = b.add("Clip", [conv(b, p, 32, 32, 3, group=32)], {"min": 0.0, "max": 6.0})
    (m,) = b.add("Mul", [d, b.constant("scale", rand(32, 1, 1))])
    (q,) = b.add("AveragePool", [conv(b, p, 32, 16, 1, bias=False)], {"kernel_shape": [2, 2],
                                                                       "pads": [1, 1, 0, 0]})
    (cat,) = b.add("Concat", [m, conv(b, p, 32, 32, 3)], {"axis": 1})
    (g,) = b.add("GlobalAveragePool", [cat])
    return b.finish([g, q])


def run(graph: Graph, feeds: dict[str, np.ndarray], opt_level: int = 2) -> list[np.ndarray]:
    return ember.compile(graph, opt_level=opt_level, cache=False).run(feeds)


def ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


@pytest.mark.parametrize("block", [16, 8])
def test_numbers_equal_before_and_after(block: int) -> None:
    graph = block_net()
    feeds = {"x": rand(1, 3, 18, 17)}
    after = convert_layout(graph, LayoutRule(block=block))
    assert "Conv" not in ops(after) and ops(after).count("ConvNCHWc") == 6
    for want, got in zip(run(graph, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_transforms_only_at_the_edges() -> None:
    after = convert_layout(block_net(), LayoutRule(block=16))
    transforms = [n for n in after.nodes if n.op == "LayoutTransform"]
    # the RGB input is read as it is; the two outputs (global pool, average pool) go back
    assert len(transforms) == 2 and all(n.attrs["dst_block"] == 0 for n in transforms)
    producers = after.producers()
    for n in transforms:
        src = producers.get(n.inputs[0])
        assert src is None or src.op != "LayoutTransform"
    # pools and elementwise ops run on the blocked tensors
    pools = [n for n in after.nodes if n.op in ("MaxPool", "AveragePool")]
    assert all(n.inputs[0].type.ndim == 5 for n in pools)
    mul = next(n for n in after.nodes if n.op == "Mul")
    assert mul.inputs[1].type.shape == (1, 2, 1, 1, 16)


def test_idempotent() -> None:
    once = convert_layout(block_net(), LayoutRule(block=16))
    twice = convert_layout(once, LayoutRule(block=16))
    assert ops(twice).count("LayoutTransform") == ops(once).count("LayoutTransform")
    assert len(twice.nodes) == len(once.nodes)


def test_graph_output_in_the_middle_keeps_its_value() -> None:
    b = GraphBuilder("mid")
    x = b.input("x", (1, 16, 8, 8), "float32")
    (a,) = b.add("Relu", [conv(b, x, 16, 16, 3)])
    y = conv(b, a, 16, 32, 3)
    graph = b.finish([a, y])
    after = convert_layout(graph, LayoutRule(block=8))
    assert after.outputs == graph.outputs  # the same Values, made by transforms
    assert ops(after).count("LayoutTransform") == 3  # x in; a and y out
    feeds = {"x": rand(1, 16, 8, 8)}
    for want, got in zip(run(graph, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_what_stays_nchw() -> None:
    b = GraphBuilder("keep")
    x = b.input("x", (1, 8, 6, 6), "float32")
    wx = b.input("w", (8, 8, 3, 3), "float32")
    (a,) = b.add("Conv", [x, wx], {"pads": [1] * 4})             # weights not constant
    g2 = conv(b, a, 8, 8, 3, group=2)                             # grouped, not depthwise
    odd = conv(b, g2, 8, 50, 1)                                   # 50 channels: no block
    graph = b.finish([odd])
    after = convert_layout(graph, LayoutRule(block=16))
    assert ops(after) == ops(graph)
    assert after is graph


def test_block_rule() -> None:
    assert [block_of(c, 16) for c in (3, 8, 24, 32, 1000, 50, 12)] == [3, 8, 8, 16, 8, 0, 4]
    assert [block_of(c, 4) for c in (3, 8, 6)] == [3, 4, 0]


def test_pipeline_level_3_uses_blocked_convs() -> None:
    from ember.graph.pipeline import optimize_graph

    graph = block_net()
    fused = optimize_graph(graph, opt_level=3)
    inner = [m.op for n in fused.nodes for m in n.attrs["graph"].nodes]
    assert inner.count("ConvNCHWc") == 6 and "Conv" not in inner
    feeds = {"x": rand(1, 3, 18, 17)}
    for want, got in zip(run(graph, feeds), run(graph, feeds, opt_level=3)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_winograd_rule_and_numbers() -> None:
    b = GraphBuilder("wino")
    x = b.input("x", (1, 128, 8, 9), "float32")
    (a,) = b.add("Relu", [conv(b, x, 128, 128, 3)])
    (c,) = b.add("Relu", [conv(b, a, 128, 128, 3, stride=2)])  # strided: direct
    y = conv(b, c, 128, 64, 3)  # 64 output channels: direct
    graph = b.finish([y])
    after = convert_layout(graph, LayoutRule(block=16))
    algorithms = [n.attrs["algorithm"] for n in after.nodes if n.op == "ConvNCHWc"]
    assert algorithms == ["winograd", "direct", "direct"]
    off = convert_layout(graph, LayoutRule(block=16, winograd=False))
    assert [n.attrs["algorithm"] for n in off.nodes if n.op == "ConvNCHWc"] == ["direct"] * 3
    feeds = {"x": rand(1, 128, 8, 9)}
    for want, got in zip(run(graph, feeds), run(after, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
