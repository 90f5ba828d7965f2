"""The command line: every command's --help, errors as one line with exit code 2, and the
commands on small models (ONNX ones once the ONNX frontend is present)."""

import numpy as np
import pytest

import ember
from ember.cli import main
from ember.graph.ir import GraphBuilder
from ember.lowering.saved import save_compiled

COMMANDS = ["compile", "run", "inspect", "bench", "check", "zoo", "demo", "target"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: ember {command}" in capsys.readouterr().out


def test_errors_are_one_line_with_exit_code_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ArgumentError" in err and "does not exist" in err
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage")
    assert main(["inspect", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["zoo", "no_such_model", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "unknown model 'no_such_model'" in capsys.readouterr().err


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory):
    b = GraphBuilder("tiny")
    x = b.input("x", (2, 8), "float32")
    y, = b.add("Relu", [x])
    z, = b.add("Add", [y, x])
    model = ember.compile(b.finish([z]), cache=False)
    return save_compiled(model, tmp_path_factory.mktemp("out") / "tiny.ember")


def test_run_and_inspect_a_compiled_model(compiled_dir, tmp_path, capsys):
    x = np.arange(-8, 8, dtype="float32").reshape(2, 8)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(compiled_dir), "--input", f"x={tmp_path / 'x.npy'}"]) == 0
    out = capsys.readouterr().out
    want = np.maximum(x, 0) + x
    assert "float32[2, 8]" in out and f"{want.reshape(-1)[0]:.6g}" in out
    assert main(["run", str(compiled_dir), "--input", "y=whatever.npy"]) == 2
    assert "the model has inputs ['x']" in capsys.readouterr().err
    assert main(["inspect", str(compiled_dir)]) == 0
    out = capsys.readouterr().out
    assert "Fused(" in out and "memory plan" in out


def test_zoo_list(capsys):
    pytest.importorskip("onnx")
    assert main(["zoo", "--list"]) == 0
    assert "resnet18" in capsys.readouterr().out


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    w = np.random.default_rng(1).standard_normal((3, 16)).astype("float32")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add0"),
             helper.make_node("Relu", ["a"], ["r"], name="relu0"),
             helper.make_node("ReduceMax", ["r"], ["m"], name="max0", keepdims=1, axes=[1]),
             helper.make_node("Sub", ["r", "m"], ["y"], name="sub0")]
    graph = helper.make_graph(nodes, "small",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 16])],
                              [onnx.numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("onnx") / "small.onnx"
    onnx.save(model, str(path))
    return path


def test_onnx_commands(onnx_file, tmp_path, capsys):
    assert main(["run", str(onnx_file)]) == 0
    assert "y: float32[3, 16]" in capsys.readouterr().out
    assert main(["compile", str(onnx_file), "-o", str(tmp_path / "out")]) == 0
    assert "fused groups" in capsys.readouterr().out
    assert main(["run", str(tmp_path / "out")]) == 0
    assert main(["inspect", str(onnx_file)]) == 0
    out = capsys.readouterr().out
    assert "Fused(" in out and "naive sum of intermediates" in out
    assert main(["bench", str(onnx_file), "--runs", "3", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime" in out and "time ember/ort" in out and "ember is faster" in out
    assert main(["bench", str(onnx_file), "--runs", "2", "--threads", "1", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "cached (us)" in out and "sum of groups" in out
    assert main(["bench", str(tmp_path / "out"), "--runs", "2", "--profile"]) == 0
    assert "cached (us)" in capsys.readouterr().out
    assert main(["check", str(onnx_file)]) == 0
    assert "all tensors agree" in capsys.readouterr().out


def test_inspect_source(onnx_file, capsys):
    from ember.driver import import_model
    from ember.lowering.groups import fused_groups, optimize

    group = fused_groups(optimize(import_model(str(onnx_file)), 3))[0]
    assert main(["inspect", str(onnx_file), "--source", group.name]) == 0
    out = capsys.readouterr().out
    for marker in ("---- tir ----", "---- ll ----", "---- asm ----", "---- c ----",
                   f"{group.symbol}("):
        assert marker in out
    assert main(["inspect", str(onnx_file), "--source", "nope"]) == 2
    assert "no fused group named 'nope'" in capsys.readouterr().err


def test_check_names_the_first_diverging_group(onnx_file):
    import onnx

    from ember.compare import check
    from ember.lowering.link import link
    from ember.runtime.executor import CompiledModel

    good = ember.compile(str(onnx_file), cache=False)
    blob = good.constant_bytes().copy()
    blob.view(np.float32)[0] += 5.0  # corrupt the first weight: every later tensor differs
    bad = CompiledModel(good.plan, good.objects, blob, graph=good.graph,
                        linked=link(good.plan, good.objects))
    feeds = {"x": np.random.default_rng(2).standard_normal((3, 16)).astype("float32")}
    model = onnx.load(str(onnx_file))
    assert check(model, good, feeds).first is None
    report = check(model, bad, feeds)
    first_group = good.plan.calls[0].group
    assert report.compared >= 1 and report.first is not None
    assert report.first.group == first_group
    assert report.first.node in {n.name for n in model.graph.node}
    assert report.first.max_abs > 1.0
