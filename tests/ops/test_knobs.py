"""Knob families: random points of each space keep the numbers (against the default schedule
and a reference), every point is accepted, the default is in the space, bad knobs are
rejected by name, and no schedule reads the process's thread count."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from ember.errors import ScheduleError
from ember.graph.ir import Node, Value, tensor_type
from ember.lowering.kernel import group_knobs, run_op
from ember.ops.conv import ConvNCHWKnobs
from ember.ops.conv_blocked import (
    ConvKnobs,
    LayoutKnobs,
    from_blocked,
    pack_depthwise,
    pack_direct,
    to_blocked,
)
from ember.ops.conv_winograd import pack_winograd
from ember.ops.dense import DenseKnobs
from ember.ops.generic import InjectiveKnobs, ReductionKnobs
from ember.ops.knobs import Knobs, NoKnobs, Space, Task, knobs_at
from ember.ops.matmul import MatmulKnobs
from ember.ops.pool import PoolKnobs
from ember.ops.registry import all_ops, get_op
from ember.ops.rnn import RNNKnobs
from ember.target import Target
from tests.ops.onnx_ref import onnx_run

RNG = np.random.default_rng(11)
SAMPLES = 2  # random points per family (each one is a compile)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def blocked(ws: Sequence[int], algorithm: str, pads: Sequence[int] = (0, 0, 0, 0)
            ) -> dict[str, Any]:
    return {"kernel_shape": tuple(ws[2:]), "pads": tuple(pads), "algorithm": algorithm}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * scale + bias


class Case:
    """One op on fixed inputs: its knob family, inputs, attributes, weights and reference."""

    def __init__(self, name: str, family: type[Knobs], op: str, arrays: list[np.ndarray],
                 attrs: dict[str, Any], reference: Callable[[], np.ndarray],
                 constant: Sequence[int] = (), convert: Callable[[np.ndarray], np.ndarray]
                 = lambda y: y) -> None:
        self.name, self.family, self.op, self.arrays = name, family, op, arrays
        self.attrs, self.reference, self.constant, self.convert = attrs, reference, constant, \
            convert

    def task(self) -> Task:
        opdef = get_op(self.op)
        full = opdef.complete_attrs(self.attrs, self.op)
        values = [Value(f"x{i}", tensor_type(a.shape, a.dtype)) for i, a in enumerate(self.arrays)]
        types = opdef.infer(full, [v.type for v in values])
        outs = [Value(f"y{i}", t) for i, t in enumerate(types)]
        node = Node(self.op, "n", tuple(values), tuple(outs), full)
        task, family = group_knobs([node], values, outs, Target("llvm"))
        assert family is self.family
        return task

    def run(self, knobs: Knobs | None) -> np.ndarray:
        out = run_op(self.op, self.arrays, self.attrs, constant=self.constant, knobs=knobs)[0]
        return self.convert(out)


def _cases() -> list[Case]:
    x8 = rand(1, 16, 6, 7)
    w_direct = rand(16, 16, 3, 3)
    x_1x1, w_1x1 = rand(1, 16, 5, 6), rand(32, 16, 1, 1)
    x_dw, w_dw = rand(1, 16, 6, 9), rand(16, 1, 3, 3)
    x_wino, w_wino = rand(1, 8, 6, 6), rand(16, 8, 3, 3)
    x_conv, w_conv = rand(1, 8, 5, 9), rand(16, 8, 3, 3)
    x_plain, w_plain = rand(1, 3, 7, 8), rand(5, 3, 3, 3)
    a, b = rand(20, 16), rand(16, 40)
    ba, bb = rand(3, 10, 8), rand(3, 8, 20)
    da, db = rand(2, 32), rand(3, 32)
    xp = rand(1, 4, 9, 11)
    xs, xl, sc, bi = rand(6, 37), rand(3, 4, 24), rand(24), rand(24)
    xr = rand(5, 30, 6)
    u, v = rand(4, 5, 19), rand(19)
    xt = rand(1, 32, 3, 5)
    seq, wl, rl = rand(4, 2, 8), rand(1, 64, 8), rand(1, 64, 16)
    wg, rg = rand(1, 48, 8), rand(1, 48, 16)
    return [
        Case("conv_direct", ConvKnobs, "ConvNCHWc",
             [to_blocked(x8, 8), pack_direct(w_direct, 8, 8)],
             blocked(w_direct.shape, "direct", (1, 1, 1, 1)),
             lambda: onnx_run("Conv", [x8, w_direct], {"pads": [1, 1, 1, 1]})[0],
             convert=from_blocked),
        Case("conv_1x1", ConvKnobs, "ConvNCHWc",
             [to_blocked(x_1x1, 8), pack_direct(w_1x1, 8, 8)], blocked(w_1x1.shape, "direct"),
             lambda: onnx_run("Conv", [x_1x1, w_1x1])[0], convert=from_blocked),
        Case("conv_depthwise", ConvKnobs, "ConvNCHWc",
             [to_blocked(x_dw, 8), pack_depthwise(w_dw, 8)],
             blocked(w_dw.shape, "depthwise", (1, 1, 1, 1)),
             lambda: onnx_run("Conv", [x_dw, w_dw], {"pads": [1, 1, 1, 1], "group": 16})[0],
             convert=from_blocked),
        Case("conv_winograd", ConvKnobs, "ConvNCHWc",
             [to_blocked(x_wino, 8), pack_winograd(w_wino, 8, 8)],
             blocked(w_wino.shape, "winograd", (1, 1, 1, 1)),
             lambda: onnx_run("Conv", [x_wino, w_wino], {"pads": [1, 1, 1, 1]})[0],
             convert=from_blocked),
        Case("conv_nchw_blocked", ConvNCHWKnobs, "Conv", [x_conv, w_conv], {"pads": [1] * 4},
             lambda: onnx_run("Conv", [x_conv, w_conv], {"pads": [1, 1, 1, 1]})[0]),
        Case("conv_nchw_plain", ConvNCHWKnobs, "Conv", [x_plain, w_plain], {},
             lambda: onnx_run("Conv", [x_plain, w_plain])[0]),
        Case("matmul_packed", DenseKnobs, "MatMul", [a, b], {}, lambda: a @ b, constant=(1,)),
        Case("matmul_batched", DenseKnobs, "MatMul", [ba, bb], {}, lambda: ba @ bb),
        Case("gemm_dot", DenseKnobs, "Gemm", [da, db], {"transB": 1}, lambda: da @ db.T),
        Case("lppool", PoolKnobs, "LpPool", [xp], {"kernel_shape": (3, 3), "pads": (1,) * 4},
             lambda: onnx_run("LpPool", [xp], {"kernel_shape": [3, 3],
                                               "pads": [1, 1, 1, 1]})[0]),
        Case("avgpool", PoolKnobs, "AveragePool", [xp], {"kernel_shape": (2, 3)},
             lambda: onnx_run("AveragePool", [xp], {"kernel_shape": [2, 3]})[0]),
        Case("softmax", ReductionKnobs, "Softmax", [xs], {"axis": -1}, lambda: softmax(xs)),
        Case("layer_norm", ReductionKnobs, "LayerNormalization", [xl, sc, bi], {"axis": -1},
             lambda: layer_norm(xl, sc, bi)),
        Case("reduce_sum", ReductionKnobs, "ReduceSum", [xr], {"axes": (1,), "keepdims": 0},
             lambda: xr.sum(axis=1)),
        Case("add", InjectiveKnobs, "Add", [u, v], {}, lambda: u + v),
        Case("layout", LayoutKnobs, "LayoutTransform", [xt], {"dst_block": 16},
             lambda: to_blocked(xt, 16)),
        Case("lstm", RNNKnobs, "LSTM", [seq, wl, rl], {"hidden_size": 16},
             lambda: onnx_run("LSTM", [seq, wl, rl], {"hidden_size": 16})[0], constant=(1, 2)),
        Case("gru", RNNKnobs, "GRU", [seq, wg, rg], {"hidden_size": 16},
             lambda: onnx_run("GRU", [seq, wg, rg], {"hidden_size": 16})[0], constant=(1, 2)),
    ]


CASES = {c.name: c for c in _cases()}


def _points(case: Case, task: Task, count: int, seed: int) -> list[Knobs]:
    """`count` distinct points of the case's space other than the default (fewer if the
    space is smaller)."""
    space = case.family.space(task)
    default = case.family.default(task)
    rng = random.Random(seed)
    seen, out = {tuple(sorted(default.to_dict().items()))}, []
    for _ in range(50 * count):
        knobs = knobs_at(case.family, task, space.sample(rng))
        key = tuple(sorted(knobs.to_dict().items()))
        if key not in seen:
            seen.add(key)
            out.append(knobs)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_points_keep_the_numbers(name: str) -> None:
    case = CASES[name]
    task = case.task()
    expected = case.run(None)
    np.testing.assert_allclose(expected, case.reference(), rtol=1e-4, atol=1e-4)
    points = _points(case, task, SAMPLES, seed=sum(map(ord, name)))
    assert points, f"{name}: the space has only the default"
    for knobs in points:
        # same math in another loop order: float sums may round differently
        np.testing.assert_allclose(case.run(knobs), expected, rtol=1e-5, atol=1e-5,
                                   err_msg=str(knobs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_point_is_accepted_and_the_default_is_in_the_space(name: str) -> None:
    case = CASES[name]
    task = case.task()
    space = case.family.space(task)
    default = case.family.default(task)
    assert isinstance(default, case.family)
    assert space.contains(default.to_dict()), (default, space.choices)
    assert space.size > 1
    for point in space.points():
        knobs = knobs_at(case.family, task, point)
        knobs.check(task)
        assert case.family.from_dict(knobs.to_dict()) == knobs


def _task_for(op: str, arrays: list[np.ndarray], attrs: dict[str, Any], target: str) -> Task:
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs, op)
    values = [Value(f"x{i}", tensor_type(a.shape, a.dtype)) for i, a in enumerate(arrays)]
    outs = [Value(f"y{i}", t) for i, t in enumerate(opdef.infer(full, [v.type for v in values]))]
    return group_knobs([Node(op, "n", tuple(values), tuple(outs), full)], values, outs,
                       Target(target))[0]


def test_a_constrained_space_enumerates_samples_and_contains_only_valid_points() -> None:
    space = Space({"a": (1, 2, 3, 4), "b": (1, 2, 4)}, lambda p: p["a"] * p["b"] <= 4)
    points = list(space.points())
    assert space.size == len(points) == 7 and all(p["a"] * p["b"] <= 4 for p in points)
    rng = random.Random(3)
    assert all(space.contains(space.sample(rng)) for _ in range(200))
    assert not space.contains({"a": 3, "b": 2}) and space.contains({"a": 2, "b": 2})


def test_conv_spaces_leave_out_tiles_past_the_register_file() -> None:
    """ow_tile x oc_tile x vectors a block accumulators at most the target's registers
    (8 x 28 would spill at every step and take LLVM minutes to allocate)."""
    for target in ("llvm -mcpu=sapphirerapids", "llvm -mcpu=skylake"):
        op, arrays, attrs = "ConvNCHWc", [np.zeros((1, 8, 28, 28, 16), "float32"),
                                          np.zeros((16, 8, 1, 1, 16, 16), "float32")], \
            {"kernel_shape": (1, 1), "algorithm": "direct"}
        task = _task_for(op, arrays, attrs, target)
        space = ConvKnobs.space(task)
        registers = Target(target).facts.vector_registers
        lanes = Target(target).vector_lanes("float32")
        per_block = -(-16 // lanes)
        assert all(p["ow_tile"] * p["oc_tile"] * per_block <= registers
                   for p in space.points())
        assert 8 in space.choices["oc_tile"] and 28 in space.choices["ow_tile"]
        assert not space.contains({**ConvKnobs.default(task).to_dict(), "ow_tile": 28,
                                   "oc_tile": 8})
        assert space.contains(ConvKnobs.default(task).to_dict())


def test_space_sizes_for_sample_shapes() -> None:
    """The spaces grow with the shape (bigger outputs, more tiles) and are enumerable."""
    sizes = {name: case.family.space(case.task()).size for name, case in CASES.items()}
    # ow_tile 1..7, oc_tile 1 or 2 blocks, unroll_kw, unroll_ii, parallel_columns, rows_outer,
    # k_chunk 0 or 1 (of 2 input blocks)
    assert sizes["conv_direct"] == 7 * 2 * 2 * 2 * 2 * 2 * 2
    # 3 x 3 tiles of 2 x 2, oc_tile 1 or 2 blocks, unroll_ii, parallel_columns
    assert sizes["conv_winograd"] == 9 * 2 * 2 * 2
    # rows 1..16, cols = the panel, parallel_rows, unroll_k 1, 2 or 4 (K = 16)
    assert sizes["matmul_packed"] == 16 * 1 * 2 * 3
    assert all(0 < s < 100_000 for s in sizes.values()), sizes


BAD = [
    ("conv_direct", ConvKnobs(ow_tile=0, oc_tile=1), r"ConvKnobs: knob ow_tile=0 is outside"),
    ("conv_direct", ConvKnobs(ow_tile=2, oc_tile=9), r"knob oc_tile=9 is outside \[1, 2\]"),
    ("conv_direct", ConvKnobs(ow_tile=np.int64(2)), r"ow_tile=np.int64\(2\) must be a Python "
                                                    r"int in \[1, 7\] .* not a int64"),
    ("conv_depthwise", ConvKnobs(ow_tile=2, oc_tile=2), r"oc_tile=2 must be one of \(1,\) "
                                                         r"for a depthwise"),
    ("conv_winograd", ConvKnobs(ow_tile=2, unroll_kw=True), r"unroll_kw=True .*Winograd"),
    ("conv_winograd", ConvKnobs(ow_tile=2, oc_tile=3), r"oc_tile=3 is outside \[1, 2\]"),
    ("conv_winograd", ConvKnobs(ow_tile=2, k_chunk=2), r"k_chunk=2 is outside \[0, 1\]"),
    ("conv_depthwise", ConvKnobs(ow_tile=2, k_chunk=1), r"k_chunk=1 must be one of \(0,\) "
                                                       r"for a depthwise"),
    ("conv_direct", ConvKnobs(ow_tile=2, k_chunk=3), r"k_chunk=3 is outside \[0, 2\]"),
    ("conv_nchw_plain", ConvNCHWKnobs(ow_tile=2, parallel_rows=True),
     r"parallel_rows=True needs the blocked compute"),
    ("conv_nchw_blocked", ConvNCHWKnobs(ow_tile=10), r"ow_tile=10 is outside \[1, 9\]"),
    ("matmul_packed", DenseKnobs(rows=4, cols=8), r"cols=8 must be one of \((16|32),\) "
                                                  r"\(the panel width"),
    ("matmul_batched", DenseKnobs(rows=99, cols=4), r"DenseKnobs: knob rows=99 is outside"),
    ("matmul_batched", DenseKnobs(rows=2, cols=4, unroll_k=3),
     r"unroll_k=3 does not divide the reduction's 8 steps"),
    ("gemm_dot", DenseKnobs(rows=1, cols=2, unroll_k=2), r"unroll_k=2 must be one of \(1,\)"),
    ("gemm_dot", DenseKnobs(rows=2, cols=2), r"rows=2 must be one of \(1,\)"),
    ("lppool", PoolKnobs(ow_tile=0, row_tile=1), r"PoolKnobs: knob ow_tile=0"),
    ("add", InjectiveKnobs(vector_bits=-8), r"vector_bits=-8 must be 0 or a positive"),
    ("softmax", ReductionKnobs(vector_bits=12), r"vector_bits=12 must be"),
    ("lstm", RNNKnobs(rows=0), r"RNNKnobs: knob rows=0 is outside"),
    ("add", DenseKnobs(), r"op 'Add': expected InjectiveKnobs knobs, got DenseKnobs"),
    ("softmax", InjectiveKnobs(), r"expected ReductionKnobs knobs, got InjectiveKnobs"),
]


@pytest.mark.parametrize("name,knobs,match", BAD)
def test_bad_knobs_are_rejected_by_name(name: str, knobs: Knobs, match: str) -> None:
    case = CASES[name]
    with pytest.raises(ScheduleError, match=match):
        case.run(knobs)
    assert "op '" in _message(case, knobs)


def _message(case: Case, knobs: Knobs) -> str:
    try:
        case.run(knobs)
    except ScheduleError as error:
        return str(error)
    return ""


def test_a_family_without_its_stage_says_so() -> None:
    with pytest.raises(ScheduleError, match="ConvKnobs: no ConvNCHWc stage"):
        ConvKnobs.default(CASES["add"].task())
    with pytest.raises(ScheduleError, match="DenseKnobs: no MatMul/Gemm stage"):
        DenseKnobs.space(CASES["add"].task())
    with pytest.raises(ScheduleError, match="RNNKnobs: no input projection"):
        RNNKnobs.default(CASES["add"].task())


def test_from_dict_rejects_unknown_knobs() -> None:
    with pytest.raises(ScheduleError, match=r"DenseKnobs: unknown knob\(s\) \['mr'\]"):
        DenseKnobs.from_dict({"mr": 8})


def test_every_scheduled_op_declares_its_family() -> None:
    for name, opdef in all_ops().items():
        family = opdef.knob_family()
        assert issubclass(family, Knobs), name
        if opdef.schedule is not None:
            assert opdef.knobs is not None and family is not NoKnobs, name


def test_threads_come_from_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread count is a target fact: schedules never ask the thread pool, and the
    defaults follow -num-cores."""
    from ember.runtime import threadpool

    def forbidden() -> int:
        raise AssertionError("a schedule read the process's thread count")

    monkeypatch.setattr(threadpool, "num_threads", forbidden)
    for name in ("conv_direct", "conv_winograd", "conv_nchw_blocked", "matmul_packed",
                 "layout"):
        CASES[name].run(None)
    task = CASES["conv_nchw_blocked"].task()  # one block of 16 output channels
    one = Task(task.outs, Target("llvm -num-cores=1"))
    many = Task(task.outs, Target("llvm -num-cores=64"))
    assert not ConvNCHWKnobs.default(one).parallel_rows
    assert ConvNCHWKnobs.default(many).parallel_rows


def test_matmul_knobs_keep_the_numbers() -> None:
    """The stand-alone GEMM schedule (demo, benchmarks) with random points of its space."""
    from ember.lowering.build import build
    from ember.ops.matmul import matmul, schedule_matmul_x86

    a_t, b_t, packed, c_t = matmul(24, 40, 36, nr=16)
    a, b = rand(24, 36), rand(36, 40)
    task = Task((c_t,), Target("llvm"))
    assert MatmulKnobs.space(task).contains(MatmulKnobs.default(task).to_dict())
    rng = random.Random(3)
    for _ in range(2):
        knobs = knobs_at(MatmulKnobs, task, MatmulKnobs.space(task).sample(rng))
        module = build(schedule_matmul_x86(c_t, packed, "llvm", knobs), [a_t, b_t, c_t])
        c = np.zeros((24, 40), "float32")
        module(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ScheduleError, match=r"nr=32 must be one of \(16,\)"):
        schedule_matmul_x86(c_t, packed, "llvm", MatmulKnobs(nr=32))
