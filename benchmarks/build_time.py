"""Build time of one tuning candidate: a blocked 3x3 convolution (64 channels, 56x56) with a
large unrolled register tile, lowered, run through the TIR pipeline and compiled by LLVM.

    python benchmarks/build_time.py               # table: CPU seconds per phase, medians
    python benchmarks/build_time.py --json        # the same as JSON
    python benchmarks/build_time.py --repeat 7
    PYTHONPATH=. python benchmarks/build_time.py   # time this checkout, not the installed one

Times are process CPU seconds (the machine may be shared: CPU time varies less than wall
time there); each phase is timed around its function, the total around the whole build.
The kernel cache is cleared before each build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

KNOBS = {"ow_tile": 14, "oc_tile": 2, "unroll_kw": True, "unroll_ii": True}


def _group() -> tuple[Any, ...]:
    import numpy as np

    from ember.graph.ir import Node, Value, tensor_type
    from ember.ops.registry import get_op

    arrays = [np.zeros((1, 4, 56, 56, 16), "float32"),
              np.zeros((4, 4, 3, 3, 16, 16), "float32")]
    attrs = {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1), "algorithm": "direct"}
    opdef = get_op("ConvNCHWc")
    full = opdef.complete_attrs(attrs, "ConvNCHWc")
    values = [Value(f"x{i}", tensor_type(a.shape, a.dtype)) for i, a in enumerate(arrays)]
    outs = [Value("y0", t) for t in opdef.infer(full, [v.type for v in values])]
    return [Node("ConvNCHWc", "conv", tuple(values), tuple(outs), full)], values, outs


def _timed(phases: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[name] = phases.get(name, 0.0) + time.process_time() - start
    wrapper.__name__ = getattr(fn, "__name__", name)
    return wrapper


def measure(repeat: int) -> dict[str, Any]:
    import ember.codegen.jit as jit
    from ember.codegen import llvm as llvm_codegen
    from ember.lowering.kernel import build_group
    from ember.ops.conv_blocked import ConvKnobs
    from ember.target_facts import host_cpu_model
    from ember.tir import pipeline

    phases: dict[str, float] = {}
    for level in (2, 3):
        pipeline.PASSES[level] = [_timed(phases, getattr(p, "__name__", "pass"), p)
                                  for p in pipeline.PASSES[level]]
    jit.codegen_llvm = _timed(phases, "codegen_llvm", llvm_codegen.codegen_llvm)
    jit.optimize = _timed(phases, "llvm_optimize", jit.optimize)
    nodes, values, outs = _group()
    knobs = ConvKnobs(**KNOBS)
    build_group("warmup", nodes, values, outs, "llvm", ConvKnobs())  # imports, LLVM start-up
    runs: list[dict[str, float]] = []
    for i in range(repeat):
        jit.clear_cache()
        phases.clear()
        start = time.process_time()
        build_group(f"candidate{i}", nodes, values, outs, "llvm", knobs)
        runs.append({"total": time.process_time() - start, **phases})
    names = list(runs[0])
    return {"cpu": host_cpu_model(), "knobs": KNOBS, "repeat": repeat,
            "median_cpu_s": {n: round(statistics.median(r.get(n, 0.0) for r in runs), 3)
                             for n in names}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.repeat)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['cpu']}: conv 3x3 64ch 56x56, knobs {result['knobs']}, "
          f"median of {result['repeat']} builds (CPU s)")
    for name, seconds in result["median_cpu_s"].items():
        print(f"  {name:18s} {seconds:7.3f}")


if __name__ == "__main__":
    main()
