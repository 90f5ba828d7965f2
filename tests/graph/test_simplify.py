"""remove_identities, merge_reshapes, cancel_transposes and simplify_graph."""

import numpy as np

from ember.graph.passes.cancel_transposes import cancel_transposes
from ember.graph.passes.dead_code import eliminate_dead_code
from ember.graph.passes.merge_reshapes import merge_reshapes
from ember.graph.passes.remove_identities import remove_identities
from ember.graph.passes.simplify import simplify_graph
from tests.graph.runner import Builder, assert_same_results


def test_identity_and_dropout_chains_disappear() -> None:
    b = Builder()
    x = b.input("x", (2, 5), "float32")
    (r,) = b.add("Relu", [x])
    (i1,) = b.add("Identity", [r])
    d, mask = b.node("Dropout", [i1], [(2, 5), (2, 5)], {"ratio": 0.5}, ["float32", "bool"])
    (y,) = b.add("Add", [d, x])
    (m,) = b.add("Not", [mask])
    g = b.finish([y, m])
    out = remove_identities(g)
    assert [n.op for n in out.nodes] == ["Relu", "Add", "Not"]
    assert out.nodes[1].inputs[0] is r
    kept_mask = out.nodes[2].inputs[0]
    assert kept_mask.is_constant and kept_mask.data.dtype == bool and kept_mask.data.all()
    assert_same_results(g, out)


def test_identity_at_graph_output_renames_its_producer() -> None:
    b = Builder()
    x = b.input("x", (3,), "float32")
    (r,) = b.add("Relu", [x])
    (y,) = b.add("Identity", [r])
    (z,) = b.add("Add", [r, x])
    g = b.finish([y, z])
    out = remove_identities(g)
    assert [n.op for n in out.nodes] == ["Relu", "Add"]
    assert out.outputs == (y, z)
    assert out.nodes[0].outputs == (y,) and out.nodes[1].inputs[0] is y
    assert_same_results(g, out)


def test_identity_from_input_to_output_stays() -> None:
    b = Builder()
    x = b.input("x", (3,), "float32")
    (y,) = b.add("Identity", [x])
    g = b.finish([y])
    assert remove_identities(g) is g


def test_neutral_arithmetic_and_noop_shapes() -> None:
    b = Builder()
    x = b.input("x", (2, 3), "float32")
    zero = b.constant("zero", np.zeros((3,), np.float32))
    one = b.constant("one", np.ones((2, 3), np.float32))
    big_zero = b.constant("bz", np.zeros((4, 2, 3), np.float32))
    (a,) = b.add("Add", [zero, x])          # 0 + x -> x
    (m,) = b.add("Mul", [a, one])           # x * 1 -> x
    (cast,) = b.add("Cast", [m], {"to": 1})    # float32 -> float32
    (t,) = b.add("Transpose", [cast], {"perm": (0, 1)})
    (s,) = b.add("Reshape", [t], {"shape": (2, 3)})
    (grown,) = b.add("Add", [s, big_zero])  # broadcasts to (4, 2, 3): not a copy
    (sub,) = b.add("Sub", [zero, x])        # 0 - x is no copy either
    g = b.finish([grown, sub])
    out = remove_identities(g)
    assert [n.op for n in out.nodes] == ["Add", "Sub"]
    assert out.nodes[0].inputs[0] is x
    assert_same_results(g, out)


def test_reshape_chain_becomes_one_reshape() -> None:
    b = Builder()
    x = b.input("x", (2, 3, 4), "float32")
    (r1,) = b.add("Reshape", [x], {"shape": (6, 4)})
    (f,) = b.add("Flatten", [r1], {"axis": 0})
    (u,) = b.add("Unsqueeze", [f], {"axes": (0,)})
    (r2,) = b.add("Reshape", [u], {"shape": (4, 0, -1)})
    g = b.finish([r2])
    out = eliminate_dead_code(merge_reshapes(g))
    assert [n.op for n in out.nodes] == ["Reshape"]
    assert out.nodes[0].inputs == (x,) and out.nodes[0].outputs == (r2,)
    assert tuple(out.nodes[0].attrs["shape"]) == r2.type.shape
    assert_same_results(g, out)


def test_transpose_pairs_compose_or_cancel() -> None:
    b = Builder()
    x = b.input("x", (2, 3, 4, 5), "float32")
    (t1,) = b.add("Transpose", [x], {"perm": (0, 2, 3, 1)})
    (t2,) = b.add("Transpose", [t1], {"perm": (0, 3, 1, 2)})   # undoes t1
    (r,) = b.add("Relu", [t2])
    (t3,) = b.add("Transpose", [r], {"perm": (1, 0, 3, 2)})
    (t4,) = b.add("Transpose", [t3], {"perm": (2, 3, 0, 1)})
    (t5,) = b.add("Transpose", [t4], {"perm": (0, 1, 3, 2)})
    (t6,) = b.add("Transpose", [t4])                  # default perm: reversed axes
    g = b.finish([t5, t6])
    out = simplify_graph(g)
    # r -> (1,0,3,2) -> (2,3,0,1) is r -> (3,2,1,0); then (0,1,3,2) gives (3,2,0,1) and the
    # reversal gives the identity, so Relu now defines t6 itself
    assert [n.op for n in out.nodes] == ["Relu", "Transpose"]
    assert out.nodes[0].inputs == (x,) and out.nodes[0].outputs == (t6,)
    assert tuple(out.nodes[1].attrs["perm"]) == (3, 2, 0, 1)
    assert out.nodes[1].inputs == (t6,) and out.outputs == (t5, t6)
    assert_same_results(g, out)


def test_shared_inner_transpose_stays_for_its_other_reader() -> None:
    b = Builder()
    x = b.input("x", (2, 3), "float32")
    (t1,) = b.add("Transpose", [x], {"perm": (1, 0)})
    (t2,) = b.add("Transpose", [t1], {"perm": (1, 0)})
    (r,) = b.add("Relu", [t1])
    (y,) = b.add("Add", [t2, x])
    g = b.finish([y, r])
    out = eliminate_dead_code(cancel_transposes(g))
    assert [n.op for n in out.nodes] == ["Transpose", "Relu", "Add"]
    assert out.nodes[2].inputs == (x, x)
    assert_same_results(g, out)
