"""Search efficiency: best kernel latency against trials for random search, the XGBoost-guided
search and the XGBoost search warmed by earlier records (transfer), on three conv2d tasks of
ResNet-18 and one dense task of BERT-base.

    python benchmarks/search_efficiency.py --db search.sqlite --pool 96 --trials 32 \\
        --plot docs/search_efficiency.png

Two phases.

Measure: per task, its default and a seeded uniform sample of `--pool` points of its knob
space (the whole space when it is smaller) are built, checked against the default's output
and timed by the tuner's own runner (`LocalRunner`, one worker process, fastest of 5 timed
runs, cold weights as the tuner times them), all of a task's points in one batch, so they
are timed in turns and the host's drift does not rank them, and kept in a tuning database
with their loop features. A candidate that fails (build error, time-out, wrong answer) is a
record with an error, as in tuning. The phase resumes: tasks already in the database are
not measured again.

Replay: each search runs `--seeds` times over the measured sample as its space (a trial
reads the measurement instead of building), exactly as `tune` drives it: the default first,
then batches of 8 proposed by the strategy, each batch observed before the next. Replaying
one measured sample lets every strategy and seed see the same costs, so the curves differ by
the search alone, not by machine noise between runs. Transfer: the cost model also trains
from the start on the records of the other tasks of the same knob family (for a conv task
the two other conv tasks; for the dense task the other dense tasks of BERT-base). The
model-guided search runs as the tuner runs it (its first batch half ranked by the machine
model's estimate, the `tile_estimate` feature) and without that prior (`prior=None`: a
uniform first batch), each with and without transfer.

Two modes: the default first, as the tuner runs (where the default is the fastest point of
the sample, every search has it at trial 1 and the figure says nothing about the search),
and from nothing (the searches alone, no default). Figures, per mode: per task and
strategy, the mean over seeds of (best latency so far / fastest in the sample) after each
trial; and the trials each strategy needs to reach random search's
final best (the median over seeds of random's best after `--trials` trials), and to reach
the fastest point of the sample ("never": not within `--trials`), medians over seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BATCH = 8
CONV_MODEL, DENSE_MODEL = "resnet18", "bert-base"
DENSE_TASK = "MatMul 1x128x768, 768x3072"
DENSE_SOURCES = ("MatMul 1x128x768, 768x768", "MatMul 1x128x3072, 3072x768")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def select_tasks(work: str, threads: int) -> tuple[list[Any], dict[str, list[Any]]]:
    """The benchmark's tasks (three conv2d of ResNet-18 with the largest knob spaces, the
    dense FFN-up of BERT-base) and, per task key, the tasks whose records it may transfer."""
    import onnx

    from ember.autotune.task import extract_tasks
    from ember.zoo import build_model

    target = f"llvm -num-cores={threads}"
    paths = {}
    for name, config in ((CONV_MODEL, {}), (DENSE_MODEL, {"layers": 1})):
        paths[name] = os.path.join(work, f"{name}.onnx")  # one BERT layer: the same shapes
        onnx.save(build_model(name, **config), paths[name])
    convs = [t for t in extract_tasks(paths[CONV_MODEL], target) if t.family == "ConvKnobs"]
    convs.sort(key=lambda t: (-t.space().size, -t.weight, t.description))
    convs = convs[:3]
    dense_all = [t for t in extract_tasks(paths[DENSE_MODEL], target)
                 if t.family == "DenseKnobs"]
    dense = [t for t in dense_all if t.description.startswith(DENSE_TASK)]
    sources = [t for t in dense_all if t.description.startswith(DENSE_SOURCES)]
    transfer = {t.key: [c for c in convs if c is not t] for t in convs}
    transfer[dense[0].key] = sources
    return convs + dense, transfer


def pool_points(task: Any, size: int, seed: int) -> list[dict[str, Any]]:
    """The default and a seeded uniform sample of the space without repeats (all of it when
    it has at most `size` points)."""
    from ember.autotune.database import knobs_json

    space = task.space()
    default = task.default_point()
    if space.size <= size:
        rest = [p for p in space.points() if knobs_json(p) != knobs_json(default)]
        return [default] + rest
    rng = random.Random(seed)
    chosen = {knobs_json(default): default}
    while len(chosen) < size:
        p = space.sample(rng)
        chosen.setdefault(knobs_json(p), p)
    return list(chosen.values())


def measure_pools(tasks: Sequence[Any], db_path: str, size: int, timeout: float,
                  seed: int) -> None:
    """Measure every task's sample into the database (what is there is not measured again)."""
    from ember.autotune import LocalRunner, MeasureSettings, Record, TuningDatabase
    from ember.autotune.database import knobs_json
    from ember.target import Target
    from ember.version import __version__

    settings = MeasureSettings(repeat=5, timeout=timeout)
    with TuningDatabase(db_path) as db, LocalRunner(settings) as runner:
        for task in tasks:
            fingerprint = Target(task.target).fingerprint
            done = db.measured(task.key, fingerprint, settings.timing)
            todo = [p for p in pool_points(task, size, seed) if knobs_json(p) not in done]
            log(f"{task.description}: {len(done)} measured, {len(todo)} to measure")
            if not todo:
                continue
            # one batch: every point is timed in turns with all the others, so the host's
            # drift over the minutes this takes does not rank points measured at different
            # times (in batches of 8, a sample's fastest point was often one timed while
            # the host was quick)
            start = time.perf_counter()
            results = runner.measure(task, todo)
            db.add([Record(task.key, task.family, task.description, task.target,
                           fingerprint, p, r.costs, r.error, features(task, p),
                           __version__, timing=settings.timing)
                    for p, r in zip(todo, results)])
            log(f"  {len(todo)} in {time.perf_counter() - start:.0f} s")


