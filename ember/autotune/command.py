"""`ember tune MODEL --db FILE --trials N`: extract the model's tasks, tune them within the
budget with a live progress bar (measuring locally, or as Ray tasks with `--ray`), print the
per-task table; `--report` prints the records; `--export` / `--import` move the database's
records as JSON lines."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from typing import Any

from ember.errors import TuningError


LOCAL_RAY = "local"  # --ray without an address


def parse_budget(text: str | None) -> float | None:
    """'20m', '90s', '1h' or plain seconds -> seconds."""
    if text is None:
        return None
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:].lower(), 0)
    number = text[:-1] if scale else text
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        raise TuningError(f"--budget {text!r}: expected seconds or e.g. 20m, 90s, 1h") from None
    if seconds <= 0:
        raise TuningError(f"--budget {text!r}: must be positive")
    return seconds


def report(db: Any, fingerprint: str | None, defaults: dict[str, str] | None = None) -> str:
    """Per task in the database: records, errors, the default's and the best's fastest run,
    their ratio, and the ratio the tuner's confirmation measured (default over the fastest
    confirmed candidate: what applies where above 1). `defaults`: task key -> the default's
    knobs_json (the model's tasks); '-' where unknown."""
    from ember.autotune.database import confirmed_costs, knobs_json

    by_task: dict[str, list] = {}
    for r in db.records(fingerprint=fingerprint):
        by_task.setdefault(r.task_key, []).append(r)
    lines = [f"{'task':60} {'records':>7} {'errors':>6} {'default ms':>10} {'best ms':>9} "
             f"{'speedup':>7} {'confirmed':>9} timing"]
    for key, records in by_task.items():
        # the best among the records timed like the newest one (cold and warm not compared)
        timing = max(records, key=lambda r: r.timestamp).timing
        timed = [r for r in records if r.timing == timing]
        best = min((r.best for r in timed), default=math.inf)
        errors = sum(1 for r in records if not r.ok)
        default = (defaults or {}).get(key)
        default_ms = min((r.best for r in timed if knobs_json(r.knobs) == default),
                         default=math.inf)
        confirmed = confirmed_costs(timed)
        verdict = (f"{confirmed[default] / min(confirmed.values()):.2f}"
                   if default in confirmed else "-")
        speedup = f"{default_ms / best:.2f}" if math.isfinite(default_ms / best) else "-"
        shown = f"{default_ms * 1e3:.3f}" if math.isfinite(default_ms) else "-"
        lines.append(f"{records[0].task[:60]:60} {len(records):>7} {errors:>6} {shown:>10} "
                     f"{best * 1e3:>9.3f} {speedup:>7} {verdict:>9} {timing or '?'}")
    return "\n".join(lines)


def run(args: argparse.Namespace, input_shapes: dict[str, Sequence[int]] | None) -> int:
    from ember.autotune.database import TuningDatabase, default_path, knobs_json
    from ember.autotune.measure import COLD_WEIGHT_BYTES, MeasureSettings
    from ember.autotune.task import extract_tasks
    from ember.autotune.tuner import summary, tune
    from ember.target import Target

    target = Target(args.target)
    db_path = args.db or default_path()
    if args.export or args.import_file:
        return exchange(db_path, args.export, args.import_file)
    if args.model is None:
        raise TuningError("ember tune: give a model (an .onnx file), or --export / --import")
    with TuningDatabase(db_path) as db:
        tasks = extract_tasks(args.model, target, args.opt_level, input_shapes)
        if args.report:
            defaults = {t.key: knobs_json(t.default_point()) for t in tasks}
            print(report(db, target.fingerprint, defaults))
            return 0
        if args.tasks:
            wanted = {t.strip() for t in args.tasks.split(",")}
            tasks = [t for t in tasks if t.op in wanted or t.key[:8] in wanted]
            if not tasks:
                raise TuningError(f"--tasks {args.tasks!r}: no task of the model matches "
                                  "(give anchor op names or task key prefixes)")
        settings = MeasureSettings(repeat=args.repeat, timeout=args.timeout,
                                   cold_weight_bytes=0 if args.warm_cache else COLD_WEIGHT_BYTES)
        with _runner(args, settings) as runner:
            states = tune(tasks, db, runner, trials=args.trials,
                          budget_seconds=parse_budget(args.budget), search=args.search,
                          progress=True)
    print(summary(states))
    print(f"records in {db_path}; apply them with ember.compile(..., tuning_db='{db_path}')")
    return 0


def _runner(args: argparse.Namespace, settings: Any) -> Any:
    """The measuring runner: Ray tasks with --ray (a running cluster at ADDRESS, or a local
    instance of --workers CPUs), else local worker processes."""
    from ember.autotune.measure import LocalRunner

    if args.ray is None:
        return LocalRunner(settings, workers=args.workers)
    from ember.autotune.ray_runner import RayRunner

    if args.ray == LOCAL_RAY:
        return RayRunner(settings, num_cpus=args.workers)
    return RayRunner(settings, address=args.ray)


def exchange(db_path: Any, export: str | None, import_file: str | None) -> int:
    """--import FILE (JSON lines into the database), then --export FILE (the database as
    JSON lines)."""
    from ember.autotune.database import TuningDatabase

    with TuningDatabase(db_path) as db:
        if import_file:
            added = db.import_jsonl(import_file)
            print(f"{added} new records from {import_file} in {db_path}")
        if export:
            written = db.export_jsonl(export)
            print(f"{written} records of {db_path} written to {export}")
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help="tuning database (default: the user cache's)")
    p.add_argument("--trials", type=int, default=200, help="measurements in all (default 200)")
    p.add_argument("--budget", default=None, help="time budget, e.g. 20m (default: none)")
    p.add_argument("--search", default="xgb", choices=("xgb", "random", "grid"))
    p.add_argument("--tasks", default=None, help="only these anchor ops / task keys (a,b)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per candidate")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per candidate")
    p.add_argument("--warm-cache", action="store_true",
                   help="time kernels on the same weights back to back, warm in cache "
                        "(default: each call reads its weights from one of copies spanning "
                        "128 MiB, cold as inside a model)")
    p.add_argument("--workers", type=int, default=1,
                   help="measuring processes: builds in parallel, timings one at a time")
    p.add_argument("--ray", nargs="?", const=LOCAL_RAY, default=None, metavar="ADDRESS",
                   help="measure as Ray tasks on the cluster at ADDRESS (e.g. auto, or "
                        "host:6379), or without ADDRESS on a local Ray instance of --workers "
                        "CPUs (pip install 'ember[ray]')")
    p.add_argument("--report", action="store_true", help="print the records and exit")
    p.add_argument("--export", default=None, metavar="FILE",
                   help="write the database's records as JSON lines to FILE and exit")
    p.add_argument("--import", dest="import_file", default=None, metavar="FILE",
                   help="add the records of a JSON lines file (e.g. another machine's: "
                        "they seed transfer learning, and apply only on a matching target) "
                        "to the database and exit")
    p.add_argument("--no-model-check", action="store_true",
                   help="skip timing the tuned groups in model order against the default "
                        "build afterwards (a record no faster there does not apply)")


__all__ = ["add_arguments", "parse_budget", "report", "run"]
