"""LSTM and GRU on OpenCL: the input projection as one GEMM kernel, each time step as its
own launches (the host loop of ember.codegen.gpu_kernels), against onnxruntime."""

import numpy as np
import pytest

from ember.codegen.gpu_kernels import split_kernels
from ember.errors import CodegenError
from ember.lowering.kernel import run_op
from tests.ops.onnx_ref import onnx_run

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def _lstm_inputs(T, B, F, H, D=1):
    return [rand(T, B, F), rand(D, 4 * H, F), rand(D, 4 * H, H), rand(D, 8 * H)]


def _gru_inputs(T, B, F, H, D=1):
    return [rand(T, B, F), rand(D, 3 * H, F), rand(D, 3 * H, H), rand(D, 6 * H)]


CASES = [
    ("LSTM", _lstm_inputs(5, 2, 3, 4), {"hidden_size": 4}, 3),
    ("LSTM", _lstm_inputs(4, 3, 5, 6, 2), {"hidden_size": 6, "direction": "bidirectional"}, 3),
    ("LSTM", _lstm_inputs(4, 1, 3, 70), {"hidden_size": 70, "direction": "reverse"}, 3),
    ("GRU", _gru_inputs(20, 2, 3, 4), {"hidden_size": 4}, 2),  # more steps than 16
    ("GRU", _gru_inputs(3, 2, 4, 5), {"hidden_size": 5, "linear_before_reset": 1}, 2),
]


@pytest.mark.parametrize("op,inputs,attrs,n", CASES, ids=[f"{c[0]}{i}" for i, c in
                                                          enumerate(CASES)])
def test_rnn_matches_onnxruntime(opencl, op, inputs, attrs, n):
    ref = onnx_run(op, inputs, attrs, num_outputs=n)
    got = run_op(op, inputs, attrs, target="opencl")
    assert len(got) == n
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_lstm_sequence_lens_and_initial_state(opencl):
    x, w, r, b = _lstm_inputs(4, 3, 3, 4)
    lens = np.array([4, 2, 1], np.int32)
    h0, c0 = rand(1, 3, 4), rand(1, 3, 4)
    ref = onnx_run("LSTM", [x, w, r, b, lens, h0, c0], {"hidden_size": 4}, num_outputs=3)
    got = run_op("LSTM", [x, w, r, b, lens, h0, c0], {"hidden_size": 4}, target="opencl")
    for g, want in zip(got, ref):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def _running_sum(steps=6, n=40):
    """A te.scan running sum over `steps` rows, its row loop bound to threads."""
    from ember import te

    X = te.placeholder((steps, n), "float32", name="X")
    state = te.placeholder((steps, n), "float32", name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((steps, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    out = te.scan(init, update, state, name="cumsum")
    s = te.create_schedule(out.op)
    s[update].bind(update.op.axis[1], "threadIdx.x")
    s[out].bind(out.op.spatial_axis[0], "threadIdx.x")
    s[init].bind(init.op.axis[1], "threadIdx.x")
    return s, X, out


def test_scan_time_loop_is_a_host_loop_of_launches(opencl):
    from ember.lowering.build import build_gpu, lower_gpu

    s, X, out = _running_sum()
    func = lower_gpu(s, [X, out], "cumsum")
    program = split_kernels(func)
    stepped = [k for k in program.kernels if k.step is not None]
    assert len(stepped) == 2 and all(k.scalars[-1] is k.step for k in stepped)
    order = program.launch_order()
    steps = [v for _, v in order if v is not None]
    # init and its copy into the state once, then (update, copy) for each of the 5 steps
    assert len(order) == 2 + 2 * 5 and order[0][1] is None and order[1][1] is None
    assert steps == [steps[0] + t for t in range(5) for _ in range(2)]
    x = rand(6, 40)
    got = np.zeros((6, 40), np.float32)
    build_gpu(func, __import__("ember").target.Target("opencl"))(x, got)
    np.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)


def test_host_loop_with_a_symbolic_bound_is_refused():
    from ember.dtype import float32
    from ember.tir import expr as E
    from ember.tir import stmt as S
    from ember.tir.function import Buffer, PrimFunc

    n, t, i = E.Var("n"), E.Var("t"), E.Var("i")
    buf = Buffer("A", (E.const(64),), float32)
    inner = S.For(i, E.const(0), E.const(64), S.ForKind.THREAD_BINDING,
                  S.Store(buf, E.const(1.0, float32), (i,)), thread_tag="threadIdx.x")
    body = S.For(t, E.const(0), n, S.ForKind.SERIAL, inner)
    with pytest.raises(CodegenError, match="host loop 't' around GPU kernels has a "
                                           "non-constant bound n"):
        split_kernels(PrimFunc("f", (buf, n), body))


def test_scan_time_axis_inside_thread_loops_is_refused():
    from ember.errors import ScheduleError
    from ember.lowering.build import lower_gpu

    s, X, out = _running_sum()
    stage = s[out]
    t, i = stage.leaf_iter_vars
    stage.reorder(i, t)
    with pytest.raises(ScheduleError, match="scan 'cumsum': its time axis 'cumsum.t' is "
                                            "inside thread-bound loops"):
        lower_gpu(s, [X, out], "cumsum")


def test_an_allocation_repeated_by_a_peeled_loop_is_one_temporary():
    from ember.dtype import float32
    from ember.tir import expr as E
    from ember.tir import stmt as S
    from ember.tir.function import Buffer, PrimFunc

    out = Buffer("out", (E.const(64),), float32)
    tmp = Buffer("tmp", (E.const(64),), float32)

    def step():  # tmp = 1; out = tmp, as a peeled iteration and the loop body both hold it
        i, j = E.Var("i"), E.Var("j")
        fill = S.For(i, E.const(0), E.const(64), S.ForKind.THREAD_BINDING,
                     S.Store(tmp, E.const(1.0, float32), (i,)), thread_tag="threadIdx.x")
        copy = S.For(j, E.const(0), E.const(64), S.ForKind.THREAD_BINDING,
                     S.Store(out, E.Load(tmp, (j,)), (j,)), thread_tag="threadIdx.x")
        return S.Allocate(tmp, S.Seq((fill, copy)))

    t = E.Var("t")
    body = S.Seq((step(), S.For(t, E.const(1), E.const(3), S.ForKind.SERIAL, step())))
    program = split_kernels(PrimFunc("f", (out,), body))
    assert [b.name for b in program.temporaries] == ["tmp"]
    assert all(len({id(b.data) for b in k.buffers}) == len(k.buffers) for k in program.kernels)
    assert len(program.launch_order()) == 2 + 2 * 3
