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
    assert "records" in capsys.readouterr().out
    assert main(["tune", str(model), "--db", str(db), "--tasks", "Softmax"]) == 2
    assert "no task of the model matches" in capsys.readouterr().err


def test_parse_budget():
    assert parse_budget("20m") == 1200 and parse_budget("90s") == 90
    assert parse_budget("1h") == 3600 and parse_budget("45") == 45 and parse_budget(None) is None
    with pytest.raises(TuningError, match="expected seconds or e.g. 20m"):
        parse_budget("soon")
    with pytest.raises(TuningError, match="must be positive"):
        parse_budget("0m")
