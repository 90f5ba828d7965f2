"""Zoo models: ember against onnxruntime, PyTorch (eager, torch.compile), TVM — latency, memory.

    python benchmarks/models.py                       # all models and systems, 2 and 1 threads
    python benchmarks/models.py --models resnet18 bert-tiny --threads 2 --json
    python benchmarks/models.py --systems ember onnxruntime --runs 50

Each system (ember; ember-tuned: ember with the best record per task of the tuning database
--db, as `benchmarks/tune.py` compares it, not in the default set; onnxruntime with every
graph optimization; torch: the zoo's ONNX model through onnx2torch, eager under
inference_mode; torch-compile: that module through torch.compile, inductor's default mode;
tvm: the relax ONNX frontend, relax.build's default pipeline for this CPU) runs in its own
worker process (benchmarks/peers.py) at batch 1 with the same thread count, so each peak RSS
is that system's own. The workers build one at a time, then take turns: each turn is one
untimed run (for runs under 0.5 s) and a block of timed runs, in a rotating order, so
machine noise is shared. Latency is the median of --runs timed runs after warm-up; a system
slower than --max-seconds / --runs gets fewer runs (at least --min-runs; the count is
reported). Build times (ember's cold and warm compile, TVM's relax.build, torch.compile's
first call: cold at the first thread count, from inductor's cache after) are reported apart
from latency. Peak RSS is the worker's VmHWM during inference, reset after the build;
peak_rss_total_mb includes the build.
Peers that are not installed (pip install 'ember[bench]') or cannot build a model show as
"n/a (reason)". --json prints a list of objects with keys model, threads, system,
median_ms, peak_rss_mb (and more).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import SYSTEMS, PeerError, Worker, missing  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "squeezenet", "bert-base", "lstm_lm"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def prepare(name: str, workdir: str) -> tuple[str, str]:
    """The zoo model saved as ONNX and its seeded random inputs saved as .npz."""
    from ember import zoo

    model = zoo.build_model(name)
    feeds = zoo.random_inputs(model)
    model_path = zoo.save_model(name, os.path.join(workdir, f"{name}.onnx"))
    feeds_path = os.path.join(workdir, f"{name}-inputs.npz")
    np.savez(feeds_path, **feeds)
    return model_path, feeds_path


def max_rel_error(path: str, reference: str) -> float | None:
    """Worst error of the outputs in `path` relative to those in `reference`."""
    from ember.compare import errors

    with np.load(path) as got, np.load(reference) as want:
        if len(got.files) != len(want.files):
            return float("inf")
        worst = max((errors(got[k], want[k])[1] for k in want.files), default=0.0)
    return float(f"{worst:.3g}")


def split_runs(total: int, rounds: int) -> list[int]:
    """`total` runs spread over `rounds` turns as evenly as possible."""
    return [total // rounds + (1 if r < total % rounds else 0) for r in range(rounds)]


def measure_threads(name: str, threads: int, systems: list[str], paths: tuple[str, str],
                    workdir: str, cache: str, cold: bool, args: argparse.Namespace
                    ) -> list[dict[str, Any]]:
    """One model at one thread count: a row per system."""
    rows = {s: {"model": name, "threads": threads, "system": s, "median_ms": None,
                "peak_rss_mb": None} for s in systems}
    workers: dict[str, Worker] = {}
    runs: dict[str, int] = {}
    estimates: dict[str, float] = {}
    for system in systems:
        reason = missing(system)
        if reason:
            rows[system]["error"] = reason
            continue
        worker = Worker(system, *paths, threads, workdir, cache,
                        cold and system.startswith("ember"), args.db or "")
        log(f"  {name} threads={threads}: building {system} ...")
        try:
            info = worker.start(args.build_timeout)
            slow = info["first_run_s"] > 5  # e.g. TVM's untuned default build
            warm = worker.run(1 if slow else args.warmup, 0, args.build_timeout)
        except PeerError as error:
            rows[system]["error"] = str(error)
            rows[system]["error_detail"] = worker.full_error or str(error)
            continue
        rows[system].update({k: v for k, v in info.items() if k != "ready"})
        rows[system]["first_run_s"] = round(info["first_run_s"], 4)
        estimate = estimates[system] = min(warm) if warm else info["first_run_s"]
        affordable = int(args.max_seconds / max(estimate, 1e-9))
        runs[system] = max(args.min_runs, min(args.runs, affordable))
        workers[system] = worker
    times: dict[str, list[float]] = {s: [] for s in workers}
    rounds = max(1, math.ceil(args.runs / args.block))
    blocks = {s: split_runs(runs[s], rounds) for s in workers}
    for r in range(rounds):
        order = list(workers)
        order = order[r % len(order):] + order[:r % len(order)] if order else order
        for system in order:
            count = blocks[system][r]
            if not count:
                continue
            estimate = min(times[system] or [estimates[system]])
            warmup = 1 if estimate < 0.5 else 0
            try:
                times[system] += workers[system].run(
                    count, warmup, 60 + 10 * estimate * (count + warmup))
            except PeerError as error:
                rows[system]["error"] = f"failed while timing: {error}"
                workers.pop(system).kill()
            time.sleep(args.gap)
    for system, worker in workers.items():
        try:
            rows[system].update(worker.finish())
        except PeerError as error:
            rows[system]["error"] = f"failed at the end: {error}"
            worker.kill()
            continue
        samples = times[system]
        rows[system].update(median_ms=round(float(np.median(samples)) * 1e3, 3),
                            runs=len(samples),
                            min_ms=round(min(samples) * 1e3, 3))
    reference = os.path.join(workdir, f"onnxruntime-{threads}.npz")
    ort_ok = "onnxruntime" in workers
    for system in workers:
        if system != "onnxruntime" and ort_ok and rows[system]["median_ms"] is not None:
            rows[system]["max_rel_error"] = max_rel_error(
                os.path.join(workdir, f"{system}-{threads}.npz"), reference)
    ember_ms = rows.get("ember", {}).get("median_ms")
    for system, row in rows.items():
        if system != "ember" and ember_ms and row["median_ms"]:
            row["ember_ratio"] = round(ember_ms / row["median_ms"], 3)
    ort_ms = rows.get("onnxruntime", {}).get("median_ms")
    for system in ("ember", "ember-tuned"):
        own_ms = rows.get(system, {}).get("median_ms")
        if own_ms and ort_ms:
            rows[system].update(ember_ms=own_ms, onnxruntime_ms=ort_ms,
                                ratio=round(own_ms / ort_ms, 3))
    return list(rows.values())


def measure(name: str, threads: list[int], systems: list[str], args: argparse.Namespace
            ) -> list[dict[str, Any]]:
    """One model at each thread count; ember compiles cold once, then from its cache."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as workdir:
        paths = prepare(name, workdir)
        cache = os.path.join(workdir, "ember-cache")
        cold: dict[str, dict[str, Any]] = {}  # per ember system (library, jit)
        for i, count in enumerate(threads):
            batch = measure_threads(name, count, systems, paths, workdir, cache, i == 0, args)
            for row in batch:
                if row["system"].startswith("ember"):
                    first = cold.setdefault(row["system"], {})
                    if "compile_cold_s" in row:
                        first["compile_cold_s"] = row["compile_cold_s"]
                    row.update(first)
            if not args.json:
                print_progress(batch)
            rows += batch
    return rows


