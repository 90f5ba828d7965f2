"""Zoo models: ember against onnxruntime in one process — compile time, latency, error, memory.

    python benchmarks/models.py                       # all models, 2 and 1 threads
    python benchmarks/models.py --models resnet18 bert-tiny --threads 2 --json

Latency is the median of --runs alternating runs (ember, onnxruntime, ember, ...) after
warm-up, both at the same thread count. Cold compile has the kernel cache off; warm
compile is a second compile with the cache on.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet", "bert-base", "lstm_lm"]


def measure(name: str, threads: list[int], runs: int) -> list[dict[str, object]]:
    import ember
    from ember import zoo
    from ember.runtime import threadpool
    from ember.runtime.compare import errors, ort_session

    model = zoo.build_model(name)
    feeds = zoo.random_inputs(model)
    with tempfile.TemporaryDirectory() as cache_dir:
        start = time.perf_counter()
        ember.compile(model, cache=cache_dir)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        compiled = ember.compile(model, cache=cache_dir)
        warm = time.perf_counter() - start
    plan = compiled.memory_plan
    rows = []
    for count in threads:
        session = ort_session(model, count)
        names = [o.name for o in session.get_outputs()]
        threadpool.set_num_threads(count)
        ours = compiled.run(feeds)
        theirs = session.run(names, feeds)
        worst = max(errors(a, np.asarray(b))[1] for a, b in zip(ours, theirs))
        for _ in range(3):
            compiled.run(feeds)
            session.run(names, feeds)
        ember_t, ort_t = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            compiled.run(feeds)
            t1 = time.perf_counter()
            session.run(names, feeds)
            t2 = time.perf_counter()
            ember_t.append(t1 - t0)
            ort_t.append(t2 - t1)
        e_ms, o_ms = float(np.median(ember_t)) * 1e3, float(np.median(ort_t)) * 1e3
        rows.append({"model": name, "threads": count, "ember_ms": round(e_ms, 3),
                     "onnxruntime_ms": round(o_ms, 3), "ratio": round(e_ms / o_ms, 3),
                     "max_rel_error": float(f"{worst:.3g}"), "compile_cold_s": round(cold, 2),
                     "compile_warm_s": round(warm, 2),
                     "workspace_mb": round(plan.workspace_bytes / 2**20, 2),
                     "peak_live_mb": round(plan.peak_live_bytes / 2**20, 2),
                     "naive_mb": round(plan.naive_bytes / 2**20, 2)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS)
    parser.add_argument("--threads", type=int, nargs="*", default=[2, 1])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in args.models:
        rows += measure(name, args.threads, args.runs)
        if not args.json:
            for r in rows[-len(args.threads):]:
                print(f"{r['model']:>13} threads={r['threads']} ember {r['ember_ms']:8.2f} ms  "
                      f"onnxruntime {r['onnxruntime_ms']:8.2f} ms  ratio {r['ratio']:5.2f}  "
                      f"err {r['max_rel_error']:.1e}  compile {r['compile_cold_s']:.1f}s cold "
                      f"/ {r['compile_warm_s']:.1f}s warm  memory {r['workspace_mb']} MB "
                      f"(peak live {r['peak_live_mb']}, naive {r['naive_mb']})", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
