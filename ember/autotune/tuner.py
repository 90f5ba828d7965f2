"""The tuning loop: spend a budget of trials (and seconds) over a model's tasks, each round
on the task where the model's latency stands to gain most, every measurement committed to
the database as soon as its batch finishes.

    with TuningDatabase("tune.sqlite") as db, LocalRunner() as runner:
        results = tune(extract_tasks("resnet18.onnx"), db, runner, trials=200)

Resuming is free: candidates already in the database for a task and target are not measured
again, and they train the cost model from the first round.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.autotune.database import CONFIRM, Record, TuningDatabase, confirmed_costs, knobs_json
from ember.autotune.features import FEATURE_NAMES
from ember.autotune.measure import LocalRunner, MeasureResult, MeasureSettings, Runner
from ember.autotune.search import SEARCHES, ModelSearch
from ember.autotune.task import TuneTask
from ember.errors import EmberError, TuningError
from ember.target import Target


@dataclass
class TaskProgress:
    """Where one task stands: its default and best seconds (fastest run), trials, errors."""

    task: TuneTask
    fingerprint: str
    strategy: Any
    tried: set[str]
    default_cost: float = math.inf
    best_cost: float = math.inf
    best_knobs: dict[str, Any] | None = None
    trials: int = 0
    errors: int = 0
    since_improvement: int = 0
    history: list[float] = field(default_factory=list)   # best cost after each round
    done: bool = False
    timing: str = ""        # how the runner times: 'cold' or 'warm' weights
    confirmed: dict[str, float] = field(default_factory=dict)  # knobs_json -> median best

    @property
    def confirmed_speedup(self) -> float | None:
        """The default's confirmed seconds over the fastest confirmed candidate's (None:
        not confirmed; 1.0: the default stayed the fastest)."""
        default = self.confirmed.get(knobs_json(self.task.default_point()))
        if default is None:
            return None
        return default / min(self.confirmed.values())

    @property
    def speedup(self) -> float:
        if not math.isfinite(self.best_cost) or not math.isfinite(self.default_cost):
            return 1.0
        return self.default_cost / self.best_cost

    def note(self, point: dict[str, Any], result: MeasureResult, default: bool) -> None:
        self.tried.add(knobs_json(point))
        self.trials += 1
        if not result.ok:
            self.errors += 1
            self.since_improvement += 1
            return
        if default:
            self.default_cost = min(self.default_cost, result.best)
        if result.best < self.best_cost:
            self.best_cost, self.best_knobs = result.best, dict(point)
            self.since_improvement = 0
        else:
            self.since_improvement += 1


def _safe_features(task: TuneTask, point: dict[str, Any]) -> tuple[float, ...]:
    try:
        return task.features(point)
    except EmberError:  # an illegal candidate: measuring it records the error
        return (0.0,) * len(FEATURE_NAMES)


def _transfer(db: TuningDatabase, task: TuneTask, fingerprint: str, timing: str
              ) -> list[tuple[Sequence[float], float, str]]:
    """Earlier records of the same knob family, with features: other tasks on any target,
    and this task measured on other targets (another machine's records, imported) or timed
    the other way; not the task's own records on `fingerprint` timed as `timing` (the
    search observes those)."""
    rows = []
    for r in db.records(family=task.family):
        own = (r.task_key, r.fingerprint, r.timing) == (task.key, fingerprint, timing)
        if own or r.features is None or len(r.features) != len(FEATURE_NAMES):
            continue
        rows.append((r.features, r.best, f"{r.task_key}/{r.fingerprint}/{r.timing}"))
    return rows


def _start(task: TuneTask, db: TuningDatabase, search: str, seed: int, transfer: bool,
           epsilon: float, timing: str) -> TaskProgress:
    fingerprint = Target(task.target).fingerprint
    space = task.space()
    if search == "xgb":
        strategy: Any = ModelSearch(space, lambda p: _safe_features(task, p), task.key, seed,
                                    epsilon, _transfer(db, task, fingerprint, timing) if transfer
                                    else ())
    else:
        strategy = SEARCHES[search](space, seed)
    progress = TaskProgress(task, fingerprint, strategy, set(), timing=timing)
    default = knobs_json(task.default_point())
    # resume: what was measured (timed the same way) trains the model and is not repeated
    earlier = db.records(task_key=task.key, fingerprint=fingerprint, timing=timing)
    for r in earlier:
        point = dict(r.knobs)
        result = MeasureResult(r.costs, r.error)
        progress.note(point, result, knobs_json(point) == default)
        progress.trials -= 1  # trials count this session's measurements only
    if earlier:
        strategy.observe([dict(r.knobs) for r in earlier], [r.best for r in earlier])
    return progress


def _measure(progress: TaskProgress, points: list[dict[str, Any]], runner: Runner,
             db: TuningDatabase, version: str, role: str = "") -> None:
    task = progress.task
    results = runner.measure(task, points)
    default = knobs_json(task.default_point())
    records = []
    for point, result in zip(points, results):
        features = (progress.strategy.features(point) if isinstance(progress.strategy,
                                                                    ModelSearch)
                    else _safe_features(task, point))
        records.append(Record(task.key, task.family, task.description, task.target,
                              progress.fingerprint, point, result.costs, result.error,
                              tuple(features), version, timing=progress.timing, role=role))
        progress.note(point, result, knobs_json(point) == default)
    db.add(records)
    progress.strategy.observe(points, [r.best for r in results])
    progress.history.append(progress.best_cost)


# candidates timed again beside the default after the search, and rounds of it
CONFIRM_CANDIDATES = 3


def _confirm(progress: TaskProgress, rounds: int, runner: Runner, db: TuningDatabase,
             version: str) -> None:
    """Time the default and the CONFIRM_CANDIDATES fastest other candidates again, in turns,
    `rounds` times, as one batch (the worker keeps them built); their records (role
    'confirm') decide what applies. The fastest of hundreds of single measurements is partly
    the luckiest: tuning MobileNet-V2, 6 of the 25 tasks' fastest candidates were slower than
    the default timed beside them again, 3 more within 1%."""
    default = knobs_json(progress.task.default_point())
    names = set(progress.task.space().choices)
    earlier = db.records(progress.task.key, progress.fingerprint, ok_only=True,
                         timing=progress.timing)
    fastest: dict[str, Record] = {}
    for r in sorted(earlier, key=lambda r: r.best):
        if names <= set(r.knobs):  # not from before a knob joined the space
            fastest.setdefault(knobs_json(r.knobs), r)
    others = [dict(r.knobs) for k, r in fastest.items() if k != default][:CONFIRM_CANDIDATES]
    if not others or default not in fastest or next(iter(fastest)) == default:
        return  # nothing beat the default
    points = [dict(fastest[default].knobs)] + others
    _measure(progress, points * rounds, runner, db, version, CONFIRM)
    progress.confirmed = confirmed_costs(db.records(progress.task.key, progress.fingerprint,
                                                    ok_only=True, timing=progress.timing))


# rounds over which a task's recent gain is averaged (one round's new best is often noise)
GAIN_WINDOW = 3
# the gain a task is credited with before it has a measured trend, shrinking with its rounds
OPTIMISTIC_GAIN = 0.2


def _priority(p: TaskProgress) -> float:
    """Expected saving of the next round: weight x best latency x relative gain. The gain is
    the larger of the task's measured trend (its best's relative improvement per round over
    the last GAIN_WINDOW rounds) and an optimistic prior OPTIMISTIC_GAIN / (1 + rounds
    searched), so a task whose search stalls gives way to the others in proportion to its
    share of the model's time (rounds ~ weight x latency), and none is starved: without the
    shrinking prior, every stalled task had the same floor and the heaviest took all the
    rounds (ResNet-50: 898 of 1903 trials on one 1x1 conv, 9 on most others)."""
    rounds = max(0, len(p.history) - 1)  # the first round measured the default
    prior = OPTIMISTIC_GAIN / (1 + rounds)
    trend = 0.0
    if rounds:
        window = p.history[-(GAIN_WINDOW + 1):]
        start, end = window[0], window[-1]
        if math.isfinite(start) and start > 0 and math.isfinite(end):
            trend = (start - end) / start / (len(window) - 1)
    best = p.best_cost if math.isfinite(p.best_cost) else 1.0
    return p.task.weight * best * max(trend, prior)


def tune(tasks: Sequence[TuneTask] | Any, db: TuningDatabase | None = None,
         runner: Runner | None = None, trials: int = 64, budget_seconds: float | None = None,
         search: str = "xgb", batch: int = 8, transfer: bool = True, epsilon: float = 0.2,
         early_stopping: int | None = None, progress: bool = False, seed: int = 0,
         confirm: int = 2, target: str | Target | None = None) -> list[TaskProgress]:
    """Tune `tasks` for at most `trials` measurements in all (and `budget_seconds`), `batch`
    candidates a round; returns each task's progress (default vs best).

    `tasks` may also be a model (a path, an onnx.ModelProto or an ember Graph): its tasks on
    `target` (default "llvm"; GPU targets are measured on their device), as in
    `tune(model, db, target="opencl", trials=16)`. `db` defaults to the tuning database at
    ember.autotune.default_path().

    Then, per task where a candidate beat the default, the default and the three fastest
    candidates are timed again in turns, `confirm` rounds (the worker keeps them built, so
    this costs runs, not builds); those records decide what `compile(tuning_db=...)`
    applies (`apply.py`): a candidate that looked fast only by luck, or because the
    default's runs met other work on the machine, loses its lead there."""
    if search not in SEARCHES:
        raise TuningError(f"unknown search {search!r}; expected one of {sorted(SEARCHES)}")
    if trials < 1 or batch < 1:
        raise TuningError(f"tune: trials and batch must be >= 1, got {trials} and {batch}")
    from ember.version import __version__

    if not isinstance(tasks, (list, tuple)):  # a model
        from ember.autotune.task import extract_tasks

        tasks = extract_tasks(tasks, target if target is not None else "llvm")
    elif target is not None:
        wrong = [t.description for t in tasks
                 if str(Target(t.target)) != str(Target(target))]
        if wrong:
            raise TuningError(f"tune: target {str(target)!r} given, but tasks {wrong[:3]} "
                              "were extracted for another target")
    if db is None:
        with TuningDatabase() as own_db:
            return tune(tasks, own_db, runner, trials, budget_seconds, search, batch,
                        transfer, epsilon, early_stopping, progress, seed, confirm)
    own_runner = runner is None
    runner = runner or LocalRunner()
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    settings = getattr(runner, "settings", None)
    timing = settings.timing if isinstance(settings, MeasureSettings) else ""
    states = [_start(t, db, search, seed + i, transfer, epsilon, timing)
              for i, t in enumerate(tasks)]
    bar = _bar(trials, progress)
    used = 0
    try:
        # the first round of every task measures its default schedule
        queue = list(states)
        while used < trials and (deadline is None or time.monotonic() < deadline):
            live = [s for s in states if not s.done]
            if not live:
                break
            state = queue.pop(0) if queue else max(live, key=_priority)
            if state.done:
                continue
            size = min(batch, trials - used)
            points: list[dict[str, Any]] = []
            default = state.task.default_point()
            if knobs_json(default) not in state.tried:
                # first the default of every task: its latency decides where trials go
                points.append(default)
                size = 1
            if size > len(points):
                if transfer and isinstance(state.strategy, ModelSearch):
                    # what other tasks of the family measured meanwhile trains this one too
                    state.strategy.set_transfer(_transfer(db, state.task, state.fingerprint,
                                                               state.timing))
                chosen = state.tried | {knobs_json(p) for p in points}
                points += state.strategy.propose(size - len(points), chosen)
            if not points:
                state.done = True  # the space is exhausted
                continue
            _measure(state, points, runner, db, __version__)
            used += len(points)
            if early_stopping is not None and state.since_improvement >= early_stopping:
                state.done = True
            if bar is not None:
                bar.update(len(points))
                bar.set_postfix_str(f"{state.task.op} best {state.best_cost * 1e3:.3f} ms "
                                    f"x{state.speedup:.2f}", refresh=False)
        for state in states:
            if confirm:
                _confirm(state, confirm, runner, db, __version__)
    finally:
        if bar is not None:
            bar.close()
        if own_runner:
            runner.close()
    return states


def _bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="tuning", unit="trial")


def summary(states: Sequence[TaskProgress]) -> str:
    """A table: per task its weight, trials, errors, default and best latency (fastest run
    of any record), speedup, and the speedup the confirmation measured (what applies; '-':
    not confirmed, nothing beat the default)."""
    lines = [f"{'task':56} {'w':>2} {'trials':>6} {'err':>3} {'default ms':>10} "
             f"{'best ms':>9} {'speedup':>7} {'confirmed':>9}"]
    for s in states:
        confirmed = s.confirmed_speedup
        lines.append(f"{s.task.description[:56]:56} {s.task.weight:>2} {s.trials:>6} "
                     f"{s.errors:>3} {s.default_cost * 1e3:>10.3f} {s.best_cost * 1e3:>9.3f} "
                     f"{s.speedup:>7.2f} "
                     f"{'-' if confirmed is None else format(confirmed, '.2f'):>9}")
    return "\n".join(lines)


__all__ = ["TaskProgress", "summary", "tune"]
