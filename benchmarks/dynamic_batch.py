"""One model compiled with a symbolic batch against static builds per batch, and onnxruntime.

    python benchmarks/dynamic_batch.py                      # resnet50 and bert-base, 1 4 8
    python benchmarks/dynamic_batch.py --models resnet18 --image-size 64 --runs 20 --json

The zoo model's batch dim is made symbolic ("N"); `ember.compile(model)` then gives a
SpecializedModel that compiles per batch at its first run and caches (ember.specialize).
For each batch three worker processes (benchmarks/peers.py) take turns: "symbolic" (the
symbolic-batch model compiled once and run at every batch asked for before timing, so one
compiled model serves them all), "static" (ember.compile of the model built for that batch)
and onnxruntime on the symbolic model. Each process is its own, so neither ember build sees
the other's caches or allocations. The workers build one at a time, then take turns: one
untimed run and a block of timed runs each, in a rotating order, so machine noise is shared.
Latency is the median (the minimum too, in --json); ratios are against the static build. A
batch whose slowest variant would take more than --max-seconds gets fewer runs. Outputs are
checked against onnxruntime's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402

CNNS = ("resnet18", "resnet50", "mobilenet_v2", "squeezenet")
BERTS = ("bert-base", "bert-tiny")


def symbolic_batch(model: Any) -> Any:
    """The model with dim 0 of every graph input and output named "N"."""
    for vi in [*model.graph.input, *model.graph.output]:
        if vi.name in {t.name for t in model.graph.initializer}:
            continue
        dim = vi.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "N"
    return model


def build(name: str, batch: int, image_size: int = 224, seq_len: int = 128) -> Any:
    """A zoo model whose batch is only in its input and output types (its Reshapes copy
    dims with 0), so it can be made symbolic."""
    from ember.zoo import build_model

    if name in CNNS:
        return build_model(name, batch=batch, image_size=image_size)
    if name in BERTS:
        return build_model(name, batch=batch, seq_len=seq_len)
    raise SystemExit(f"unknown model {name!r} (one of {', '.join(CNNS + BERTS)})")


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


# ---- the symbolic variant's worker ------------------------------------------------------

_BATCHES: list[int] = []   # every batch the symbolic worker runs before timing


def build_symbolic(path: str, feeds: dict[str, np.ndarray], threads: int,
                   info: dict[str, Any], **_: Any) -> Callable[[], list[np.ndarray]]:
    """ember.compile of the symbolic-batch model, run once at each batch of _BATCHES (each
    first run compiles that batch), then timed at the batch of `feeds`."""
    import ember
    from ember.runtime import threadpool

    threadpool.set_num_threads(threads)
    start = time.perf_counter()
    compiled = ember.compile(path)
    for batch in _BATCHES:
        compiled.run({n: np.ascontiguousarray(np.repeat(a[:1], batch, axis=0))
                      for n, a in feeds.items()})
    info["compile_all_batches_s"] = round(time.perf_counter() - start, 2)
    info["compiles"] = compiled.compiles
    return lambda: compiled.run(feeds)


class SymbolicWorker(peers.Worker):
    """peers.Worker running this file's worker (the "symbolic" system is defined here)."""

    def __init__(self, batches: list[int], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._argv[1:3] = [os.path.abspath(__file__), "worker",
                           ",".join(str(b) for b in batches)]


def worker_main(argv: list[str]) -> None:
    _BATCHES[:] = [int(b) for b in argv[0].split(",")]
    peers.BUILDERS["symbolic"] = build_symbolic
    peers.IMPORTS["symbolic"] = ["ember"]
    peers.worker_main(argv[1:])


# ---- the parent --------------------------------------------------------------------------

def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rel_error(path: str, reference: str) -> float:
    with np.load(path) as got, np.load(reference) as want:
        a, b = got["arr_0"], want["arr_0"]
    return float(np.abs(a - b).max()) / (float(np.abs(b).max()) or 1.0)


def bench_batch(name: str, batch: int, args: argparse.Namespace, workdir: str,
                symbolic_path: str) -> dict[str, Any]:
    """The three variants at one batch, each in its own worker, taking turns."""
    import onnx

    from ember.lowering.cache import default_cache_dir

    symbolic = onnx.load(symbolic_path)
    feeds_path = os.path.join(workdir, f"{name}-b{batch}.npz")
    np.savez(feeds_path, **feeds_for(symbolic, batch, seed=batch))
    static_path = os.path.join(workdir, f"{name}-b{batch}.onnx")
    onnx.save(build(name, batch, args.image_size, args.seq_len), static_path)
    sub = os.path.join(workdir, f"b{batch}")
    os.makedirs(sub, exist_ok=True)
    workers = {
        "symbolic": SymbolicWorker(args.batches, "symbolic", symbolic_path, feeds_path,
                                   args.threads, sub),
        "static": peers.Worker("ember-jit", static_path, feeds_path, args.threads, sub,
                               cache=str(default_cache_dir())),
        "onnxruntime": peers.Worker("onnxruntime", symbolic_path, feeds_path, args.threads,
                                    sub)}
    info: dict[str, Any] = {}
    try:
        for variant, worker in workers.items():
            log(f"  {name} batch {batch}: building {variant} ...")
            info[variant] = worker.start(args.build_timeout)
        for variant in ("symbolic", "static"):
            error = rel_error(workers[variant].outputs, workers["onnxruntime"].outputs)
            if error > 1e-3:
                raise SystemExit(f"{name} batch {batch}: {variant}'s output differs from "
                                 f"onnxruntime's (max error {error:.2e} of the largest)")
        # the slowest variant's first run decides how many runs fit in --max-seconds
        first = max(i["first_run_s"] for i in info.values())
        runs = max(args.min_runs, min(args.runs, int(args.max_seconds / max(first, 1e-9))))
        times: dict[str, list[float]] = {v: [] for v in workers}
        order = list(workers)
        rounds = -(-runs // args.block)
        for _ in range(rounds):
            for variant in order:
                times[variant] += workers[variant].run(args.block, 1, args.build_timeout)
            order = order[1:] + order[:1]
        for worker in workers.values():
            worker.finish()
    finally:
        for worker in workers.values():
            worker.kill()
    medians = {v: statistics.median(t) for v, t in times.items()}
    return {"batch": batch, "runs": len(times["static"]),
            **{v: round(m * 1e3, 3) for v, m in medians.items()},
            **{f"{v}_min": round(min(t) * 1e3, 3) for v, t in times.items()},
            "symbolic/static": round(medians["symbolic"] / medians["static"], 3),
            "onnxruntime/static": round(medians["onnxruntime"] / medians["static"], 3),
            "compiles": info["symbolic"]["compiles"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "bert-base"])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--min-runs", type=int, default=10)
    parser.add_argument("--max-seconds", type=float, default=60,
                        help="fewer runs (not under --min-runs) for a batch whose slowest "
                             "variant would take longer than this")
    parser.add_argument("--block", type=int, default=2, help="timed runs per turn")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--build-timeout", type=float, default=1800)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    import onnx

    results = []
    with tempfile.TemporaryDirectory(prefix="ember-dynamic-") as workdir:
        for name in args.models:
            symbolic_path = os.path.join(workdir, f"{name}-symbolic.onnx")
            onnx.save(symbolic_batch(build(name, 1, args.image_size, args.seq_len)),
                      symbolic_path)
            rows = [bench_batch(name, b, args, workdir, symbolic_path) for b in args.batches]
            shape = (f"{args.image_size}x{args.image_size}" if name in CNNS
                     else f"seq {args.seq_len}")
            results.append({"model": f"{name} {shape}", "rows": rows})
    info = {"cpu": peers.host_cpu(), "threads": args.threads, "runs": args.runs,
            "models": results, "dispatch_us": dispatch_overhead()}
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"{info['cpu']}, {args.threads} threads; median ms (runs per batch in the table)")
    for result in results:
        print(f"{result['model']} (the symbolic model compiled "
              f"{result['rows'][0]['compiles']} times, once per batch)")
        print(f"{'batch':>5} {'runs':>5} {'symbolic':>10} {'static':>10} {'onnxruntime':>12} "
              f"{'sym/static':>11} {'ort/static':>11}")
        for r in result["rows"]:
            print(f"{r['batch']:>5} {r['runs']:>5} {r['symbolic']:>10} {r['static']:>10} "
                  f"{r['onnxruntime']:>12} {r['symbolic/static']:>11} "
                  f"{r['onnxruntime/static']:>11}")
    d = info["dispatch_us"]
    print(f"dispatch: a one-Relu symbolic model {d['symbolic']} us per run, its compiled "
          f"program {d['compiled']} us")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit(main())
