"""How far two measurements of the same candidates agree, timed back to back (each candidate's
runs in one stretch, as ember measured before) or in turns (a batch built first, then rounds
of one run per candidate, as ember measures now). For each task of a model: its default and
the neighbours one step away on each knob, measured twice each way in one worker, on the
target's thread count, cold weights.

    PYTHONPATH=. python benchmarks/measure_turns.py                      # resnet50, 4 tasks
    PYTHONPATH=. python benchmarks/measure_turns.py --model mobilenet_v2 --tasks 6 --pairs 3

Per task and way: the largest relative difference of a candidate's two measurements, the
rank correlation (Spearman) of the two, and the regret: how much slower by the second
measurement the candidate is that the first one called fastest.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def neighbours(task: Any, limit: int) -> list[dict[str, Any]]:
    """The default and the points one step away from it on one knob."""
    default = task.default_point()
    points = [default]
    for name, values in task.space().choices.items():
        values = list(values)
        at = values.index(default[name]) if default[name] in values else 0
        for v in values[max(0, at - 1):at + 2]:
            point = dict(default, **{name: v})
            if point not in points:
                points.append(point)
    return points[:limit]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 2 else 1.0


def agreement(first: np.ndarray, second: np.ndarray) -> tuple[float, float, float]:
    """(largest relative difference, rank correlation, regret) of two measurements."""
    deviation = float(np.max(np.abs(first / second - 1.0)))
    return deviation, spearman(first, second), float(second[np.argmin(first)] / second.min())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=4, help="the heaviest N tasks")
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=2, help="measurement pairs per way")
    args = parser.parse_args(argv)

    import onnx

    from ember.autotune import LocalRunner, MeasureSettings
    from ember.autotune.task import extract_tasks
    from ember.target import Target
    from ember.target_facts import host_cpu_model
    from ember.zoo import build_model

    path = os.path.join(tempfile.mkdtemp(prefix="ember-turns-"), "model.onnx")
    onnx.save(build_model(args.model), path)
    tasks = [t for t in extract_tasks(path, f"llvm -num-cores={args.threads}")
             if t.op.startswith(("Conv", "MatMul", "Gemm"))]
    tasks = sorted(tasks, key=lambda t: -t.weight)[:args.tasks]
    print(f"CPU: {host_cpu_model()} ({Target.host().cpu}), {args.threads} thread(s), "
          f"{args.model}: {len(tasks)} tasks, {args.pairs} measurement pairs per way")
    print("| task | candidates | way | largest difference | rank correlation | regret |")
    print("|---|---|---|---|---|---|")
    summary: dict[str, list[tuple[float, float, float]]] = {"back to back": [], "in turns": []}
    with LocalRunner(MeasureSettings(repeat=5), workers=1) as runner:
        for task in tasks:
            points = neighbours(task, args.candidates)
            for _ in range(args.pairs):
                for way in summary:
                    pair = []
                    for _ in range(2):
                        if way == "in turns":
                            results = runner.measure(task, points)
                        else:
                            results = [runner.measure(task, [p])[0] for p in points]
                        pair.append(np.array([r.best for r in results]))
                    ok = np.isfinite(pair[0]) & np.isfinite(pair[1])
                    row = agreement(pair[0][ok], pair[1][ok])
                    summary[way].append(row)
                    print(f"| {task.description} | {int(ok.sum())} | {way} | {row[0]:.1%} | "
                          f"{row[1]:.2f} | {row[2]:.3f} |", flush=True)
    for way, rows in summary.items():
        d, r, g = (np.median([row[k] for row in rows]) for k in range(3))
        worst = max(row[0] for row in rows)
        print(f"{way}: median largest difference {d:.1%} (worst {worst:.1%}), median rank "
              f"correlation {r:.2f}, median regret {g:.3f}, worst regret "
              f"{max(row[2] for row in rows):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
