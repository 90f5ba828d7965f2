"""Loop features follow the schedule: counts scale with the work, loop kinds are seen."""

import math

from ember import te
from ember.autotune.features import FEATURE_NAMES, loop_features
from ember.te.lower import lower_schedule


def _add(vectorize: bool, parallel: bool, n: int = 1024):
    a = te.placeholder((n,), "float32", name="a")
    b = te.placeholder((n,), "float32", name="b")
    c = te.compute((n,), lambda i: a[i] * b[i] + a[i], name="c")
    s = te.create_schedule(c.op)
    outer, inner = s[c].split(c.op.axis[0], 16)
    if vectorize:
        s[c].vectorize(inner)
    if parallel:
        s[c].parallel(outer)
    return dict(zip(FEATURE_NAMES, loop_features(lower_schedule(s, [a, b, c], "f"))))


def test_counts_and_kinds():
    plain = _add(False, False)
    assert plain["float_ops"] == round(math.log2(1 + 2 * 1024), 6)  # one mul, one add each
    assert plain["loads"] == round(math.log2(1 + 3 * 1024), 6)
    assert plain["stores"] == round(math.log2(1 + 1024), 6)
    assert plain["loads_stride1"] == plain["loads"] and plain["loops_serial"] > 0
    tuned = _add(True, True)
    assert tuned["loops_vectorized"] == 1 and tuned["vector_extent"] == round(math.log2(17), 6)
    assert tuned["loops_parallel"] == 1 and tuned["parallel_extent"] == round(math.log2(65), 6)
    assert plain["loops_parallel"] == 0 and plain["loops_vectorized"] == 0
    big = _add(False, False, 4096)
    assert big["float_ops"] > plain["float_ops"]
