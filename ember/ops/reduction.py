"""Reductions (ONNX semantics): Reduce*, ArgMax/ArgMin, CumSum, Softmax, LogSoftmax.

Each op is a te reduction (tagged with the op name) plus elementwise prologue/epilogue
stages; the generic reduction schedule vectorizes the reduction, computes it per output row
inside the epilogue's parallel loop and inlines the elementwise parts.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import dtype as dt
from ember import te
from ember.errors import ShapeError, UnsupportedOpError
from ember.types import TensorType
from ember.ops.elementwise import FLOATS, NUMBERS, check_kinds, const_like, shape_of
from ember.ops.registry import Attrs, OpDef, Pattern
from ember.te.tensor import Tensor
from ember.tir.expr import Div, Expr, IterVar, Select, const

Reducer = Callable[..., Expr]


def normalize_axis(axis: int, rank: int, op: str) -> int:
    """A possibly negative axis as an index in [0, rank); ShapeError when out of range."""
    if not -rank <= axis < max(rank, 1) or (rank == 0 and axis not in (0, -1)):
        raise ShapeError(f"{op}: axis {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(axes: Sequence[int], rank: int, op: str) -> tuple[int, ...]:
    out = sorted({normalize_axis(int(a), rank, op) for a in axes})
    if len(out) != len(axes):
        raise ShapeError(f"{op}: axes {tuple(axes)} name an axis twice")
    return tuple(out)


def _reduce_axes(attrs: Attrs, rank: int, op: str) -> tuple[int, ...] | None:
    """The reduced axes; None for the no-op case (empty axes with noop_with_empty_axes)."""
    axes = attrs.get("axes")
    if axes is None or (isinstance(axes, (tuple, list)) and len(axes) == 0):
        if attrs.get("noop_with_empty_axes"):
            return None
        return tuple(range(rank))
    if isinstance(axes, int):
        axes = (axes,)
    return normalize_axes(axes, rank, op)


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def reduce_compute(x: Tensor, axes: Sequence[int], keepdims: bool, reducer: Reducer,
                   prologue: Callable[[Expr], Expr] = lambda v: v, name: str = "reduce",
                   tag: str = "") -> Tensor:
    """`out[kept] = reducer(prologue(x[kept, k]), over k)` for the given axes."""
    shape = shape_of(x)
    ks = {d: te.reduce_axis((0, shape[d]), name=f"k{d}") for d in axes}

    def body(*i: Expr) -> Expr:
        index: list[Any] = []
        kept = iter(i)
        for d in range(len(shape)):
            if d in ks:
                if keepdims:
                    next(kept)
                index.append(ks[d])
            else:
                index.append(next(kept))
        return reducer(prologue(x[tuple(index)]), axis=[ks[d] for d in axes])

    return te.compute(reduced_shape(shape, axes, keepdims), body, name=name,  # type: ignore
                      tag=tag)


def _product(source: Expr, axis: Sequence[IterVar]) -> Expr:
    reducer = te.comm_reducer(lambda a, b: a * b, lambda t: const(1, t), name="prod")
    return reducer(source, axis=axis)  # type: ignore[return-value]


def _count(shape: Sequence[int], axes: Sequence[int]) -> int:
    n = 1
    for d in axes:
        n *= shape[d]
    return n


def _lift(epilogue: Callable[[Expr, int], Expr]) -> Callable[[Tensor, Tensor, int, str], Tensor]:
    def apply(r: Tensor, x: Tensor, n: int, name: str) -> Tensor:
        return te.compute(shape_of(r), lambda *i: epilogue(r[i], n),  # type: ignore[return-value]
                          name=name.lower(), tag=name)
    return apply


def _mean(v: Expr, n: int) -> Expr:
    return v / const_like(n, v) if v.dtype.is_float else Div(v, const_like(n, v))


def _finite_or_zero(v: Expr) -> Expr:
    """v where finite, else 0: shifting by an infinite maximum would give inf - inf = nan,
    while log(sum(exp(x))) is +inf (or -inf when every x is -inf)."""
    zero = const_like(0, v)
    return Select((v - v) == zero, v, zero)


def _log_sum_exp(x: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    m = reduce_compute(x, axes, True, te.max, name="lse_max")
    shape = shape_of(x)

    def shifted(*i: Expr) -> Expr:
        index = tuple(const(0) if d in axes else i[d] for d in range(len(shape)))
        return te.exp(x[i] - _finite_or_zero(m[index]))

    e = te.compute(shape, shifted, name="lse_exp")
    total = reduce_compute(e, axes, keepdims, te.sum, name="lse_sum",  # type: ignore[arg-type]
                           tag="ReduceLogSumExp")

    def result(*i: Expr) -> Expr:
        if keepdims:
            index = i
        else:
            kept = iter(i)
            index = tuple(const(0) if d in axes else next(kept) for d in range(len(shape)))
        return te.log(total[i]) + _finite_or_zero(m[index])

    return te.compute(shape_of(total), result, name="reducelogsumexp",  # type: ignore
                      tag="ReduceLogSumExp")


# name -> (reducer, prologue, epilogue or None, allowed kinds)
_REDUCES: dict[str, tuple[Reducer, Callable[[Expr], Expr], Callable[[Expr, int], Expr] | None,
                          str]] = {
    "ReduceSum": (te.sum, lambda v: v, None, NUMBERS),
    "ReduceMean": (te.sum, lambda v: v, _mean, NUMBERS),
    "ReduceMax": (te.max, lambda v: v, None, NUMBERS + "b"),
    "ReduceMin": (te.min, lambda v: v, None, NUMBERS + "b"),
    "ReduceProd": (_product, lambda v: v, None, NUMBERS),
    "ReduceL1": (te.sum, te.abs, None, NUMBERS),
    "ReduceL2": (te.sum, lambda v: v * v, lambda v, n: te.sqrt(v), FLOATS),
    "ReduceSumSquare": (te.sum, lambda v: v * v, None, NUMBERS),
    "ReduceLogSum": (te.sum, lambda v: v, lambda v, n: te.log(v), FLOATS),
    "ReduceLogSumExp": (te.sum, lambda v: v, None, FLOATS),
}


def reduce_op(name: str) -> OpDef:
    reducer, prologue, epilogue, kinds = _REDUCES[name]

    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        assert x is not None
        check_kinds(name, kinds, x)
        for flag in ("keepdims", "noop_with_empty_axes"):
            if attrs[flag] not in (0, 1, True, False):
                raise UnsupportedOpError(f"{name}: {flag} must be 0 or 1, got {attrs[flag]!r}")
        axes = _reduce_axes(attrs, x.ndim, name)
        if axes is None:
            return [x]
        return [TensorType(reduced_shape(x.shape, axes, bool(attrs["keepdims"])), x.dtype)]

    def compute(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        x = tensors[0]
        assert x is not None
        shape = shape_of(x)
        axes = _reduce_axes(attrs, len(shape), name)
        if axes is None:
            return [te.compute(shape, lambda *i: x[i], name=name.lower(),  # type: ignore
                               tag=name)]
        keep = bool(attrs["keepdims"])
        if x.dtype.is_bool:  # any / all, reduced as bytes
            wide = te.compute(shape, lambda *i: x[i].astype("uint8"), name="as_bytes")
            r = reduce_compute(wide, axes, keep, reducer, name=name.lower(),  # type: ignore
                               tag=name)
            return [te.compute(shape_of(r), lambda *i: r[i] != const(0, "uint8"),
                               name=f"{name.lower()}_bool", tag=name)]  # type: ignore
        if name == "ReduceLogSumExp":
            return [_log_sum_exp(x, axes, keep)]
        r = reduce_compute(x, axes, keep, reducer, prologue, name=name.lower(), tag=name)
        if epilogue is not None:
            r = _lift(epilogue)(r, x, _count(shape, axes), name)
        return [r]

    return OpDef(name, ("data", "axes"), infer, compute, Pattern.REDUCTION,
                 attrs={"keepdims": 1, "noop_with_empty_axes": 0, "axes": None},
                 attr_inputs=("axes",))


# ------------------------------------------------------------------------------------------
def arg_op(name: str) -> OpDef:
    """ArgMax / ArgMin: int64 index of the extreme value along one axis."""
    better = (lambda a, b: a > b) if name == "ArgMax" else (lambda a, b: a < b)

    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        assert x is not None
        check_kinds(name, NUMBERS, x)
        axis = normalize_axis(int(attrs["axis"]), x.ndim, name)
        return [TensorType(reduced_shape(x.shape, (axis,), bool(attrs["keepdims"])), dt.int64)]

    def compute(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        x = tensors[0]
        assert x is not None
        shape = shape_of(x)
        axis = normalize_axis(int(attrs["axis"]), len(shape), name)
        last = bool(attrs["select_last_index"])

        def combine(a: tuple[Expr, Expr], b: tuple[Expr, Expr]) -> tuple[Expr, Expr]:
            (ia, va), (ib, vb) = a, b
            tie = (ia > ib) if last else (ia < ib)
            take_a = better(va, vb) | ((va == vb) & tie)
            return Select(take_a, ia, ib), Select(take_a, va, vb)

        def identity(index_type: Any, value_type: Any) -> tuple[Expr, Expr]:
            start = -1 if last else dt.int64.max_value()
            worst = te.min_value(value_type) if name == "ArgMax" else te.max_value(value_type)
            return const(start, index_type), worst

        reducer = te.comm_reducer(combine, identity, name=name.lower())
        keep = bool(attrs["keepdims"])
        k = te.reduce_axis((0, shape[axis]), name="k")

        def body(*i: Expr) -> tuple[Expr, Expr]:
            index: list[Any] = list(i)
            if keep:
                index[axis] = k
            else:
                index.insert(axis, k)
            return reducer((k.var.astype("int64"), x[tuple(index)]), axis=k)  # type: ignore

        index, _ = te.compute(reduced_shape(shape, (axis,), keep), body,  # type: ignore[misc]
                              name=f"{name.lower()}_pair", tag=name)
        # the (index, value) pair is an intermediate; the op's output is the index alone
        out = te.compute(shape_of(index), lambda *i: index[i], name=name.lower(), tag=name)
        return [out]  # type: ignore[list-item]

    return OpDef(name, ("data",), infer, compute, Pattern.REDUCTION,
                 attrs={"axis": 0, "keepdims": 1, "select_last_index": 0})


# ------------------------------------------------------------------------------------------
def _infer_same_axis(name: str, kinds: str, axis_key: str = "axis"
                     ) -> Callable[[Attrs, Sequence[TensorType | None]], list[TensorType]]:
    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        assert x is not None
        check_kinds(name, kinds, x)
        if attrs.get(axis_key) is None:
            raise ShapeError(f"{name}: the '{axis_key}' input is required")
        normalize_axis(_scalar(attrs[axis_key]), x.ndim, name)
        return [x]
    return infer


def _scalar(value: Any) -> int:
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ShapeError(f"expected one axis, got {tuple(value)}")
        value = value[0]
    return int(value)


_PRODUCT = te.comm_reducer(lambda a, b: a * b, lambda t: const(1, t), name="prod")


def _cumulative(name: str, reducer: Reducer) -> Callable[[Attrs, Sequence[Tensor | None]],
                                                          list[Tensor]]:
    """CumSum / CumProd: out[.., j, ..] = reduce(x[.., k, ..] for k before (or at) j)."""

    def compute(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        x = tensors[0]
        assert x is not None
        shape = shape_of(x)
        axis = normalize_axis(_scalar(attrs["axis"]), len(shape), name)
        k = te.reduce_axis((0, shape[axis]), name="k")
        exclusive, reverse = bool(attrs["exclusive"]), bool(attrs["reverse"])

        def body(*i: Expr) -> Expr:
            index: list[Any] = list(i)
            index[axis] = k
            j = i[axis]
            if reverse:
                cond = (k > j) if exclusive else (k >= j)
            else:
                cond = (k < j) if exclusive else (k <= j)
            return reducer(x[tuple(index)], axis=k, where=cond)

        return [te.compute(shape, body, name=name.lower(), tag=name)]  # type: ignore[list-item]

    return compute


def _softmax(log: bool) -> Callable[[Attrs, Sequence[Tensor | None]], list[Tensor]]:
    name = "LogSoftmax" if log else "Softmax"

    def compute(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
        x = tensors[0]
        assert x is not None
        shape = shape_of(x)
        axis = normalize_axis(int(attrs["axis"]), len(shape), name)
        m = reduce_compute(x, (axis,), True, te.max, name=f"{name.lower()}_max", tag=name)
        # float16 rows are exponentiated and summed in float32 and rounded once at the end
        # (a float16 sum of the exponentials drifts by units in the last place)
        wide = x.dtype == dt.float16

        def row(i: Sequence[Expr]) -> tuple[Expr, ...]:
            return tuple(const(0) if d == axis else v for d, v in enumerate(i))

        def fshift(*i: Expr) -> Expr:
            if wide:
                return x[i].astype(dt.float32) - m[row(i)].astype(dt.float32)
            return x[i] - m[row(i)]

        def narrow(e: Expr) -> Expr:
            return e.astype(x.dtype) if wide else e

        shifted = te.compute(shape, fshift, name=f"{name.lower()}_shift")
        total = reduce_compute(shifted, (axis,), True, te.sum, te.exp,  # type: ignore[arg-type]
                               name=f"{name.lower()}_sum", tag=name)
        if log:
            out = te.compute(shape, lambda *i: narrow(shifted[i] - te.log(total[row(i)])),
                             name="logsoftmax", tag=name)
        else:
            out = te.compute(shape, lambda *i: narrow(te.exp(shifted[i]) * (
                const_like(1, shifted[i]) / total[row(i)])), name="softmax", tag=name)
        return [out]  # type: ignore[list-item]

    return compute


def _infer_softmax(name: str) -> Callable[[Attrs, Sequence[TensorType | None]],
                                          list[TensorType]]:
    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        x = types[0]
        assert x is not None
        check_kinds(name, FLOATS, x)
        normalize_axis(int(attrs["axis"]), x.ndim, name)
        return [x]
    return infer


def _check_cumsum(opdef: OpDef) -> OpDef:
    from dataclasses import replace

    def infer(attrs: Attrs, types: Sequence[TensorType | None]) -> list[TensorType]:
        for key in ("exclusive", "reverse"):
            if attrs[key] not in (0, 1):
                raise UnsupportedOpError(f"{opdef.name}: {key} must be 0 or 1, got "
                                         f"{attrs[key]!r}")
        return opdef.infer(attrs, types)

    return replace(opdef, infer=infer)


OPS: dict[str, OpDef] = {name: reduce_op(name) for name in _REDUCES}
OPS["ArgMax"] = arg_op("ArgMax")
OPS["ArgMin"] = arg_op("ArgMin")
for _name, _reducer in (("CumSum", te.sum), ("CumProd", _PRODUCT)):
    OPS[_name] = _check_cumsum(OpDef(
        _name, ("x", "axis"), _infer_same_axis(_name, NUMBERS), _cumulative(_name, _reducer),
        Pattern.REDUCTION, attrs={"exclusive": 0, "reverse": 0, "axis": None},
        attr_inputs=("axis",)))
OPS["Softmax"] = OpDef("Softmax", ("input",), _infer_softmax("Softmax"), _softmax(False),
                       Pattern.REDUCTION, attrs={"axis": -1})
OPS["LogSoftmax"] = OpDef("LogSoftmax", ("input",), _infer_softmax("LogSoftmax"),
                          _softmax(True), Pattern.REDUCTION, attrs={"axis": -1})


def _hardmax(attrs: Attrs, tensors: Sequence[Tensor | None]) -> list[Tensor]:
    """1 at the first maximum along `axis`, 0 elsewhere."""
    x = tensors[0]
    assert x is not None
    shape = shape_of(x)
    axis = normalize_axis(int(attrs["axis"]), len(shape), "Hardmax")
    n = shape[axis]

    def along(i: Sequence[Expr], k: Any) -> Expr:
        index: list[Any] = list(i)
        index[axis] = k
        return x[tuple(index)]

    k1 = te.reduce_axis((0, n), name="k1")
    top = te.compute(shape, lambda *i: te.max(along(i, k1), axis=k1), name="hardmax.max",
                     tag="Hardmax")
    k2 = te.reduce_axis((0, n), name="k2")
    first = te.compute(shape, lambda *i: te.min(
        Select(along(i, k2) == top[i], k2.var, const(n)), axis=k2), name="hardmax.first")
    out = te.compute(shape, lambda *i: Select(i[axis] == first[i], const_like(1, x),
                                              const_like(0, x)), name="hardmax")
    return [out]  # type: ignore[list-item]


OPS["Hardmax"] = OpDef("Hardmax", ("input",), _infer_softmax("Hardmax"), _hardmax,
                       Pattern.REDUCTION, attrs={"axis": -1})

