"""One model compiled with a symbolic batch against static builds per batch, and onnxruntime.

    python benchmarks/dynamic_batch.py                      # resnet50 and bert-base, 1 4 8
    python benchmarks/dynamic_batch.py --threads 1 2 --control
    python benchmarks/dynamic_batch.py --models resnet18 --image-size 64 --runs 20 --json

The zoo model's batch dim is made symbolic ("N"); `ember.compile(model)` then gives a
SpecializedModel that compiles per batch at its first run and caches (ember.specialize).
For each batch and thread count, worker processes (benchmarks/peers.py) take turns:
"symbolic" (the symbolic-batch model compiled once and run at every batch asked for before
timing, so one compiled model serves them all), "static" (ember.compile of the model built
for that batch), onnxruntime on the symbolic model and, with --control, a second static
build ("static-2", an A/A pair: how far two identical builds drift apart on this machine,
the noise floor of the symbolic/static ratio). Each process is its own, so no build sees
another's caches or allocations. The workers build one at a time, then take turns: one
untimed run and a block of timed runs each, in a rotating order, so machine noise is shared.
Latency is the median (the minimum too, in --json); ratios are against the static build. A
batch whose slowest variant would take more than --max-seconds gets fewer runs. Outputs are
checked against onnxruntime's, and the kernels the symbolic model runs at a batch against
the static build's (a digest of their object code: "same kernels").
"""

from __future__ import annotations

import argparse
import hashlib
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


# ---- the ember workers -------------------------------------------------------------------

_BATCHES: list[int] = []   # every batch the symbolic worker runs before timing


def kernels_digest(compiled: Any) -> str:
    """A digest of a CompiledModel's kernels (their object code, by symbol) and the order
    its plan calls them in: equal digests run the same machine code the same way."""
    digest = hashlib.sha256()
    for name in sorted(compiled.objects):
        digest.update(name.encode() + b"\0" + compiled.objects[name] + b"\0")
    for call in compiled.plan.calls:
        digest.update(call.symbol.encode() + b"\n")
    return digest.hexdigest()[:16]


def program_for(specialized: Any, feeds: dict[str, np.ndarray]) -> Any:
    """The CompiledModel a SpecializedModel runs for these inputs (compiled already)."""
    shapes = specialized._shape_key(specialized.feeds(feeds))
    for (key, bound), step in specialized._steps.items():
        if key == shapes and not bound and not step.names:
            return step.program.compiled
    raise SystemExit("the symbolic model has no program for these inputs' shapes")


def build_static(path: str, feeds: dict[str, np.ndarray], threads: int,
                 info: dict[str, Any], cache: str = "", **_: Any
                 ) -> Callable[[], list[np.ndarray]]:
    """ember.compile of the model built for this batch (as peers' ember-jit), with the
    digest of its kernels."""
    import ember
    from ember.runtime import threadpool

    threadpool.set_num_threads(threads)
    start = time.perf_counter()
    compiled = ember.compile(path, cache=cache or True)
    info["compile_s"] = round(time.perf_counter() - start, 2)
    info["kernels"] = kernels_digest(compiled)
    return lambda: compiled.run(feeds)


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
    compiled.run(feeds)
    info["kernels"] = kernels_digest(program_for(compiled, feeds))
    return lambda: compiled.run(feeds)


