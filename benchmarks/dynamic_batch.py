"""One model compiled with a symbolic batch against static builds per batch, and onnxruntime.

    python benchmarks/dynamic_batch.py                      # resnet18 at 64x64, batches 1 4 8
    python benchmarks/dynamic_batch.py --model mobilenet_v2 --batches 1 4 --runs 20 --json

The zoo model's batch dim is made symbolic ("N"); `ember.compile(model)` then gives a
SpecializedModel that compiles per batch at its first run and caches (ember.specialize).
For each batch the variants are: the symbolic-batch model (after its first run), a static
build for that batch (`input_shapes`), and onnxruntime on the symbolic model. Outputs are
checked against onnxruntime. The variants take turns (one untimed run, then a block of
timed runs, rotating); latency is the median, ratios are against the static build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402


def symbolic_batch(model: Any) -> Any:
    """The model with dim 0 of every graph input and output named "N"."""
    for vi in [*model.graph.input, *model.graph.output]:
        if vi.name in {t.name for t in model.graph.initializer}:
            continue
        dim = vi.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "N"
    return model


CNNS = ("resnet18", "resnet50", "mobilenet_v2", "squeezenet")


def build(name: str, batch: int, image_size: int) -> Any:
    """A zoo CNN (its batch is only in the input and output types, so it can be made
    symbolic; the zoo's BERT bakes the batch into Reshape shapes)."""
    from ember.zoo import build_model

    if name not in CNNS:
        raise SystemExit(f"unknown model {name!r} (one of {', '.join(CNNS)})")
    return build_model(name, batch=batch, image_size=image_size)


def feeds_for(model: Any, batch: int, seed: int) -> dict[str, np.ndarray]:
    from ember.zoo import random_inputs

    base = random_inputs(model, seed)
    return {n: np.ascontiguousarray(np.repeat(a[:1], batch, axis=0)
                                    if a.shape[0] != batch else a) for n, a in base.items()}


def dispatch_overhead(runs: int = 3000) -> dict[str, float]:
    """Microseconds per call of a symbolic-batch one-Relu model and of the compiled program
    it dispatches to: the difference is what specialization costs per run (shape key, cache
    lookup, input checks), free of the model's own run time."""
    import onnx.helper as oh
    from onnx import TensorProto

    import ember

    graph = oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "relu",
                          [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])])
    model = ember.compile(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    feeds = {"x": np.ones((1, 8), np.float32)}
    model.run(feeds)
    (step,) = model._steps.values()
    inner, arrays = step.program.compiled, [feeds["x"]]
    medians = measure({"symbolic": lambda: model.run(feeds),
                       "compiled": lambda: inner.run(arrays)}, runs, block=100)
    return {k: round(v * 1e6, 2) for k, v in medians.items()}


def measure(variants: dict[str, Callable[[], Any]], runs: int, block: int = 5
            ) -> dict[str, float]:
    """Median seconds per variant, taking turns in blocks of `block` timed runs."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    while min(len(v) for v in times.values()) < runs:
        for name in order:
            variants[name]()
            for _ in range(block):
                start = time.perf_counter()
                variants[name]()
                times[name].append(time.perf_counter() - start)
        order = order[1:] + order[:1]
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    import ember
    from ember.runtime import threadpool

    threadpool.set_num_threads(args.threads)
    model = symbolic_batch(build(args.model, 1, args.image_size))
    dynamic = ember.compile(model)
    session = peers.ort_session(model.SerializeToString(), args.threads)
    rows = []
    for batch in args.batches:
        feeds = feeds_for(model, batch, seed=batch)
        static = ember.compile(build(args.model, batch, args.image_size))
        want = session.run(None, feeds)[0]
        for got in (dynamic.run(feeds)[0], static.run(feeds)[0]):
            scale = float(np.abs(want).max()) or 1.0
            if float(np.abs(got - want).max()) / scale > 1e-3:
                raise SystemExit(f"batch {batch}: ember's output differs from onnxruntime's")
        medians = measure({"symbolic": lambda: dynamic.run(feeds),
                           "static": lambda: static.run(feeds),
                           "onnxruntime": lambda: session.run(None, feeds)}, args.runs)
        rows.append({"batch": batch, **{k: round(v * 1e3, 3) for k, v in medians.items()},
                     "symbolic/static": round(medians["symbolic"] / medians["static"], 3),
                     "onnxruntime/static": round(medians["onnxruntime"] / medians["static"],
                                                 3)})
    info = {"model": f"{args.model} {args.image_size}x{args.image_size}",
            "cpu": peers.host_cpu(), "threads": args.threads,
            "compiles": dynamic.compiles, "rows": rows,
            "dispatch_us": dispatch_overhead()}
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"{args.model}, {info['cpu']}, {args.threads} threads; median ms over "
          f"{args.runs} runs; the symbolic model compiled {dynamic.compiles} times")
    print(f"{'batch':>5} {'symbolic':>10} {'static':>10} {'onnxruntime':>12} "
          f"{'sym/static':>11} {'ort/static':>11}")
    for r in rows:
        print(f"{r['batch']:>5} {r['symbolic']:>10} {r['static']:>10} {r['onnxruntime']:>12} "
              f"{r['symbolic/static']:>11} {r['onnxruntime/static']:>11}")
    d = info["dispatch_us"]
    print(f"dispatch: a one-Relu symbolic model {d['symbolic']} us per run, its compiled "
          f"program {d['compiled']} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
