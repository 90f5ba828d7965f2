"""The XGBoost cost model ranks candidates better than chance, and model-guided search finds
a synthetic optimum in fewer trials than random search."""

import math

import numpy as np
import pytest

from ember.autotune.cost_model import XGBoostCostModel, rank_correlation, relevance
from ember.autotune.search import GridSearch, ModelSearch, RandomSearch
from ember.autotune.database import knobs_json
from ember.ops.knobs import Space

pytest.importorskip("xgboost")


def _cost(x):
    # a bowl in the first two features, a cliff in the third, noise-free
    return math.exp(0.5 * (x[0] - 3) ** 2 + 0.3 * (x[1] - 5) ** 2 + (2.0 if x[2] > 6 else 0.0))


def test_relevance():
    assert list(relevance([2.0, 1.0, math.inf, 4.0])) == [0.5, 1.0, 0.0, 0.25]
    assert list(relevance([math.inf])) == [0.0]


def test_ranks_better_than_random_on_held_out_task():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 9, size=(400, 5))
    costs = [_cost(x) * (1 + 0.05 * rng.standard_normal()) for x in X]
    groups = [f"task{i % 4}" for i in range(300)]
    model = XGBoostCostModel()
    model.fit(X[:300], costs[:300], groups)
    scores = model.predict(X[300:])
    model_rho = rank_correlation(scores, costs[300:])
    random_rho = rank_correlation(rng.standard_normal(100), costs[300:])
    assert model_rho > 0.7 and abs(random_rho) < 0.3
    top = np.argsort(-scores)[:10]
    assert np.mean([costs[300 + i] for i in top]) < np.median(costs[300:])


def test_untrained_model_predicts_zeros():
    model = XGBoostCostModel()
    model.fit([[1.0], [2.0]], [1.0, 2.0], ["a", "b"])  # no task with two samples
    assert not model.trained and list(model.predict([[1.0], [3.0]])) == [0.0, 0.0]


SPACE = Space({"a": tuple(range(10)), "b": tuple(range(10)), "c": tuple(range(10))})


def _trials_to_optimum(strategy, limit=400, batch=8):
    best = min(_cost((p["a"], p["b"], p["c"])) for p in SPACE.points())
    tried, count = set(), 0
    while count < limit:
        points = strategy.propose(batch, tried)
        costs = [_cost((p["a"], p["b"], p["c"])) for p in points]
        strategy.observe(points, costs)
        for p, c in zip(points, costs):
            count += 1
            tried.add(knobs_json(p))
            if c <= best:
                return count
    return limit


def test_model_search_beats_random_search():
    featurize = lambda p: (p["a"], p["b"], p["c"])  # noqa: E731
    guided = [_trials_to_optimum(ModelSearch(SPACE, featurize, seed=s, max_evaluations=200))
              for s in range(6)]
    blind = [_trials_to_optimum(RandomSearch(SPACE, seed=s)) for s in range(6)]
    assert sum(guided) < sum(blind) / 2


def test_grid_and_random_never_repeat():
    space = Space({"x": (1, 2, 3), "y": (True, False)})
    for strategy in (GridSearch(space), RandomSearch(space, seed=1)):
        tried = set()
        seen = []
        while True:
            points = strategy.propose(4, tried)
            if not points:
                break
            seen += [knobs_json(p) for p in points]
            tried |= {knobs_json(p) for p in points}
        assert sorted(seen) == sorted(knobs_json(p) for p in space.points())
        assert strategy.propose(0, set()) == []


def test_epsilon_must_be_a_share():
    from ember.errors import TuningError

    with pytest.raises(TuningError, match=r"epsilon must be in \[0, 1\]"):
        ModelSearch(SPACE, lambda p: (0.0,), epsilon=1.5)


class _FlatModel(XGBoostCostModel):
    """A trained model that cannot tell any two points apart."""

    trained = True

    def fit(self, *args, **kwargs):
        pass

    def predict(self, rows):
        return np.zeros(len(rows))


def test_equal_scores_are_proposed_in_random_order_not_the_spaces():
    featurize = lambda p: (p["a"], p["b"], p["c"])  # noqa: E731
    first_in_order = knobs_json(next(iter(SPACE.points())))
    firsts = set()
    for seed in range(8):
        search = ModelSearch(SPACE, featurize, seed=seed, epsilon=0.0, model=_FlatModel(),
                             max_evaluations=2000)
        firsts.add(knobs_json(search.propose(1, set())[0]))
    assert len(firsts) > 1 and firsts != {first_in_order}


def _with_prior(p):
    """Full feature vectors whose machine-model estimate peaks at a = 3."""
    from ember.autotune.features import FEATURE_NAMES

    row = [float(p["a"]), float(p["b"]), float(p["c"])] + [0.0] * (len(FEATURE_NAMES) - 3)
    row[FEATURE_NAMES.index("tile_estimate")] = -abs(p["a"] - 3)
    return tuple(row)


