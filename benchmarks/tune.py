"""Tuning benchmark: tune a zoo model for a fixed budget, then time the default build, the
tuned build and onnxruntime side by side, each in its own process, taking turns.

    python benchmarks/tune.py --model resnet18 --budget 480 --threads 1

What the figures are: the median of `--runs` timed runs per system, each system (ember's
default build, ember tuned, onnxruntime) in its own worker process, taking turns in blocks
of 5 runs, as `benchmarks/models.py` measures (this uses its workers), the same inputs,
`--threads` threads for every system; the tuned build applies the best record per task from
this run's database (and any earlier records for this CPU in it). Every system's outputs are
checked against onnxruntime's. `--budget 0` with an existing `--db` only compares. Per task:
the default and best kernel medians measured by the tuner (the kernel alone, its weights
rotated through copies spanning 128 MiB so they come from memory as in the model, unless
--warm-cache).
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

SYSTEMS = ["ember", "ember-tuned", "onnxruntime"]
NAMES = {"ember": "ember default", "ember-tuned": "ember tuned", "onnxruntime": "onnxruntime"}


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
    parser.add_argument("--no-model-check", action="store_true",
                        help="skip timing the tuned groups in model order (ember.tune_check)")
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
    from ember.tune_check import check_in_model, verdict_lines
    from ember.zoo import MODELS, build_model, random_inputs

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from models import ROOT, measure_threads

    os.environ["PYTHONPATH"] = os.pathsep.join(  # the workers import this checkout's ember
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

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
    if not args.no_model_check:
        start = time.perf_counter()
        verdicts = check_in_model(path, db_path, target)
        print(f"\nchecked in model order in {time.perf_counter() - start:.0f} s")
        for line in verdict_lines(verdicts):
            print(line)

    np.savez(feeds_path := os.path.join(work, "inputs.npz"), **feeds)
    compare = argparse.Namespace(runs=args.runs, warmup=3, block=5, min_runs=5,
                                 max_seconds=120.0, build_timeout=1200.0, gap=0.3,
                                 db=db_path)
    rows = measure_threads(args.model, args.threads, SYSTEMS, (path, feeds_path), work,
                           os.path.join(work, "ember-cache"), True, compare)
    failed = [f"{r['system']}: {r['error']}" for r in rows if r.get("error")]
    if failed:
        print("comparison failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    medians = {NAMES[r["system"]]: r["median_ms"] / 1e3 for r in rows}
    errors_vs_ort = {NAMES[r["system"]]: r.get("max_rel_error") for r in rows}
    ort = medians["onnxruntime"]
    trials = sum(s.trials for s in states)
    errors = sum(s.errors for s in states)
    applied = sum(1 for s in states if s.best_knobs is not None
                  and s.best_knobs != s.task.default_point())
    confirmed = sum(1 for s in states if (s.confirmed_speedup or 1.0) > 1.0)
    tuned_groups = next(r.get("tuned_groups") for r in rows if r["system"] == "ember-tuned")
    print(f"\nCPU: {host_cpu_model()} ({ember.target.Target.host().cpu}), threads "
          f"{args.threads}, model {args.model}"
          f"{f' {args.image_size}x{args.image_size}' if takes_size else ''}, "
          f"search {args.search}")
    print(f"tuning: {tuning_seconds:.0f} s, {trials} trials ({errors} errors), "
          f"{len(tasks)} tasks, {applied} with a record better than the default, "
          f"{confirmed} confirmed faster; the tuned build takes tuned knobs in "
          f"{tuned_groups} groups")
    print("| system | median ms | vs onnxruntime | max rel error vs onnxruntime |")
    print("|---|---|---|---|")
    for name, m in medians.items():
        error = errors_vs_ort[name]
        print(f"| {name} | {m * 1e3:.2f} | {m / ort:.2f}x | "
              f"{'' if error is None else f'{error:.1e}'} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": medians, "trials": trials, "errors": errors,
                       "tuning_seconds": tuning_seconds, "tasks": len(tasks),
                       "table": table, "cpu": host_cpu_model()}, f, indent=1)
    worst = max((e for e in errors_vs_ort.values() if e is not None), default=0.0)
    if worst > 2e-3:
        print(f"ember's outputs differ from onnxruntime's by {worst:.1e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
