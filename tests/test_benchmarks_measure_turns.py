"""benchmarks/measure_turns.py: how two measurements of the same candidates are compared."""

import numpy as np

from tests.benchmark_modules import load_benchmark

turns = load_benchmark("measure_turns")


def test_agreement_of_two_measurements():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert turns.agreement(a, a) == (0.0, 1.0, 1.0)
    # the first calls candidate 0 fastest, the second finds it 1.5x the fastest (and
    # candidate 1 at half its first time: the largest difference, 100%)
    deviation, rank, regret = turns.agreement(a, np.array([1.5, 1.0, 3.0, 4.0]))
    assert np.isclose(deviation, 1.0) and np.isclose(regret, 1.5) and rank < 1.0
    assert turns.spearman(a, a[::-1]) == -1.0


class _Task:
    def default_point(self):
        return {"x": 2, "flag": False}

    def space(self):
        from ember.ops.knobs import Space

        return Space({"x": (1, 2, 3, 4), "flag": (False, True)})


def test_neighbours_are_one_step_from_the_default():
    points = turns.neighbours(_Task(), 10)
    assert points[0] == {"x": 2, "flag": False}
    assert points[1:] == [{"x": 1, "flag": False}, {"x": 3, "flag": False},
                          {"x": 2, "flag": True}]
    assert len(turns.neighbours(_Task(), 2)) == 2
