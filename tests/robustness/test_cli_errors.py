"""The command line on a first user's mistakes: one-line errors with exit code 2 (130 for
Ctrl-C), never a traceback; `python -m ember`; --shape honoured by run; bench of a compiled
directory."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import cli
from ember.cli import main
from ember.graph.ir import GraphBuilder
from ember.lowering.saved import save_compiled

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


@pytest.fixture(scope="module")
def relu_onnx(tmp_path_factory):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y])
    path = tmp_path_factory.mktemp("m") / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_python_dash_m_ember() -> None:
    done = subprocess.run([sys.executable, "-m", "ember", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == ember.__version__


def test_unwritable_output_is_one_line(relu_onnx, tmp_path, capsys) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out in (blocker / "model.so", blocker / "model.ember"):
        code = main(["compile", str(relu_onnx), "--shape", "x=2,8", "-o", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("ember: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err


def test_interrupt_and_missing_package(monkeypatch, capsys) -> None:
    def interrupted(args):
        raise KeyboardInterrupt

    def missing(args):
        raise ModuleNotFoundError("No module named 'onnx'", name="onnx")

    monkeypatch.setattr(cli, "_cmd_target", interrupted)
    assert main(["target"]) == 130
    assert capsys.readouterr().err == "ember: interrupted\n"
    monkeypatch.setattr(cli, "_cmd_target", missing)
    assert main(["target"]) == 2
    assert "needs the 'onnx' package: pip install 'ember[onnx]'" in capsys.readouterr().err


def test_zoo_unknown_name_before_output(capsys) -> None:
    assert main(["zoo", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'nonsense'" in err and "pass -o" not in err


def test_run_honours_shape(relu_onnx, capsys) -> None:
    assert main(["run", str(relu_onnx), "--shape", "x=3,8", "--no-cache"]) == 0
    assert "float32[3, 8]" in capsys.readouterr().out


def test_bench_a_compiled_directory(tmp_path, capsys) -> None:
    b = GraphBuilder("tiny")
    x = b.input("x", (2, 8), "float32")
    y, = b.add("Relu", [x])
    path = save_compiled(ember.compile(b.finish([y]), cache=False), tmp_path / "tiny.ember")
    assert main(["bench", str(path), "--runs", "3", "--warmup", "1", "--threads", "1"]) == 0
    assert "median" in capsys.readouterr().out


def test_run_with_bad_input_file(relu_onnx, tmp_path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.ones((2, 8), "float64"))
    code = main(["run", str(relu_onnx), "--shape", "x=2,8", "--no-cache", "--input",
                 f"x={tmp_path / 'x.npy'}"])
    assert code == 2 and "expected dtype float32, got float64" in capsys.readouterr().err


def test_front_door_signatures_agree_and_are_documented() -> None:
    import inspect

    from ember.target_facts import host_cpu_model as cpu_name
    from ember.driver import compile as compile_model
    from ember.driver import export_library, export_objects

    params = list(inspect.signature(compile_model).parameters)
    for export in (export_library, export_objects):
        rest = [p for p in inspect.signature(export).parameters if p not in ("path",
                                                                            "directory")]
        assert rest == [p for p in params if p in rest], (export.__name__, rest)
    doc = compile_model.__doc__ or ""
    for name in params:
        assert f"{name}:" in doc, f"compile's docstring does not document '{name}'"
    assert cpu_name().strip()
