"""ONNX Loop and Scan, unrolled while importing.

ember compiles static graphs, so a loop is imported as copies of its body, one per
iteration, chained through the loop-carried values:
  - Scan: the number of iterations is the scanned axis' length (a static shape); each
    iteration reads one slice of every scan input and its scan outputs are stacked.
  - Loop: the trip count `M` and the initial condition must be known at import (constants,
    or values computed at run time that ember.specialize binds, as for a Reshape's shape);
    after each iteration the body's condition must again be a constant (it usually is: the
    condition passed through, or computed from the iteration number). A condition that
    depends on the data is refused with an error naming the node.
Unrolling is bounded: more than MAX_ITERATIONS iterations of one loop, or more than
MAX_UNROLLED_NODES body nodes in all, is an UnsupportedOpError rather than a compile that
never ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ember.errors import ModelError, ShapeError, UnsupportedOpError
from ember.graph.ir import Value, constant
from ember.frontend.onnx_sequence import concat

if TYPE_CHECKING:
    from onnx import GraphProto

    from ember.frontend.onnx import NodeContext, _Importer

MAX_ITERATIONS = 1024          # iterations of one Loop or Scan
MAX_UNROLLED_NODES = 20000     # body nodes copied by all loops of one import


def count_nodes(graph: GraphProto) -> int:
    """Nodes of `graph`, its subgraphs' nodes included."""
    from onnx import AttributeProto

    total = 0
    for node in graph.node:
        total += 1
        for attr in node.attribute:
            subs = [attr.g] if attr.type == AttributeProto.GRAPH else \
                list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []
            total += sum(count_nodes(g) for g in subs)
    return total


def check_iterations(ctx: NodeContext, count: int) -> None:
    if count > MAX_ITERATIONS:
        raise UnsupportedOpError(f"{count} iterations: ember unrolls loops and allows at most "
                                 f"{MAX_ITERATIONS} iterations of one loop")


def _slice(imp: _Importer, ctx: NodeContext, x: Value, axis: int, index: int) -> Value:
    """x[..., index, ...] along `axis` (the axis removed)."""
    (piece,) = imp.builder.add("Slice", [x], {"starts": (index,), "ends": (index + 1,),
                                              "axes": (axis,)}, name=f"{ctx.label}/slice")
    (piece,) = imp.builder.add("Squeeze", [piece], {"axes": (axis,)},
                               name=f"{ctx.label}/slice")
    return piece


def _stack(imp: _Importer, ctx: NodeContext, values: Sequence[Value], axis: int,
           name: str) -> Value:
    """The values stacked along a new `axis`."""
    shapes = {v.type.shape for v in values}
    if len(shapes) > 1:
        raise ShapeError(f"the scan output '{name}' has different shapes in different "
                         f"iterations: {sorted(shapes)}")
    rows = [imp.builder.add("Unsqueeze", [v], {"axes": (axis,)}, name=f"{ctx.label}/stack")[0]
            for v in values]
    return concat(imp.builder, rows, axis, f"{ctx.label}/stack", name)


def _scalar(imp: _Importer, ctx: NodeContext, formal: str, value: Value | None) -> Any:
    if value is None:
        return None
    if not isinstance(value, Value) or value.type.size != 1:
        raise ModelError(f"node '{ctx.label}' ({ctx.op}): '{formal}' must be a tensor with one "
                         "element")
    return np.asarray(imp._need_constant(ctx, formal, value)).reshape(-1)[0]


def convert_loop(imp: _Importer, ctx: NodeContext) -> list[Any]:
    body = ctx.attrs["body"]
    values = list(ctx.values) + [None] * max(0, 2 - len(ctx.values))
    carried = values[2:]
    if len(body.input) != 2 + len(carried):
        raise ModelError(f"node '{ctx.label}' (Loop): the body takes {len(body.input)} inputs; "
                         f"it must take 2 + {len(carried)} (iteration, condition, carried)")
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan < 0:
        raise ModelError(f"node '{ctx.label}' (Loop): the body gives {len(body.output)} "
                         f"outputs; it must give at least 1 + {len(carried)}")
    errors: list[UnsupportedOpError] = []
    known: list[Any] = []
    for formal, value in (("M", values[0]), ("cond", values[1])):
        try:
            known.append(_scalar(imp, ctx, formal, value))
        except UnsupportedOpError as err:      # try both, so both are named for binding
            errors.append(err)
    if errors:
        raise errors[0]
    trip = None if known[0] is None else int(known[0])
    go = True if known[1] is None else bool(known[1])
    if trip is not None:
        check_iterations(ctx, max(trip, 0))
    scans: list[list[Value]] = [[] for _ in range(n_scan)]
    t = 0
    while go and (trip is None or t < trip):
        check_iterations(ctx, t + 1)
        imp.count_unrolled(ctx, 1, body)
        bindings: dict[str, Any] = {
            body.input[0].name: constant(f"{ctx.label}/iter", np.array(t, np.int64)),
            body.input[1].name: constant(f"{ctx.label}/cond", np.array(go))}
        bindings.update((formal.name, value) for formal, value in zip(body.input[2:], carried))
        results = imp.run_graph(ctx, body, f"{ctx.label}/{t}/", bindings)
        if results is None:
            return imp.failed(len(ctx.node.output))
        go = _condition(imp, ctx, results[0], t)
        carried = results[1:1 + len(carried)]
        for collected, value in zip(scans, results[1 + len(carried):]):
            if not isinstance(value, Value):
                raise UnsupportedOpError("a scan output that is not a tensor is not supported")
            collected.append(value)
        t += 1
    outputs: list[Any] = list(carried)
    for index, collected in enumerate(scans):
        name = ctx.node.output[len(carried) + index] if len(carried) + index < len(
            ctx.node.output) else ""
        if collected:
            outputs.append(_stack(imp, ctx, collected, 0, name))
        else:
            outputs.append(_zero_trip_output(imp, ctx, body, len(carried), index))
    return outputs


