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
