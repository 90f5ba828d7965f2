"""fold_constants: constant-only nodes become constants computed by ember's own kernels."""

import numpy as np
import pytest

from ember.graph.passes import fold_constants as fc
from ember.graph.passes.fold_constants import fold_constants as fold_with, should_fold
from ember.lowering import evaluate as ev
from ember.lowering.evaluate import evaluate_node
from tests.graph.runner import Builder, assert_same_results


def fold_constants(graph):
    return fold_with(graph, evaluate_node)


def test_without_an_evaluator_only_types_fold() -> None:
    b = Builder()
    x = b.input("x", (3, 4), "float32")
    c0, c1 = _consts(b, (3, 4), 0)
    (s,) = b.add("Add", [c0, c1])
    (y,) = b.add("Add", [x, s])
    g = b.finish([y])
    assert [n.op for n in fold_with(g).nodes] == ["Add", "Add"]


def _consts(b: Builder, shape: tuple[int, ...], seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    return tuple(b.constant(f"c{i}", rng.standard_normal(shape).astype(np.float32))
                 for i in range(2))


def test_chain_of_constant_nodes_folds_to_one_constant() -> None:
    b = Builder()
    x = b.input("x", (3, 4), "float32")
    c0, c1 = _consts(b, (3, 4), 0)
    (s,) = b.add("Add", [c0, c1])
    (r,) = b.add("Relu", [s])
    (y,) = b.add("Add", [x, r])
    g = b.finish([y])
    out = fold_constants(g)
    assert [n.op for n in out.nodes] == ["Add"]
    folded = out.nodes[0].inputs[1]
    assert folded.is_constant and folded.name == r.name and folded.type == r.type
    np.testing.assert_allclose(folded.data, np.maximum(c0.data + c1.data, 0), rtol=1e-6)
    assert not folded.data.flags.writeable
    assert_same_results(g, out)


def test_shape_and_size_fold_from_types() -> None:
    b = Builder()
    x = b.input("x", (2, 3, 5), "float32")
    (shape,) = b.add("Shape", [x], {"start": 1})
    (size,) = b.add("Size", [x])
    (y,) = b.add("Add", [shape, shape])
    (z,) = b.add("Add", [size, size])
    g = b.finish([y, z])
    out = fold_constants(g)
    assert [n.op for n in out.nodes] == ["Add", "Add"]
    np.testing.assert_array_equal(out.nodes[0].inputs[0].data, [3, 5])
    assert int(out.nodes[1].inputs[0].data) == 30


def test_graph_outputs_and_non_constant_nodes_stay() -> None:
    b = Builder()
    x = b.input("x", (4,), "float32")
    c0, c1 = _consts(b, (4,), 1)
    (s,) = b.add("Add", [c0, c1])
    (y,) = b.add("Add", [x, c0])
    g = b.finish([s, y])
    assert fold_constants(g) is g


def test_skips_nondeterministic_unknown_and_huge(monkeypatch: pytest.MonkeyPatch) -> None:
    b = Builder()
    (rand,) = b.node("RandomNormal", [], [(4,)], {"shape": (4,)})
    (mystery,) = b.node("NotAnOp", [], [(4,)])
    c0, c1 = _consts(b, (64, 64), 2)
    (big,) = b.add("Add", [c0, c1])
    assert not should_fold(b.nodes[0]) and not should_fold(b.nodes[1])
    assert should_fold(b.nodes[2])
    monkeypatch.setattr(fc, "MAX_FOLD_BYTES", 64 * 64 * 4 - 1)
    assert not should_fold(b.nodes[2])
    x = b.input("x", (4,), "float32")
    (y,) = b.add("Add", [rand, mystery])
    (z,) = b.add("Add", [y, x])
    g = b.finish([z, big])
    assert fold_constants(g) is g


def test_kernels_are_cached_per_op_and_shape() -> None:
    b = Builder()
    x = b.input("x", (5, 7), "float32")
    rng = np.random.default_rng(3)
    ys = []
    for i in range(3):
        c = b.constant("c", rng.standard_normal((5, 7)).astype(np.float32))
        (r,) = b.add("Relu", [c])
        (y,) = b.add("Add", [x, r])
        ys.append(y)
    g = b.finish(ys)
    before = len(ev._KERNELS)
    out = fold_constants(g)
    assert len(ev._KERNELS) <= before + 1
    assert [n.op for n in out.nodes] == ["Add"] * 3
    assert_same_results(g, out)