def _condition(imp: _Importer, ctx: NodeContext, value: Any, t: int) -> bool:
    if not isinstance(value, Value) or value.type.size != 1:
        raise ModelError(f"node '{ctx.label}' (Loop): the body's condition must be a tensor "
                         "with one element")
    known = imp.constant_value(value)
    if known is None:
        raise UnsupportedOpError(f"the loop's condition after iteration {t} is computed from "
                                 "run-time data; ember unrolls loops and needs the number of "
                                 "iterations when compiling (a trip count, or a condition "
                                 "known from constants and shapes)")
    return bool(np.asarray(known).reshape(-1)[0])


def _zero_trip_output(imp: _Importer, ctx: NodeContext, body: GraphProto, n_carried: int,
                      index: int) -> Value:
    """A scan output of a loop that ran no iteration: empty, of the body's element type and
    shape as declared."""
    from ember.frontend.onnx_fold import onnx_dtype

    formal = body.output[1 + n_carried + index]
    tensor = formal.type.tensor_type
    dims = list(tensor.shape.dim) if tensor.HasField("shape") else None
    if not tensor.elem_type or dims is None or \
            any(not (d.HasField("dim_value") and d.dim_value > 0) for d in dims):
        raise UnsupportedOpError(f"the loop runs no iteration and its scan output "
                                 f"'{formal.name}' declares no static shape and type for an "
                                 "empty result")
    dtype = onnx_dtype(tensor.elem_type, f"scan output '{formal.name}'")
    shape = [0] + [int(d.dim_value) for d in dims]
    return imp.constant(ctx, np.zeros(shape, dtype.numpy), n_carried + index)


def convert_scan(imp: _Importer, ctx: NodeContext) -> list[Any]:
    body = ctx.attrs["body"]
    attrs = ctx.attrs
    m = int(attrs["num_scan_inputs"])
    values = list(ctx.values)
    n = len(values) - m
    if n < 0 or len(body.input) != len(values):
        raise ModelError(f"node '{ctx.label}' (Scan): {len(values)} inputs, num_scan_inputs "
                         f"{m} and a body of {len(body.input)} inputs do not agree")
    k = len(body.output) - n
    if k < 0:
        raise ModelError(f"node '{ctx.label}' (Scan): the body gives {len(body.output)} "
                         f"outputs, fewer than its {n} states")

    def ints(key: str, count: int) -> list[int]:
        got = list(attrs.get(key, [0] * count))
        if len(got) != count:
            raise ModelError(f"node '{ctx.label}' (Scan): '{key}' has {len(got)} entries, "
                             f"expected {count}")
        return [int(v) for v in got]

    in_axes, in_dirs = ints("scan_input_axes", m), ints("scan_input_directions", m)
    out_axes, out_dirs = ints("scan_output_axes", k), ints("scan_output_directions", k)
    scans: list[tuple[Value, int]] = []
    for index, (x, axis) in enumerate(zip(values[n:], in_axes)):
        if not isinstance(x, Value):
            raise ModelError(f"node '{ctx.label}' (Scan): scan input {index} must be a tensor")
        rank = x.type.ndim
        if not -rank <= axis < rank:
            raise ShapeError(f"node '{ctx.label}' (Scan): scan_input_axes[{index}] = {axis} is "
                             f"out of range for rank {rank}")
        scans.append((x, axis + rank if axis < 0 else axis))
    lengths = {x.type.shape[axis] for x, axis in scans}
    if len(lengths) != 1:
        raise ShapeError(f"node '{ctx.label}' (Scan): the scan inputs have different lengths "
                         f"{sorted(lengths)} along their scan axes")
    (length,) = lengths
    if length == 0:
        raise UnsupportedOpError("a scan over 0 iterations is not supported")
    check_iterations(ctx, length)
    imp.count_unrolled(ctx, length, body)
    states: list[Any] = list(values[:n])
    collected: list[list[Value]] = [[] for _ in range(k)]
    for t in range(length):
        slices = [_slice(imp, ctx, x, axis, length - 1 - t if d else t)
                  for (x, axis), d in zip(scans, in_dirs)]
        bindings = {formal.name: value for formal, value in zip(body.input, states + slices)}
        results = imp.run_graph(ctx, body, f"{ctx.label}/{t}/", bindings)
        if results is None:
            return imp.failed(len(ctx.node.output))
        states = results[:n]
        for out, value in zip(collected, results[n:]):
            if not isinstance(value, Value):
                raise UnsupportedOpError("a scan output that is not a tensor is not supported")
            out.append(value)
    outputs: list[Any] = list(states)
    for index, (items, axis, d) in enumerate(zip(collected, out_axes, out_dirs)):
        rank = items[0].type.ndim + 1
        if not -rank <= axis < rank:
            raise ShapeError(f"node '{ctx.label}' (Scan): scan_output_axes[{index}] = {axis} "
                             f"is out of range for rank {rank}")
        name = ctx.node.output[n + index] if n + index < len(ctx.node.output) else ""
        outputs.append(_stack(imp, ctx, items[::-1] if d else items,
                              axis + rank if axis < 0 else axis, name))
    return outputs


CONVERTERS = {"Loop": convert_loop, "Scan": convert_scan}
