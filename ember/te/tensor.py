"""Tensors and operations: placeholder, compute, reduce_axis, scan and extern.

What to compute, separate from how (the schedule). A Tensor is one output of an
Operation; indexing it (`A[i, k]`) builds a TensorLoad expression.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

from ember import dtype as dt
from ember.dtype import DType
from ember.errors import EmberError, ShapeError
from ember.tir.expr import (
    Expr, ExprLike, IntImm, IterKind, IterVar, Range, Reduce, Var, const, convert,
)
from ember.tir.function import Buffer
from ember.tir.stmt import Stmt


@dataclass(frozen=True, eq=False, repr=False)
class TensorLoad(Expr):
    """Read of a tensor element inside a compute body: `A[i, k]`."""

    tensor: Tensor
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:  # type: ignore[override]
        return self.tensor.dtype


class Operation:
    """Base of the operations that produce tensors."""

    name: str

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, index: int = 0) -> Tensor:
        return self.outputs[index]

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        raise NotImplementedError

    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


@dataclass(eq=False, repr=False)
class Tensor:
    """The `value_index`-th output of `op`, with a static shape and a dtype."""

    op: Operation
    value_index: int
    shape: tuple[Expr, ...]
    dtype: DType

    @property
    def name(self) -> str:
        return self.op.name if self.op.num_outputs == 1 else f"{self.op.name}.v{self.value_index}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: object) -> TensorLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise ShapeError(f"tensor '{self.name}' has {len(self.shape)} dimensions, "
                             f"indexed with {len(indices)}")
        converted = []
        for i in indices:
            e = convert(i)
            if not e.dtype.is_int:
                raise ShapeError(f"index of tensor '{self.name}' must be an integer, "
                                 f"got {e.dtype}")
            converted.append(e)
        return TensorLoad(self, tuple(converted))

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name}: {self.dtype}[{dims}])"


def _shape(shape: Sequence[ExprLike] | ExprLike) -> tuple[Expr, ...]:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    out = []
    for s in shape:
        e = convert(s)
        if not isinstance(e, IntImm) or e.value < 0:
            raise ShapeError(f"shape {tuple(shape)!r}: every dimension must be a non-negative "
                             f"integer constant, got {s!r}")
        out.append(const(e.value, "int32"))
    size = 1
    for e in out:
        size *= e.value  # type: ignore[attr-defined]
    if size > 2**31 - 1:  # loop variables and flat indices are int32
        raise ShapeError(f"shape {tuple(shape)!r} has {size} elements; tensors of at most "
                         f"{2**31 - 1} elements are supported (32-bit indices)")
    return tuple(out)


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[Expr, ...], dtype: DType) -> None:
        self.name = name
        self._outputs = (Tensor(self, 0, shape, dtype),)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs


class ComputeOp(Operation):
    """`out[axis] = body` for every point of `axis`; a Reduce body sums over reduce_axis."""

    def __init__(self, name: str, axis: tuple[IterVar, ...], body: tuple[Expr, ...],
                 tag: str = "") -> None:
        self.name = name
        self.axis = axis
        self.body = body
        self.tag = tag
        reduce_axis: tuple[IterVar, ...] = ()
        if isinstance(body[0], Reduce):
            reduce_axis = body[0].axis
        self.reduce_axis = reduce_axis
        shape = tuple(iv.dom.extent for iv in axis)
        self._outputs = tuple(Tensor(self, i, shape, b.dtype) for i, b in enumerate(body))

    @property
    def num_outputs(self) -> int:
        return len(self.body)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs

    def input_tensors(self) -> list[Tensor]:
        from ember.te.analysis import tensors_read

        return tensors_read(self.body)


class ScanOp(Operation):
    """A recurrence over axis 0: state[0:k] = init, state[t] = update(state[t-1], ...)."""

    def __init__(self, name: str, scan_axis: IterVar, init: tuple[Tensor, ...],
                 update: tuple[Tensor, ...], state_placeholder: tuple[Tensor, ...]) -> None:
        self.name = name
        self.scan_axis = scan_axis
        self.init = init
        self.update = update
        self.state_placeholder = state_placeholder
        self.spatial_axis = tuple(
            IterVar(Var(f"{name}.s{d}"), Range.from_extent(extent))
            for d, extent in enumerate(state_placeholder[0].shape[1:]))
        self._outputs = tuple(Tensor(self, i, s.shape, s.dtype)
                              for i, s in enumerate(state_placeholder))

    @property
    def num_outputs(self) -> int:
        return len(self.update)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs

    def input_tensors(self) -> list[Tensor]:
        return list(self.init) + list(self.update)


class ExternOp(Operation):
    """An operation whose body is a loop program (or a call) written against buffers."""

    def __init__(self, name: str, inputs: tuple[Tensor, ...], input_buffers: tuple[Buffer, ...],
                 output_buffers: tuple[Buffer, ...], body: Stmt) -> None:
        self.name = name
        self.inputs = inputs
        self.input_buffers = input_buffers
        self.output_buffers = output_buffers
        self.body = body
        self._outputs = tuple(Tensor(self, i, b.shape, b.dtype)
                              for i, b in enumerate(output_buffers))

    @property
    def num_outputs(self) -> int:
        return len(self.output_buffers)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs

    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)


# ------------------------------------------------------------------------------------------
# user-facing builders
def placeholder(shape: Sequence[ExprLike] | ExprLike, dtype: str | DType = "float32",
                name: str = "placeholder") -> Tensor:
    """An input tensor: `A = te.placeholder((M, K), "float32", name="A")`."""
    return PlaceholderOp(name, _shape(shape), dt.parse(dtype)).output(0)


def reduce_axis(dom: tuple[ExprLike, ExprLike] | ExprLike, name: str = "rv") -> IterVar:
    """A reduction axis over [begin, end): `k = te.reduce_axis((0, K), name="k")`."""
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise ShapeError(f"reduce_axis '{name}': expected (begin, end), got {dom!r}")
        begin, end = convert(dom[0]), convert(dom[1])
    else:
        begin, end = const(0), convert(dom)
    if not isinstance(begin, IntImm) or not isinstance(end, IntImm) or end.value < begin.value:
        raise ShapeError(f"reduce_axis '{name}': bounds must be integer constants with "
                         f"begin <= end, got {dom!r}")
    return IterVar(Var(name), Range(begin, const(end.value - begin.value)), IterKind.REDUCE)


def thread_axis(tag: str, extent: int | None = None) -> IterVar:
    """A GPU thread axis such as "threadIdx.x" or "blockIdx.x", for `Stage.bind`."""
    valid = [f"{k}.{a}" for k in ("threadIdx", "blockIdx", "vthread") for a in "xyz"]
    if tag not in valid:
        raise EmberError(f"unknown thread axis {tag!r}; expected one of {valid}")
    dom = Range.from_extent(extent) if extent is not None else Range(const(0), const(0))
    return IterVar(Var(tag), dom, IterKind.THREAD, tag)


def compute(shape: Sequence[ExprLike] | ExprLike, fcompute: Callable[..., object],
            name: str = "compute", tag: str = "") -> Tensor | tuple[Tensor, ...]:
    """`C = te.compute((M, N), lambda i, j: A[i, j] + 1, name="C")`.

    A function returning a tuple makes an operation with several outputs (all of the same
    reduction, e.g. argmax's index and value).
    """
    dims = _shape(shape)
    nargs = len(inspect.signature(fcompute).parameters)
    if nargs != len(dims):
        # allow lambda *i for any rank
        params = inspect.signature(fcompute).parameters.values()
        if not any(p.kind == p.VAR_POSITIONAL for p in params):
            raise ShapeError(f"compute '{name}': the function takes {nargs} indices but the "
                             f"shape has {len(dims)} dimensions")
    names = _axis_names(fcompute, len(dims))
    axis = tuple(IterVar(Var(n), Range.from_extent(d)) for n, d in zip(names, dims))
    result = fcompute(*[iv.var for iv in axis])
    values = result if isinstance(result, (tuple, list)) else (result,)
    body = tuple(convert(v) for v in values)
    _check_body(name, body)
    op = ComputeOp(name, axis, body, tag)
    return op.outputs if len(body) > 1 else op.output(0)


def _axis_names(fcompute: Callable[..., object], ndim: int) -> list[str]:
    params = list(inspect.signature(fcompute).parameters.values())
    if len(params) == ndim and all(p.kind != p.VAR_POSITIONAL for p in params):
        return [p.name for p in params]
    return [f"i{d}" for d in range(ndim)]


def _check_body(name: str, body: tuple[Expr, ...]) -> None:
    from ember.te.analysis import contains_reduce

    for index, value in enumerate(body):
        top_reduce = isinstance(value, Reduce)
        if not top_reduce and contains_reduce(value):
            raise EmberError(f"compute '{name}': a reduction (te.sum, te.max, ...) must be the "
                             "outermost expression of the body; compute the reduction in its "
                             "own te.compute and use its result")
        if index > 0 and top_reduce != isinstance(body[0], Reduce):
            raise EmberError(f"compute '{name}': either all outputs are reductions or none")
    if len(body) > 1 and isinstance(body[0], Reduce):
        first = body[0]
        for value in body[1:]:
            assert isinstance(value, Reduce)
            if value.combiner is not first.combiner or value.source is not first.source:
                raise EmberError(f"compute '{name}': the outputs of a multi-output reduction "
                                 "must come from one call of the same reducer")


def scan(init: Tensor | Sequence[Tensor], update: Tensor | Sequence[Tensor],
         state_placeholder: Tensor | Sequence[Tensor], name: str = "scan"
         ) -> Tensor | tuple[Tensor, ...]:
    """A recurrence along axis 0 (time).

    `state` is a placeholder of shape (T, ...); `init` (shape (k, ...)) gives state[0:k];
    `update` (shape (T, ...)) gives state[t] from state[t-1] (or earlier) and other inputs:

        s = te.placeholder((T, n)); init = te.compute((1, n), lambda _, i: X[0, i])
        update = te.compute((T, n), lambda t, i: s[t - 1, i] + X[t, i])
        res = te.scan(init, update, s)   # running sum over t
    """
    inits = tuple(init) if isinstance(init, (tuple, list)) else (init,)
    updates = tuple(update) if isinstance(update, (tuple, list)) else (update,)
    states = (tuple(state_placeholder) if isinstance(state_placeholder, (tuple, list))
              else (state_placeholder,))
    if not (len(inits) == len(updates) == len(states)):
        raise ShapeError(f"scan '{name}': init, update and state need the same number of "
                         f"tensors, got {len(inits)}, {len(updates)}, {len(states)}")
    for i, (a, u, s) in enumerate(zip(inits, updates, states)):
        if not isinstance(s.op, PlaceholderOp):
            raise EmberError(f"scan '{name}': state {i} must be a te.placeholder")
        if _ints(u.shape) != _ints(s.shape):
            raise ShapeError(f"scan '{name}': update {i} has shape {_ints(u.shape)} but the "
                             f"state has {_ints(s.shape)}")
        if _ints(a.shape)[1:] != _ints(s.shape)[1:] or _ints(a.shape)[0] > _ints(s.shape)[0]:
            raise ShapeError(f"scan '{name}': init {i} has shape {_ints(a.shape)}, expected "
                             f"(k, {', '.join(map(str, _ints(s.shape)[1:]))})")
        if a.dtype != s.dtype or u.dtype != s.dtype:
            raise EmberError(f"scan '{name}': init, update and state {i} must share a dtype")
    steps = _ints(states[0].shape)[0]
    init_steps = _ints(inits[0].shape)[0]
    axis = IterVar(Var(f"{name}.t"), Range(const(init_steps), const(steps - init_steps)))
    op = ScanOp(name, axis, inits, updates, states)
    return op.outputs if len(updates) > 1 else op.output(0)


def _ints(shape: tuple[Expr, ...]) -> tuple[int, ...]:
    return tuple(s.value for s in shape if isinstance(s, IntImm))


def extern(shape: Sequence[ExprLike] | Sequence[Sequence[ExprLike]],
           inputs: Sequence[Tensor], fcompute: Callable[[list[Buffer], list[Buffer]], Stmt],
           name: str = "extern", dtype: str | DType | Sequence[str | DType] = "float32"
           ) -> Tensor | tuple[Tensor, ...]:
    """An operation whose body is written directly as a loop program over buffers.

    `fcompute(ins, outs)` receives one Buffer per input and output and returns a Stmt
    (loops you build with ember.tir, or an Evaluate of an external Call).
    """
    multi = bool(shape) and isinstance(shape[0], (tuple, list))  # type: ignore[index]
    shapes = list(shape) if multi else [shape]
    dtypes = list(dtype) if isinstance(dtype, (tuple, list)) else [dtype] * len(shapes)
    in_bufs = [Buffer(t.name, t.shape, t.dtype) for t in inputs]
    out_bufs = [Buffer(f"{name}.out{i}" if len(shapes) > 1 else name, _shape(s), dt.parse(d))
                for i, (s, d) in enumerate(zip(shapes, dtypes))]
    body = fcompute(in_bufs, out_bufs)
    if not isinstance(body, Stmt):
        raise EmberError(f"extern '{name}': fcompute must return a tir Stmt, "
                         f"got {type(body).__name__}")
    op = ExternOp(name, tuple(inputs), tuple(in_bufs), tuple(out_bufs), body)
    return op.outputs if len(out_bufs) > 1 else op.output(0)
