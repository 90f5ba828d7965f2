"""The graph pipeline sizes the blocked layout for the target's vectors, not the host's."""

import numpy as np

from ember.graph.ir import GraphBuilder
from ember.graph.pipeline import optimize_graph


def _conv_graph():
    rng = np.random.default_rng(0)
    b = GraphBuilder("net")
    x = b.input("x", (1, 32, 8, 8), "float32")
    w = b.constant("w", rng.standard_normal((32, 32, 3, 3)).astype("float32"))
    (y,) = b.add("Conv", [x, w], {"pads": (1, 1, 1, 1)})
    (z,) = b.add("Relu", [y])
    return b.finish([z])


def _blocks(graph):
    return {m.attrs.get("dst_block") for n in graph.nodes for m in n.attrs["graph"].nodes
            if m.op == "LayoutTransform"}


def test_layout_block_follows_the_target():
    neon = optimize_graph(_conv_graph(), 3, target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
    avx512 = optimize_graph(_conv_graph(), 3, target="llvm -mcpu=znver4")
    assert 4 in _blocks(neon)
    assert 16 in _blocks(avx512)


def _winograd_graph(width: int, channels: int = 128):
    rng = np.random.default_rng(1)
    b = GraphBuilder("net")
    x = b.input("x", (1, channels, width, width), "float32")
    w = b.constant("w", rng.standard_normal((channels, channels, 3, 3)).astype("float32"))
    (y,) = b.add("Conv", [x, w], {"pads": (1, 1, 1, 1)})
    return b.finish([y])


def _algorithms(graph):
    return [m.attrs["algorithm"] for n in graph.nodes for m in n.attrs["graph"].nodes
            if m.op == "ConvNCHWc"]


def test_winograd_width_follows_the_fma_pipes():
    """Two 512-bit FMA pipes make the direct kernel win at 7x7; one keeps Winograd there."""
    for width, spr, zen4 in ((7, "direct", "winograd"), (14, "winograd", "winograd")):
        graph = _winograd_graph(width)
        assert _algorithms(optimize_graph(graph, 3, target="llvm -mcpu=sapphirerapids")) == [spr]
        assert _algorithms(optimize_graph(graph, 3, target="llvm -mcpu=znver4")) == [zen4]


def test_winograd_channels_follow_the_fma_width():
    """128-bit FMAs (WebAssembly, NEON) take Winograd from 64 channels; wider CPUs and GPUs
    from 128."""
    graph = _winograd_graph(14, channels=64)
    for target in ("wasm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"):
        assert _algorithms(optimize_graph(graph, 3, target=target)) == ["winograd"], target
    for target in ("llvm -mcpu=znver4", "llvm -mcpu=sapphirerapids", "llvm -mcpu=haswell"):
        assert _algorithms(optimize_graph(graph, 3, target=target)) == ["direct"], target
    narrow = _winograd_graph(14, channels=32)
    assert _algorithms(optimize_graph(narrow, 3, target="wasm")) == ["direct"]
