"""eliminate_dead_code: unused nodes go, multi-output nodes stay while any output is used."""

import numpy as np

from ember.graph.passes.dead_code import eliminate_dead_code
from tests.graph.runner import Builder, assert_same_results


def test_drops_unused_branch() -> None:
    b = Builder()
    x = b.input("x", (2, 8), "float32")
    (y,) = b.add("Relu", [x])
    (dead,) = b.add("Add", [x, x])
    b.add("Relu", [dead])
    (z,) = b.add("Add", [y, x])
    g = b.finish([z])
    out = eliminate_dead_code(g)
    assert [n.op for n in out.nodes] == ["Relu", "Add"]
    assert out.nodes[1].outputs == (z,)
    assert_same_results(g, out)


def test_keeps_multi_output_node_with_one_used_output() -> None:
    b = Builder()
    x = b.input("x", (4, 6), "float32")
    a, c = b.node("Split", [x], [(2, 6), (2, 6)], {"axis": 0})
    (unused,) = b.add("Relu", [c])
    (y,) = b.add("Relu", [a])
    g = b.finish([y])
    out = eliminate_dead_code(g)
    assert [n.op for n in out.nodes] == ["Split", "Relu"]
    assert unused not in {v for n in out.nodes for v in n.outputs}


def test_unchanged_graph_is_returned_as_is() -> None:
    b = Builder()
    x = b.input("x", (3,), "float32")
    c = b.constant("c", np.ones(3, np.float32))
    (y,) = b.add("Add", [x, c])
    g = b.finish([y])
    assert eliminate_dead_code(g) is g


def test_everything_dead_but_an_input_output() -> None:
    b = Builder()
    x = b.input("x", (3,), "float32")
    b.add("Relu", [x])
    g = b.finish([x])
    assert eliminate_dead_code(g).nodes == ()
