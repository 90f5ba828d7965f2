"""ember against onnxruntime: same inputs, latency of both, output and intermediate errors.

    report = bench(model_path, compiled, feeds, threads=2, runs=20)
    first = first_divergence(model_path, compiled, feeds)   # None when all agree
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.errors import EmberError
from ember.runtime.executor import CompiledModel
from ember.runtime.library import median_seconds


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise EmberError("comparing with onnxruntime needs it installed: "
                         "pip install 'ember[onnx]'") from None
    return onnxruntime


def ort_session(model: Any, threads: int | None = None) -> Any:
    """An onnxruntime CPU session for a ModelProto or a path."""
    ort = _onnxruntime()
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    options.log_severity_level = 3
    source = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 (its own error types)
        raise EmberError(f"onnxruntime cannot load the model: {error}") from None


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max absolute, max relative to the largest reference magnitude) difference."""
    if got.shape != want.shape:
        return float("inf"), float("inf")
    if got.size == 0:
        return 0.0, 0.0
    a, b = got.astype(np.float64), want.astype(np.float64)
    diff = np.abs(a - b)
    diff[(a == b) | (np.isnan(a) & np.isnan(b))] = 0.0
    absolute = float(np.max(diff))
    scale = float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
    return absolute, absolute / scale if scale > 0 else absolute


@dataclass
class BenchReport:
    ember_seconds: float
    ort_seconds: float
    max_abs: float
    max_rel: float
    threads: int

    @property
    def ratio(self) -> float:
        """ember time / onnxruntime time (below 1: ember is faster)."""
        return self.ember_seconds / self.ort_seconds if self.ort_seconds else float("inf")

    def __str__(self) -> str:
        return (f"threads           {self.threads}\n"
                f"ember             {self.ember_seconds * 1e3:9.3f} ms (median)\n"
                f"onnxruntime       {self.ort_seconds * 1e3:9.3f} ms (median)\n"
                f"time ember/ort    {self.ratio:9.2f} (ember's time over onnxruntime's: "
                f"below 1, ember is faster)\n"
                f"max abs error     {self.max_abs:9.2e}\n"
                f"max rel error     {self.max_rel:9.2e}")


def bench(onnx_model: Any, compiled: CompiledModel, feeds: Mapping[str, np.ndarray],
          threads: int, runs: int = 20, warmup: int = 2) -> BenchReport:
    """Median latency of ember and onnxruntime (same thread count) and their max error."""
    from ember.runtime import threadpool

    session = ort_session(onnx_model, threads)
    names = [o.name for o in session.get_outputs()]
    previous = threadpool.num_threads()
    threadpool.set_num_threads(threads)
    try:
        ours = compiled.run(feeds)
        ember_s = median_seconds(lambda: compiled.run(feeds), runs, warmup)
    finally:
        threadpool.set_num_threads(previous)
    theirs = session.run(names, dict(feeds))
    ort_s = median_seconds(lambda: session.run(names, dict(feeds)), runs, warmup)
    worst_abs, worst_rel = 0.0, 0.0
    for got, want in zip(ours, theirs):
        a, r = errors(got, np.asarray(want))
        worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, r)
    return BenchReport(ember_s, ort_s, worst_abs, worst_rel, threads)


@dataclass
class Divergence:
    value: str
    node: str          # the ONNX node producing the value ("" if unknown)
    op: str
    group: str         # ember's fused group computing it
    max_abs: float
    max_rel: float


@dataclass
class CheckReport:
    compared: int
    first: Divergence | None
    worst: Divergence | None


def onnx_name(name: str, tensors: Mapping[str, Any]) -> str:
    """The ONNX tensor an ember value stands for: its name, or its name without the "_<n>"
    suffix the graph builder adds when a node and its output share a name."""
    if name in tensors:
        return name
    base = re.sub(r"_\d+$", "", name)
    return base if base in tensors else name


def check(onnx_model: Any, compiled: CompiledModel, feeds: Mapping[str, np.ndarray],
          rtol: float = 1e-3, atol: float = 1e-4) -> CheckReport:
    """Compare every group output ember computes with the same tensor from onnxruntime.

    onnxruntime exposes an intermediate when it is a graph output, so a copy of the model
    lists every tensor ember materializes as an extra output.
    """
    import onnx

    producers = {out: node for node in onnx_model.graph.node for out in node.output}
    traced = [(group, onnx_name(name, producers), array)
              for group, name, array in compiled.trace(feeds)]
    wanted = [name for _, name, _ in traced if name in producers]
    probe = onnx.ModelProto()
    probe.CopyFrom(onnx_model)
    existing = {o.name for o in probe.graph.output}
    for name in dict.fromkeys(wanted):
        if name not in existing:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    session = ort_session(probe)
    out_names = [o.name for o in session.get_outputs()]
    reference = dict(zip(out_names, session.run(out_names, dict(feeds))))
    compared, first, worst = 0, None, None
    for group, name, array in traced:
        if name not in reference:
            continue
        want = np.asarray(reference[name])
        compared += 1
        a, r = errors(array, want)
        node = producers.get(name)
        entry = Divergence(name, node.name if node is not None else "",
                           node.op_type if node is not None else "", group, a, r)
        if worst is None or r > worst.max_rel:
            worst = entry
        bad = array.shape != want.shape or not np.allclose(
            array.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
            equal_nan=True)
        if bad and first is None:
            first = entry
    return CheckReport(compared, first, worst)
