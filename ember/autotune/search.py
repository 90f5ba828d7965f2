"""Search strategies over a knob space: each proposes the next batch of untried points.

    RandomSearch   uniform samples (the baseline)
    GridSearch     the points in order
    ModelSearch    simulated annealing over the XGBoost cost model's predictions, with
                   epsilon-greedy exploration; trained on this task's measurements plus
                   transferred ones (other tasks of the family, earlier sessions)
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ember.autotune.cost_model import XGBoostCostModel
from ember.autotune.database import knobs_json
from ember.autotune.features import FEATURE_NAMES
from ember.errors import TuningError
from ember.ops.knobs import Space

Point = dict[str, Any]


def _untried(space: Space, tried: set[str], n: int, rng: random.Random,
             exclude: set[str] = set()) -> list[Point]:
    """Up to n distinct random points not in `tried` (enumerated when the space is small)."""
    if space.size <= 4096:
        pool = [p for p in space.points() if knobs_json(p) not in tried | exclude]
        rng.shuffle(pool)
        return pool[:n]
    out: dict[str, Point] = {}
    for _ in range(50 * n):
        p = space.sample(rng)
        key = knobs_json(p)
        if key not in tried and key not in exclude:
            out[key] = p
            if len(out) == n:
                break
    return list(out.values())


class RandomSearch:
    """Uniform random points, never one twice."""

    name = "random"

    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space, self.rng = space, random.Random(seed)

    def propose(self, n: int, tried: set[str]) -> list[Point]:
        return _untried(self.space, tried, n, self.rng)

    def observe(self, points: Sequence[Mapping[str, Any]], costs: Sequence[float]) -> None:
        pass


class GridSearch:
    """Every point in the order `Space.points` gives them."""

    name = "grid"

    def __init__(self, space: Space, seed: int = 0) -> None:
        self.space = space

    def propose(self, n: int, tried: set[str]) -> list[Point]:
        out: list[Point] = []
        if n <= 0:
            return out
        for p in self.space.points():
            if knobs_json(p) not in tried:
                out.append(p)
                if len(out) == n:
                    break
        return out

    def observe(self, points: Sequence[Mapping[str, Any]], costs: Sequence[float]) -> None:
        pass


INITIAL_BATCHES = ("near-and-spread", "spread", "random")


class ModelSearch:
    """Model-guided search: fit the cost model on what was measured, run simulated annealing
    chains over its predictions, propose the best-predicted untried points, and a share
    `epsilon` of exploring ones (the model is wrong where it has seen nothing), chosen far
    in feature space from what was measured.

    Before the model has data (no transfer, fewer than `min_samples` measurements), a share
    `prior_share` of the batch is the points the prior ranks first (the feature named
    `prior`: the machine model's estimate from the target's facts, features.tile_estimate;
    the trees may use it later like any feature), the rest spread in feature space. After
    the model is trained, the prior still weighs beside it (`prior_weight`, halving by the
    task's 16th measurement of its own; see `_score`): in the replay of a 320-point sample of
    three conv tasks and all 96 points of a dense one (benchmarks/search_efficiency.py), the
    trees trained on a few dozen points alone ranked a conv task's fastest tiles no better
    than the estimate did, and the two together needed fewer trials on most tasks
    (BENCHMARKS.md, "320-point samples"). Where
    the prior says nothing (None, or the same for every point sampled), the batch is
    `initial`: "random" (uniform, the default: it did best in the replay of
    benchmarks/search_efficiency.py), "spread" (points chosen one by one farthest in
    standardized feature space from what was measured) or "near-and-spread" (half the
    untried points nearest in knob steps to the best measured one, the default schedule
    at first, half spread). Candidates whose features equal a measured point's (knobs that
    change nothing in the lowered program) go last. The batch's best-predicted share is
    chosen for rank and spread together (`diversity`, see `_diverse`): points the model
    ranks alike are often one point's neighbours, and 8 neighbours of one tile teach the
    model less than 8 tiles. In the replay of two 320-point samples of the four tasks, 40
    seeds each, diversity 0.5 took the search from nothing to random's final best in 9-20.5
    trials where 0 took 15-42 on the four conv rows it moved (sum over the 8 rows 196 ->
    138 trials); with transfer every row stayed within one trial (9-16 either way).
    The task's own samples weigh
    `own_weight` times a transferred task's in the model ("auto": up to as much as all
    the transferred tasks together, growing with its own samples)."""

    name = "xgb"

    def __init__(self, space: Space, featurize: Callable[[Point], Sequence[float]],
                 task_key: str = "task", seed: int = 0, epsilon: float = 0.2,
                 transfer: Sequence[tuple[Sequence[float], float, str]] = (),
                 max_evaluations: int = 256, chains: int = 8, steps: int = 40,
                 min_samples: int = 4, model: XGBoostCostModel | None = None,
                 own_weight: float | str = "auto", initial: str = "random",
                 prior: str | None = "tile_estimate", prior_share: float = 0.5,
                 prior_weight: float = 1.0, max_seconds: float = 15.0,
                 diversity: float = 0.5) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise TuningError(f"ModelSearch: epsilon must be in [0, 1], got {epsilon}")
        if initial not in INITIAL_BATCHES:
            raise TuningError(f"ModelSearch: initial must be one of {INITIAL_BATCHES}, got "
                              f"{initial!r}")
        if own_weight != "auto" and not (isinstance(own_weight, (int, float))
                                         and own_weight > 0):
            raise TuningError(f"ModelSearch: own_weight must be 'auto' or > 0, got "
                              f"{own_weight!r}")
        self.space, self.featurize, self.task_key = space, featurize, task_key
        self.rng = random.Random(seed)
        self.epsilon, self.max_evaluations = epsilon, max_evaluations
        self.chains, self.steps, self.min_samples = chains, steps, min_samples
        self.own_weight, self.initial = own_weight, initial
        if prior is not None and prior not in FEATURE_NAMES:
            raise TuningError(f"ModelSearch: prior must be a feature name or None, got "
                              f"{prior!r}")
        self._prior = None if prior is None else FEATURE_NAMES.index(prior)
        if not 0.0 < prior_share <= 1.0:
            raise TuningError(f"ModelSearch: prior_share must be in (0, 1], got {prior_share}")
        self.prior_share = prior_share
        if not prior_weight >= 0.0:
            raise TuningError(f"ModelSearch: prior_weight must be >= 0, got {prior_weight}")
        self.prior_weight = prior_weight
        if not diversity >= 0.0:
            raise TuningError(f"ModelSearch: diversity must be >= 0, got {diversity}")
        self.diversity = diversity
        # seconds a proposal may spend lowering candidates for their features (a Winograd
        # F(4,3) kernel takes seconds each); past it, only points already lowered are
        # scored and the rest of the batch is drawn at random
        self.max_seconds = max_seconds
        self._deadline = math.inf
        self._sample: list[Sequence[float]] | None = None  # features of a sample of the space
        self._model_scale = np.zeros(0)   # the model's sorted scores of the sample, measured
        self._prior_scale = np.zeros(0)   # the prior's, sorted
        self.model = model or XGBoostCostModel(seed=seed)
        self.transfer = list(transfer)
        self.samples: list[tuple[Sequence[float], float]] = []
        self._features: dict[str, Sequence[float]] = {}
        self._best: list[Point] = []
        self._costs: dict[str, float] = {}
        self._measured: set[tuple[float, ...]] = set()   # feature vectors measured

    def features(self, point: Point) -> Sequence[float]:
        key = knobs_json(point)
        if key not in self._features:
            self._features[key] = tuple(self.featurize(point))
        return self._features[key]

    def observe(self, points: Sequence[Mapping[str, Any]], costs: Sequence[float]) -> None:
        for p, c in zip(points, costs):
            self.samples.append((self.features(dict(p)), c))
            self._measured.add(tuple(self.features(dict(p))))
            if math.isfinite(c):
                self._costs[knobs_json(p)] = c
                self._best.append(dict(p))
        # the annealing chains start from the fastest points measured so far
        self._best.sort(key=lambda p: self._costs[knobs_json(p)])
        self._best = self._best[:self.chains]
        self._fit()

    def set_transfer(self, transfer: Sequence[tuple[Sequence[float], float, str]]) -> None:
        """Replace the transferred samples (other tasks measured meanwhile) and refit."""
        if len(transfer) != len(self.transfer):
            self.transfer = list(transfer)
            self._fit()

    def _weights(self) -> dict[str, float]:
        if self.own_weight != "auto":
            return {self.task_key: float(self.own_weight)}
        if not self.transfer or not self.samples:
            return {}
        sources = len({g for _, _, g in self.transfer})
        # grows with the task's own samples: a few measurements rank less surely
        share = min(1.0, len(self.samples) / 16)
        return {self.task_key: max(1.0, sources * share)}

    def _fit(self) -> None:
        rows = [f for f, _ in self.samples] + [f for f, _, _ in self.transfer]
        costs_all = [c for _, c in self.samples] + [c for _, c, _ in self.transfer]
        groups = [self.task_key] * len(self.samples) + [g for _, _, g in self.transfer]
        if len(self.samples) + len(self.transfer) >= self.min_samples:
            self.model.fit(rows, costs_all, groups, self._weights())
        if self.model.trained and self._prior_informs():
            reference = list(self._space_sample()) + [f for f, _ in self.samples]
            self._model_scale = np.sort(self.model.predict(reference))
            self._prior_scale = np.sort([self._prior_value(f) for f in reference])

    def _prior_value(self, f: Sequence[float]) -> float:
        return float(f[self._prior]) if self._prior is not None and len(f) > self._prior \
            else 0.0

    def _prior_of(self, point: Point) -> float:
        return self._prior_value(self.features(point))

    def _space_sample(self) -> list[Sequence[float]]:
        """Features of a fixed sample of 32 points of the space (lowered once)."""
        if self._sample is None:
            self._sample = [self.features(p)
                            for p in _untried(self.space, set(), 32, random.Random(0))]
        return self._sample

    def _prior_informs(self) -> bool:
        """Whether the prior tells points apart: it differs among some sampled points."""
        if self._prior is None:
            return False
        return len({self._prior_value(f) for f in self._space_sample()}) > 1

    def propose(self, n: int, tried: set[str]) -> list[Point]:
        if n <= 0:
            return []
        self._deadline = time.monotonic() + self.max_seconds
        if not self.model.trained and not self._prior_informs():
            if self.initial == "random":
                return _untried(self.space, tried, n, self.rng)
            return self._first_batch(n, tried)
        if self.model.trained:
            explore = sum(1 for _ in range(n) if self.rng.random() < self.epsilon)
        else:  # the prior alone: a share of the batch, the rest spread
            explore = n - max(1, round(n * self.prior_share))
        candidates = self._anneal(tried)
        # equal scores (a model that cannot tell them apart yet) in random order, not in
        # the order the space lists its points
        ties = {key: self.rng.random() for key in candidates}
        ranked = sorted(candidates.items(), key=lambda kv: (-kv[1][1], ties[kv[0]]))
        # a candidate that lowers to a measured program (same features) goes last
        fresh = [p for _, (p, _) in ranked if tuple(self.features(p)) not in self._measured]
        same = [p for _, (p, _) in ranked if tuple(self.features(p)) in self._measured]
        chosen = self._diverse(_distinct_programs(fresh, 4 * n, self.features), n - explore)
        picked = {knobs_json(p) for p in chosen}
        pool = _untried(self.space, tried, 4 * n, self.rng, picked)
        chosen += self._spread(pool, n - len(chosen), chosen)
        picked = {knobs_json(p) for p in chosen}
        chosen += [p for p in same if knobs_json(p) not in picked][:n - len(chosen)]
        if len(chosen) < n:
            picked = {knobs_json(p) for p in chosen}
            chosen += _untried(self.space, tried, n - len(chosen), self.rng, picked)
        return chosen

    def _diverse(self, ranked: Sequence[Point], n: int) -> list[Point]:
        """n of the best-ranked points: one by one, the point whose rank (1 first, 0 last)
        plus `diversity` x its knob-step distance to the nearest point chosen already (over
        the largest such distance) is highest; with diversity 0, the first n."""
        if self.diversity == 0.0 or n <= 1 or len(ranked) <= n:
            return list(ranked[:n])
        rank = 1.0 - np.arange(len(ranked)) / len(ranked)
        out = [0]
        nearest = np.array([_knob_distance(self.space, ranked[0], p) for p in ranked])
        while len(out) < n:
            gain = rank + self.diversity * nearest / (float(nearest.max()) or 1.0)
            gain[out] = -np.inf
            i = int(np.argmax(gain))
            out.append(i)
            nearest = np.minimum(nearest, [_knob_distance(self.space, ranked[i], p)
                                           for p in ranked])
        return [ranked[i] for i in out]

    def _first_batch(self, n: int, tried: set[str]) -> list[Point]:
        """"spread" or "near-and-spread" (see the class); random when nothing was measured."""
        if not self._best:
            return _untried(self.space, tried, n, self.rng)
        center = self._best[0]
        near = self._nearest(center, tried, 4 * n)
        near = [p for p in self._affordable(near) if tuple(self.features(p)) not in self._measured]
        chosen = _distinct_programs(near, (n + 1) // 2 if self.initial == "near-and-spread"
                                    else 0, self.features)
        picked = {knobs_json(p) for p in chosen}
        pool = _untried(self.space, tried, 8 * n, self.rng, picked)
        chosen += self._spread(pool, n - len(chosen), chosen)
        if len(chosen) < n:
            picked = {knobs_json(p) for p in chosen}
            chosen += _untried(self.space, tried, n - len(chosen), self.rng, picked)
        return chosen

    def _nearest(self, center: Point, tried: set[str], n: int) -> list[Point]:
        """Up to n untried points by knob-step distance from `center` (ties at random)."""
        if self.space.size <= 4096:
            pool = [p for p in self.space.points() if knobs_json(p) not in tried]
        else:
            pool = {knobs_json(q): q for q in (self._neighbour(center) for _ in range(8 * n))
                    if knobs_json(q) not in tried}.values()  # type: ignore[assignment]
            pool = list(pool)
        self.rng.shuffle(pool)
        pool.sort(key=lambda p: _knob_distance(self.space, center, p))
        return pool[:n]

    def _spread(self, pool: Sequence[Point], n: int, chosen: Sequence[Point]) -> list[Point]:
        """n points of `pool` chosen one by one farthest (standardized feature distance)
        from the measured points and those chosen, skipping measured programs."""
        if n <= 0:
            return []
        pool = [p for p in self._affordable(pool) if tuple(self.features(p)) not in self._measured]
        if not pool:
            return []
        X = np.asarray([self.features(p) for p in pool], dtype=np.float64)
        anchors = [f for f, _ in self.samples] + [self.features(p) for p in chosen]
        scale = np.std(np.vstack([X] + ([np.asarray(anchors)] if anchors else [])), axis=0)
        scale[scale == 0] = 1.0
        Z = X / scale
        if anchors:
            A = np.asarray(anchors, dtype=np.float64) / scale
            distance = np.min(np.linalg.norm(Z[:, None, :] - A[None, :, :], axis=2), axis=1)
        else:
            distance = np.full(len(pool), np.inf)
        out: list[Point] = []
        for _ in range(min(n, len(pool))):
            i = int(np.argmax(distance))
            if out and distance[i] <= 0:
                break
            out.append(pool[i])
            distance = np.minimum(distance, np.linalg.norm(Z - Z[i], axis=1))
            distance[i] = -1.0
        return out

    def _score(self, points: Sequence[Point]) -> np.ndarray:
        """Higher = predicted faster: the prior before the model is trained; after, the
        model's score, and while the task has few measurements of its own, the prior's too.
        Both are read as quantiles of their scores of a fixed sample of the space and the
        measured points (so a score means the same in every call), the prior's weighing
        `prior_weight` at first and less as measurements come: at 16 of its own, half."""
        if not self.model.trained and self._prior is not None:
            return np.asarray([self._prior_of(p) for p in points], dtype=float)
        scores = self.model.predict([self.features(p) for p in points])
        weight = self.prior_weight * 16.0 / (16.0 + len(self.samples))
        if weight == 0.0 or not len(self._prior_scale) or not len(points):
            return scores
        priors = np.asarray([self._prior_of(p) for p in points], dtype=float)
        spread = float(np.std(self._model_scale)) or 1.0
        # the model's own order breaks ties between equal quantiles (past the sample's range)
        return (_quantile(self._model_scale, scores) + 1e-3 * scores / spread
                + weight * _quantile(self._prior_scale, priors))

    def _anneal(self, tried: set[str]) -> dict[str, tuple[Point, float]]:
        """Untried points the annealing chains visited, with their predicted scores."""
        seen: dict[str, tuple[Point, float]] = {}
        if self.space.size <= self.max_evaluations:  # small space: score every point
            points = self._affordable([p for p in self.space.points()
                                       if knobs_json(p) not in tried])
            for p, s in zip(points, self._score(points)):
                seen[knobs_json(p)] = (p, float(s))
            return seen
        starts = self._best + _untried(self.space, set(), self.chains - len(self._best),
                                       self.rng)
        current = list(starts)
        scores = list(self._score(current))
        spread = float(np.std(scores)) or 1.0
        evaluations = len(current)
        for step in range(self.steps):
            temperature = spread * (1.0 - step / self.steps) + 1e-9
            proposals = [self._neighbour(p) for p in current]
            new_scores = self._score(proposals)
            evaluations += len(proposals)
            for i, (p, s) in enumerate(zip(proposals, new_scores)):
                key = knobs_json(p)
                if key not in tried:
                    seen[key] = (p, float(s))
                if s >= scores[i] or self.rng.random() < math.exp((s - scores[i]) / temperature):
                    current[i], scores[i] = p, float(s)
            if evaluations >= self.max_evaluations or time.monotonic() > self._deadline:
                break
        return seen

    def _affordable(self, points: Sequence[Point]) -> list[Point]:
        """`points` whose features are known, then the others in order while the proposal's
        time for lowering lasts (all of them where lowering is quick)."""
        known = [p for p in points if knobs_json(p) in self._features]
        for p in points:
            if knobs_json(p) not in self._features:
                if time.monotonic() > self._deadline:
                    break
                self.features(p)
                known.append(p)
        return known

    def _neighbour(self, point: Point) -> Point:
        """The point with one knob moved to an adjacent choice (or, at times, any choice),
        within the space's constraint (else, after a few tries, the point itself)."""
        names = [n for n, values in self.space.choices.items() if len(values) > 1]
        if not names:
            return dict(point)
        for _ in range(8):
            name = self.rng.choice(names)
            values = self.space.choices[name]
            out = dict(point)
            index = values.index(point[name]) if point.get(name) in values else 0
            if self.rng.random() < 0.25:
                out[name] = self.rng.choice(values)
            else:
                step = self.rng.choice((-1, 1))
                out[name] = values[max(0, min(len(values) - 1, index + step))]
            if self.space.contains(out):
                return out
        return dict(point)


def _quantile(reference: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per value, the share of the sorted `reference` at or below it."""
    return np.searchsorted(reference, values, side="right") / len(reference)


def _knob_distance(space: Space, a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Steps between two points: per knob, how many choices apart their values are."""
    total = 0
    for name, values in space.choices.items():
        if a.get(name) == b.get(name):
            continue
        if a.get(name) in values and b.get(name) in values:
            total += abs(values.index(a[name]) - values.index(b[name]))
        else:
            total += len(values)
    return float(total)


def _distinct_programs(points: Sequence[Point], n: int,
                       features: Callable[[Point], Sequence[float]]) -> list[Point]:
    """The first n points of `points` whose features differ from those before them."""
    out: list[Point] = []
    seen: set[tuple[float, ...]] = set()
    for p in points:
        if len(out) >= n:
            break
        f = tuple(features(p))
        if f not in seen:
            seen.add(f)
            out.append(p)
    return out


SEARCHES = {"random": RandomSearch, "grid": GridSearch, "xgb": ModelSearch}

__all__ = ["GridSearch", "ModelSearch", "RandomSearch", "SEARCHES"]
