"""ember.compile(knobs=...): knobs reach each fused group's kernel, change its code and its
cache entry, are reported in the stats, and bad ones are rejected naming the group."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError, ScheduleError
from ember.graph.ir import GraphBuilder
from ember.lowering.cache import KernelCache
from ember.lowering.compile import choose_knobs, lower_group
from ember.lowering.groups import fused_groups, optimize
from ember.ops.conv_blocked import ConvKnobs
from ember.ops.dense import DenseKnobs, target_panel
from ember.ops.generic import InjectiveKnobs
from ember.ops.knobs import Task
from ember.target import Target
from ember.tir import structural_hash

RNG = np.random.default_rng(2)
W = RNG.standard_normal((24, 64)).astype("float32")


def _graph():
    """x [20, 24] @ W (constant, packed) -> Relu: one fused group around the MatMul."""
    b = GraphBuilder("knobbed")
    x = b.input("x", (20, 24), "float32")
    w = b.constant("w", W)
    (y,) = b.add("MatMul", [x, w])
    (z,) = b.add("Relu", [y])
    return b.finish([z])


def _matmul_group(model: ember.CompiledModel) -> str:
    (name,) = [n for n, k in model.stats["knobs"].items() if k["family"] == "DenseKnobs"]
    return name


def test_knobs_reach_the_kernel(tmp_path) -> None:
    x = RNG.standard_normal((20, 24)).astype("float32")
    cache = KernelCache(tmp_path)
    default = ember.compile(_graph(), cache=cache)
    name = _matmul_group(default)
    chosen = default.stats["knobs"][name]
    # packed panels of the host's width (2 vectors: 32 columns with AVX-512, 16 with AVX2)
    assert chosen["family"] == "DenseKnobs" and chosen["cols"] == target_panel(
        Target.host().vector_lanes("float32"))
    assert 1 <= chosen["rows"] <= 20  # the host's row tile (6 with AVX2: 3 tiles and a tail)
    knobs = DenseKnobs(rows=4 if chosen["rows"] != 4 else 5, cols=chosen["cols"],
                       parallel_rows=not chosen["parallel_rows"])
    tuned = ember.compile(_graph(), cache=KernelCache(tmp_path), knobs={name: knobs})
    assert tuned.stats["knobs"][name] == {"family": "DenseKnobs", **knobs.to_dict()}
    assert tuned.stats["compiled"] == 1 and tuned.stats["cached"] == 0  # a new cache entry
    assert set(tuned.plan.symbols) != set(default.plan.symbols)
    (want,) = default.run({"x": x})
    (got,) = tuned.run({"x": x})
    np.testing.assert_allclose(want, np.maximum(x @ W, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    again = ember.compile(_graph(), cache=KernelCache(tmp_path), knobs={name: knobs})
    assert again.stats["cached"] == 1 and again.stats["compiled"] == 0


def test_a_knob_changes_the_lowered_loops() -> None:
    target = Target("llvm")
    groups = fused_groups(optimize(_graph(), 3, target), target=target)
    default = choose_knobs(groups, target)
    calls: list[tuple[str, Task]] = []

    def pick(group, task):
        calls.append((group.name, task))
        if task.op != "MatMul":
            return None
        host = DenseKnobs.default(task)          # another row tile than the host's default
        return DenseKnobs(rows=4 if host.rows != 4 else 5, cols=host.cols)

    picked = choose_knobs(groups, target, pick)
    assert [n for n, _ in calls] == [g.name for g in groups]
    assert all(t.target == target for _, t in calls)
    matmul = [i for i, g in enumerate(groups) if calls[i][1].op == "MatMul"]
    assert matmul
    for i, (a, b) in enumerate(zip(default, picked)):
        same = structural_hash(lower_group(a, target)) == structural_hash(lower_group(b, target))
        assert same == (i not in matmul)
        assert (a.key == b.key) == (i not in matmul)


def test_the_target_thread_count_chooses_the_default() -> None:
    """With one thread the whole packed panel loop is parallel; with many, the row tiles
    too (the default is a function of -num-cores)."""
    g = fused_groups(optimize(_graph(), 3, Target("llvm")))
    one = choose_knobs(g, Target("llvm -num-cores=1"))
    many = choose_knobs(g, Target("llvm -num-cores=32"))
    knobs_one = [x.knobs for x in one if isinstance(x.knobs, DenseKnobs)]
    knobs_many = [x.knobs for x in many if isinstance(x.knobs, DenseKnobs)]
    assert not knobs_one[0].parallel_rows and knobs_many[0].parallel_rows


def test_bad_knobs_name_the_group() -> None:
    graph = _graph()
    name = _matmul_group(ember.compile(graph, cache=False))
    with pytest.raises(ScheduleError, match=rf"fused group '{name}' \(MatMul\): .*expected "
                                            r"DenseKnobs knobs, got ConvKnobs"):
        ember.compile(graph, cache=False, knobs={name: ConvKnobs()})
    with pytest.raises(ScheduleError, match=rf"fused group '{name}' \(MatMul\): DenseKnobs: "
                                            r"knob rows=50 is outside \[1, 20\]"):
        ember.compile(graph, cache=False, knobs={name: DenseKnobs(rows=50, cols=32)})
    with pytest.raises(ArgumentError, match=r"knobs name fused group\(s\) \['nope'\] that the "
                                            "model does not have"):
        ember.compile(graph, cache=False, knobs={"nope": DenseKnobs()})
    with pytest.raises(ArgumentError, match="knobs must be a Knobs value, got dict"):
        ember.compile(graph, cache=False, knobs={name: {"rows": 4}})
    with pytest.raises(ArgumentError, match="knobs must map fused group names to Knobs or be "
                                            "a function"):
        ember.compile(graph, cache=False, knobs=[DenseKnobs()])
    with pytest.raises(ScheduleError, match="expected DenseKnobs knobs, got InjectiveKnobs"):
        ember.compile(graph, cache=False, knobs=lambda g, t: InjectiveKnobs())


def test_gpu_targets_use_the_gpu_families() -> None:
    from ember.ops.gpu.knobs import GpuMatmulKnobs

    target = Target("cuda")
    groups = choose_knobs(fused_groups(optimize(_graph(), 2, target)), target)
    families = {type(g.knobs) for g in groups}
    assert GpuMatmulKnobs in families and DenseKnobs not in families
    with pytest.raises(ScheduleError, match="expected GpuMatmulKnobs knobs, got DenseKnobs"):
        choose_knobs(fused_groups(optimize(_graph(), 2, target)), target,
                     lambda g, t: DenseKnobs() if t.op == "MatMul" else None)
