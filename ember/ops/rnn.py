"""Recurrent ops (ONNX semantics): RNN, LSTM and GRU as te.scan recurrences over time.

Per direction: the input projection x @ W^T (+ biases) for all steps is one matrix product
before the scan, [T * B, I] x [I, G * H] with W packed in panels of 32 columns (a register
tiled GEMM); inside the scan, step t computes h[t-1] @ R^T with R packed as
[j block, k, gate, 32 j] so each step streams R once, contiguously, into 4 x 2 vector
accumulators per block; then the gate activations and the new states. Both packs read only
the weights, so they run at compile time when W and R are constants. Steps past a batch
entry's sequence_lens keep their state and output zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember import te
from ember.errors import ScheduleError, ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.budgets import row_tile, vectors
from ember.ops.conv_common import extent, pick_tile, shape_of
from ember.ops.generic import schedule_flat
from ember.ops.knobs import Knobs, Space, Task, in_range, resolve_knobs, up_to
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.target import Target
from ember.te.schedule import Schedule, Stage
from ember.te.tensor import ComputeOp, Tensor
from ember.tir.expr import Expr
from ember.tir.stmt import PARALLEL_CHUNKS

Act = Callable[[Expr], Expr]

INPUT_PANEL = 32        # columns of W^T per packed panel (two AVX-512 vectors of float32)
INPUT_ROWS = 8          # rows of the input projection's register tile
RECURRENT_BLOCK = 32    # hidden units per block of the packed R (vector lanes of a gate)


def _activation(name: str, alpha: float | None, beta: float | None) -> Act:
    def c(v: float, x: Expr) -> Expr:
        return te.const(v, x.dtype)

    match name.lower():
        case "sigmoid":
            return te.sigmoid
        case "tanh":
            return te.tanh
        case "relu":
            return lambda x: te.max(x, c(0.0, x))
        case "leakyrelu":
            a = 0.01 if alpha is None else alpha
            return lambda x: te.if_then_else(x >= c(0.0, x), x, x * c(a, x))
        case "hardsigmoid":
            a, b = (0.2 if alpha is None else alpha), (0.5 if beta is None else beta)
            return lambda x: te.min(te.max(x * c(a, x) + c(b, x), c(0.0, x)), c(1.0, x))
        case "thresholdedrelu":
            a = 1.0 if alpha is None else alpha
            return lambda x: te.if_then_else(x > c(a, x), x, c(0.0, x))
        case "scaledtanh":
            a, b = (1.0 if alpha is None else alpha), (1.0 if beta is None else beta)
            return lambda x: c(a, x) * te.tanh(x * c(b, x))
        case "affine":
            a, b = (1.0 if alpha is None else alpha), (0.0 if beta is None else beta)
            return lambda x: x * c(a, x) + c(b, x)
        case "softsign":
            return lambda x: x / (c(1.0, x) + te.abs(x))
        case "softplus":
            return lambda x: te.log(te.exp(x) + c(1.0, x))
        case "elu":
            a = 1.0 if alpha is None else alpha
            return lambda x: te.if_then_else(x >= c(0.0, x), x,
                                             c(a, x) * (te.exp(x) - c(1.0, x)))
    raise UnsupportedOpError(f"activation '{name}' is not supported")


_DEFAULT_ACTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"),
                 "RNN": ("Tanh",)}
_USES_ALPHA = {"leakyrelu", "hardsigmoid", "thresholdedrelu", "scaledtanh", "affine", "elu"}
_USES_BETA = {"hardsigmoid", "scaledtanh", "affine"}


def _activations(attrs: Attrs, defaults: Sequence[str], directions: int) -> list[list[Act]]:
    names = list(attrs.get("activations") or defaults * directions)
    if len(names) != len(defaults) * directions:
        raise UnsupportedOpError(f"activations {names}: expected {len(defaults) * directions} "
                                 f"names ({len(defaults)} per direction)")
    alphas = list(attrs.get("activation_alpha") or [])
    betas = list(attrs.get("activation_beta") or [])
    acts = []
    for name in names:
        key = name.lower() if isinstance(name, str) else name.decode().lower()
        alpha = alphas.pop(0) if key in _USES_ALPHA and alphas else None
        beta = betas.pop(0) if key in _USES_BETA and betas else None
        acts.append(_activation(key, alpha, beta))
    per = len(defaults)
    return [acts[d * per:(d + 1) * per] for d in range(directions)]


class _Spec:
    """Checked shapes and attributes of one RNN/LSTM/GRU node."""

    def __init__(self, kind: str, attrs: Attrs, types: Sequence[TensorType | None]) -> None:
        self.kind = kind
        self.gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
        x, w, r = types[0], types[1], types[2]
        assert x is not None and w is not None and r is not None
        self.layout = int(attrs.get("layout", 0))
        if self.layout not in (0, 1):
            raise UnsupportedOpError(f"layout={self.layout} is not supported (expected 0 or 1)")
        direction = attrs.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise UnsupportedOpError(f"direction={direction!r} is not supported")
        self.reverse = [direction == "reverse"] if direction != "bidirectional" else [False, True]
        self.dirs = len(self.reverse)
        if x.ndim != 3:
            raise ShapeError(f"input X must be 3-D, got shape {x.shape}")
        if self.layout == 0:
            self.steps, self.batch, self.features = x.shape
        else:
            self.batch, self.steps, self.features = x.shape
        h = attrs.get("hidden_size") or r.shape[-1]
        self.hidden = int(h)
        g, hd = self.gates, self.hidden
        want = {1: (self.dirs, g * hd, self.features), 2: (self.dirs, g * hd, hd),
                3: (self.dirs, 2 * g * hd), 4: (self.batch,)}
        state = (self.dirs, self.batch, hd) if self.layout == 0 else (self.batch, self.dirs, hd)
        want.update({5: state, 6: state, 7: (self.dirs, 3 * hd)})
        names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
        for pos, t in enumerate(types):
            if pos in want and t is not None and t.shape != want[pos]:
                raise ShapeError(f"input {names[pos]} has shape {t.shape}, expected {want[pos]}")
        if attrs.get("input_forget", 0) and kind == "LSTM":
            self.input_forget = True
        else:
            self.input_forget = False
        clip = attrs.get("clip")
        self.clip = None if clip is None else float(clip)

    def outputs(self, dtype: object) -> list[TensorType]:
        t, b, d, h = self.steps, self.batch, self.dirs, self.hidden
        y = (t, d, b, h) if self.layout == 0 else (b, t, d, h)
        state = (d, b, h) if self.layout == 0 else (b, d, h)
        outs = [TensorType(y, dtype), TensorType(state, dtype)]  # type: ignore[arg-type]
        if self.kind == "LSTM":
            outs.append(TensorType(state, dtype))  # type: ignore[arg-type]
        return outs


def _infer(kind: str) -> Callable[[Attrs, Sequence[TensorType | None]], list[TensorType]]:
    def infer(attrs: Attrs, inputs: Sequence[TensorType | None]) -> list[TensorType]:
        x = inputs[0]
        assert x is not None
        if not x.dtype.is_float:
            raise ShapeError(f"input X must be a float tensor, got {x.dtype}")
        spec = _Spec(kind, attrs, inputs)
        _activations(attrs, _DEFAULT_ACTS[kind], spec.dirs)  # reject unknown names early
        return spec.outputs(x.dtype)

    return infer


def _direction(spec: _Spec, d: int, ins: Sequence[Tensor | None], acts: list[Act],
               attrs: Attrs) -> tuple[Tensor, Tensor | None, Expr]:
    """(h states [T+1, B, H], c states or None, -) of direction d."""
    x, w, r = ins[0], ins[1], ins[2]
    bias = ins[3] if len(ins) > 3 else None
    lens = ins[4] if len(ins) > 4 else None
    init_h = ins[5] if len(ins) > 5 else None
    init_c = ins[6] if len(ins) > 6 and spec.kind == "LSTM" else None
    peep = ins[7] if len(ins) > 7 and spec.kind == "LSTM" else None
    assert x is not None and w is not None and r is not None
    T, B, I, H, G = spec.steps, spec.batch, spec.features, spec.hidden, spec.gates
    kind, rev, dtype = spec.kind, spec.reverse[d], x.dtype
    zero = te.const(0, dtype)
    lbr = kind == "GRU" and bool(attrs.get("linear_before_reset", 0))

    def x_at(t: Expr, b: Expr, i: Expr) -> Expr:
        return x[(t, b, i)] if spec.layout == 0 else x[(b, t, i)]

    def source(t: Expr, b: Expr) -> Expr:
        if not rev:
            return t
        if lens is None:
            return T - 1 - t
        return te.max(te.cast(lens[b], "int32") - 1 - t, te.const(0))

    def state_in(init: Tensor | None, name: str) -> Tensor:
        if init is None:
            return te.compute((1, B, H), lambda _, b, j: zero, name=name,  # type: ignore
                              tag="RNN.init")
        if spec.layout == 0:
            return te.compute((1, B, H), lambda _, b, j: init[d, b, j], name=name,  # type: ignore
                              tag="RNN.init")
        return te.compute((1, B, H), lambda _, b, j: init[b, d, j], name=name,  # type: ignore
                          tag="RNN.init")

    N, PW = G * H, INPUT_PANEL
    panels = -(-N // PW)

    def fwp(p: Expr, i: Expr, c: Expr) -> Expr:
        n = p * PW + c
        return w[d, n, i] if N % PW == 0 else te.if_then_else(n < N, w[d, n, i], zero)

    wp = te.compute((panels, I, PW), fwp, name="w_p", tag=f"{kind}.pack")
    JW = pick_tile(H, RECURRENT_BLOCK)
    rp = te.compute((H // JW, H, G, JW), lambda jo, k, g, ji: r[d, g * H + jo * JW + ji, k],
                    name="r_p", tag=f"{kind}.pack")
    i_ax = te.reduce_axis((0, I), name="i")

    def in_bias(g: Expr, j: Expr) -> Expr | None:
        if bias is None:
            return None
        wb = bias[d, g * H + j]
        if lbr:  # GRU h gate: its recurrent bias goes inside the reset product
            return wb + te.if_then_else(g < 2, bias[d, (G + g) * H + j], zero)
        return wb + bias[d, (G + g) * H + j]

    def fxw(row: Expr, n: Expr) -> Expr:
        t, b = (row, te.const(0)) if B == 1 else (row // B, row % B)
        return te.sum(x_at(source(t, b), b, i_ax.var) * wp[n // PW, i_ax, n % PW], axis=i_ax)

    xw0 = te.compute((T * B, N), fxw, name="xw", tag=f"{kind}.input")

    def fxwb(row: Expr, n: Expr) -> Expr:
        extra = in_bias(n // H, n % H)
        return xw0[row, n] + extra if extra is not None else xw0[row, n]

    xw2 = te.compute((T * B, N), fxwb, name="xw_b", tag=f"{kind}.input_bias")

    def xw(t: Expr, b: Expr, g: Expr | int, j: Expr) -> Expr:
        """The input projection of step t, batch entry b, gate g, unit j."""
        return xw2[t * B + b, g * H + j]
    hs = te.placeholder((T + 1, B, H), dtype, name="h_state")
    k_ax = te.reduce_axis((0, H), name="k")

    def clip(v: Expr) -> Expr:
        if spec.clip is None:
            return v
        return te.min(te.max(v, te.const(-spec.clip, dtype)), te.const(spec.clip, dtype))

    def valid(t: Expr, b: Expr) -> Expr | None:
        return None if lens is None else t - 1 < te.cast(lens[b], "int32")

    def keep(t: Expr, b: Expr, new: Expr, old: Expr) -> Expr:
        ok = valid(t, b)
        return new if ok is None else te.if_then_else(ok, new, old)

    if kind == "LSTM":
        cs = te.placeholder((T + 1, B, H), dtype, name="c_state")
        rec = te.compute((T + 1, B, G, H), lambda t, b, g, j: te.sum(
            hs[t - 1, b, k_ax] * rp[j // JW, k_ax, g, j % JW], axis=k_ax), name="rec",
            tag="LSTM.rec")
        f_act, g_act, h_act = acts

        def gate(t: Expr, b: Expr, g: int, j: Expr) -> Expr:
            return xw(t - 1, b, g, j) + rec[t, b, g, j]

        def peep_term(g: int, j: Expr, c: Expr) -> Expr:
            return peep[d, g * H + j] * c if peep is not None else zero

        def c_new(t: Expr, b: Expr, j: Expr) -> Expr:
            c_prev = cs[t - 1, b, j]
            i = f_act(clip(gate(t, b, 0, j) + peep_term(0, j, c_prev)))
            if spec.input_forget:
                f = te.const(1, dtype) - i
            else:
                f = f_act(clip(gate(t, b, 2, j) + peep_term(2, j, c_prev)))
            return f * c_prev + i * g_act(clip(gate(t, b, 3, j)))

        c_upd = te.compute((T + 1, B, H), lambda t, b, j: keep(t, b, c_new(t, b, j),
                                                                cs[t - 1, b, j]),
                           name="c_update", tag="LSTM.cell")

        def h_new(t: Expr, b: Expr, j: Expr) -> Expr:
            c = c_upd[t, b, j]  # the new cell state (where the step is valid)
            o = f_act(clip(gate(t, b, 1, j) + peep_term(1, j, c)))
            return o * h_act(c)

        h_upd = te.compute((T + 1, B, H), lambda t, b, j: keep(t, b, h_new(t, b, j),
                                                                hs[t - 1, b, j]),
                           name="h_update", tag="LSTM.cell")
        h_out, c_out = te.scan([state_in(init_h, "h0"), state_in(init_c, "c0")],
                               [h_upd, c_upd], [hs, cs], name=f"lstm{d}")
        return h_out, c_out, zero  # type: ignore[return-value]

    if kind == "RNN":  # h[t] = f(x W^T + h[t-1] R^T + Wb + Rb)
        (act,) = acts
        rec = te.compute((T + 1, B, 1, H), lambda t, b, g, j: te.sum(
            hs[t - 1, b, k_ax] * rp[j // JW, k_ax, g, j % JW], axis=k_ax), name="rec",
            tag="RNN.rec")
        h_upd = te.compute((T + 1, B, H), lambda t, b, j: keep(
            t, b, act(clip(xw(t - 1, b, 0, j) + rec[t, b, 0, j])), hs[t - 1, b, j]),
            name="h_update", tag="RNN.cell")
        h_out = te.scan(state_in(init_h, "h0"), h_upd, hs, name=f"rnn{d}")
        return h_out, None, zero  # type: ignore[return-value]

    # GRU: gates z, r, h
    f_act, g_act = acts
    rec_g = 3 if lbr else 2
    rec = te.compute((T + 1, B, rec_g, H), lambda t, b, g, j: te.sum(
        hs[t - 1, b, k_ax] * rp[j // JW, k_ax, g, j % JW], axis=k_ax), name="rec",
        tag="GRU.rec")

    def gate(t: Expr, b: Expr, g: int, j: Expr) -> Expr:
        return clip(xw(t - 1, b, g, j) + rec[t, b, g, j])

    if lbr:
        def candidate(t: Expr, b: Expr, j: Expr) -> Expr:
            rb = bias[d, (G + 2) * H + j] if bias is not None else zero
            reset = f_act(gate(t, b, 1, j))
            return g_act(clip(xw(t - 1, b, 2, j) + reset * (rec[t, b, 2, j] + rb)))
    else:
        reset_h = te.compute((T + 1, B, H), lambda t, b, k: f_act(gate(t, b, 1, k))
                             * hs[t - 1, b, k], name="reset_h", tag="GRU.reset")
        k2 = te.reduce_axis((0, H), name="k2")
        rec_h = te.compute((T + 1, B, H), lambda t, b, j: te.sum(
            reset_h[t, b, k2] * rp[j // JW, k2, 2, j % JW], axis=k2), name="rec_h",
            tag="GRU.rec_h")

        def candidate(t: Expr, b: Expr, j: Expr) -> Expr:
            return g_act(clip(xw(t - 1, b, 2, j) + rec_h[t, b, j]))

    def h_new(t: Expr, b: Expr, j: Expr) -> Expr:
        z = f_act(gate(t, b, 0, j))
        return (te.const(1, dtype) - z) * candidate(t, b, j) + z * hs[t - 1, b, j]

    h_upd = te.compute((T + 1, B, H), lambda t, b, j: keep(t, b, h_new(t, b, j),
                                                            hs[t - 1, b, j]),
                       name="h_update", tag="GRU.cell")
    h_out = te.scan(state_in(init_h, "h0"), h_upd, hs, name=f"gru{d}")
    return h_out, None, zero  # type: ignore[return-value]


def _compute(kind: str) -> Callable[[Attrs, Sequence[Tensor | None]], list[Tensor]]:
    def compute(attrs: Attrs, inputs: Sequence[Tensor | None]) -> list[Tensor]:
        x = inputs[0]
        assert x is not None
        types = [None if t is None else TensorType(shape_of(t), t.dtype) for t in inputs]
        spec = _Spec(kind, attrs, types)
        acts = _activations(attrs, _DEFAULT_ACTS[kind], spec.dirs)
        results = [_direction(spec, d, inputs, acts[d], attrs) for d in range(spec.dirs)]
        lens = inputs[4] if len(inputs) > 4 else None
        T, B, D, H = spec.steps, spec.batch, spec.dirs, spec.hidden
        zero = te.const(0, x.dtype)

        def y_value(t: Expr, d: int, b: Expr, j: Expr) -> Expr:
            h = results[d][0]
            if lens is None:
                return h[(T - t if spec.reverse[d] else t + 1), b, j]
            n = te.cast(lens[b], "int32")
            step = te.max(n - t, te.const(0)) if spec.reverse[d] else t + 1
            return te.if_then_else(t < n, h[step, b, j], zero)

        def pick(d: Expr, fn: Callable[[int], Expr]) -> Expr:
            value = fn(D - 1)
            for k in range(D - 2, -1, -1):
                value = te.if_then_else(d == k, fn(k), value)
            return value

        if spec.layout == 0:
            y = te.compute((T, D, B, H), lambda t, d, b, j: pick(
                d, lambda k: y_value(t, k, b, j)), name="Y", tag=f"{kind}.Y")
        else:
            y = te.compute((B, T, D, H), lambda b, t, d, j: pick(
                d, lambda k: y_value(t, k, b, j)), name="Y", tag=f"{kind}.Y")

        def final(index: int, name: str) -> Tensor:
            def value(d: Expr, b: Expr, j: Expr) -> Expr:
                return pick(d, lambda k: results[k][index][T, b, j])  # type: ignore[index]

            if spec.layout == 0:
                return te.compute((D, B, H), value, name=name)  # type: ignore[return-value]
            return te.compute((B, D, H), lambda b, d, j: value(d, b, j),  # type: ignore
                              name=name)

        outs = [y, final(0, "Y_h")]
        if kind == "LSTM":
            outs.append(final(1, "Y_c"))
        return outs  # type: ignore[return-value]

    return compute


# -- schedule -------------------------------------------------------------------------------
# multiply-adds per step worth splitting the recurrent product over the threads. A step of
# H = 256 (4 x 256 x 256, R = 1 MiB of float32) streams R from the shared cache in ~12 us,
# bandwidth-bound; split, each thread keeps its half of R in its own L2 (one contiguous
# share per thread, pragma PARALLEL_CHUNKS = 1, so usually the same blocks every step),
# which outweighs a wake-up of the pool (~6-12 us).
# Measured on lstm_lm (H = 256, T = 64) at 2 threads: 2-5% faster split (noisy, shared).
RECURRENT_PARALLEL_MIN = 1 << 18
# multiply-adds of the input projection (one GEMM before the scan) worth running in parallel
PROJECTION_PARALLEL_MIN = 1 << 18
_KEEP = ("RNN.init", "LSTM.cell", "GRU.cell", "RNN.cell", "LSTM.pack", "GRU.pack",
         "RNN.pack", "GRU.reset", "LSTM.input_bias", "GRU.input_bias", "RNN.input_bias")


@dataclass(frozen=True)
class RNNKnobs(Knobs):
    """Choices of the RNN / LSTM / GRU schedule: rows of the input projection's register tile
    (x 32 columns); parallel_projection / parallel_recurrent: run the input projection /
    the recurrent product of each step on the threads where it is big enough
    (PROJECTION_PARALLEL_MIN / RECURRENT_PARALLEL_MIN multiply-adds), else never."""

    rows: int = 1
    parallel_projection: bool = True
    parallel_recurrent: bool = True

    @classmethod
    def space(cls, task: Task) -> Space:
        return Space({"rows": up_to(_projection_rows(task), 2 * INPUT_ROWS),
                      "parallel_projection": (False, True),
                      "parallel_recurrent": (False, True)})

    @classmethod
    def default(cls, task: Task) -> RNNKnobs:
        # the projection's register tile is rows x INPUT_PANEL columns of float32: as many
        # rows as budgets.row_tile allows for that many vectors a row (8 on Zen 4, 2 on AVX2)
        rows = _projection_rows(task)
        lanes = task.target.vector_lanes("float32")
        limit = min(row_tile(task.target.facts, vectors(INPUT_PANEL, lanes)), 2 * INPUT_ROWS)
        tile = pick_tile(rows, limit)
        if tile < limit // 2 and rows > limit:
            tile = limit
        return cls(tile, True, True)

    def check(self, task: Task) -> None:
        in_range(self, "rows", 1, _projection_rows(task), "rows of the input projection")


def _projection_rows(task: Task) -> int:
    """Rows (steps x batch) of the input projection of an RNN / LSTM / GRU group."""
    stage = task.find(".input_bias")
    if stage is None:
        raise ScheduleError("RNNKnobs: no input projection (RNN / LSTM / GRU) in the task")
    return shape_of(stage.outputs[0])[0]


def _schedule_projection(s: Schedule, out: Stage, mm: Stage, k: RNNKnobs) -> None:
    """The input projection as a register-tiled GEMM: per panel of 32 columns (parallel),
    row tiles of `k.rows` x 32 accumulators over all of k, the bias added on the tile."""
    rows, cols = out.op.axis  # type: ignore[attr-defined]
    width = min(INPUT_PANEL, extent(cols))
    co, ci = out.split(cols, width)
    ro, ri = out.split(rows, k.rows)
    out.reorder(co, ro, ri, ci)
    work = extent(rows) * extent(cols) * extent(mm.op.reduce_axis[0])  # type: ignore
    if work >= PROJECTION_PARALLEL_MIN and k.parallel_projection:
        out.parallel(co)
    out.vectorize(ci)
    mm.compute_at(out, ro)
    mr, mc = mm.op.axis  # type: ignore[attr-defined]
    mm.reorder(*mm.op.reduce_axis, mr, mc)  # type: ignore[attr-defined]
    mm.unroll(mr)
    mm.vectorize(mc)


def schedule_rnn(outs: Sequence[Tensor], target: Target, knobs: Knobs | None = None
                 ) -> Schedule:
    """The input projection (a GEMM) before the scan; per step the recurrent product over
    blocks of 32 hidden units (the gates unrolled, R streamed once), then the cell."""
    k = resolve_knobs(RNNKnobs, knobs, outs, target)
    s = te.create_schedule([t.op for t in outs])
    for stage in s.stages:
        op = stage.op
        if (isinstance(op, ComputeOp) and not op.reduce_axis and not stage.is_output
                and op.tag not in _KEEP):
            stage.compute_inline()
    for stage in s.stages:
        op = stage.op
        if not isinstance(op, ComputeOp) or stage.attach.value == "inline":
            continue
        tag = op.tag
        if tag.endswith(".pack"):
            schedule_flat(stage, target, str(op.outputs[0].dtype))
        elif tag.endswith(".input_bias"):
            mm = [t for t in s.stages if t.op in [x.op for x in op.input_tensors()]
                  and isinstance(t.op, ComputeOp) and t.op.tag.endswith(".input")]
            if mm:
                _schedule_projection(s, stage, mm[0], k)
            else:
                schedule_flat(stage, target, str(op.outputs[0].dtype))
        elif tag.endswith((".rec", ".rec_h")):
            *lead, j = op.axis
            block = pick_tile(extent(j), RECURRENT_BLOCK)
            jo, ji = stage.split(j, block)
            if len(lead) == 3:
                t, b, g = lead
                stage.reorder(t, b, jo, *op.reduce_axis, g, ji)
                stage.unroll(g)
            else:
                stage.reorder(*lead, jo, *op.reduce_axis, ji)
            stage.vectorize(ji)
            work = extent(j) * extent(op.reduce_axis[0]) * (extent(lead[-1]) if len(lead) == 3
                                                             else 1)
            if work >= RECURRENT_PARALLEL_MIN and extent(j) > block and k.parallel_recurrent:
                # each thread keeps its slice of the recurrent weights in its own cache:
                # one contiguous share per thread, the same one on every step
                stage.parallel(jo)
                stage.pragma(jo, PARALLEL_CHUNKS, 1)
        elif tag.endswith((".cell", ".reset")):
            j = op.axis[-1]
            jo, ji = stage.split(j, pick_tile(extent(j), 16))
            stage.vectorize(ji)
    for t in outs:
        schedule_flat(s[t], target, str(t.dtype))
    return s


def _rnn_attrs(extra: dict[str, object]) -> dict[str, object]:
    return {"activation_alpha": None, "activation_beta": None, "activations": None,
            "clip": None, "direction": "forward", "hidden_size": None, "layout": 0, **extra}


OPS: dict[str, OpDef] = {
    "LSTM": OpDef("LSTM", ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
                  _infer("LSTM"), _compute("LSTM"), Pattern.OPAQUE, schedule_rnn, knobs=RNNKnobs,
                  attrs=_rnn_attrs({"input_forget": 0}), num_outputs=3),
    "RNN": OpDef("RNN", ("X", "W", "R", "B", "sequence_lens", "initial_h"), _infer("RNN"),
                 _compute("RNN"), Pattern.OPAQUE, schedule_rnn, knobs=RNNKnobs,
                 attrs=_rnn_attrs({}), num_outputs=2),
    "GRU": OpDef("GRU", ("X", "W", "R", "B", "sequence_lens", "initial_h"), _infer("GRU"),
                 _compute("GRU"), Pattern.OPAQUE, schedule_rnn, knobs=RNNKnobs,
                 attrs=_rnn_attrs({"linear_before_reset": 0}), num_outputs=2),
}
