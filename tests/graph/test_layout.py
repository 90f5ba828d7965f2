"""convert_layout: the same numbers before and after, transforms only at the edges."""

import numpy as np
import pytest

import ember
from ember.graph.ir import Graph, GraphBuilder
from ember.graph.passes.layout import LayoutRule, block_of, convert_layout, winograd_tile

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
    f43 = convert_layout(graph, LayoutRule(block=16, winograd_f4_min_tiles=6))
    assert [n.inputs[1].type.shape[0] for n in f43.nodes
            if n.op == "ConvNCHWc" and n.attrs["algorithm"] == "winograd"] == [36]
    feeds = {"x": rand(1, 128, 8, 9)}
    want = run(graph, feeds)
    for converted in (after, f43):
        for w, got in zip(want, run(converted, feeds)):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("out_hw, min_tiles, tile", [
    ((56, 56), 16, 4), ((14, 14), 16, 4), ((13, 13), 16, 4), ((12, 12), 16, 2),
    ((7, 7), 16, 2), ((56, 56), 0, 2), ((7, 7), 4, 4)])
def test_winograd_tile_counts_4x4_tiles(out_hw, min_tiles, tile):
    assert winograd_tile(out_hw, min_tiles) == tile


def test_winograd_tile_wants_twice_the_tiles_for_weights_beyond_the_cache():
    """F(4,3) weights over the cache are streamed per run: 16 tiles no longer do, 32 do,
    and a batch of two images doubles the tiles."""
    big, l2 = 9 << 20, 2 << 20
    assert winograd_tile((14, 14), 16, big, l2) == 2
    assert winograd_tile((14, 14), 16, 1 << 20, l2) == 4
    assert winograd_tile((14, 14), 16, big, 0) == 4
    assert winograd_tile((28, 28), 16, big, l2) == 4
    assert winograd_tile((14, 14), 16, big, l2, batch=2) == 4


def classifier_net(cout: int, then_conv: bool = False) -> Graph:
    """A squeezenet-style head: conv to `cout` classes (a narrow block), per-channel Div and
    ReLU, an average pool, then a global pool; with then_conv a conv reads the classes."""
    b = GraphBuilder("head")
    x = b.input("x", (1, 32, 9, 11), "float32")
    y = conv(b, x, 32, cout, 1)
    (y,) = b.add("Div", [y, b.constant("d", rand(cout, 1, 1) + 3.0)])
    (y,) = b.add("Relu", [y])
    (y,) = b.add("AveragePool", [y], {"kernel_shape": [2, 2], "strides": [1, 1]})
    if then_conv:
        y = conv(b, y, cout, 16, 3)
    (g,) = b.add("GlobalAveragePool", [y])
    return b.finish([g])


def _check_padded(graph: Graph, rule: LayoutRule, channels: int, blocks: int, block: int
                  ) -> None:
    """The head's conv and Div take `blocks` blocks of `block`, the transform back keeps
    `channels`, and the numbers are the unconverted graph's."""
    after = convert_layout(graph, rule)
    conv_node = next(n for n in after.nodes if n.op == "ConvNCHWc")
    assert conv_node.outputs[0].type.shape == (1, blocks, 9, 11, block)
    div = next(n for n in after.nodes if n.op == "Div")
    assert div.inputs[1].type.shape == (1, blocks, 1, 1, block)
    (back,) = [n for n in after.nodes if n.op == "LayoutTransform" and not n.attrs["dst_block"]]
    assert back.attrs["channels"] == channels
    assert back.outputs[0].type.shape == (1, channels, 8, 10)
    feeds = {"x": rand(1, 32, 9, 11)}
    np.testing.assert_allclose(run(after, feeds)[0], run(graph, feeds)[0], rtol=1e-4,
                               atol=1e-5)


def test_narrow_output_block_is_padded_to_the_vector() -> None:
    graph = classifier_net(40)  # 40 = 5 blocks of 8 on 16 lanes: padded to 3 blocks of 16
    _check_padded(graph, LayoutRule(block=16), 40, 3, 16)
    narrow = convert_layout(graph, LayoutRule(block=16, pad_channels=False))
    assert next(n for n in narrow.nodes if n.op == "ConvNCHWc").outputs[0].type.shape[4] == 8


