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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ember.autotune.cost_model import XGBoostCostModel
from ember.autotune.database import knobs_json
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


class ModelSearch:
    """Model-guided search: fit the cost model on what was measured, run simulated annealing
    chains over its predictions, propose the best-predicted untried points, and a share
    `epsilon` of random ones (the model is wrong where it has seen nothing)."""

    name = "xgb"

    def __init__(self, space: Space, featurize: Callable[[Point], Sequence[float]],
                 task_key: str = "task", seed: int = 0, epsilon: float = 0.2,
                 transfer: Sequence[tuple[Sequence[float], float, str]] = (),
                 max_evaluations: int = 256, chains: int = 8, steps: int = 40,
                 min_samples: int = 4, model: XGBoostCostModel | None = None) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise TuningError(f"ModelSearch: epsilon must be in [0, 1], got {epsilon}")
        self.space, self.featurize, self.task_key = space, featurize, task_key
        self.rng = random.Random(seed)
        self.epsilon, self.max_evaluations = epsilon, max_evaluations
        self.chains, self.steps, self.min_samples = chains, steps, min_samples
        self.model = model or XGBoostCostModel(seed=seed)
        self.transfer = list(transfer)
        self.samples: list[tuple[Sequence[float], float]] = []
        self._features: dict[str, Sequence[float]] = {}
        self._best: list[Point] = []
        self._costs: dict[str, float] = {}

    def features(self, point: Point) -> Sequence[float]:
        key = knobs_json(point)
        if key not in self._features:
            self._features[key] = tuple(self.featurize(point))
        return self._features[key]

    def observe(self, points: Sequence[Mapping[str, Any]], costs: Sequence[float]) -> None:
        for p, c in zip(points, costs):
            self.samples.append((self.features(dict(p)), c))
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

    def _fit(self) -> None:
        rows = [f for f, _ in self.samples] + [f for f, _, _ in self.transfer]
        costs_all = [c for _, c in self.samples] + [c for _, c, _ in self.transfer]
        groups = [self.task_key] * len(self.samples) + [g for _, _, g in self.transfer]
        if len(self.samples) + len(self.transfer) >= self.min_samples:
            self.model.fit(rows, costs_all, groups)

    def propose(self, n: int, tried: set[str]) -> list[Point]:
        if n <= 0:
            return []
        if not self.model.trained:
            return _untried(self.space, tried, n, self.rng)
        explore = sum(1 for _ in range(n) if self.rng.random() < self.epsilon)
        candidates = self._anneal(tried)
        ranked = sorted(candidates.items(), key=lambda kv: -kv[1][1])
        chosen = [p for _, (p, _) in ranked[:n - explore]]
        picked = {knobs_json(p) for p in chosen}
        chosen += _untried(self.space, tried, n - len(chosen), self.rng, picked)
        return chosen

    def _score(self, points: Sequence[Point]) -> np.ndarray:
        return self.model.predict([self.features(p) for p in points])

    def _anneal(self, tried: set[str]) -> dict[str, tuple[Point, float]]:
        """Untried points the annealing chains visited, with their predicted scores."""
        seen: dict[str, tuple[Point, float]] = {}
        if self.space.size <= self.max_evaluations:  # small space: score every point
            points = [p for p in self.space.points() if knobs_json(p) not in tried]
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
            if evaluations >= self.max_evaluations:
                break
        return seen

    def _neighbour(self, point: Point) -> Point:
        """The point with one knob moved to an adjacent choice (or, at times, any choice)."""
        names = [n for n, values in self.space.choices.items() if len(values) > 1]
        if not names:
            return dict(point)
        name = self.rng.choice(names)
        values = self.space.choices[name]
        out = dict(point)
        index = values.index(point[name]) if point.get(name) in values else 0
        if self.rng.random() < 0.25:
            out[name] = self.rng.choice(values)
        else:
            out[name] = values[max(0, min(len(values) - 1, index + self.rng.choice((-1, 1))))]
        return out


SEARCHES = {"random": RandomSearch, "grid": GridSearch, "xgb": ModelSearch}

__all__ = ["GridSearch", "ModelSearch", "RandomSearch", "SEARCHES"]