class EmberWorker(peers.Worker):
    """peers.Worker running this file's worker, where the "symbolic" and "static" systems
    are defined; its outputs and log are named by `label` (there may be two static ones)."""

    def __init__(self, batches: list[int], label: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        outputs = os.path.join(self._workdir, f"{label}-{self.threads}.npz")
        self._argv[self._argv.index(self.outputs)] = outputs
        self.outputs = outputs
        self.log = os.path.join(self._workdir, f"{label}-{self.threads}.log")
        self._argv[1:3] = [os.path.abspath(__file__), "worker",
                           ",".join(str(b) for b in batches)]


def worker_main(argv: list[str]) -> None:
    _BATCHES[:] = [int(b) for b in argv[0].split(",")]
    peers.BUILDERS.update(symbolic=build_symbolic, static=build_static)
    peers.IMPORTS.update(symbolic=["ember"], static=["ember"])
    peers.worker_main(argv[1:])


# ---- the parent --------------------------------------------------------------------------

def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def rel_error(path: str, reference: str) -> float:
    with np.load(path) as got, np.load(reference) as want:
        a, b = got["arr_0"], want["arr_0"]
    return float(np.abs(a - b).max()) / (float(np.abs(b).max()) or 1.0)


def bench_batch(name: str, batch: int, threads: int, args: argparse.Namespace,
                workdir: str, symbolic_path: str) -> dict[str, Any]:
    """The variants at one batch and thread count, each in its own worker, taking turns."""
    import onnx

    from ember.lowering.cache import default_cache_dir

    feeds_path = os.path.join(workdir, f"{name}-b{batch}.npz")
    static_path = os.path.join(workdir, f"{name}-b{batch}.onnx")
    if not os.path.exists(static_path):
        np.savez(feeds_path, **feeds_for(onnx.load(symbolic_path), batch, seed=batch))
        onnx.save(build(name, batch, args.image_size, args.seq_len), static_path)
    sub = os.path.join(workdir, f"{name}-b{batch}-t{threads}")
    os.makedirs(sub, exist_ok=True)
    cache = str(default_cache_dir())
    workers = {
        "symbolic": EmberWorker(args.batches, "symbolic", "symbolic", symbolic_path,
                                feeds_path, threads, sub, cache=cache),
        "static": EmberWorker(args.batches, "static", "static", static_path, feeds_path,
                              threads, sub, cache=cache),
        "onnxruntime": peers.Worker("onnxruntime", symbolic_path, feeds_path, threads, sub)}
    if args.control:
        workers["static-2"] = EmberWorker(args.batches, "static-2", "static", static_path,
                                          feeds_path, threads, sub, cache=cache)
    info: dict[str, Any] = {}
    try:
        for variant, worker in workers.items():
            log(f"  {name} batch {batch}, {threads} threads: building {variant} ...")
            info[variant] = worker.start(args.build_timeout)
        for variant in workers:
            if variant == "onnxruntime":
                continue
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
    row = {"batch": batch, "threads": threads, "runs": len(times["static"]),
           **{v: round(m * 1e3, 3) for v, m in medians.items()},
           **{f"{v}_min": round(min(t) * 1e3, 3) for v, t in times.items()},
           **{f"{v}/static": round(medians[v] / medians["static"], 3)
              for v in workers if v != "static"},
           "compiles": info["symbolic"]["compiles"],
           "same_kernels": info["symbolic"]["kernels"] == info["static"]["kernels"],
           "compile_s": {"symbolic, all batches": info["symbolic"]["compile_all_batches_s"],
                         "static": info["static"]["compile_s"]}}
    return row


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
    parser.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count() or 1])
    parser.add_argument("--control", action="store_true",
                        help="a second static build (A/A): the ratio's noise floor")
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
            rows = [bench_batch(name, b, t, args, workdir, symbolic_path)
                    for t in args.threads for b in args.batches]
            shape = (f"{args.image_size}x{args.image_size}" if name in CNNS
                     else f"seq {args.seq_len}")
            results.append({"model": f"{name} {shape}", "rows": rows})
            if args.json:   # what is done so far, should a later model fail
                log(json.dumps(results[-1]))
    info = {"cpu": peers.host_cpu(), "threads": args.threads, "runs": args.runs,
            "models": results, "dispatch_us": dispatch_overhead()}
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"{info['cpu']}; median ms (runs per batch in the table)")
    extra = ["static-2"] if args.control else []
    for result in results:
        print(f"{result['model']} (the symbolic model compiled "
              f"{result['rows'][0]['compiles']} times, once per batch)")
        print(f"{'threads':>7} {'batch':>5} {'runs':>5} {'symbolic':>10} {'static':>10} "
              + "".join(f"{v:>10} " for v in extra) + f"{'onnxruntime':>12} "
              f"{'sym/static':>11} " + "".join(f"{v + '/static':>16} " for v in extra)
              + f"{'ort/static':>11} {'same kernels':>13}")
        for r in result["rows"]:
            print(f"{r['threads']:>7} {r['batch']:>5} {r['runs']:>5} {r['symbolic']:>10} "
                  f"{r['static']:>10} " + "".join(f"{r[v]:>10} " for v in extra)
                  + f"{r['onnxruntime']:>12} {r['symbolic/static']:>11} "
                  + "".join(f"{r[v + '/static']:>16} " for v in extra)
                  + f"{r['onnxruntime/static']:>11} {str(r['same_kernels']):>13}")
    d = info["dispatch_us"]
    print(f"dispatch: a one-Relu symbolic model {d['symbolic']} us per run, its compiled "
          f"program {d['compiled']} us")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit(main())
