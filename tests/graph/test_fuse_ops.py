"""fuse_ops: groups by pattern, one anchor per group, chains stop at shared values."""

import numpy as np

from ember.graph.ir import Graph, Node
from ember.graph.passes.fuse_ops import fuse_ops, wrap_single_ops
from ember.graph.pipeline import check_graph
from tests.graph.runner import Builder, assert_same_results


def _groups(g: Graph) -> list[list[str]]:
    assert all(n.op == "Fused" for n in g.nodes)
    check_graph(g)
    return [[m.op for m in n.attrs["graph"].nodes] for n in g.nodes]


def _covers(before: Graph, after: Graph) -> None:
    """Every node of `before` sits in exactly one group; outputs keep their Values."""
    inner = [m for n in after.nodes for m in n.attrs["graph"].nodes]
    assert sorted(map(id, inner)) == sorted(map(id, before.nodes))
    assert after.outputs == before.outputs


def test_conv_bias_bn_relu_residual_is_one_kernel() -> None:
    b = Builder()
    x = b.input("x", (1, 4, 6, 6), "float32")
    (c,) = b.node("Conv", [x, b.const("w", (4, 4, 3, 3), 0)], [(1, 4, 6, 6)],
                  {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1), "strides": (1, 1),
                   "dilations": (1, 1), "group": 1})
    (y,) = b.add("Add", [c, b.const("bias", (4, 1, 1), 1)])
    (y,) = b.add("Mul", [y, b.const("bn_scale", (4, 1, 1), 2)])
    (y,) = b.add("Add", [y, b.const("bn_shift", (4, 1, 1), 3)])
    (y,) = b.add("Relu", [y])
    (y,) = b.add("Add", [y, x])
    (z,) = b.add("Relu", [y])
    g = b.finish([z])
    out = fuse_ops(g)
    assert _groups(out) == [["Conv", "Add", "Mul", "Add", "Relu", "Add", "Relu"]]
    fused = out.nodes[0]
    assert fused.attrs["anchor"] == "conv" and fused.attrs["pattern"] == "OUT_FUSABLE"
    assert fused.outputs == (z,) and fused.inputs[0] is x and len(fused.inputs) == 5
    _covers(g, out)
    assert_same_results(g, out)


def test_two_anchors_never_share_a_group() -> None:
    b = Builder()
    x = b.input("x", (3, 4), "float32")
    (m1,) = b.node("MatMul", [x, b.const("w1", (4, 4), 0)], [(3, 4)])
    (m2,) = b.node("MatMul", [m1, b.const("w2", (4, 4), 1)], [(3, 4)])
    (m3,) = b.node("MatMul", [x, b.const("w3", (4, 4), 2)], [(3, 4)])
    (s,) = b.add("Add", [m2, m3])
    g = b.finish([s])
    out = fuse_ops(g)
    assert sorted(_groups(out)) == [["MatMul"], ["MatMul"], ["MatMul", "Add"]]
    _covers(g, out)
    assert_same_results(g, out)


def test_shared_value_stops_the_chain() -> None:
    b = Builder()
    x = b.input("x", (4, 8), "float32")
    (a,) = b.add("Add", [x, b.const("c", (8,), 0)])
    (r,) = b.add("Relu", [a])               # read twice below: ends its group
    (p,) = b.add("Add", [r, x])
    (q,) = b.add("Relu", [r])
    (s,) = b.add("Add", [p, q])
    g = b.finish([s])
    out = fuse_ops(g)
    assert _groups(out) == [["Add", "Relu"], ["Add", "Relu", "Add"]]
    assert out.nodes[0].outputs == (r,)
    _covers(g, out)
    assert_same_results(g, out)


def test_graph_output_in_the_middle_stops_the_chain() -> None:
    b = Builder()
    x = b.input("x", (16,), "float32")
    (r,) = b.add("Relu", [x])
    (y,) = b.add("Add", [r, x])
    g = b.finish([r, y])
    out = fuse_ops(g)
    assert _groups(out) == [["Relu"], ["Add"]]
    assert_same_results(g, out)


def test_reduction_takes_prologue_and_same_shape_epilogue() -> None:
    b = Builder()
    x = b.input("x", (6, 10), "float32")
    (a,) = b.add("Add", [x, b.const("c", (10,), 0)])
    (t,) = b.add("Relu", [a])
    (s,) = b.add("ReduceSum", [t], {"axes": (1,), "keepdims": 1})
    (e,) = b.add("Relu", [s])
    (grow,) = b.add("Add", [e, x])          # broadcasts beyond (6, 1): a new group
    (m,) = b.add("Softmax", [grow])         # second reduction: its own anchor
    g = b.finish([m])
    out = fuse_ops(g)
    assert _groups(out) == [["Add", "Relu", "ReduceSum", "Relu"], ["Add", "Softmax"]]
    assert out.nodes[0].attrs["pattern"] == "REDUCTION"
    assert out.nodes[0].attrs["anchor"] == "reducesum"
    _covers(g, out)
    assert_same_results(g, out, rtol=1e-4)


