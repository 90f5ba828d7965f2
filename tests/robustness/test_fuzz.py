"""A short seeded run of the fuzz suite (benchmarks/fuzz.py): mutated small ONNX models,
abused run calls and damaged libraries, each case in a worker process that a crash cannot
take the test run down with. Only EmberErrors may escape and no process may die; where
ember runs a model, its outputs must equal onnxruntime's."""

from collections import Counter

import pytest

from tests.benchmark_modules import load_benchmark

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
fuzz = load_benchmark("fuzz")


def test_the_harness_sees_deaths_and_internal_errors() -> None:
    results = fuzz.run([("selftest_crash", 1), ("selftest_internal", 2), ("selftest_crash", 3),
                        ("run_call", 4)], timeout=120)
    assert [r[2] for r in results[:3]] == ["death", "internal", "death"]
    assert "KeyError" in results[1][3]
    assert results[3][2] in ("ember_error", "match")  # a fresh worker carried on


def test_seeded_fuzz_run_has_no_failures() -> None:
    results = fuzz.run(fuzz.cases(240, 0), timeout=180)
    counts = Counter(r[2] for r in results)
    failures = [r for r in results if r[2] in fuzz.FAILURES]
    assert len(results) == 240
    assert not failures, "\n".join(f"{o} {f} seed {s}: {d}" for f, s, o, d in failures[:20])
    assert counts["match"] >= 10, counts  # the mutations leave some models valid
    assert {r[0] for r in results} == set(fuzz.FAMILIES)
