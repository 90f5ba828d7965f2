"""Per zoo model: what each optimization level bought — ember at opt levels 0-3 vs onnxruntime.

    python benchmarks/ablation.py --runs 30                 # the six models, 2 and 1 threads
    python benchmarks/ablation.py --models bert-tiny --threads 1 --runs 5 --json

For each model the variants are ember at opt levels 0 (one kernel per op, no graph passes),
1 (+ constant folding and fusion), 2 (+ CSE, BatchNorm folding, reshape/transpose
simplification), 3 (+ blocked NCHW[x]c convolutions with packed weights), level 3 with
prepack=False (the weight-only stages run on every call), level 3 on libgomp's pool
(EMBER_THREAD_POOL=gomp, which must be set before ember loads: a child process, started
with this script's hidden --worker-gomp mode, timed in the same turns as the rest) and
onnxruntime (every graph optimization). Every variant's outputs are checked against
onnxruntime's first (the largest error relative to the largest reference value; above
--rtol the script stops). Then all take turns in one process (the gomp child over a pipe):
each turn is a pause of --gap seconds, one untimed run (for runs under 0.5 s) and a block of
timed runs, in a rotating order. Latency is the median; a variant slower than
--max-seconds / --runs gets fewer runs (at least --min-runs; the count is reported). The
ratio is a variant's median divided by onnxruntime's (lower is better). Kernels come from
ember's kernel cache, so only the first run of a model compiles.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("ember") is None:  # run from a checkout, not installed
    sys.path.insert(0, ROOT)
from models import MODELS  # noqa: E402
from peers import ort_session  # noqa: E402

LEVELS = [0, 1, 2, 3]
NO_PREPACK = "level3-noprepack"
GOMP = "level3-gomp"
ORT = "onnxruntime"
VARIANTS = [f"level{n}" for n in LEVELS] + [NO_PREPACK, GOMP, ORT]
CHILD_TIMEOUT = 1200.0  # seconds the gomp child may take to compile or answer


class MismatchError(RuntimeError):
    """A variant's outputs differ from onnxruntime's beyond the tolerance."""


class ChildError(RuntimeError):
    """The gomp child failed; str() is the reason for the table."""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def max_rel_error(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """Worst error over the outputs, relative to each reference output's largest value."""
    from ember.compare import errors

    if len(got) != len(want):
        return float("inf")
    worst = max((errors(np.asarray(g), np.asarray(w))[1] for g, w in zip(got, want)),
                default=0.0)
    return float(f"{worst:.3g}")


# ---- the gomp child ---------------------------------------------------------------------

def worker_gomp(argv: Sequence[str]) -> None:
    """Child mode: compile level 3 on libgomp's pool, then answer `threads N OUT.npz`
    (set the count, run once, save the outputs), `run COUNT WARMUP` and `done` on stdin."""
    path, feeds_path, cache = argv
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # library chatter on stdout must not corrupt the channel
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")

    try:
        import ember
        from ember.runtime import threadpool

        with np.load(feeds_path) as archive:
            feeds = {name: archive[name] for name in archive.files}
        compiled = ember.compile(path, opt_level=3, cache=cache or True)
        send({"ready": True, "pool": threadpool.pool_kind()})
    except Exception as error:  # noqa: BLE001 (any failure becomes a table note)
        send({"error": f"{type(error).__name__}: {error}"})
        return
    while line := sys.stdin.readline():
        words = line.split() or ["none"]
        if words[0] == "threads":
            threadpool.set_num_threads(int(words[1]))
            start = time.perf_counter()
            outputs = compiled.run(feeds)
            first = time.perf_counter() - start
            np.savez(words[2], *outputs)
            send({"first_run_s": first})
        elif words[0] == "run":
            send({"times": timed_block(lambda: compiled.run(feeds), int(words[1]),
                                       int(words[2]))})
        elif words[0] == "done":
            return


