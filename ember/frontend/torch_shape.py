"""ATen shape, indexing and reduction operators as ember ops (the SHAPE table)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtype as dt
from ember.errors import UnsupportedOpError
from ember.frontend.torch import Call, Converter, _Importer

Result = Any
_INT64 = dt.parse("int64")


def _axis(dim: int, rank: int) -> int:
    return int(dim) + rank if int(dim) < 0 else int(dim)


def _reduce_dims(dims: Any, rank: int) -> tuple[int, ...]:
    """Normalized reduction dims; None or [] means every dim (torch's convention)."""
    if dims is None or (isinstance(dims, list) and not dims):
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted({_axis(d, rank) for d in dims}))


# views --------------------------------------------------------------------------------------
def convert_view(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    shape = [int(s) for s in (call.args.get("size") or call.args.get("shape") or [])]
    if -1 in shape:                                # resolve it here: 0 is a real size in torch
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        shape[shape.index(-1)] = x.type.size // known if known else 0
    if tuple(shape) == x.type.shape:
        return x
    return imp.add1("Reshape", [x], {"shape": tuple(shape), "allowzero": 1})


def convert_permute(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    perm = tuple(_axis(d, x.type.ndim) for d in call["dims"])
    if perm == tuple(range(x.type.ndim)):
        return x
    return imp.add1("Transpose", [x], {"perm": perm})


def convert_transpose(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    rank = x.type.ndim
    perm = list(range(rank))
    if call.target.startswith("aten.t."):
        perm = perm[::-1]
    else:
        a, b = _axis(call["dim0"], rank), _axis(call["dim1"], rank)
        perm[a], perm[b] = perm[b], perm[a]
    return imp.add1("Transpose", [x], {"perm": tuple(perm)})


def convert_expand(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    size = [int(s) for s in call["size"]]
    lead = len(size) - x.type.ndim
    shape = tuple(x.type.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    if shape == x.type.shape:
        return x
    return imp.add1("Expand", [x], {"shape": shape})


def convert_unsqueeze(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    return imp.add1("Unsqueeze", [x], {"axes": (_axis(call["dim"], x.type.ndim + 1),)})


def convert_squeeze(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    dims = call.args.get("dim", call.args.get("dims"))
    rank = x.type.ndim
    candidates = range(rank) if dims is None else _reduce_dims(dims, max(rank, 1))
    axes = tuple(d for d in candidates if d < rank and x.type.shape[d] == 1)  # others: kept
    if not axes:
        return x
    return imp.add1("Squeeze", [x], {"axes": axes})


def convert_select(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    axis = _axis(call["dim"], x.type.ndim)
    index = int(call["index"])
    index = index + x.type.shape[axis] if index < 0 else index
    return imp.add1("Gather", [x, imp.scalar(index, _INT64)], {"axis": axis})


def convert_slice(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    axis = _axis(call["dim"], x.type.ndim)
    size = x.type.shape[axis]
    start = 0 if call["start"] is None else int(call["start"])
    end = size if call["end"] is None else int(call["end"])
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    step = int(call["step"])
    if (start, end, step) == (0, size, 1):
        return x
    return imp.add1("Slice", [x], {"starts": (start,), "ends": (end,), "axes": (axis,),
                                   "steps": (step,)})


def convert_cat(imp: _Importer, call: Call) -> Result:
    # torch skips 1-D empty tensors in cat whatever the other operands' rank
    tensors = [t for t in call["tensors"] if not (t.type.ndim == 1 and t.type.size == 0)]
    dtype = call.out_dtype
    tensors = [imp.cast(t, dtype) for t in tensors]
    if len(tensors) == 1:
        return tensors[0]
    axis = _axis(call["dim"], tensors[0].type.ndim)
    return imp.add1("Concat", tensors, {"axis": axis})


def convert_split(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    axis = _axis(call["dim"], x.type.ndim)
    size = x.type.shape[axis]
    if "split_sizes" in call.args:
        sizes = [int(s) for s in call["split_sizes"]]
    else:
        step = int(call["split_size"])
        sizes = [min(step, size - start) for start in range(0, size, step)] or [0]
    if len(sizes) == 1:
        return (x,)
    return imp.add("Split", [x], {"axis": axis, "split": tuple(sizes)})


def convert_index_select(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    return imp.add1("Gather", [x, call["index"]], {"axis": _axis(call["dim"], x.type.ndim)})


def convert_index(imp: _Importer, call: Call) -> Result:
    """x[i0, i1, ...] with integer index tensors (None: the whole dim).

    One index tensor is a Gather. Several are broadcast and stacked into GatherND's index
    tuples over the indexed dims moved to the front; like torch, the broadcast dims then
    come first, or, when the indexed dims are adjacent, where the first of them was."""
    x, indices = call["self"], call["indices"]
    given = [i for i, t in enumerate(indices) if t is not None]
    if any(indices[i].type.dtype.is_bool for i in given):
        raise UnsupportedOpError("indexing with a boolean mask is not supported (its result's "
                                 "shape depends on the data)")
    if len(given) == 1:
        return imp.add1("Gather", [x, indices[given[0]]], {"axis": given[0]})
    from ember.ops.elementwise import broadcast_shape

    rank = x.type.ndim
    shape = broadcast_shape(*[indices[i].type.shape for i in given])
    parts = []
    for i in given:
        index = imp.cast(indices[i], _INT64)
        if index.type.shape != shape:
            index = imp.add1("Expand", [index], {"shape": shape})
        parts.append(imp.add1("Unsqueeze", [index], {"axes": (len(shape),)}))
    stacked = imp.add1("Concat", parts, {"axis": len(shape)})
    rest = [d for d in range(rank) if d not in given]
    front = x if given == list(range(len(given))) else \
        imp.add1("Transpose", [x], {"perm": tuple(given + rest)})
    out = imp.add1("GatherND", [front, stacked])        # broadcast dims, then `rest`
    adjacent = given == list(range(given[0], given[-1] + 1))
    lead = given[0]
    if not adjacent or lead == 0:
        return out
    b = len(shape)                                      # move rest[:lead] ahead of them
    perm = tuple(range(b, b + lead)) + tuple(range(b)) + tuple(range(b + lead, out.type.ndim))
    return imp.add1("Transpose", [out], {"perm": perm})


def convert_gather(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    return imp.add1("GatherElements", [x, call["index"]],
                    {"axis": _axis(call["dim"], x.type.ndim)})


def convert_embedding(imp: _Importer, call: Call) -> Result:
    return imp.add1("Gather", [call["weight"], call["indices"]], {"axis": 0})


def _torch_pads(pad: list[int], rank: int) -> tuple[int, ...]:
    """torch's pad list (last dim first, (begin, end) pairs) as ONNX pads (begins, ends)."""
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    return tuple(begins + ends)


def convert_pad(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    pads = _torch_pads(list(call["pad"]), x.type.ndim)
    if any(p < 0 for p in pads):
        raise UnsupportedOpError(f"negative padding {list(call['pad'])} is not supported")
    mode = {"constant_pad_nd": "constant", "reflection_pad1d": "reflect",
            "reflection_pad2d": "reflect", "replication_pad1d": "edge",
            "replication_pad2d": "edge"}[call.target.split(".")[1]]
    attrs: dict[str, Any] = {"pads": pads, "mode": mode}
    if mode == "constant":
        attrs["constant_value"] = float(call["value"]) if x.type.dtype.is_float \
            else int(call["value"])
    return imp.add1("Pad", [x], attrs)


def convert_flip(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    axes = _reduce_dims(call["dims"], x.type.ndim)
    big = np.iinfo(np.int64).max
    return imp.add1("Slice", [x], {"starts": (-1,) * len(axes), "ends": (-big,) * len(axes),
                                   "axes": axes, "steps": (-1,) * len(axes)})


def convert_repeat(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    repeats = tuple(int(r) for r in call["repeats"])
    lead = len(repeats) - x.type.ndim
    if lead:
        x = imp.add1("Reshape", [x], {"shape": (1,) * lead + x.type.shape})
    return imp.add1("Tile", [x], {"repeats": repeats})


def convert_trilu(imp: _Importer, call: Call) -> Result:
    upper = int(call.target.startswith("aten.triu"))
    return imp.add1("Trilu", [call["self"]], {"upper": upper, "k": int(call["diagonal"])})


def convert_cumsum(imp: _Importer, call: Call) -> Result:
    x = imp.cast(call["self"], call.out_dtype)
    return imp.add1("CumSum", [x], {"axis": _axis(call["dim"], x.type.ndim)})


def convert_topk(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    axis = _axis(call["dim"], x.type.ndim)
    if "k" in call.args:
        k, largest = int(call["k"]), int(bool(call["largest"]))
    else:                                                        # sort: every element
        k, largest = x.type.shape[axis], int(bool(call["descending"]))
    return imp.add("TopK", [x], {"K": k, "axis": axis, "largest": largest, "sorted": 1})


# reductions ---------------------------------------------------------------------------------
def reduce(op: str) -> Converter:
    def convert(imp: _Importer, call: Call) -> Result:
        x = call["self"]
        dims = call.args.get("dim", call.args.get("dims"))
        axes = _reduce_dims(dims, x.type.ndim)
        keep = int(bool(call.args.get("keepdim", False)))
        dtype = call.out_dtype
        boolean = dtype.is_bool                          # any/all: max/min over 0/1
        x = imp.cast(x, dt.parse("int32") if boolean else dtype)
        if not axes:                                     # a 0-d tensor: nothing to reduce
            out = x
        elif op == "ReduceMean" and keep and x.type.ndim >= 3 \
                and axes == tuple(range(2, x.type.ndim)):  # an image's global average pool
            out = imp.add1("GlobalAveragePool", [x])
        else:
            out = imp.add1(op, [x], {"axes": axes, "keepdims": keep})
        return imp.cast(out, dtype) if boolean else out
    return convert


def convert_var(imp: _Importer, call: Call) -> Result:
    x = call["self"]
    axes = _reduce_dims(call["dim"], x.type.ndim)
    keep = int(bool(call["keepdim"]))
    count = int(np.prod([x.type.shape[a] for a in axes], dtype=np.int64))
    correction = call.args.get("correction")
    correction = 1 if correction is None else float(correction)
    mean = imp.add1("ReduceMean", [x], {"axes": axes, "keepdims": 1})
    diff = imp.add1("Sub", [x, mean])
    total = imp.add1("ReduceSum", [imp.add1("Mul", [diff, diff])],
                     {"axes": axes, "keepdims": keep})
    denominator = max(count - correction, 0)
    return imp.add1("Div", [total, imp.scalar(denominator, x.type.dtype)])


def arg_reduce(op: str) -> Converter:
    def convert(imp: _Importer, call: Call) -> Result:
        x = call["self"]
        dim = call.args.get("dim")
        keep = int(bool(call["keepdim"]))
        if dim is None:                                  # over the flattened tensor
            x = imp.add1("Reshape", [x], {"shape": (x.type.size,)})
            dim, keep = 0, 0
        return imp.add1(op, [x], {"axis": _axis(dim, x.type.ndim), "keepdims": keep})
    return convert


def value_reduce(op: str, arg: str) -> Converter:
    """max.dim / min.dim: the values and their indices."""
    def convert(imp: _Importer, call: Call) -> Result:
        x = call["self"]
        axis = _axis(call["dim"], x.type.ndim)
        keep = int(bool(call["keepdim"]))
        values = imp.add1(op, [x], {"axes": (axis,), "keepdims": keep})
        return values, imp.add1(arg, [x], {"axis": axis, "keepdims": keep})
    return convert


def convert_max_or_min(imp: _Importer, call: Call) -> Result:
    """max/min: over everything (one tensor), per dim (values, indices), or elementwise."""
    op, arg, pair = (("ReduceMax", "ArgMax", "Max") if call.target.startswith("aten.max.")
                     else ("ReduceMin", "ArgMin", "Min"))
    if "other" in call.args:
        return imp.add1(pair, [call["self"], imp.cast(call["other"], call["self"].type.dtype)])
    if "dim" in call.args:
        return value_reduce(op, arg)(imp, call)
    x = call["self"]
    return imp.add1(op, [x], {"axes": tuple(range(x.type.ndim)), "keepdims": 0})


def convert_amax(imp: _Importer, call: Call) -> Result:
    return reduce("ReduceMax" if call.target.startswith("aten.amax") else "ReduceMin")(imp,
                                                                                         call)


SHAPE: dict[str, Converter] = {
    "view": convert_view, "_unsafe_view": convert_view, "reshape": convert_view,
    "permute": convert_permute, "transpose": convert_transpose, "t": convert_transpose,
    "expand": convert_expand, "unsqueeze": convert_unsqueeze, "squeeze": convert_squeeze,
    "select": convert_select, "slice": convert_slice, "cat": convert_cat,
    "split_with_sizes": convert_split, "split": convert_split,
    "index_select": convert_index_select, "index": convert_index, "gather": convert_gather,
    "embedding": convert_embedding, "constant_pad_nd": convert_pad,
    "reflection_pad1d": convert_pad, "reflection_pad2d": convert_pad,
    "replication_pad1d": convert_pad, "replication_pad2d": convert_pad,
    "flip": convert_flip, "repeat": convert_repeat, "tril": convert_trilu,
    "triu": convert_trilu, "cumsum": convert_cumsum, "topk": convert_topk,
    "sort": convert_topk,
    "mean": reduce("ReduceMean"), "sum": reduce("ReduceSum"), "prod": reduce("ReduceProd"),
    "amax": convert_amax, "amin": convert_amax, "any": reduce("ReduceMax"),
    "all": reduce("ReduceMin"), "var": convert_var, "argmax": arg_reduce("ArgMax"),
    "argmin": arg_reduce("ArgMin"), "max": convert_max_or_min, "min": convert_max_or_min,
}
