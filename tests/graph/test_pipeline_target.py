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


def test_winograd_channels_follow_the_fma_pipes():
    """Cores that start two full-width FMAs a cycle (Sapphire Rapids, AVX2) or 128-bit FMAs
    only (WebAssembly, NEON) take Winograd from 64 channels; Zen 4 (one 512-bit FMA on both
    pipes) and GPUs from 128."""
    graph = _winograd_graph(14, channels=64)
    for target in ("wasm", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
                   "llvm -mcpu=sapphirerapids", "llvm -mcpu=haswell"):
        assert _algorithms(optimize_graph(graph, 3, target=target)) == ["winograd"], target
    assert _algorithms(optimize_graph(graph, 3, target="llvm -mcpu=znver4")) == ["direct"]
    narrow = _winograd_graph(14, channels=32)
    assert _algorithms(optimize_graph(narrow, 3, target="wasm")) == ["direct"]


def _winograd_rows(graph):
    """The first dimension of each Winograd conv's packed weights: 16 = F(2,3), 36 = F(4,3)."""
    rows = []
    for n in graph.nodes:
        for m in n.attrs["graph"].nodes:
            if m.op == "ConvNCHWc" and m.attrs["algorithm"] == "winograd":
                rows.append(m.inputs[1].type.shape[0])
    return rows


def test_winograd_tile_follows_the_tile_count():
    """CPUs take F(4,3) from 16 output tiles of 4x4 (14x14 has 16), F(2,3) below (7x7 on Zen
    4 has 4), and from 32 tiles where its weights overflow a core's L2 (128 channels: 2.4 MB,
    over Zen 4's 1 MB); GPU kernels keep F(2,3)."""
    spr = "llvm -mcpu=sapphirerapids"  # 2 MB of L2, Winograd from 64 channels
    assert _winograd_rows(optimize_graph(_winograd_graph(14, 64), 3, target=spr)) == [36]
    assert _winograd_rows(optimize_graph(_winograd_graph(14, 256), 3, target=spr)) == [16]
    assert _winograd_rows(optimize_graph(_winograd_graph(14), 3, target="llvm -mcpu=znver4")) \
        == [16]
    assert _winograd_rows(optimize_graph(_winograd_graph(28), 3, target="llvm -mcpu=znver4")) \
        == [36]
    assert _winograd_rows(optimize_graph(_winograd_graph(7), 3, target="llvm -mcpu=znver4")) \
        == [16]
    assert _winograd_rows(optimize_graph(_winograd_graph(24, 64), 3, target="wasm")) == [36]
    assert _winograd_rows(optimize_graph(_winograd_graph(14), 3, target="opencl")) == [16]
