"""Exported libraries: one .so per model, loaded with ctypes + numpy, checked against ORT."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import ember  # noqa: E402
from ember.errors import ArgumentError  # noqa: E402
from ember.runtime import library  # noqa: E402
from ember.driver import export_library, export_objects  # noqa: E402
from ember.lowering.export import CompilerNotFoundError, LinkError, find_c_compiler  # noqa: E402
from ember.runtime.library import load_library  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and not os.environ.get("CC"),
                                reason="exporting needs a C compiler")
ROOT = Path(__file__).resolve().parents[2]


def _ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _weight(rng, name, shape):
    return helper.make_tensor(name, TensorProto.FLOAT, shape,
                              (rng.standard_normal(shape) * 0.2).astype(np.float32).ravel())


def conv_relu_pool():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(
        nodes, "conv_relu_pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])],
        [_weight(rng, "w", [16, 8, 3, 3]), _weight(rng, "b", [16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul_gelu():
    """MatMul + bias + GELU (erf form); a second output that is the graph input itself and a
    third that is a weight: outputs a kernel does not write."""
    rng = np.random.default_rng(1)
    half, one, sqrt2 = (helper.make_tensor(n, TensorProto.FLOAT, [], [v])
                        for n, v in (("half", 0.5), ("one", 1.0), ("sqrt2", 2 ** 0.5)))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["h", "e1"], ["g"]),
             helper.make_node("Mul", ["g", "half"], ["y"]),
             helper.make_node("Identity", ["x"], ["x_out"]),
             helper.make_node("Identity", ["b"], ["b_out"])]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "matmul_gelu", [info("x", TensorProto.FLOAT, [8, 64])],
        [info("y", TensorProto.FLOAT, [8, 96]), info("x_out", TensorProto.FLOAT, [8, 64]),
         info("b_out", TensorProto.FLOAT, [96])],
        [_weight(rng, "w", [64, 96]), _weight(rng, "b", [96]), half, one, sqrt2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def small_libraries(tmp_path_factory):
    root = tmp_path_factory.mktemp("libs")
    models = {"conv": conv_relu_pool(), "gelu": matmul_gelu()}
    return {k: (m, export_library(m, root / f"{k}.so")) for k, m in models.items()}


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    from ember.zoo import build_model

    model = build_model("resnet18", image_size=32, num_classes=10)
    return model, export_library(model, tmp_path_factory.mktemp("resnet") / "resnet.so")


@pytest.mark.parametrize("name", ["conv", "gelu"])
def test_small_graphs_match_onnxruntime(small_libraries, name):
    model, path = small_libraries[name]
    lib = load_library(path)
    rng = np.random.default_rng(7)
    feeds = {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in lib.inputs}
    got = lib.run(feeds)
    for g, want in zip(got, _ort(model, feeds)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)
    assert len(lib.output_names) == len(model.graph.output) == len(got)
    np.testing.assert_array_equal(lib(*feeds.values())[0], got[0])


def test_resnet_matches_onnxruntime_and_the_jit(resnet):
    from ember.zoo import random_inputs

    model, path = resnet
    lib = load_library(path)
    feeds = random_inputs(model, 3)
    (got,) = lib.run(feeds)
    np.testing.assert_allclose(got, _ort(model, feeds)[0], rtol=1e-3, atol=1e-4)
    (jit,) = ember.compile(model).run(feeds)  # the same IR and passes: the same numbers
    np.testing.assert_allclose(got, jit, rtol=1e-6, atol=1e-6)
    assert lib.constant_bytes().size > 10 * 64 * 64 * 9 * 4  # the weights are in the library


def test_thread_counts_agree(resnet):
    from ember.zoo import random_inputs

    lib = load_library(resnet[1])
    feeds = random_inputs(resnet[0], 5)
    lib.set_num_threads(1)
    assert lib.num_threads == 1
    (one,) = lib.run(feeds)
    lib.set_num_threads(2)
    assert lib.num_threads == 2
    (two,) = lib.run(feeds)
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match="positive thread count"):
        lib.set_num_threads(0)
    assert lib.time(feeds, repeat=2) > 0


def test_lstm_matches_onnxruntime(tmp_path):
    from ember.zoo import build_model, random_inputs

    model = build_model("lstm_lm", layers=1, hidden=32, embed=16, seq_len=8, vocab=50)
    lib = load_library(export_library(model, tmp_path / "lstm.so"))
    feeds = random_inputs(model, 2)
    for got, want in zip(lib.run(feeds), _ort(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_loader_needs_no_compiler(resnet):
    """A fresh interpreter loads and runs the library without llvmlite, onnx or the compiler."""
    script = textwrap.dedent(f"""
        import sys, numpy as np
        from ember.runtime.library import load_library
        lib = load_library({str(resnet[1])!r})
        x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
        (y,) = lib(x)
        assert y.shape == (1, 10) and np.isfinite(y).all()
        loaded = [m for m in ("llvmlite", "onnx", "onnxruntime", "ember.codegen", "ember.te",
                              "ember.tir", "ember.driver") if m in sys.modules]
        print("loaded:", loaded)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stdout


