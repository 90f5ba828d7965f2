"""optimize_graph: every level ends in Fused nodes with equal results; errors name the pass."""

import numpy as np
import pytest

from ember.errors import EmberError, ShapeError
from ember.graph.ir import Graph, Node, Value, tensor_type
from ember.graph.pipeline import PASSES, GraphPassError, check_graph, optimize_graph
from tests.graph.runner import Builder, assert_same_results


def _model() -> Graph:
    b = Builder("model")
    x = b.input("x", (4, 8), "float32")
    c0 = b.constant("c", np.full((8,), 0.5, np.float32))
    c1 = b.constant("c", np.full((8,), 0.5, np.float32))
    zero = b.constant("zero", np.zeros((4, 8), np.float32))
    (k,) = b.add("Add", [c0, c1])            # folds
    (a,) = b.add("Add", [x, k])
    (i,) = b.add("Identity", [a])
    (a0,) = b.add("Add", [i, zero])          # x + 0
    (t,) = b.add("Transpose", [a0], {"perm": (1, 0)})
    (t2,) = b.add("Transpose", [t], {"perm": (1, 0)})
    (r1,) = b.add("Relu", [t2])
    (r2,) = b.add("Relu", [t2])              # same as r1
    (s,) = b.add("Add", [r1, r2])
    (row,) = b.add("ReduceSum", [s], {"axes": (1,), "keepdims": 1})
    (y,) = b.add("Add", [row, x])
    b.add("Relu", [y])                       # dead
    return b.finish([y, r1])


@pytest.mark.parametrize("level", sorted(PASSES))
def test_every_level_keeps_results_and_fuses(level: int) -> None:
    g = _model()
    out = optimize_graph(g, opt_level=level, check_each=True)
    assert out.nodes and all(n.op == "Fused" for n in out.nodes)
    assert out.outputs == g.outputs
    inner = [m.op for n in out.nodes for m in n.attrs["graph"].nodes]
    if level == 0:
        assert len(inner) == len(g.nodes) - 1
    if level >= 2:
        assert "Identity" not in inner and "Transpose" not in inner
        assert inner.count("Relu") == 1 and len(out.nodes) <= 3
    assert_same_results(g, out, rtol=1e-5)


def test_failures_name_the_pass() -> None:
    def explode(graph: Graph) -> Graph:
        """Always fails."""
        raise ShapeError("bad shape")

    def crash(graph: Graph) -> Graph:
        """Fails with a Python error."""
        return graph.nodes[99]  # type: ignore[return-value]

    with pytest.raises(ShapeError, match="in pass explode: bad shape"):
        optimize_graph(_model(), passes=[explode])
    with pytest.raises(GraphPassError, match="in pass crash: IndexError"):
        optimize_graph(_model(), passes=[crash])
    with pytest.raises(EmberError, match="opt_level must be one of"):
        optimize_graph(_model(), opt_level=7)


def test_print_after(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                     ) -> None:
    monkeypatch.setenv("EMBER_PRINT_GRAPH_AFTER", "remove_identities,fuse_ops")
    optimize_graph(_model(), opt_level=1)
    err = capsys.readouterr().err
    assert err.count("# graph after remove_identities") == 1
    assert "# graph after fuse_ops\ngraph model(" in err and "Fused(" in err
    assert "# graph after fold_constants" not in err


def test_check_graph_rejects_bad_graphs() -> None:
    t = tensor_type((2,), "float32")
    x, y, z = Value("x", t), Value("y", t), Value("z", t)
    use_first = Graph("g", (x,), (z,), (Node("Relu", "a", (y,), (z,)),
                                        Node("Relu", "b", (x,), (y,))))
    with pytest.raises(GraphPassError, match="node 'a' \\(Relu\\) reads %y before"):
        check_graph(use_first)
    twice = Graph("g", (x,), (y,), (Node("Relu", "a", (x,), (y,)),
                                    Node("Relu", "b", (x,), (y,))))
    with pytest.raises(GraphPassError, match="defines %y, which is already defined"):
        check_graph(twice)
    with pytest.raises(GraphPassError, match="output %z is never defined"):
        check_graph(Graph("g", (x,), (z,), ()))


def test_passes_are_documented_functions() -> None:
    for level, passes in PASSES.items():
        assert passes[-1].__name__ in ("fuse_ops", "wrap_single_ops"), level
        for p in passes:
            assert p.__doc__ and p.__doc__.strip(), p.__name__
