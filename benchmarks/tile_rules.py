"""What a constant of the tile model (ember/ops/budgets.py) or a knob's default changes on
this machine: every task of a model whose default point differs between two values of the
constant (or, with `--flip KNOB`, every task whose default turns the boolean KNOB on,
against the same point with it off), both points timed in turn in one measuring worker, on
the target's thread count, cold weights, best of `--rounds`.

    PYTHONPATH=. python benchmarks/tile_rules.py      # resnet50: L2 term off (inf) vs ember's
    PYTHONPATH=. python benchmarks/tile_rules.py --model squeezenet --values 1.0 0.9
    PYTHONPATH=. python benchmarks/tile_rules.py --constant LOADS_PER_CYCLE --values 2 3
    PYTHONPATH=. python benchmarks/tile_rules.py --flip rows_outer
    PYTHONPATH=. python benchmarks/tile_rules.py --model bert-base --family DenseKnobs \
        --set rows=4 --whole 20

`--set KNOB=VALUE`: every task whose default has another VALUE for KNOB, against the same
point with KNOB=VALUE. `--whole N`: the whole model too, compiled both ways (the other
points as `knobs=` overrides) and run N times each in turn in this process.

L2_BYTES_PER_CYCLE: bytes a cycle at which weights that overflow half of L1 are re-read
from L2 (inf: the term never binds); LOADS_PER_CYCLE: vector loads a core issues a cycle.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONSTANTS = ("L2_BYTES_PER_CYCLE", "LOADS_PER_CYCLE", "FMA_SLACK", "WIDE_FMA_SLACK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--constant", default="L2_BYTES_PER_CYCLE", choices=CONSTANTS)
    parser.add_argument("--values", type=float, nargs=2, default=None,
                        help="the two values to compare (default: inf, the L2 term off, "
                             "and ember's L2 rate)")
    parser.add_argument("--flip", default=None,
                        help="a boolean knob: defaults that turn it on against it off")
    parser.add_argument("--set", default=None, metavar="KNOB=VALUE",
                        help="defaults with another value of KNOB against KNOB=VALUE")
    parser.add_argument("--family", default=None,
                        help="only tasks of this knob family (e.g. DenseKnobs)")
    parser.add_argument("--whole", type=int, default=0, metavar="N",
                        help="also time the whole model both ways, N runs each in turn")
    args = parser.parse_args(argv)

    import onnx

    from ember.autotune import LocalRunner, MeasureSettings
    from ember.autotune.task import extract_tasks
    from ember.ops import budgets
    from ember.target import Target
    from ember.target_facts import host_cpu_model
    from ember.zoo import build_model

    path = os.path.join(tempfile.mkdtemp(prefix="ember-tiles-"), "model.onnx")
    onnx.save(build_model(args.model), path)
    tasks = extract_tasks(path, f"llvm -num-cores={args.threads}")
    ours = getattr(budgets, args.constant)
    if args.values is None and args.constant != "L2_BYTES_PER_CYCLE":
        parser.error("--values is needed for a constant other than L2_BYTES_PER_CYCLE")
    first, second = args.values or (float("inf"), ours)

    def default_at(task, value):  # type: ignore[no-untyped-def]
        setattr(budgets, args.constant, value)
        try:
            return task.default_point()
        finally:
            setattr(budgets, args.constant, ours)

    if args.set is not None:
        knob, _, text = args.set.partition("=")
        value = {"True": True, "False": False}.get(text, int(text) if text.isdigit() else text)
    if args.family is not None:
        tasks = [t for t in tasks if t.family == args.family]
    pairs = []
    for task in tasks:
        if args.set is not None:
            b = task.default_point()
            if knob in b and b[knob] != value:
                pairs.append((task, dict(b, **{knob: value}), b))
            continue
        if args.flip is not None:
            b = task.default_point()
            if b.get(args.flip) is True:
                pairs.append((task, dict(b, **{args.flip: False}), b))
            continue
        a, b = default_at(task, first), default_at(task, second)
        if a != b:
            pairs.append((task, a, b))
    if args.set is not None:
        first, second = args.set, "default"  # type: ignore[assignment]
        what = f"defaults against {args.set}"
    elif args.flip is not None:
        first, second = f"{args.flip} off", "default"  # type: ignore[assignment]
        what = f"defaults with {args.flip} on"
    else:
        what = f"{args.constant} {first} vs {second}"
    print(f"CPU: {host_cpu_model()} ({Target.host().cpu}), {args.threads} thread(s), "
          f"{args.model}, {what}: {len(pairs)} of {len(tasks)} tasks")
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in pairs]
    with LocalRunner(MeasureSettings(repeat=5), workers=1) as runner:
        for _ in range(args.rounds):
            for (task, a, b), (ta, tb) in zip(pairs, times):
                ra, rb = runner.measure(task, [a, b])
                ta.append(ra.best * 1e3)
                tb.append(rb.best * 1e3)
    print(f"| task | weight | knobs at {first} -> at {second} | {first} ms | {second} ms | "
          "speedup |")
    print("|---|---|---|---|---|---|")
    total_a = total_b = 0.0
    for (task, a, b), (ta, tb) in zip(pairs, times):
        changed = ", ".join(f"{k} {a[k]} -> {b[k]}" for k in b if a[k] != b[k])
        total_a += task.weight * min(ta)
        total_b += task.weight * min(tb)
        print(f"| {task.description} | {task.weight} | {changed} | {min(ta):.3f} | "
              f"{min(tb):.3f} | {min(ta) / min(tb):.2f} |")
    print(f"weighted: {total_a:.2f} -> {total_b:.2f} ms")
    if args.whole and pairs:
        whole_model(path, args.threads, {t.key: a for t, a, _ in pairs}, args.whole,
                    str(first))
    return 0


def whole_model(path: str, threads: int, points: dict, runs: int, name: str) -> None:
    """The model compiled with its defaults and with `points` (task key -> knobs) in their
    place, run `runs` times each in turn (which goes first alternates)."""
    import time

    import numpy as np
    import onnx

    import ember
    from ember.autotune.lowering import knob_family
    from ember.autotune.task import task_key
    from ember.runtime import threadpool
    from ember.zoo import random_inputs

    def other(group, task):  # type: ignore[no-untyped-def]
        point = points.get(task_key(group))
        family = knob_family(group, task.target)
        return None if point is None or family is None else family.default(task).replace(
            **point)

    threadpool.set_num_threads(threads)
    feeds = random_inputs(onnx.load(path))
    models = {"default": ember.compile(path), name: ember.compile(path, knobs=other)}
    times: dict[str, list[float]] = {k: [] for k in models}
    for m in models.values():
        m.run(feeds)
    for r in range(runs):
        for key in (list(models) if r % 2 == 0 else list(models)[::-1]):
            start = time.perf_counter()
            models[key].run(feeds)
            times[key].append(time.perf_counter() - start)
    base = np.median(times["default"])
    for key, t in times.items():
        print(f"whole model, {key}: median {np.median(t) * 1e3:.2f} ms, min "
              f"{min(t) * 1e3:.2f} ms ({np.median(t) / base:.3f}x the default's median)")


if __name__ == "__main__":
    raise SystemExit(main())