def features(task: Any, point: Mapping[str, Any]) -> tuple[float, ...]:
    """The candidate's loop features (zeros for one that does not even lower, as in tuning)."""
    from ember.autotune.features import FEATURE_NAMES
    from ember.errors import EmberError

    try:
        return tuple(task.features(point))
    except EmberError:
        return (0.0,) * len(FEATURE_NAMES)


@dataclass(frozen=True)
class Table:
    """A task's measured sample: knobs -> (features, fastest run or inf)."""

    key: str
    choices: Mapping[str, tuple[Any, ...]]
    default: str
    rows: Mapping[str, tuple[tuple[float, ...], float]]

    @property
    def best(self) -> float:
        return min(c for _, c in self.rows.values())


class SampleSpace:
    """The measured sample as a knob space (the interface the searches use), its points in a
    seeded order: in the database's order the default comes first, and a search that takes
    the first of equally scored points would find it for nothing."""

    def __init__(self, table: Table, seed: int = 0) -> None:
        self.choices = table.choices
        self._points = [json.loads(k) for k in table.rows]
        random.Random(seed).shuffle(self._points)

    @property
    def size(self) -> int:
        return len(self._points)

    def points(self) -> Iterator[dict[str, Any]]:
        return iter([dict(p) for p in self._points])

    def sample(self, rng: random.Random) -> dict[str, Any]:
        return dict(rng.choice(self._points))

    def contains(self, point: Mapping[str, Any]) -> bool:
        return any(point == p for p in self._points)


def load_table(db: Any, task: Any, stored_features: bool = False) -> Table:
    """The task's records; their features as this version of the code extracts them (or
    as the records stored them, `stored_features`)."""
    from ember.autotune.database import knobs_json
    from ember.target import Target

    rows = {}
    for r in db.records(task_key=task.key, fingerprint=Target(task.target).fingerprint):
        if r.features is not None:
            f = tuple(r.features) if stored_features else features(task, r.knobs)
            rows[knobs_json(r.knobs)] = (f, r.best)
    return Table(task.key, task.space().choices, knobs_json(task.default_point()), rows)


