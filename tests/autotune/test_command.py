"""`ember tune`: a short run fills the database, --report reads it, bad options are errors."""

import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402

from ember.autotune.command import parse_budget  # noqa: E402
from ember.autotune.database import TuningDatabase  # noqa: E402
from ember.cli import main  # noqa: E402
from ember.errors import TuningError  # noqa: E402
from tests.autotune.test_tune import _two_conv_model  # noqa: E402


def test_tune_command_and_report(tmp_path, capsys):
    model = tmp_path / "convs.onnx"
    onnx.save(_two_conv_model(), str(model))
    db = tmp_path / "tune.sqlite"
    assert main(["tune", str(model), "--db", str(db), "--trials", "2", "--search", "random",
                 "--tasks", "ConvNCHWc", "--target", "llvm -num-cores=1", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "ConvNCHWc" in out and "speedup" in out
    with TuningDatabase(db) as d:
        assert len(d) >= 2 and {r.family for r in d.records()} == {"ConvKnobs"}
    assert main(["tune", str(model), "--db", str(db), "--report",
                 "--target", "llvm -num-cores=1"]) == 0
    out = capsys.readouterr().out
    assert "records" in out and "default ms" in out and "confirmed" in out
    rows = [line for line in out.splitlines() if line.startswith("ConvNCHWc")]
    assert rows and all(line.split()[-5] != "-" for line in rows)  # each default measured
    assert main(["tune", str(model), "--db", str(db), "--tasks", "Softmax"]) == 2
    assert "no task of the model matches" in capsys.readouterr().err


def test_export_and_import_commands(tmp_path, capsys):
    """`ember tune --export/--import` move records (and model-order checks) between
    databases without a model; tuning without a model is a clear error."""
    from tests.autotune.test_database import _record

    source, copy, lines = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "r.jsonl"
    with TuningDatabase(source) as db:
        db.add([_record(knobs={"ow_tile": k}, costs=(k * 1e-4,)) for k in (1, 2)])
        db.add_model_checks([("t1", "fp-a", {"ow_tile": 1}, 2e-4)])
    assert main(["tune", "--db", str(source), "--export", str(lines)]) == 0
    assert "2 records" in capsys.readouterr().out
    assert main(["tune", "--db", str(copy), "--import", str(lines)]) == 0
    assert "2 new records" in capsys.readouterr().out
    model = tmp_path / "convs.onnx"  # with a model too: only the exchange, no tuning or check
    onnx.save(_two_conv_model(), str(model))
    assert main(["tune", str(model), "--db", str(copy), "--export", str(lines)]) == 0
    assert capsys.readouterr().out.strip() == f"2 records of {copy} written to {lines}"
    with TuningDatabase(copy) as db:
        assert len(db) == 2 and db.model_checks("fp-a") == {"t1": {'{"ow_tile": 1}': 2e-4}}
    assert main(["tune", "--db", str(copy), "--import", str(tmp_path / "none.jsonl")]) == 2
    assert "cannot read records from" in capsys.readouterr().err
    assert main(["tune", "--db", str(copy)]) == 2
    assert "give a model" in capsys.readouterr().err


def test_parse_budget():
    assert parse_budget("20m") == 1200 and parse_budget("90s") == 90
    assert parse_budget("1h") == 3600 and parse_budget("45") == 45 and parse_budget(None) is None
    with pytest.raises(TuningError, match="expected seconds or e.g. 20m"):
        parse_budget("soon")
    with pytest.raises(TuningError, match="must be positive"):
        parse_budget("0m")


def test_compile_run_and_export_take_a_tuning_database(tmp_path, capsys):
    """`ember compile/run --db FILE` and a .so export apply a database (the records here:
    a faster non-default point of one conv task); a missing file is a clear error."""
    import time

    from ember.autotune import Record, extract_tasks
    from ember.target import Target

    target = "llvm -num-cores=1"
    model = tmp_path / "convs.onnx"
    onnx.save(_two_conv_model(), str(model))
    task = next(t for t in extract_tasks(str(model), target) if t.family == "ConvKnobs")
    point = next(p for p in task.space().points() if p != task.default_point())
    fingerprint = Target(target).fingerprint
    db = tmp_path / "tune.sqlite"
    with TuningDatabase(db) as d:
        for knobs, cost in ((task.default_point(), 1e-3), (point, 1e-6)):
            d.add(Record(task.key, task.family, task.description, target, fingerprint,
                         knobs, (cost,), None, None, "test", time.time()))
    common = ["--db", str(db), "--target", target, "--no-cache"]
    assert main(["compile", str(model), "-o", str(tmp_path / "out"), *common]) == 0
    assert main(["compile", str(model), "-o", str(tmp_path / "m.so"), *common]) == 0
    assert (tmp_path / "m.so").is_file()
    assert main(["run", str(model), *common]) == 0
    capsys.readouterr()
    assert main(["run", str(model), "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "tuning database" in capsys.readouterr().err