def print_progress(batch: list[dict[str, Any]]) -> None:
    ember = next((r for r in batch if r["system"] == "ember"), {})
    if "ratio" in ember:
        r = ember
        err = r.get("max_rel_error")
        print(f"{r['model']:>13} threads={r['threads']} ember {r['ember_ms']:8.2f} ms  "
              f"onnxruntime {r['onnxruntime_ms']:8.2f} ms  ratio {r['ratio']:5.2f}  "
              f"err {err if err is not None else float('nan'):.1e}  compile "
              f"{r.get('compile_cold_s', float('nan')):.1f}s cold / "
              f"{r.get('compile_warm_s', float('nan')):.1f}s warm  memory "
              f"{r.get('workspace_mb')} MB (peak live {r.get('peak_live_mb')}, naive "
              f"{r.get('naive_mb')})", flush=True)
    for r in batch:
        if r["system"] != "ember" or "ratio" not in r:
            value = f"{r['median_ms']:.2f} ms" if r["median_ms"] is not None else \
                f"n/a ({r.get('error', '')})"
            if "ratio" in r:
                value += f"  ratio {r['ratio']:5.2f}"
            print(f"{r['model']:>13} threads={r['threads']} {r['system']:<12} {value}",
                  flush=True)


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    if row.get(key) is None:
        return f"n/a ({row['error']})" if key == "median_ms" and row.get("error") else "n/a"
    return format(row[key], fmt)