def replay(table: Table, strategy: str, seed: int, trials: int,
           transfer: Sequence[tuple[Sequence[float], float, str]] = (), batch: int = BATCH,
           with_default: bool = True, **options: Any) -> list[float]:
    """Best cost after each trial of one search run over the measured sample (the default
    first, as the tuner does, or with `with_default` False, a search from nothing)."""
    from ember.autotune.database import knobs_json
    from ember.autotune.search import ModelSearch, RandomSearch

    space = SampleSpace(table, seed)
    if strategy == "random":
        search: Any = RandomSearch(space, seed)  # type: ignore[arg-type]
    else:
        # the model scores the whole sample: the annealing walk of a full space would
        # rarely step from one sampled point to another
        options.setdefault("max_evaluations", max(256, space.size))
        search = ModelSearch(space, lambda p: table.rows[knobs_json(p)][0],  # type: ignore
                             table.key, seed, transfer=transfer, **options)
    tried: set[str] = set()
    best, curve = math.inf, []
    # the tuner measures the default first
    points = [json.loads(table.default)] if with_default else search.propose(batch, tried)
    while len(curve) < trials:
        costs = [table.rows[knobs_json(p)][1] for p in points]
        for p, c in zip(points, costs):
            tried.add(knobs_json(p))
            best = min(best, c)
            curve.append(best)
        search.observe(points, costs)
        points = search.propose(min(batch, trials - len(curve)), tried)
        if not points:  # the sample is exhausted
            curve += [best] * (trials - len(curve))
    return curve[:trials]


def trials_to_reach(curve: Sequence[float], target: float) -> float:
    return next((i + 1 for i, c in enumerate(curve) if c <= target), math.inf)


# the model-guided search without the machine model's estimate ranking its first batch
NO_PRIOR = {"prior": None}