def test_no_padding_where_a_conv_reads_the_channels() -> None:
    # the padding lanes would hold Div's 0/0 = NaN, and NaN x 0 weight is NaN: never padded
    graph = classifier_net(40, then_conv=True)
    after = convert_layout(graph, LayoutRule(block=16))
    assert all(n.outputs[0].type.shape[4] in (8, 16) for n in after.nodes if n.op == "ConvNCHWc")
    first = next(n for n in after.nodes if n.op == "ConvNCHWc")
    assert first.outputs[0].type.shape == (1, 5, 9, 11, 8)
    assert not any(n.attrs.get("channels") for n in after.nodes if n.op == "LayoutTransform")
    feeds = {"x": rand(1, 32, 9, 11)}
    np.testing.assert_allclose(run(after, feeds)[0], run(graph, feeds)[0], rtol=1e-4,
                               atol=1e-5)


def test_padding_only_where_it_costs_less_than_the_narrow_block() -> None:
    # 20 channels: 5 blocks of 4 on 16 lanes (a quarter vector) -> 32 padded (1.6x the work,
    # 4x the width); 24: 3 of 8 -> 32 (1.33x, 2x); 1000: 125 of 8 -> 1008
    for cout, padded in ((20, True), (24, True), (1000, True), (48, False)):
        after = convert_layout(classifier_net(cout), LayoutRule(block=16))
        conv_node = next(n for n in after.nodes if n.op == "ConvNCHWc")
        assert (conv_node.outputs[0].type.shape[4] == 16 and cout % 16 != 0) == padded, cout


def test_full_blocks_padded_where_the_register_tile_gains() -> None:
    # 1000 = 125 blocks of 8 on an AVX2 core: only 1 or 5 blocks divide 125, so the tile is
    # 2 columns x 5 blocks (10 accumulators); 126 blocks take 2 x 6 (12), worth 0.8% more work
    from ember.target import Target

    zen3 = Target("llvm -mcpu=znver3").facts
    graph = classifier_net(1000)
    _check_padded(graph, LayoutRule(block=8, tile_facts=zen3), 1000, 126, 8)
    # without the target's facts, where blocks divide well, or where a conv reads the
    # channels: no padding
    plain = convert_layout(graph, LayoutRule(block=8))
    assert next(n for n in plain.nodes if n.op == "ConvNCHWc").outputs[0].type.shape[1] == 125
    for cout, then_conv in ((1024, False), (1000, True)):
        other = convert_layout(classifier_net(cout, then_conv),
                               LayoutRule(block=8, tile_facts=zen3))
        first = next(n for n in other.nodes if n.op == "ConvNCHWc")
        assert first.outputs[0].type.shape[1] == cout // 8


def test_a_padded_tensor_meets_an_unpadded_one_in_nchw() -> None:
    # the padded conv output (126 blocks) added to an input of the same 1000 channels (125
    # blocks once blocked): the Add reads both in NCHW, where the padding is dropped
    from ember.target import Target

    b = GraphBuilder("residual_head")
    x = b.input("x", (1, 32, 9, 11), "float32")
    skip = b.input("skip", (1, 1000, 9, 11), "float32")
    (y,) = b.add("Add", [conv(b, x, 32, 1000, 1), skip])
    (g,) = b.add("GlobalAveragePool", [y])
    graph = b.finish([g])
    zen3 = Target("llvm -mcpu=znver3").facts
    after = convert_layout(graph, LayoutRule(block=8, tile_facts=zen3))
    assert next(n for n in after.nodes if n.op == "ConvNCHWc").outputs[0].type.shape[1] == 126
    add = next(n for n in after.nodes if n.op == "Add")
    assert [v.type.shape for v in add.inputs] == [(1, 1000, 9, 11)] * 2
    feeds = {"x": rand(1, 32, 9, 11), "skip": rand(1, 1000, 9, 11)}
    np.testing.assert_allclose(run(after, feeds)[0], run(graph, feeds)[0], rtol=1e-4,
                               atol=1e-5)
