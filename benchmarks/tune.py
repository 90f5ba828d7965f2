"""Tuning benchmark: tune a zoo model for a fixed budget, then time the default build, the
tuned build and onnxruntime side by side in one process, interleaved.

    python benchmarks/tune.py --model resnet18 --budget 480 --threads 1

What the figures are: median seconds per model run over `--runs` interleaved rounds (one
call of each system per round, after warm-up), the same inputs, `--threads` threads for
every system; the tuned build applies the best record per task from this run's database
(and any earlier records for this CPU in it). Per task: the default and best kernel
medians measured by the tuner (the kernel alone, its weights rotated through copies spanning
128 MiB so they come from memory as in the model, unless --warm-cache).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import tempfile
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--budget", type=float, default=480.0, help="tuning seconds")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--search", default="xgb", choices=("xgb", "random", "grid"))
    parser.add_argument("--db", default=None, help="tuning database (default: a temp file)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--workers", type=int, default=1,
                        help="measuring processes (builds in parallel, timings in turn)")
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds per candidate")
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--warm-cache", action="store_true",
                        help="time kernels on the same weights back to back (default: "
                             "weights rotated through copies spanning 128 MiB)")
    args = parser.parse_args(argv)

    import onnx

    import ember
    from ember.autotune import LocalRunner, MeasureSettings, TuningDatabase, summary, tune
    from ember.autotune.measure import COLD_WEIGHT_BYTES
    from ember.autotune.task import extract_tasks
    from ember.runtime import threadpool
    from ember.target_facts import host_cpu_model
    from ember.zoo import MODELS, build_model, random_inputs

    sys.path.insert(0, os.path.dirname(__file__))
    from peers import ort_session

    threadpool.set_num_threads(args.threads)
    target = f"llvm -num-cores={args.threads}"
    # --image-size only for the models that take one (the CNNs)
    takes_size = "image_size" in inspect.signature(MODELS[args.model]).parameters
    model = build_model(args.model, **({"image_size": args.image_size} if takes_size else {}))
    feeds = random_inputs(model)
    work = tempfile.mkdtemp(prefix="ember-tune-")
    path = os.path.join(work, "model.onnx")
    onnx.save(model, path)
    db_path = args.db or os.path.join(work, "tune.sqlite")

    start = time.perf_counter()
    tasks = extract_tasks(path, target)
    print(f"{len(tasks)} tasks ({sum(t.weight for t in tasks)} groups) in "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    start = time.perf_counter()
    settings = MeasureSettings(repeat=5, timeout=args.timeout, 
                               cold_weight_bytes=0 if args.warm_cache else COLD_WEIGHT_BYTES)
    with TuningDatabase(db_path) as db, LocalRunner(settings, workers=args.workers) as runner:
        states = tune(tasks, db, runner, trials=args.trials, budget_seconds=args.budget,
                      search=args.search, progress=True)
    tuning_seconds = time.perf_counter() - start
    table = summary(states)
    print(table)

    default = ember.compile(path, target=target)
    tuned = ember.compile(path, target=target, tuning_db=db_path)
    session = ort_session(path, args.threads)
    names = [o.name for o in session.get_outputs()]
    want = session.run(names, feeds)
    for system in (default, tuned):
        got = system.run(feeds)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3)
    systems = {"ember default": lambda: default.run(feeds),
               "ember tuned": lambda: tuned.run(feeds),
               "onnxruntime": lambda: session.run(names, feeds)}
    times: dict[str, list[float]] = {k: [] for k in systems}
    for _ in range(3):
        for run in systems.values():
            run()
    for _ in range(args.runs):
        for name, run in systems.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    medians = {k: float(np.median(v)) for k, v in times.items()}
    ort = medians["onnxruntime"]
    trials = sum(s.trials for s in states)
    errors = sum(s.errors for s in states)
    applied = sum(1 for s in states if s.best_knobs is not None
                  and s.best_knobs != s.task.default_point())
    print(f"\nCPU: {host_cpu_model()} ({ember.target.Target.host().cpu}), threads "
          f"{args.threads}, model {args.model}"
          f"{f' {args.image_size}x{args.image_size}' if takes_size else ''}, "
          f"search {args.search}")
    print(f"tuning: {tuning_seconds:.0f} s, {trials} trials ({errors} errors), "
          f"{len(tasks)} tasks, {applied} with a record better than the default")
    print("| system | median ms | vs onnxruntime |")
    print("|---|---|---|")
    for name, m in medians.items():
        print(f"| {name} | {m * 1e3:.2f} | {m / ort:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": medians, "trials": trials, "errors": errors,
                       "tuning_seconds": tuning_seconds, "tasks": len(tasks),
                       "table": table, "cpu": host_cpu_model()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
