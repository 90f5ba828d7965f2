"""benchmarks/ablation.py: bert-tiny end to end, run counts, turn taking, failures."""


import pytest

from tests.benchmark_modules import load_benchmark

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ablation = load_benchmark("ablation")

TINY = ["--models", "bert-tiny", "--runs", "3", "--min-runs", "2", "--gap", "0"]


def test_bert_tiny_rows_complete(capsys: pytest.CaptureFixture[str]) -> None:
    rows = ablation.main([*TINY, "--threads", "2", "1", "--json"])
    capsys.readouterr()
    assert [(r["threads"], r["variant"]) for r in rows] == \
        [(t, v) for t in (2, 1) for v in ablation.VARIANTS]
    for r in rows:
        assert r["model"] == "bert-tiny"
        assert "error" not in r, r
        assert r["runs"] == 3
        assert 0 < r["min_ms"] <= r["median_ms"]
        assert r["max_rel_error"] <= 1e-3
    for t in (2, 1):
        by = {r["variant"]: r for r in rows if r["threads"] == t}
        ort = by["onnxruntime"]["median_ms"]
        assert by["onnxruntime"]["ratio_vs_onnxruntime"] == 1.0
        for r in by.values():
            assert r["ratio_vs_onnxruntime"] == pytest.approx(r["median_ms"] / ort, rel=0.01)
        # fusion: one kernel per op at level 0, fewer from level 1 on
        assert by["level0"]["kernels"] > by["level1"]["kernels"] >= by["level3"]["kernels"]


def test_run_counts_and_turns() -> None:
    counts = ablation.run_counts({"fast": 0.001, "slow": 2.0, "slower": 50.0}, 30, 5, 10.0)
    assert counts == {"fast": 30, "slow": 5, "slower": 5}
    assert ablation.run_counts({"a": 0.5}, 3, 5, 10.0) == {"a": 3}
    assert ablation.split_runs(7, 3) == [3, 2, 2]
    calls: list[tuple[str, int, int]] = []

    def block(name: str, seconds: float) -> "ablation.Block":
        return lambda n, w: calls.append((name, n, w)) or [seconds] * n

    times = ablation.take_turns({"a": block("a", 0.1), "b": block("b", 0.9)}, {"a": 7, "b": 2},
                                {"a": 0.1, "b": 0.9}, block=3, gap=0)
    assert [len(times["a"]), len(times["b"])] == [7, 2]
    # three rounds, the order rotates, b's two runs go to the first two rounds, no warm-up
    # for a variant slower than 0.5 s
    assert [c[0] for c in calls] == ["a", "b", "b", "a", "a"]
    assert [c[1] for c in calls] == [3, 1, 1, 2, 2]
    assert {c[2] for c in calls if c[0] == "b"} == {0} and {c[2] for c in calls
                                                           if c[0] == "a"} == {1}


def test_table_and_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"model": "m", "threads": 2, "variant": v, "median_ms": 2.0,
             "ratio_vs_onnxruntime": 2.0, "runs": 4} for v in ablation.VARIANTS[:-2]]
    rows.append({"model": "m", "threads": 2, "variant": "level3-gomp", "median_ms": None,
                 "ratio_vs_onnxruntime": None, "error": "died"})
    rows.append({"model": "m", "threads": 2, "variant": "onnxruntime", "median_ms": 1.0,
                 "ratio_vs_onnxruntime": 1.0, "runs": 30})
    text = ablation.table(rows, 30)
    assert "| m | 2 | 2.00 (2.00, 4 runs) |" in text
    assert "n/a (died) | 1.00 (1.00) |" in text
    with pytest.raises(ablation.MismatchError, match="bert-tiny, 1 threads: level0"):
        ablation.main([*TINY, "--threads", "1", "--rtol", "-1", "--no-gomp"])
    capsys.readouterr()
