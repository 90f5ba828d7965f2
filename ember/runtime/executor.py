"""CompiledModel: runs a whole model through one native call with a preallocated workspace.

    model = ember.compile("resnet18.onnx")
    (logits,) = model.run({"input": x})       # or model(x), or model.run([x])
    print(model.profile({"input": x}))        # time per fused group, sorted

The workspace (sized by the memory plan) and the constant blob are allocated once; a run
checks the inputs, allocates the output arrays and makes ONE ctypes call to `model_main`.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.dtype import numpy_dtype
from ember.errors import EmberError
from ember.runtime.library import (ALIGN, MAIN_SYMBOL, aligned_bytes, check_inputs, median_seconds,
                                   output_array, slot_value)
from ember.runtime.plan import ExecPlan, Slot, TensorSpec

__all__ = ["ALIGN", "CompiledModel", "ProfileTable", "aligned_bytes"]


@dataclass(frozen=True)
class ProfileRow:
    group: str
    anchor: str
    pattern: str
    seconds: float                          # in model order (data as the model leaves it)
    percent: float
    cached_seconds: float | None = None     # re-run back to back (its data in cache)


class ProfileTable:
    """Per fused-group median time, slowest first; `str(table)` prints it."""

    def __init__(self, rows: list[ProfileRow], total_seconds: float, model_seconds: float
                 ) -> None:
        self.rows = rows
        self.total_seconds = total_seconds      # sum of the kernels timed one by one
        self.model_seconds = model_seconds      # one model_main call

    @property
    def cached_seconds(self) -> float | None:
        """Sum of the groups re-run back to back (None: not measured)."""
        if not self.rows or any(r.cached_seconds is None for r in self.rows):
            return None
        return sum(r.cached_seconds for r in self.rows)  # type: ignore[misc]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __str__(self) -> str:
        width = max([len("group")] + [len(r.group) for r in self.rows])
        cached = self.cached_seconds is not None
        extra = f" {'cached (us)':>12}" if cached else ""
        rule = "-" * (width + 41 + len(extra))
        lines = [f"{'group':<{width}}  {'anchor':<20} {'time (us)':>11} {'%':>6}{extra}",
                 rule]
        for r in self.rows:
            more = f" {r.cached_seconds * 1e6:12.1f}" if r.cached_seconds is not None else ""
            lines.append(f"{r.group:<{width}}  {r.anchor[:20]:<20} {r.seconds * 1e6:11.1f} "
                         f"{r.percent:6.1f}{more}")
        lines.append(rule)
        total = f" {self.cached_seconds * 1e6:12.1f}" if cached else ""  # type: ignore
        lines.append(f"{'sum of groups':<{width}}  {'':<20} {self.total_seconds * 1e6:11.1f} "
                     f"{100.0:6.1f}{total}")
        lines.append(f"{'whole model (one call)':<{width}}  {'':<20} "
                     f"{self.model_seconds * 1e6:11.1f}")
        return "\n".join(lines)


class CompiledModel:
    """A compiled model: `run(inputs) -> list of outputs`; `graph` is the fused graph."""

    def __init__(self, plan: ExecPlan, objects: Mapping[str, bytes], constants: np.ndarray,
                 target: str = "llvm", graph: Any = None, stats: Mapping[str, Any] | None = None,
                 linked: Any = None) -> None:
        if constants.nbytes < plan.constant_bytes:
            raise EmberError(f"constant blob has {constants.nbytes} bytes, the plan needs "
                             f"{plan.constant_bytes}")
        self.plan = plan
        self.objects = dict(objects)
        self.target = target
        self.graph = graph
        self.stats = dict(stats or {})
        self.memory_plan: Any = None  # the graph memory plan, when compiled in this process
        self._workspace = aligned_bytes(plan.workspace_bytes)
        flat = constants.view(np.uint8).reshape(-1)
        if flat.ctypes.data % ALIGN == 0:  # use it as is (a view; no 100 MB copies)
            self._constants = flat[:max(1, plan.constant_bytes)]
        else:
            self._constants = aligned_bytes(plan.constant_bytes, zero=False)
            self._constants[:plan.constant_bytes] = flat[:plan.constant_bytes]
        self._constants.setflags(write=False)
        self._lock = threading.Lock()
        # `linked`: the plan and objects linked into this process (anything with
        # `address(symbol) -> int`; ember.lowering.link makes one)
        if linked is None:
            raise EmberError("CompiledModel needs the linked code (ember.lowering.link.link)")
        self._linked = linked
        count = len(plan.inputs) + len(plan.outputs) + 2
        self._main = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * count)(
            self._linked.address(MAIN_SYMBOL))
        self._tail = (self._workspace.ctypes.data, self._constants.ctypes.data)
        self._direct = [src == Slot("output", i) for i, src in enumerate(plan.output_sources)]

    # names -------------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs' specs (name, shape, dtype), in graph-input order."""
        return self.plan.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        """The outputs' specs (name, shape, dtype), in graph-output order."""
        return self.plan.outputs

    @property
    def input_names(self) -> list[str]:
        """The inputs' names, in graph-input order."""
        return [s.name for s in self.plan.inputs]

    @property
    def output_names(self) -> list[str]:
        """The outputs' names, in graph-output order."""
        return [s.name for s in self.plan.outputs]

    @property
    def workspace_bytes(self) -> int:
        """Bytes of the one scratch buffer every run uses."""
        return self.plan.workspace_bytes

    def constant_bytes(self) -> np.ndarray:
        """The constant blob the kernels read (read-only)."""
        return self._constants[:self.plan.constant_bytes]

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self.plan.inputs))
        outs = ", ".join(map(str, self.plan.outputs))
        return (f"CompiledModel({self.plan.name}: ({ins}) -> ({outs}), "
                f"{len(self.plan.calls)} kernels, target {self.target})")

    # running -----------------------------------------------------------------------------
    def check_inputs(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """The input arrays in graph-input order, checked and C-contiguous."""
        return check_inputs(self.plan.name, self.plan.inputs, inputs)

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Outputs in graph-output order for inputs given by name (dict) or position (list)."""
        arrays = self.check_inputs(inputs)
        outputs = [output_array(s.shape, s.dtype) for s in self.plan.outputs]
        pointers = [a.ctypes.data for a in arrays] + [o.ctypes.data for o in outputs]
        with self._lock:
            status = self._main(*pointers, *self._tail)
            if status != 0:
                raise EmberError(f"model '{self.plan.name}' failed with status {status}")
            for i, direct in enumerate(self._direct):
                if not direct:
                    outputs[i][...] = self._read(self.plan.output_sources[i], arrays, outputs,
                                                 self.plan.outputs[i])
        return outputs

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        """`model(x, y)`: `run` with the inputs by position."""
        return self.run(list(arrays))

    def _read(self, slot: Slot, inputs: list[np.ndarray], outputs: list[np.ndarray],
              spec: Any) -> np.ndarray:
        return slot_value(slot.kind, slot.index, spec, inputs, outputs, self._workspace,
                          self._constants)

    # profiling ---------------------------------------------------------------------------
    def kernel_calls(self, inputs: Mapping[str, Any] | Sequence[Any]
                     ) -> tuple[list[tuple[Any, tuple[int, ...]]], list[Any]]:
        """Each group's kernel as a ctypes function with its pre-bound pointer arguments."""
        arrays = self.check_inputs(inputs)
        outputs = [output_array(s.shape, s.dtype) for s in self.plan.outputs]
        bases = {"workspace": self._workspace.ctypes.data,
                 "constants": self._constants.ctypes.data}

        def address(slot: Slot) -> int:
            if slot.kind == "input":
                return int(arrays[slot.index].ctypes.data)
            if slot.kind == "output":
                return int(outputs[slot.index].ctypes.data)
            key = "workspace" if slot.kind == "workspace" else "constants"
            return bases[key] + slot.index

        functions: dict[str, Any] = {}
        calls = []
        for call in self.plan.calls:
            fn = functions.get(call.symbol)
            if fn is None:
                fn = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * len(call.args))(
                    self._linked.address(call.symbol))
                functions[call.symbol] = fn
            calls.append((fn, tuple(address(a) for a in call.args)))
        return calls, [arrays, outputs]

    def trace(self, inputs: Mapping[str, Any] | Sequence[Any]
              ) -> list[tuple[str, str, np.ndarray]]:
        """Run group by group; (group, value name, copy of the value) for every group output."""
        calls, keep = self.kernel_calls(inputs)
        record = []
        with self._lock:
            for call, (fn, args) in zip(self.plan.calls, calls):
                status = fn(*args)
                if status != 0:
                    raise EmberError(f"group '{call.group}' failed with status {status}")
                for k in range(call.num_inputs, len(call.args)):
                    name, dtype = call.arg_names[k], numpy_dtype(call.arg_dtypes[k])
                    shape = call.arg_shapes[k]
                    count = int(np.prod(shape, dtype=np.int64))
                    view = np.ctypeslib.as_array(
                        (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(args[k]))
                    array = view.view(dtype).reshape(shape).copy()
                    record.append((call.group, name, array))
        del keep
        return record

    def profile(self, inputs: Mapping[str, Any] | Sequence[Any], repeat: int = 10,
                cached: bool = False) -> ProfileTable:
        """Median time of every fused group over `repeat` runs of the model's kernels in
        order, slowest first. With `cached`, each group is also re-run `repeat` times back
        to back (its weights and inputs then in cache): the difference is what the group
        spends waiting for data the model's other kernels pushed out of the caches."""
        calls, keep = self.kernel_calls(inputs)
        samples = np.zeros((max(1, repeat), len(calls)))
        again = np.zeros_like(samples)
        with self._lock:
            for fn, args in calls:  # warm-up
                fn(*args)
            for r in range(samples.shape[0]):
                for k, (fn, args) in enumerate(calls):
                    start = time.perf_counter()
                    fn(*args)
                    samples[r, k] = time.perf_counter() - start
            for k, (fn, args) in enumerate(calls if cached else ()):
                fn(*args)
                for r in range(again.shape[0]):
                    start = time.perf_counter()
                    fn(*args)
                    again[r, k] = time.perf_counter() - start
        del keep
        medians = np.median(samples, axis=0)
        warm = np.median(again, axis=0)
        total = float(medians.sum())
        rows = [ProfileRow(c.group, c.anchor, c.pattern, float(t),
                           100.0 * float(t) / total if total > 0 else 0.0,
                           float(w) if cached else None)
                for c, t, w in zip(self.plan.calls, medians, warm)]
        rows.sort(key=lambda r: r.seconds, reverse=True)
        return ProfileTable(rows, total, self.time(inputs, repeat=max(3, repeat)))

    def time(self, inputs: Mapping[str, Any] | Sequence[Any], repeat: int = 10,
             warmup: int = 1) -> float:
        """Median seconds of one run (input checks and output allocation included)."""
        return median_seconds(lambda: self.run(inputs), repeat, warmup)
