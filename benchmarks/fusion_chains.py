"""Compile time of fused elementwise chains whose ops read their input twice.

    python -m benchmarks.fusion_chains [--lengths 8,12,16,20] [--repeat 1]

Each op of a chain reads its input twice (`Mul(y, y)`, `Add(Relu(y), Relu(y))`), the shape
Loop/Scan unrolling at import also produces; the diamond is `a = tanh(y); y' = a + a * a`.
Inlining used to copy a producer's expression at every use, so the fused kernel's expression
doubled with each op. Prints, per pattern and length, the median compile time (kernel
cache off, one worker) and the kernel's LLVM IR size.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

import ember
from ember.graph.ir import Graph, GraphBuilder, Value


def chain(kind: str, length: int, shape: tuple[int, ...] = (4, 64)) -> Graph:
    """A graph of `length` elementwise steps of pattern `kind` over one input."""
    b = GraphBuilder(f"{kind}{length}")
    y: Value = b.input("x", shape, "float32")
    for _ in range(length):
        if kind == "mul":          # y = y * y
            (y,) = b.add("Mul", [y, y])
        elif kind == "relu_add":   # y = relu(y) + relu(y), two Relu nodes
            (r1,) = b.add("Relu", [y])
            (r2,) = b.add("Relu", [y])
            (y,) = b.add("Add", [r1, r2])
        elif kind == "diamond":    # a = tanh(y); y = a + a * a
            (a,) = b.add("Tanh", [y])
            (m,) = b.add("Mul", [a, a])
            (y,) = b.add("Add", [a, m])
        else:
            raise ValueError(kind)
    return b.finish([y])


def reference(kind: str, length: int, x: np.ndarray) -> np.ndarray:
    y = x.copy()
    for _ in range(length):
        if kind == "mul":
            y = y * y
        elif kind == "relu_add":
            y = 2 * np.maximum(y, 0)
        else:
            a = np.tanh(y)
            y = a + a * a
    return y


def llvm_ir_bytes(graph: Graph) -> int:
    """Characters of the LLVM IR of all the graph's fused kernels (opt level 3, this CPU)."""
    from ember.codegen.llvm import codegen_llvm
    from ember.lowering.compile import lower_kernels
    from ember.lowering.groups import fused_groups, optimize
    from ember.target import Target

    target = Target("llvm")
    groups = fused_groups(optimize(graph, 3, target))
    return sum(len(str(codegen_llvm(lower_kernels(g, target), target))) for g in groups)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="8,12,16,20")
    ap.add_argument("--kinds", default="mul,relu_add,diamond")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    print(f"# cpu: {platform.processor() or platform.machine()}; shared machine, other jobs "
          "running; compile times are medians of --repeat runs")
    print(f"{'pattern':10s} {'length':>6s} {'compile s':>10s} {'kernels':>8s} {'IR chars':>10s}")
    ember.compile(chain("mul", 1), cache=False, jobs=1)  # warm up LLVM and the thread pool
    for kind in args.kinds.split(","):
        for length in [int(n) for n in args.lengths.split(",")]:
            times = []
            for _ in range(args.repeat):
                graph = chain(kind, length)
                start = time.perf_counter()
                model = ember.compile(graph, cache=False, jobs=1)
                times.append(time.perf_counter() - start)
            x = np.random.default_rng(0).uniform(-1.2, 1.2, (4, 64)).astype(np.float32)
            if kind == "mul":
                x = np.random.default_rng(0).uniform(0.999, 1.001, (4, 64)).astype(np.float32)
            (got,) = model(x)
            want = reference(kind, length, x)
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-6)
            ir = llvm_ir_bytes(chain(kind, length))
            kernels = model.stats.get("kernels", "")
            print(f"{kind:10s} {length:6d} {statistics.median(times):10.2f} {kernels!s:>8s} "
                  f"{ir:10d}", flush=True)


if __name__ == "__main__":
    main()