def run_replays(tables: Mapping[str, Table], sources: Mapping[str, Sequence[str]],
                seeds: int, trials: int, with_default: bool = True
                ) -> dict[str, dict[str, np.ndarray]]:
    """Per task key of `sources` and strategy, the curves of every seed (seeds x trials)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in sources:
        table = tables[key]
        transfer = [(f, c, s) for s in sources[key] for f, c in tables[s].rows.values()]
        runs = {"random": ("random", (), {}), "xgb": ("xgb", (), {}),
                "xgb + transfer": ("xgb", transfer, {}),
                "xgb, no prior": ("xgb", (), NO_PRIOR),
                "xgb, no prior + transfer": ("xgb", transfer, NO_PRIOR)}
        out[key] = {name: np.array([replay(table, strategy, s, trials, source,
                                           with_default=with_default, **options)
                                    for s in range(seeds)])
                    for name, (strategy, source, options) in runs.items()}
    return out


def plot(curves: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]],
         tables: Mapping[str, Table], names: Mapping[str, str], path: str) -> None:
    """One row of panels per mode (MODES), one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = len(next(iter(curves.values())))
    fig, axes = plt.subplots(len(curves), columns, figsize=(3.2 * columns, 2.9 * len(curves)),
                             dpi=90, squeeze=False)
    for row, (mode, by_task) in zip(axes, curves.items()):
        for ax, (key, by_strategy) in zip(row, by_task.items()):
            best = tables[key].best
            for strategy, runs in by_strategy.items():
                x = np.arange(1, runs.shape[1] + 1)
                ax.plot(x, np.mean(runs / best, axis=0), label=strategy)
            name = names[key].replace(" -> ", "\n-> ")
            ax.set_title(f"{name}\n{mode}", fontsize=7)
            ax.set_xlabel("trials", fontsize=8)
            # the first trials' spread (up to 2x) would hide where the searches differ
            ax.set_ylim(1.0, max(1.01, min(ax.get_ylim()[1], 1.25)))
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        row[0].set_ylabel("best latency / fastest in sample", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=None, help="tuning database (default: a temp file)")
    parser.add_argument("--pool", type=int, default=96, help="points measured per task")
    parser.add_argument("--trials", type=int, default=32, help="trials per search run")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds per candidate")
    parser.add_argument("--sample-seed", type=int, default=0,
                        help="seed of each task's sample (another seed: another sample; "
                             "give it a database of its own)")
    parser.add_argument("--plot", default=None, help="write the PNG here")
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--replay-only", action="store_true",
                        help="use the database as it is (measure nothing)")
    parser.add_argument("--stored-features", action="store_true",
                        help="replay with the features the records keep (default: extract "
                             "them again with this version's features)")
    args = parser.parse_args(argv)

    from ember.autotune import TuningDatabase
    from ember.runtime import threadpool
    from ember.target_facts import host_cpu_model

    threadpool.set_num_threads(args.threads)
    work = tempfile.mkdtemp(prefix="ember-search-")
    db_path = args.db or os.path.join(work, "search.sqlite")
    tasks, transfer = select_tasks(work, args.threads)
    if not args.replay_only:
        measure_pools(tasks + [s for t in tasks for s in transfer[t.key] if s not in tasks],
                      db_path, args.pool, args.timeout, seed=args.sample_seed)
    with TuningDatabase(db_path, readonly=True) as db:
        everything = {t.key: t for t in tasks}
        everything.update({s.key: s for t in tasks for s in transfer[t.key]})
        tables = {k: load_table(db, t, args.stored_features)
                  for k, t in everything.items()}
    sources = {t.key: [s.key for s in transfer[t.key]] for t in tasks}
    names = {t.key: t.description.split(" (")[0] for t in tasks}
    print(f"CPU: {host_cpu_model()}, threads {args.threads}, sample {args.pool} points per "
          f"task, {args.trials} trials per run, {args.seeds} seeds, batch {BATCH}")
    curves, figures = {}, {}
    for mode, with_default in MODES.items():
        curves[mode] = run_replays(tables, sources, args.seeds, args.trials, with_default)
        print(f"\n{mode}:")
        figures[mode] = report(tasks, tables, curves[mode], names)
    if args.plot:
        plot(curves, tables, names, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": host_cpu_model(), "figures": figures}, f, indent=1)
    return 0


# the tuner's way (the default schedule first), and the searches alone (no default)
MODES = {"the default first, as the tuner": True, "from nothing": False}


def report(tasks: Sequence[Any], tables: Mapping[str, Table],
           curves: Mapping[str, Mapping[str, np.ndarray]], names: Mapping[str, str]
           ) -> list[dict[str, Any]]:
    """Print one mode's table; its figures."""
    strategies = list(next(iter(curves.values())))
    print(f"| task | space | measured (errors) | default / fastest | random: final best / "
          f"fastest | trials to reach it: {' | '.join(strategies)} | trials to the "
          f"fastest in the sample: {' | '.join(strategies)} |")
    print("|---" * (5 + 2 * len(strategies)) + "|")
    figures = []
    for t in tasks:
        table, by = tables[t.key], curves[t.key]  # type: ignore[index]
        target = float(np.median(by["random"][:, -1]))
        reach = {s: float(np.median([trials_to_reach(c, target) for c in runs]))
                 for s, runs in by.items()}
        fastest = {s: float(np.median([trials_to_reach(c, table.best) for c in runs]))
                   for s, runs in by.items()}
        errors = sum(1 for _, c in table.rows.values() if not math.isfinite(c))
        default = table.rows[table.default][1]
        figures.append({"task": t.description, "space": t.space().size,
                        "measured": len(table.rows), "errors": errors,
                        "default_over_best": default / table.best,
                        "random_final_over_best": target / table.best, "trials": reach,
                        "trials_to_fastest": fastest})
        cells = " | ".join("never" if math.isinf(v) else f"{v:g}"
                           for v in list(reach.values()) + list(fastest.values()))
        print(f"| {names[t.key]} | {t.space().size} | {len(table.rows)} ({errors}) | "
              f"{default / table.best:.2f} | {target / table.best:.3f} | {cells} |")
    return figures


if __name__ == "__main__":
    sys.exit(main())