def table(rows: list[dict[str, Any]], systems: list[str]) -> str:
    """The markdown table: latency, ember's ratio to each peer, peak RSS of each."""
    peers = [s for s in systems if s != "ember"]
    tuned = "ember-tuned" in systems and "onnxruntime" in systems
    head = (["model", "threads"] + [f"{s} ms" for s in systems]
            + ([f"ember/{p}" for p in peers] if "ember" in systems else [])
            + (["ember-tuned/onnxruntime"] if tuned else [])
            + [f"{s} RSS MB" for s in systems])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["model"], r["threads"]) for r in rows))
    for model, threads in keys:
        by = {r["system"]: r for r in rows if (r["model"], r["threads"]) == (model, threads)}
        cells = [model, str(threads)] + [_cell(by[s], "median_ms", ".2f") for s in systems]
        if "ember" in systems:
            cells += [_cell(by[p], "ember_ratio", ".2f") for p in peers]
        if tuned:
            cells.append(_cell(by["ember-tuned"], "ratio", ".2f"))
        cells += [_cell(by[s], "peak_rss_mb", ".0f") for s in systems]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details(rows: list[dict[str, Any]]) -> str:
    """Per system: runs, build time, error against onnxruntime, RSS with the build."""
    head = ["model", "threads", "system", "runs", "min ms", "build s", "max rel err vs ort",
            "RSS after imports MB", "RSS incl. build MB", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        notes = []
        if r["system"].startswith("ember") and "compile_warm_s" in r:
            notes.append(f"compile {r.get('compile_cold_s', float('nan')):.1f}s cold / "
                         f"{r['compile_warm_s']:.1f}s warm; memory plan {r['workspace_mb']} MB "
                         f"(peak live {r['peak_live_mb']}, naive {r['naive_mb']})")
        if "tvm_build_s" in r:
            notes.append(f"relax.build {r['tvm_build_s']:.1f}s ({r.get('target', '')})")
        if "torch_compile_s" in r:
            notes.append(f"torch.compile (first call) {r['torch_compile_s']:.1f}s, "
                         f"{r.get('graphs', '?')} graph(s)")
        if r.get("error"):  # one line, or the markdown row breaks
            notes.append(" ".join(r.get("error_detail", r["error"]).split())[:400])
        err = r.get("max_rel_error")
        lines.append("| " + " | ".join([
            r["model"], str(r["threads"]), r["system"], str(r.get("runs", "")),
            _cell(r, "min_ms", ".2f"), _cell(r, "build_s", ".1f"),
            f"{err:.1e}" if err is not None else "", _cell(r, "rss_imports_mb", ".0f"),
            _cell(r, "peak_rss_total_mb", ".0f"), "; ".join(notes)]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS)
    parser.add_argument("--systems", nargs="*", choices=SYSTEMS,
                        default=[s for s in SYSTEMS if s != "ember-tuned"])
    parser.add_argument("--threads", type=int, nargs="*", default=[2, 1])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per system")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs after the build")
    parser.add_argument("--block", type=int, default=5, help="timed runs per turn")
    parser.add_argument("--min-runs", type=int, default=5,
                        help="timed runs even for a system slower than --max-seconds allows")
    parser.add_argument("--max-seconds", type=float, default=120.0,
                        help="timed seconds per system per row before runs are cut")
    parser.add_argument("--build-timeout", type=float, default=1200.0,
                        help="seconds a system may take to build one model")
    parser.add_argument("--gap", type=float, default=0.3,
                        help="seconds between turns: longer than a peer's threads spin after a run")
    parser.add_argument("--db", default=None,
                        help="tuning database for ember-tuned (ember with its best records)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if "ember-tuned" in args.systems and not args.db:
        parser.error("ember-tuned needs --db, the tuning database whose records it applies")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    systems = [s for s in SYSTEMS if s in args.systems]
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for name in args.models:
        rows += measure(name, args.threads, systems, args)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print()
    print(table(rows, systems))
    print()
    print(details(rows))
    print(f"\n{len(rows)} measurements in {time.perf_counter() - start:.0f} s; "
          f"command: python benchmarks/models.py {' '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
