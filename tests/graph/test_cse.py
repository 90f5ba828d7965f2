"""eliminate_common_subexpressions: equal constants and equal nodes merge."""

import numpy as np

from ember.graph.passes.cse import eliminate_common_subexpressions
from tests.graph.runner import Builder, assert_same_results


def test_equal_nodes_and_constants_merge() -> None:
    b = Builder()
    x = b.input("x", (2, 6), "float32")
    data = np.arange(6, dtype=np.float32)
    c0, c1 = b.constant("c", data), b.constant("c", data.copy())
    (a0,) = b.add("Add", [x, c0])
    (a1,) = b.add("Add", [x, c1])      # same as a0 once c1 -> c0
    (r0,) = b.add("Relu", [a0])
    (r1,) = b.add("Relu", [a1])        # then same as r0
    (y,) = b.add("Add", [r0, r1])
    g = b.finish([y])
    out = eliminate_common_subexpressions(g)
    assert [n.op for n in out.nodes] == ["Add", "Relu", "Add"]
    last = out.nodes[-1]
    assert last.inputs[0] is last.inputs[1] is r0
    assert out.nodes[0].inputs[1] is c0
    assert_same_results(g, out)


def test_different_constants_attrs_or_dtypes_stay_apart() -> None:
    b = Builder()
    x = b.input("x", (4,), "float32")
    c0 = b.constant("c", np.zeros(4, np.float32))
    c1 = b.constant("c", np.array([0, 0, 0, 1e-30], np.float32))
    (a0,) = b.add("Add", [x, c0])
    (a1,) = b.add("Add", [x, c1])
    (s0,) = b.add("Softmax", [a0], {"axis": 0})
    (s1,) = b.add("Softmax", [a0], {"axis": -1})
    g = b.finish([a1, s0, s1])
    assert eliminate_common_subexpressions(g) is g


def test_graph_outputs_keep_their_values() -> None:
    b = Builder()
    x = b.input("x", (4,), "float32")
    (r0,) = b.add("Relu", [x])
    (r1,) = b.add("Relu", [x])
    (r2,) = b.add("Relu", [x])
    (y,) = b.add("Add", [r1, r2])
    g = b.finish([r0, r1, y])
    out = eliminate_common_subexpressions(g)
    assert out.outputs[:2] == (r0, r1)
    assert len(out.nodes) == 3    # r2 merged into r0
    assert out.nodes[-1].inputs == (r1, r0)
    assert_same_results(g, out)
