"""Whole models as standalone C99: compiled warning-free by the system C compiler and the
aarch64 cross compiler (run under qemu-user), checked against onnxruntime."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
from ember.errors import ArgumentError  # noqa: E402
from tests.deploy.conftest import BOARDS  # noqa: E402
from tests.lowering.test_export import conv_relu_pool, matmul_gelu  # noqa: E402

HARNESS = Path(__file__).with_name("c_harness.c")
FLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"]


def _build(cc: str, root: Path) -> Path:
    program = root / f"run-{Path(cc).name}"
    done = subprocess.run([cc, *FLAGS, "-I", str(root), str(root / "model.c"),
                           str(root / "model_constants.c"), str(HARNESS), "-o", str(program),
                           "-lm"], capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr, done.stderr  # no warnings either
    return program


def _run(command: list[str], feeds: list[np.ndarray], work: Path, count: int) -> list[bytes]:
    inputs, outputs = work / "in", work / "out"
    inputs.mkdir(parents=True, exist_ok=True)
    outputs.mkdir(exist_ok=True)
    for k, array in enumerate(feeds):
        np.ascontiguousarray(array).tofile(inputs / f"{k}.bin")
    done = subprocess.run([*command, str(inputs), str(outputs)], capture_output=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return [(outputs / f"{k}.bin").read_bytes() for k in range(count)]


def _compare(model, got, feeds):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, dict(zip((i.name for i in model.graph.input), feeds)))
    assert len(got) == len(want)
    for raw, expected in zip(got, want):
        value = np.frombuffer(raw, expected.dtype).reshape(expected.shape)
        np.testing.assert_allclose(value, expected, rtol=1e-3, atol=1e-4)


@pytest.fixture(scope="module")
def zoo_c(tmp_path_factory):
    from ember.zoo import build_model, random_inputs

    model = build_model("mobilenet_v2", image_size=32, num_classes=10, width_mult=0.5)
    root = ember.export_c(model, tmp_path_factory.mktemp("c") / "mobilenet")
    return model, root, list(random_inputs(model, 6).values())


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs cc")
def test_zoo_model_as_c_matches_onnxruntime(zoo_c, tmp_path):
    model, root, feeds = zoo_c
    assert {"model.c", "model.h", "model_constants.c", "model_weights.bin"} <= {
        p.name for p in root.iterdir()}
    source = (root / "model.c").read_text()
    assert "aligned_alloc" not in source.split("int32_t model_run(")[1]  # run path: calls
    _compare(model, _run([str(_build("cc", root))], feeds, tmp_path, 1), feeds)


def test_zoo_model_as_c_on_aarch64_under_qemu(zoo_c, tmp_path):
    _, cc, emulator = BOARDS["aarch64"]
    if shutil.which(cc) is None or shutil.which(emulator[0]) is None:
        pytest.skip(f"needs {cc} and {emulator[0]}")
    model, root, feeds = zoo_c
    program = _build(cc, root)
    _compare(model, _run([*emulator, str(program)], feeds, tmp_path, 1), feeds)


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs cc")
def test_small_graphs_and_passthrough_outputs_as_c(tmp_path):
    for name, model in (("conv", conv_relu_pool()), ("gelu", matmul_gelu())):
        root = ember.export_c(model, tmp_path / name)
        rng = np.random.default_rng(9)
        feeds = [rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
                 .astype(np.float32) for i in model.graph.input]
        got = _run([str(_build("cc", root))], feeds, tmp_path / f"{name}-run",
                   len(model.graph.output))
        _compare(model, got, feeds)
        assert (root / "model_weights.bin").stat().st_size > 1000  # the weights: constants


def test_c_export_errors(tmp_path):
    with pytest.raises(ArgumentError, match="is not a C target; use target='c'"):
        ember.export_c(conv_relu_pool(), tmp_path / "x", target="llvm")
    (tmp_path / "file").write_text("")
    with pytest.raises(ArgumentError, match="exists and is not a directory"):
        ember.export_c(conv_relu_pool(), tmp_path / "file")


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs cc")
def test_command_line_writes_c_and_wasm(tmp_path, capsys):
    import onnx

    from ember.cli import main

    onnx.save(conv_relu_pool(), tmp_path / "m.onnx")
    assert main(["compile", str(tmp_path / "m.onnx"), "--target", "c", "-o",
                 str(tmp_path / "c")]) == 0
    assert "model.c, model.h" in capsys.readouterr().out
    assert (tmp_path / "c" / "model.h").read_text().count("MODEL_INPUT0_SHAPE {1, 8, 16, 16}")
    if shutil.which("wasm-ld"):
        assert main(["compile", str(tmp_path / "m.onnx"), "--target", "wasm", "-o",
                     str(tmp_path / "web")]) == 0
        assert (tmp_path / "web" / "m.wasm").read_bytes()[:4] == b"\0asm"
    assert main(["compile", str(tmp_path / "none.onnx"), "--target", "c", "-o",
                 str(tmp_path / "c2")]) == 2
    assert "does not exist" in capsys.readouterr().err
