"""The learned cost model: XGBoost ranking over loop features, trained per task group so that
only the order of candidates within a task matters (tasks differ in scale by orders of
magnitude; what the search needs is which candidate of this task is faster).

    model = XGBoostCostModel()
    model.fit(features, costs, groups)           # groups: the task of each sample
    scores = model.predict(candidate_features)   # higher = predicted faster
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ember.errors import TuningError


def _xgboost() -> object:
    try:
        import xgboost
    except ImportError:
        raise TuningError("the model-guided tuner needs xgboost: pip install "
                          "'ember[autotune]' (or use search='random')") from None
    return xgboost


def relevance(costs: Sequence[float]) -> np.ndarray:
    """Per-sample label within one task: best cost / cost in (0, 1], 0 for a failure."""
    c = np.asarray(costs, dtype=np.float64)
    finite = np.isfinite(c) & (c > 0)
    if not finite.any():
        return np.zeros_like(c)
    best = c[finite].min()
    return np.where(finite, best / np.where(finite, c, 1.0), 0.0)


OBJECTIVES = ("rank:pairwise", "rank:ndcg", "reg:squarederror")


class XGBoostCostModel:
    """Gradient-boosted trees with a pairwise ranking objective (`rank:pairwise`)."""

    def __init__(self, rounds: int = 60, max_depth: int = 6, learning_rate: float = 0.3,
                 seed: int = 0, objective: str = "rank:pairwise") -> None:
        if objective not in OBJECTIVES:
            raise TuningError(f"cost model: objective must be one of {OBJECTIVES}, got "
                              f"{objective!r}")
        self.rounds, self.seed = rounds, seed
        self.params = {"objective": objective, "max_depth": max_depth,
                       "eta": learning_rate, "min_child_weight": 1, "subsample": 1.0,
                       "seed": seed, "nthread": 1, "verbosity": 0}
        self._booster: object | None = None

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def fit(self, features: Sequence[Sequence[float]], costs: Sequence[float],
            groups: Sequence[str], weights: Mapping[str, float] | None = None) -> None:
        """Train on measured samples: `costs` in seconds (inf for a failed candidate), each
        sample's task in `groups` (labels are ranked within a task only); `weights`: a
        group's weight (default 1), e.g. more for the task being tuned than for the tasks
        its records were transferred from."""
        if not (len(features) == len(costs) == len(groups)):
            raise TuningError(f"cost model: {len(features)} feature rows, {len(costs)} costs "
                              f"and {len(groups)} groups")
        xgb = _xgboost()
        order = sorted(range(len(groups)), key=lambda i: groups[i])  # xgboost wants groups
        X = np.asarray([features[i] for i in order], dtype=np.float32)  # contiguous
        keys = [groups[i] for i in order]
        labels = np.zeros(len(order))
        sizes = []
        start = 0
        while start < len(keys):
            end = start
            while end < len(keys) and keys[end] == keys[start]:
                end += 1
            labels[start:end] = relevance([costs[order[i]] for i in range(start, end)])
            sizes.append(end - start)
            start = end
        if len(X) < 2 or not any(s > 1 for s in sizes):
            self._booster = None
            return
        # relevance grades: xgboost's rank objectives compare label values
        graded = self.params["objective"].startswith("rank:")
        dtrain = xgb.DMatrix(X, label=np.round(labels * 30.0) if graded  # type: ignore
                             else labels)
        if graded:
            dtrain.set_group(sizes)
        if weights:  # ranking: one weight a group; otherwise one a sample
            rows = [keys[i] for i in np.cumsum([0] + sizes[:-1])] if graded else keys
            dtrain.set_weight(np.asarray([float(weights.get(k, 1.0)) for k in rows]))
        self._booster = xgb.train(self.params, dtrain,  # type: ignore[attr-defined]
                                  num_boost_round=self.rounds)

    def predict(self, features: Sequence[Sequence[float]]) -> np.ndarray:
        """Scores (higher = predicted faster); zeros before the model is trained."""
        if not len(features):
            return np.zeros(0)
        if self._booster is None:
            return np.zeros(len(features))
        xgb = _xgboost()
        X = np.asarray(features, dtype=np.float32)
        return np.asarray(self._booster.predict(xgb.DMatrix(X)))  # type: ignore[attr-defined]


def rank_correlation(scores: Sequence[float], costs: Sequence[float]) -> float:
    """Spearman correlation between predicted scores and measured speed (1 / cost)."""
    s = np.argsort(np.argsort(np.asarray(scores, dtype=np.float64)))
    speed = [1.0 / c if c > 0 and math.isfinite(c) else 0.0 for c in costs]
    t = np.argsort(np.argsort(np.asarray(speed)))
    if np.std(s) == 0 or np.std(t) == 0:
        return 0.0
    return float(np.corrcoef(s, t)[0, 1])


__all__ = ["XGBoostCostModel", "rank_correlation", "relevance"]
