"""What the conv tile model's L2 term changes on this machine: every task of a model whose
default point differs between two L2 rates (vectors a cycle at which weights that overflow
half of L1 are re-read from L2; `inf`: the term never binds), both points timed in turn in
one measuring worker, on the target's thread count, cold weights, best of `--rounds`.

    PYTHONPATH=. python benchmarks/l2_rule.py                      # resnet50: inf vs the rule
    PYTHONPATH=. python benchmarks/l2_rule.py --model squeezenet --rates 1.0 0.75 --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rates", type=float, nargs=2, default=None,
                        help="the two L2 rates to compare (default: inf and ember's)")
    args = parser.parse_args(argv)

    import onnx

    from ember.autotune import LocalRunner, MeasureSettings
    from ember.autotune.task import extract_tasks
    from ember.ops import budgets
    from ember.target import Target
    from ember.target_facts import host_cpu_model
    from ember.zoo import build_model

    path = os.path.join(tempfile.mkdtemp(prefix="ember-l2-"), "model.onnx")
    onnx.save(build_model(args.model), path)
    tasks = extract_tasks(path, f"llvm -num-cores={args.threads}")
    rate = budgets.L2_VECTORS_PER_CYCLE
    first, second = args.rates or (float("inf"), rate)

    def default_at(task, r):  # type: ignore[no-untyped-def]
        budgets.L2_VECTORS_PER_CYCLE = r
        try:
            return task.default_point()
        finally:
            budgets.L2_VECTORS_PER_CYCLE = rate

    pairs = []
    for task in tasks:
        without, with_rule = default_at(task, first), default_at(task, second)
        if with_rule != without:
            pairs.append((task, without, with_rule))
    print(f"CPU: {host_cpu_model()} ({Target.host().cpu}), {args.threads} thread(s), "
          f"{args.model}, L2 rate {first} vs {second}: {len(pairs)} of {len(tasks)} tasks "
          "change")
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in pairs]
    with LocalRunner(MeasureSettings(repeat=5), workers=1) as runner:
        for _ in range(args.rounds):
            for (task, without, with_rule), (old, new) in zip(pairs, times):
                a, b = runner.measure(task, [without, with_rule])
                old.append(a.best * 1e3)
                new.append(b.best * 1e3)
    print(f"| task | weight | tile at {first} -> at {second} | {first} ms | {second} ms | speedup |")
    print("|---|---|---|---|---|---|")
    total_old = total_new = 0.0
    for (task, without, with_rule), (old, new) in zip(pairs, times):
        changed = ", ".join(f"{k} {without[k]} -> {with_rule[k]}" for k in with_rule
                            if without[k] != with_rule[k])
        total_old += task.weight * min(old)
        total_new += task.weight * min(new)
        print(f"| {task.description} | {task.weight} | {changed} | {min(old):.3f} | "
              f"{min(new):.3f} | {min(old) / min(new):.2f} |")
    print(f"weighted: {total_old:.2f} -> {total_new:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