class GompChild:
    """The parent's handle on the gomp child."""

    def __init__(self, path: str, feeds_path: str, cache: str) -> None:
        env = dict(os.environ, EMBER_THREAD_POOL="gomp")
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker-gomp", path, feeds_path,
             cache], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env)
        self._buffer = b""
        message = self._receive(CHILD_TIMEOUT)
        if "error" in message:
            self.close()
            raise ChildError(_short(message["error"]))
        if message.get("pool") != "gomp":
            self.close()
            raise ChildError(f"the child runs on the {message.get('pool')} pool, not gomp")

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise ChildError(f"timed out after {timeout:.0f}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self._proc.wait()
                self._log.seek(0)
                lines = self._log.read().decode(errors="replace").strip().splitlines()
                raise ChildError(f"died (exit {code}): {_short(lines[-1] if lines else '')}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _ask(self, text: str, timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(text.encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise ChildError("died") from None
        return self._receive(timeout)

    def threads(self, count: int, outputs_path: str) -> tuple[list[np.ndarray], float]:
        """Set the thread count; the outputs of one run and its seconds."""
        first = self._ask(f"threads {count} {outputs_path}")["first_run_s"]
        with np.load(outputs_path) as archive:
            return [archive[k] for k in archive.files], first

    def block(self, count: int, warmup: int) -> list[float]:
        return list(self._ask(f"run {count} {warmup}")["times"])

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(b"done\n")
                self._proc.stdin.close()
                self._proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
        self._proc.wait()
        self._log.close()


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---- timing -----------------------------------------------------------------------------

def timed_block(fn: Callable[[], Any], count: int, warmup: int) -> list[float]:
    """Seconds of `count` timed calls after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def split_runs(total: int, rounds: int) -> list[int]:
    """`total` runs spread over `rounds` turns as evenly as possible."""
    return [total // rounds + (1 if r < total % rounds else 0) for r in range(rounds)]


def run_counts(estimates: dict[str, float], runs: int, min_runs: int, max_seconds: float
               ) -> dict[str, int]:
    """Timed runs per variant: `runs`, fewer (not under `min_runs`) when that would take
    over `max_seconds`."""
    return {name: min(runs, max(min_runs, int(max_seconds / max(seconds, 1e-9))))
            for name, seconds in estimates.items()}


Block = Callable[[int, int], list[float]]


def take_turns(blocks: dict[str, Block], counts: dict[str, int], estimates: dict[str, float],
               block: int, gap: float) -> dict[str, list[float]]:
    """Each variant's timed seconds, in rounds of turns in a rotating order; a turn is a
    pause of `gap`, one untimed run (for runs under 0.5 s) and a block of timed runs."""
    names = list(blocks)
    rounds = max(1, math.ceil(max(counts.values(), default=1) / block))
    plan = {n: split_runs(counts[n], rounds) for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if not plan[name][r]:
                continue
            time.sleep(gap)
            warmup = 1 if min(times[name] or [estimates[name]]) < 0.5 else 0
            times[name] += blocks[name](plan[name][r], warmup)
    return times


# ---- one model --------------------------------------------------------------------------

def measure(name: str, threads: Sequence[int], args: argparse.Namespace
            ) -> list[dict[str, Any]]:
    """One model: every variant compiled once, then checked and timed at each thread count."""
    import ember
    from ember import zoo
    from ember.runtime import threadpool

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"ablation-{name}-") as workdir:
        path = zoo.save_model(name, os.path.join(workdir, f"{name}.onnx"))
        feeds = zoo.random_inputs(zoo.build_model(name))
        feeds_path = os.path.join(workdir, "inputs.npz")
        np.savez(feeds_path, **feeds)
        cache = args.cache or True
        compiled: dict[str, Any] = {}
        compile_s: dict[str, float] = {}
        for level in LEVELS:
            log(f"{name}: compiling level {level} ...")
            start = time.perf_counter()
            compiled[f"level{level}"] = ember.compile(path, opt_level=level, cache=cache)
            compile_s[f"level{level}"] = time.perf_counter() - start
        start = time.perf_counter()
        compiled[NO_PREPACK] = ember.compile(path, opt_level=3, cache=cache, prepack=False)
        compile_s[NO_PREPACK] = time.perf_counter() - start
        child: GompChild | None = None
        child_error = ""
        if not args.no_gomp:
            log(f"{name}: starting the libgomp child ...")
            try:
                child = GompChild(path, feeds_path, args.cache or "")
            except ChildError as error:
                child_error = str(error)
        try:
            for count in threads:
                rows += measure_threads(name, count, compiled, compile_s, child, child_error,
                                        path, feeds, workdir, args)
                threadpool.set_num_threads(threadpool.default_num_threads())
        finally:
            if child is not None:
                child.close()
    return rows


def measure_threads(name: str, count: int, compiled: dict[str, Any],
                    compile_s: dict[str, float], child: GompChild | None, child_error: str,
                    path: str, feeds: dict[str, np.ndarray], workdir: str,
                    args: argparse.Namespace) -> list[dict[str, Any]]:
    """One model at one thread count: a row per variant."""
    from ember.runtime import threadpool

    threadpool.set_num_threads(count)
    session = ort_session(path, count)
    names = [o.name for o in session.get_outputs()]
    want = session.run(names, feeds)
    runs: dict[str, Callable[[], Any]] = {v: (lambda m=m: m.run(feeds))
                                          for v, m in compiled.items()}
    runs[ORT] = lambda: session.run(names, feeds)
    blocks: dict[str, Block] = {v: (lambda n, w, fn=fn: timed_block(fn, n, w))
                                for v, fn in runs.items()}
    errors: dict[str, float] = {}
    estimates: dict[str, float] = {}
    for variant, fn in runs.items():
        got = fn()
        if variant != ORT:
            errors[variant] = max_rel_error(got, want)
        estimates[variant] = min(timed_block(fn, 2 if variant != "level0" else 1, 0))
    if child is not None:
        try:
            got, first = child.threads(count, os.path.join(workdir, f"gomp-{count}.npz"))
            errors[GOMP] = max_rel_error(got, want)
            estimates[GOMP] = min(child.block(1, 0) + [first])
            blocks[GOMP] = child.block
        except ChildError as error:
            child_error = str(error)
    for variant, error in errors.items():
        if not error <= args.rtol:
            raise MismatchError(f"{name}, {count} threads: {variant} differs from onnxruntime "
                                f"by {error:.2e} relative to the largest output, more than "
                                f"rtol {args.rtol:g}")
    counts = run_counts(estimates, args.runs, args.min_runs, args.max_seconds)
    load = round(os.getloadavg()[0], 2)
    log(f"{name} threads={count}: timing {', '.join(f'{v} x{n}' for v, n in counts.items())} "
        f"(load average {load})")
    try:
        times = take_turns(blocks, counts, estimates, args.block, args.gap)
    except ChildError as error:  # the child died while timing: time the rest again without it
        child_error = f"failed while timing: {error}"
        blocks.pop(GOMP)
        counts.pop(GOMP)
        times = take_turns(blocks, counts, estimates, args.block, args.gap)
    ort_ms = float(np.median(times[ORT])) * 1e3
    rows = []
    for variant in VARIANTS:
        row: dict[str, Any] = {"model": name, "threads": count, "variant": variant,
                               "median_ms": None, "ratio_vs_onnxruntime": None,
                               "load_average": load}
        if variant in times:
            ms = float(np.median(times[variant])) * 1e3
            row.update(median_ms=round(ms, 3), ratio_vs_onnxruntime=round(ms / ort_ms, 3),
                       runs=len(times[variant]),
                       min_ms=round(min(times[variant]) * 1e3, 3),
                       max_rel_error=errors.get(variant, 0.0))
            if variant in compile_s:
                row["compile_s"] = round(compile_s[variant], 2)
                row["kernels"] = len(compiled[variant].plan.calls)
        else:
            row["error"] = child_error or "not run (--no-gomp)"
        rows.append(row)
    return rows


# ---- output -----------------------------------------------------------------------------

def _cell(row: dict[str, Any], runs: int) -> str:
    if row["median_ms"] is None:
        return f"n/a ({row.get('error', '')})"
    text = f"{row['median_ms']:.2f} ({row['ratio_vs_onnxruntime']:.2f}"
    if row["variant"] != ORT and row.get("runs", runs) < runs:
        text += f", {row['runs']} runs"
    return text + ")"


def table(rows: list[dict[str, Any]], runs: int) -> str:
    """Markdown: a row per (model, threads), a cell per variant: `ms (ratio to ort)`."""
    head = ["model", "threads"] + [f"{v} ms" for v in VARIANTS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, threads in dict.fromkeys((r["model"], r["threads"]) for r in rows):
        by = {r["variant"]: r for r in rows if (r["model"], r["threads"]) == (model, threads)}
        cells = [model, str(threads)] + [_cell(by[v], runs) if v in by else "" for v in VARIANTS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker-gomp"]:
        worker_gomp(argv[1:])
        return []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS)
    parser.add_argument("--threads", type=int, nargs="*", default=[2, 1])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per variant")
    parser.add_argument("--min-runs", type=int, default=5,
                        help="timed runs even for a variant slower than --max-seconds allows")
    parser.add_argument("--max-seconds", type=float, default=10.0,
                        help="timed seconds per variant per row before its runs are cut")
    parser.add_argument("--block", type=int, default=5, help="timed runs per turn")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds of pause per turn")
    parser.add_argument("--rtol", type=float, default=1e-3,
                        help="largest error against onnxruntime, relative to the largest output")
    parser.add_argument("--cache", default="", help="ember kernel cache (default: ember's)")
    parser.add_argument("--no-gomp", action="store_true", help="skip the libgomp child")
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    load = os.getloadavg()[0]
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for name in args.models:
        batch = measure(name, args.threads, args)
        for r in batch:
            log(f"{r['model']:>13} threads={r['threads']} {r['variant']:<17} "
                f"{_cell(r, args.runs)}  err {r.get('max_rel_error', float('nan')):.1e}")
        rows += batch
    if args.json:
        print(json.dumps(rows, indent=1))
        return rows
    print(table(rows, args.runs))
    print(f"\nCells: median ms (ratio to onnxruntime; runs when cut below {args.runs}). "
          f"{GOMP}: level 3 on libgomp's pool (OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY')}) in a child process, timed in the same "
          f"turns. Started {started}, load average before {load:.2f}; "
          f"{len(rows)} rows in {time.perf_counter() - start:.0f} s; command: python "
          f"benchmarks/ablation.py {' '.join(argv)}")
    return rows


__all__ = ["MismatchError", "VARIANTS", "main", "measure", "run_counts", "split_runs",
           "table", "take_turns"]

if __name__ == "__main__":
    main()