def test_fork_child_runs_the_library(resnet):
    lib = load_library(resnet[1])
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    lib.set_num_threads(2)
    (want,) = lib(x)  # the pool has started its worker
    pid = os.fork()
    if pid == 0:  # the child has no workers; the reset lets it start its own
        try:
            (got,) = lib(x)
            os._exit(0 if np.allclose(got, want, rtol=1e-5, atol=1e-6) else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_input_errors_match_the_compiled_model(small_libraries):
    lib = load_library(small_libraries["conv"][1])
    with pytest.raises(ArgumentError, match=r"expects inputs \['x'\]; unknown: \['z'\]"):
        lib.run({"z": np.zeros((1, 8, 16, 16), np.float32)})
    with pytest.raises(ArgumentError, match="expected shape"):
        lib.run([np.zeros((1, 8, 16, 15), np.float32)])
    with pytest.raises(ArgumentError, match="expected dtype float32, got float64"):
        lib.run([np.zeros((1, 8, 16, 16))])
    with pytest.raises(ArgumentError, match="takes 1 inputs"):
        lib.run([])


def test_bad_files_are_argument_errors(small_libraries, tmp_path):
    with pytest.raises(ArgumentError, match="does not exist"):
        load_library(tmp_path / "missing.so")
    text = tmp_path / "notes.so"
    text.write_text("not a library")
    with pytest.raises(ArgumentError, match="not an ember library.*ELF"):
        load_library(text)
    data = small_libraries["conv"][1].read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(ArgumentError, match=f"'{cut}' is truncated"):
        load_library(cut)
    numpy_ext = next(Path(np.__file__).parent.glob("_core/_multiarray_umath*.so"), None)
    if numpy_ext is not None:  # a real shared library that is not ember's
        with pytest.raises(ArgumentError, match="not an ember library.*ember_checksum"):
            load_library(numpy_ext)


def test_missing_symbols_and_wrong_format(small_libraries, tmp_path, monkeypatch):
    cc = find_c_compiler()
    source = tmp_path / "fake.c"
    meta = '{"format": "ember-library-1", "plan": {}}'
    quoted = meta.replace('"', '\\"')
    source.write_text(f'const char ember_metadata[] = "{quoted}";\n'
                      f"const unsigned long ember_metadata_size = {len(meta)};\n")
    subprocess.run([*cc, "-shared", "-fPIC", "-o", tmp_path / "fake.so", source], check=True)
    with pytest.raises(ArgumentError, match="no 'ember_checksum' symbol"):
        load_library(tmp_path / "fake.so")
    monkeypatch.setattr(library, "FORMAT", "ember-library-999")
    with pytest.raises(ArgumentError, match="format 'ember-library-2'.*ember-library-999"):
        load_library(small_libraries["gelu"][1])


def test_compiler_and_link_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(CompilerNotFoundError, match="CC="):
        export_library(conv_relu_pool(), tmp_path / "a.so")
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="set the CC environment variable"):
        find_c_compiler()
    with pytest.raises(CompilerNotFoundError, match="'aarch64-unknown-linux-gnu'.*export_objects"):
        find_c_compiler("llvm -mtriple=aarch64-unknown-linux-gnu")
    monkeypatch.undo()
    monkeypatch.setenv("CC", "sh -c 'echo undefined reference to boom >&2; exit 1' cc")
    (tmp_path / "b.so").write_bytes(b"previous")
    with pytest.raises(LinkError, match="undefined reference to boom"):
        export_library(conv_relu_pool(), tmp_path / "b.so")
    assert (tmp_path / "b.so").read_bytes() == b"previous"  # atomic: nothing half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.so"]


def test_export_objects_links_by_its_script(tmp_path):
    model = conv_relu_pool()
    root = export_objects(model, tmp_path / "objs")
    assert {"main.o", "runtime.o", "data.s", "constants.bin", "metadata.json",
            "link.sh"} <= {p.name for p in root.iterdir()}
    env = {**os.environ, "PYTHON": sys.executable,  # the script seals with this ember
           "PYTHONPATH": str(Path(ember.__file__).parent.parent)}
    subprocess.run(["sh", str(root / "link.sh")], check=True, capture_output=True, env=env)
    lib = load_library(root / "model.so")
    x = np.random.default_rng(4).standard_normal((1, 8, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(lib(x)[0], _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_cli_compile_run_bench_inspect(tmp_path, capsys):
    from ember.cli import main

    onnx.save(matmul_gelu(), tmp_path / "m.onnx")
    assert main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.so")]) == 0
    assert "exported m.onnx to" in capsys.readouterr().out
    assert main(["run", str(tmp_path / "m.onnx")]) == 0
    from_onnx = capsys.readouterr().out
    assert main(["run", str(tmp_path / "m.so")]) == 0
    assert capsys.readouterr().out == from_onnx  # same random inputs, same outputs
    assert main(["bench", str(tmp_path / "m.so"), "--runs", "2", "--threads", "1"]) == 0
    assert "1 threads, 2 runs: median" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "m.so")]) == 0
    assert "LibraryModel(matmul_gelu" in capsys.readouterr().out


def test_export_objects_for_another_machine(tmp_path):
    root = export_objects(conv_relu_pool(), tmp_path / "arm",
                          target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
    objects = sorted(root.glob("*.o"))
    assert len(objects) >= 3 and {"main.o", "runtime.o"} <= {p.name for p in objects}
    for path in objects:  # e_machine 183: AArch64
        assert int.from_bytes(path.read_bytes()[18:20], "little") == 183, path.name
    assert "aarch64-linux-gnu" in (root / "link.sh").read_text()
    assert '"triple":"aarch64-linux-gnu"' in (root / "metadata.json").read_text()