def test_injective_chain_and_opaque_ops() -> None:
    b = Builder()
    x = b.input("x", (2, 3, 4), "float32")
    (t,) = b.add("Transpose", [x], {"perm": (2, 0, 1)})
    (r,) = b.add("Relu", [t])
    (s,) = b.add("Reshape", [r], {"shape": (4, 6)})
    (o,) = b.node("Mystery", [s], [(4, 6)])   # not in the op table: OPAQUE
    (y,) = b.add("Relu", [o])
    g = b.finish([y])
    out = fuse_ops(g)
    assert _groups(out) == [["Transpose", "Relu", "Reshape"], ["Mystery"], ["Relu"]]
    assert out.nodes[1].attrs["pattern"] == "OPAQUE"


def test_multi_output_node_keeps_its_outputs() -> None:
    b = Builder()
    x = b.input("x", (4, 6), "float32")
    (r,) = b.add("Relu", [x])
    lo, hi = b.add("Split", [r], {"axis": 0, "num_outputs": 2})
    (y,) = b.add("Add", [lo, hi])
    g = b.finish([y])
    out = fuse_ops(g)
    assert _groups(out) == [["Relu", "Split"], ["Add"]]
    assert out.nodes[0].outputs == (lo, hi)
    assert_same_results(g, out)


def test_fusing_twice_and_wrapping() -> None:
    b = Builder()
    x = b.input("x", (5,), "float32")
    (r,) = b.add("Relu", [x])
    (y,) = b.add("Add", [r, x])
    g = b.finish([y])
    once = fuse_ops(g)
    twice = fuse_ops(once)
    assert [n.attrs["graph"] for n in twice.nodes] == [n.attrs["graph"] for n in once.nodes]
    wrapped = wrap_single_ops(g)
    assert _groups(wrapped) == [["Relu"], ["Add"]]
    assert wrap_single_ops(wrapped) is wrapped
    assert isinstance(wrapped.nodes[0], Node) and "Fused(" in str(wrapped)
    assert_same_results(g, wrapped)
    np.testing.assert_equal(len(str(once).splitlines()), 5)


def _gelu_input(b: Builder) -> tuple:
    x = b.input("x", (8, 16), "float32")
    (m,) = b.add("MatMul", [x, b.const("w", (16, 32), 0)])
    (h,) = b.add("Add", [m, b.const("bias", (32,), 1)])
    return x, h


def _gelu(b: Builder, h) -> tuple:
    (d,) = b.add("Div", [h, b.const("sqrt2", (1,), 2)])
    (e,) = b.add("Erf", [d], name="gelu_erf")
    (a,) = b.add("Add", [e, b.const("one", (1,), 3)])
    (p,) = b.add("Mul", [h, a])             # closes the diamond h -> Div ... -> Mul(h, .)
    return b.add("Mul", [p, b.const("half", (1,), 4)])


def test_gelu_diamond_joins_the_matmul() -> None:
    b = Builder()
    _, h = _gelu_input(b)
    g = b.finish(list(_gelu(b, h)))
    out = fuse_ops(g)
    assert _groups(out) == [["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"]]
    assert out.nodes[0].attrs["anchor"] == g.nodes[0].name
    _covers(g, out)
    assert_same_results(g, out, rtol=1e-5, atol=1e-5)


def test_diamond_with_a_later_outside_reader_stays_split() -> None:
    b = Builder()
    _, h = _gelu_input(b)
    (y,) = _gelu(b, h)
    (z,) = b.add("Sub", [y, h])             # a wider diamond, closed by Sub: still one group
    (w,) = b.add("MatMul", [h, b.const("w2", (32, 4), 5)])   # h read outside: stays shared
    g = b.finish([z, w])
    out = fuse_ops(g)
    assert _groups(out) == [["MatMul", "Add"], ["Div", "Erf", "Add", "Mul", "Mul", "Sub"],
                            ["MatMul"]]
    _covers(g, out)
    assert_same_results(g, out)
    b = Builder()
    _, h = _gelu_input(b)
    (y,) = _gelu(b, h)
    g = b.finish(list(b.add("Sub", [y, h])))
    assert len(_groups(fuse_ops(g))) == 1


def test_diamond_through_an_anchor_is_not_a_prologue() -> None:
    b = Builder()
    x = b.input("x", (4, 8), "float32")
    (a,) = b.add("Relu", [x])
    (m,) = b.add("MatMul", [a, b.const("w", (8, 8), 0)])
    (y,) = b.add("Mul", [a, m])             # a feeds the MatMul and the Mul
    g = b.finish([y])
    out = fuse_ops(g)
    assert _groups(out) == [["Relu"], ["MatMul", "Mul"]]
    _covers(g, out)
    assert_same_results(g, out)


def test_a_long_chain_is_cut_into_groups_of_at_most_max_group_nodes() -> None:
    # an unrolled loop: 70 elementwise ops in a row
    from ember.graph.passes.fuse_ops import MAX_GROUP_NODES

    b = Builder()
    x = b.input("x", (4,), "float32")
    y, one = x, b.const("one", (4,), 0)
    for _ in range(70):
        (y,) = b.add("Add", [y, one])
    g = b.finish([y])
    out = fuse_ops(g)
    sizes = [len(group) for group in _groups(out)]
    assert sizes == [MAX_GROUP_NODES, MAX_GROUP_NODES, 70 - 2 * MAX_GROUP_NODES]
    _covers(g, out)
    assert_same_results(g, out)
