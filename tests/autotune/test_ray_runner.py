"""The Ray runner: a few candidates through a local Ray instance (skipped without ray)."""

import sys

import pytest

from ember.errors import TuningError


def test_without_ray_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    from ember.autotune.ray_runner import RayRunner

    with pytest.raises(TuningError, match=r"pip install 'ember\[ray\]'"):
        RayRunner()


def test_measures_through_local_ray():
    pytest.importorskip("ray")
    from ember.autotune.measure import MeasureSettings
    from ember.autotune.ray_runner import RayRunner
    from tests.autotune.test_measure import ToyTask

    settings = MeasureSettings(repeat=2, min_run_seconds=0.001, timeout=20.0)
    with RayRunner(settings, num_cpus=1) as runner:
        ok, wrong, crash = runner.measure(ToyTask(), [{"mode": m}
                                                      for m in ("ok", "wrong", "crash")])
    assert ok.ok and wrong.error.startswith("wrong answer")
    assert crash.error is not None and "Toy add-one 256" in crash.error


def test_tune_command_through_local_ray(tmp_path, capsys):
    """`ember tune --ray`: a local Ray instance measures the candidates; the records land
    in the database like the local runner's."""
    pytest.importorskip("ray")
    pytest.importorskip("onnx")
    import onnx

    from ember.autotune.database import TuningDatabase
    from ember.cli import main
    from tests.autotune.test_tune import _two_conv_model

    model = tmp_path / "convs.onnx"
    onnx.save(_two_conv_model(), str(model))
    db = tmp_path / "tune.sqlite"
    assert main(["tune", str(model), "--db", str(db), "--ray", "--trials", "3",
                 "--search", "random", "--tasks", "ConvNCHWc", "--repeat", "2",
                 "--target", "llvm -num-cores=1", "--no-model-check"]) == 0
    assert "ConvNCHWc" in capsys.readouterr().out
    with TuningDatabase(db) as d:
        records = d.records()
    assert len(records) >= 3 and all(r.ok for r in records)