def test_first_batch_follows_the_prior_then_spreads():
    for seed in range(4):
        search = ModelSearch(SPACE, _with_prior, seed=seed, max_evaluations=2000)
        batch = search.propose(8, set())
        assert len(batch) == 8 and len({knobs_json(p) for p in batch}) == 8
        # half the batch is the prior's best points, the rest spread over the space
        assert sum(p["a"] == 3 for p in batch) >= 4
        assert any(p["a"] != 3 for p in batch)
    blind = ModelSearch(SPACE, _with_prior, seed=0, prior=None).propose(8, set())
    assert sum(p["a"] == 3 for p in blind) < 4  # uniform: about one in ten


def test_a_constant_prior_leaves_the_first_batch_random():
    constant = lambda p: _with_prior({**p, "a": 3})  # noqa: E731
    batches = [ModelSearch(SPACE, constant, seed=s).propose(8, set()) for s in range(2)]
    assert [knobs_json(p) for p in batches[0]] != [knobs_json(p) for p in batches[1]]
    assert all(sum(p["a"] == 3 for p in b) < 4 for b in batches)


def test_the_prior_still_counts_after_the_model_is_trained():
    """With few measurements of its own, the search weighs the machine model's estimate
    beside the trained model (here one that cannot tell points apart), the prior's weight
    falling as measurements come; a point's score does not depend on what it is scored
    with (annealing scores a few points at a time)."""
    points = [{"a": a, "b": 1, "c": 1} for a in range(6)]

    def trained(weight):
        search = ModelSearch(SPACE, _with_prior, seed=0, epsilon=0.0, model=_FlatModel(),
                             max_evaluations=2000, prior_weight=weight)
        search.observe(points, [1.0] * len(points))
        return search

    search = trained(1.0)
    batch = search.propose(8, {knobs_json(p) for p in points})
    assert sum(p["a"] == 3 for p in batch) >= 6
    assert sum(p["a"] == 3 for p in trained(0.0).propose(8, set())) < 4
    alone = [float(search._score([p])[0]) for p in points]
    assert alone == list(search._score(points)) and max(alone) == alone[3]
    search.observe([{"a": 9, "b": b, "c": 2} for b in range(10)] * 5, [1.0] * 50)
    later = search._score(points)
    assert 0 < later[3] - later[0] < alone[3] - alone[0]


def test_annealing_over_a_large_space_with_the_lasting_prior():
    """Where the space is larger than a proposal's evaluations (annealing scores a few
    points at a time), the model and the estimate together still find the optimum in a
    third of random search's trials."""
    guided = [_trials_to_optimum(ModelSearch(SPACE, _with_prior, seed=s, max_evaluations=200))
              for s in range(6)]
    blind = [_trials_to_optimum(RandomSearch(SPACE, seed=s)) for s in range(6)]
    assert sum(guided) < sum(blind) / 3


def test_prior_options_are_checked():
    from ember.errors import TuningError

    with pytest.raises(TuningError, match="prior must be a feature name"):
        ModelSearch(SPACE, _with_prior, prior="fastness")
    with pytest.raises(TuningError, match=r"prior_share must be in \(0, 1\]"):
        ModelSearch(SPACE, _with_prior, prior_share=0.0)
    with pytest.raises(TuningError, match="prior_weight must be >= 0"):
        ModelSearch(SPACE, _with_prior, prior_weight=-1.0)
    with pytest.raises(TuningError, match="diversity must be >= 0"):
        ModelSearch(SPACE, _with_prior, diversity=-0.5)


def test_a_diverse_batch_keeps_the_best_and_spreads_the_rest():
    from ember.autotune.search import _knob_distance

    # ranked: 10 points differing from the best only in knob c, then points far from it
    near = [{"a": 3, "b": 5, "c": c} for c in range(10)]
    far = [{"a": a, "b": b, "c": 0} for a in (0, 9) for b in (0, 9)]
    ranked = near + far

    def closest(batch):
        return min(_knob_distance(SPACE, p, q) for i, p in enumerate(batch)
                   for q in batch[i + 1:])

    greedy = ModelSearch(SPACE, _with_prior)._diverse(ranked, 6)
    assert greedy == ranked[:6]
    diverse = ModelSearch(SPACE, _with_prior, diversity=1.0)._diverse(ranked, 6)
    assert diverse[0] == ranked[0] and len({knobs_json(p) for p in diverse}) == 6
    assert any(p in far for p in diverse)
    assert closest(diverse) > closest(greedy)


def test_a_proposal_spends_at_most_its_time_lowering_candidates():
    """Where each candidate's features take long to extract (a Winograd F(4,3) kernel takes
    seconds to lower), a proposal stops lowering at `max_seconds` and fills the batch with
    points already lowered or drawn at random: still n distinct untried points."""
    import time

    lowered = []

    def slow(p):
        time.sleep(0.02)
        lowered.append(p)
        return (p["a"], p["b"], p["c"])

    search = ModelSearch(SPACE, slow, seed=1, max_seconds=0.3)
    tried: set[str] = set()
    for _ in range(3):
        start = time.monotonic()
        points = search.propose(8, tried)
        assert time.monotonic() - start < 3.0
        keys = {knobs_json(p) for p in points}
        assert len(points) == len(keys) == 8 and not keys & tried
        search.observe(points, [_cost((p["a"], p["b"], p["c"])) for p in points])
        tried |= keys
    assert len(lowered) < 300  # of the 1000 points, most were never lowered
