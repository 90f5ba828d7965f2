"""plan_memory: live values never overlap, in-place only where legal, ResNet-50 packs tightly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.graph.ir import Graph, Value
from ember.graph.memory import MemoryPlan, aligned, plan_memory
from ember.graph.passes.fuse_ops import fuse_ops, wrap_single_ops
from tests.graph.nets import resnet50
from tests.graph.runner import Builder, run_graph, run_node

SHAPES = [(4, 8), (8,), (1, 4, 8), (2, 4, 8), (4, 1)]


@st.composite
def elementwise_graphs(draw: st.DrawFn) -> Graph:
    """Random DAGs of Add / Relu over mutually broadcastable shapes."""
    b = Builder("random")
    values = [b.input(f"x{i}", s, "float32") for i, s in enumerate(SHAPES)]
    values.append(b.constant("c", np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)))
    for _ in range(draw(st.integers(1, 14))):
        pick = st.sampled_from(values[len(SHAPES) // 2:] if len(values) > 8 else values)
        if draw(st.booleans()):
            (v,) = b.add("Relu", [draw(pick)])
        else:
            (v,) = b.add("Add", [draw(pick), draw(pick)])
        values.append(v)
    produced = values[len(SHAPES) + 1:]
    extra = draw(st.lists(st.sampled_from(produced), max_size=2, unique_by=id))
    return b.finish(list(dict.fromkeys([produced[-1], *extra])))


def check_plan(graph: Graph, plan: MemoryPlan) -> None:
    life = plan.lifetimes
    planned = {v for n in graph.nodes for v in n.outputs} - set(graph.outputs)
    assert set(plan.offsets) == planned == set(life)
    root = {}
    for v in life:
        root[v] = root[plan.inplace[v]] if v in plan.inplace else v
    for v, (out, offset) in plan.views.items():  # a slice inside its concatenation
        root[v] = out
        assert plan.offsets[v] == plan.offsets[out] + offset
        assert offset + v.type.nbytes <= out.type.nbytes
    for v, offset in plan.offsets.items():
        assert offset % plan.alignment == 0
        assert offset + plan.size_of(v) <= plan.workspace_bytes
    values = list(plan.offsets)
    for i, u in enumerate(values):
        for v in values[i + 1:]:
            lives_overlap = life[u][0] <= life[v][1] and life[v][0] <= life[u][1]
            bytes_overlap = (plan.offsets[u] < plan.offsets[v] + plan.size_of(v) and
                             plan.offsets[v] < plan.offsets[u] + plan.size_of(u))
            if lives_overlap and bytes_overlap:
                assert root[u] is root[v], (u, v)
                assert not (u in plan.views and v in plan.views), (u, v)  # slices are apart
    for out, src in plan.inplace.items():   # in place only where legal
        step = life[out][0]
        node = graph.nodes[step]
        assert node.outputs == (out,) and src in node.inputs and life[src][1] == step
        assert src.type.dtype == out.type.dtype and src.type.size == out.type.size
        assert plan.offsets[out] == plan.offsets[src]
    assert plan.workspace_bytes <= plan.naive_bytes
    assert plan.workspace_bytes >= max([plan.size_of(v) for v in values], default=0)


def run_in_workspace(graph: Graph, plan: MemoryPlan, args: list[np.ndarray]) -> list[np.ndarray]:
    """Execute with every intermediate stored at its planned offset of one byte buffer; nodes
    whose outputs the plan assembled in place (concats of slices) are not run."""
    workspace = np.full(plan.workspace_bytes, 0xFF, np.uint8)
    env: dict[Value, np.ndarray] = dict(zip(graph.inputs, args))

    def view(v: Value) -> np.ndarray:
        start = plan.offsets[v]
        return workspace[start:start + v.type.nbytes].view(v.type.dtype.numpy).reshape(
            v.type.shape)

    def get(v: Value) -> np.ndarray:
        if v.data is not None:
            return v.data
        return view(v) if v in plan.offsets else env[v]

    for node in graph.nodes:
        if node.outputs and all(v in plan.assembled for v in node.outputs):
            continue
        results = run_node(node, [None if v is None else get(v) for v in node.inputs],
                           compile_fused=False)
        for v, a in zip(node.outputs, results):
            if v in plan.offsets:
                view(v)[...] = a
            else:
                env[v] = a
    return [np.array(get(v)) for v in graph.outputs]


@settings(max_examples=60, deadline=None)
@given(elementwise_graphs(), st.sampled_from(["none", "wrap", "fuse"]), st.booleans())
def test_random_graphs_plan_without_overlap(graph: Graph, fusion: str, inplace: bool) -> None:
    if fusion != "none":
        graph = (wrap_single_ops if fusion == "wrap" else fuse_ops)(graph)
    plan = plan_memory(graph, inplace=inplace)
    check_plan(graph, plan)
    if not inplace:
        assert not plan.inplace and plan.workspace_bytes >= plan.peak_live_bytes
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs]
    want = run_graph(graph, args, compile_fused=False)
    for w, got in zip(want, run_in_workspace(graph, plan, args)):
        np.testing.assert_array_equal(got, w)


def test_reuse_and_inplace_on_a_chain() -> None:
    b = Builder()
    x = b.input("x", (64, 16), "float32")
    v = x
    for _ in range(6):
        (v,) = b.add("Relu", [v])
    g = b.finish([v])
    plan = plan_memory(wrap_single_ops(g))
    assert plan.naive_bytes == 5 * 4096
    assert plan.peak_live_bytes == 2 * 4096
    assert plan.workspace_bytes == 4096          # each step overwrites its input
    assert len(plan.inplace) == 4
    assert plan_memory(g, inplace=False).workspace_bytes == 2 * 4096
    text = str(plan)
    assert "in place of %relu:0" in text and "workspace 4096 B" in text


def test_no_inplace_when_input_lives_on_or_differs() -> None:
    b = Builder()
    x = b.input("x", (8, 16), "float32")
    (a,) = b.add("Relu", [x])
    (s,) = b.add("Relu", [a])
    (t,) = b.add("Add", [s, a])                  # a read after s: s cannot take a's buffer
    (row,) = b.add("ReduceSum", [t], {"axes": (1,), "keepdims": 1})
    (grown,) = b.add("Add", [row, x])            # row is smaller than the output
    (r,) = b.add("Relu", [grown])
    (y,) = b.add("Add", [r, x])                  # a graph output: not planned
    g = b.finish([y])
    plan = plan_memory(g)
    check_plan(g, plan)
    assert plan.inplace == {t: s, r: grown}  # reductions and broadcasts never write in place
    assert aligned(1) == 64 and aligned(65) == 128


def test_resnet50_workspace_close_to_peak() -> None:
    graph = fuse_ops(resnet50(224))
    plan = plan_memory(graph)
    check_plan(graph, plan)
    assert plan.workspace_bytes <= 1.2 * plan.peak_live_bytes
    assert plan.workspace_bytes < plan.naive_bytes / 4
    # the largest activation (64x112x112 floats) must fit: 3 MiB
    assert plan.workspace_bytes >= 64 * 112 * 112 * 4


def test_imported_resnet50_meets_the_target() -> None:
    """The real model through the ONNX importer and the whole pipeline."""
    pytest.importorskip("onnx")
    from ember import zoo
    from ember.frontend import onnx as frontend
    from ember.graph.pipeline import optimize_graph

    graph = optimize_graph(frontend.from_onnx(zoo.build_model("resnet50")), opt_level=3)
    inner = [m.op for n in graph.nodes for m in n.attrs["graph"].nodes]
    assert "BatchNormalization" not in inner
    assert inner.count("Conv") + inner.count("ConvNCHWc") == 53
    assert len(graph.nodes) < 60
    plan = plan_memory(graph)
    check_plan(graph, plan)
    assert plan.workspace_bytes <= 1.2 * plan.peak_live_bytes


def concat_net(shape: tuple[int, ...], axis: int) -> tuple[Graph, list[Value]]:
    """Two Relu/Sigmoid branches concatenated, a nested Concat of that, a graph-input Concat."""
    b = Builder("concats")
    x = b.input("x", shape, "float32")
    (a,) = b.add("Relu", [x])
    (s,) = b.add("Sigmoid", [x])
    (n,) = b.add("Neg", [x])
    (c1,) = b.add("Concat", [a, s], {"axis": axis})          # slices of its output
    (c2,) = b.add("Concat", [c1, n], {"axis": axis})         # c1 is assembled: c2 is not
    (c3,) = b.add("Concat", [x, n], {"axis": axis})          # reads a graph input: not
    (c4,) = b.add("Concat", [n, n], {"axis": axis})          # one value twice: not
    (y,) = b.add("Relu", [c2])
    (z,) = b.add("Add", [c3, c4])
    return b.finish([y, z]), [a, s, c1]


@pytest.mark.parametrize("fusion", ["none", "wrap"])
def test_concat_inputs_are_slices_of_the_output(fusion: str) -> None:
    graph, (a, s, c1) = concat_net((1, 4, 6, 16), axis=1)
    if fusion == "wrap":
        graph = wrap_single_ops(graph)
    plan = plan_memory(graph)
    check_plan(graph, plan)
    assert plan.views == {a: (c1, 0), s: (c1, a.type.nbytes)}
    assert plan.assembled == {c1}
    assert "slice of %" in str(plan) and "1 concats assembled in place" in str(plan)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs]
    want = run_graph(graph, args, compile_fused=False)
    for w, got in zip(want, run_in_workspace(graph, plan, args)):  # c1's Concat skipped
        np.testing.assert_array_equal(got, w)
    assert not plan_memory(graph, views=False).views


def test_no_concat_views_when_slices_are_not_contiguous_or_aligned() -> None:
    graph, _ = concat_net((1, 4, 6, 16), axis=2)   # channels before the axis: strided
    assert not plan_memory(graph).views
    graph, _ = concat_net((1, 3, 5), axis=1)        # slices of 60 bytes: not aligned
    assert not plan_memory(graph).views
    graph, (a, s, c1) = concat_net((1, 1, 4, 16), axis=2)  # only 1s before the axis
    assert plan_memory(graph).assembled == {c1}
