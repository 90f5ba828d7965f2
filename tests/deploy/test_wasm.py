"""WebAssembly: whole models linked by wasm-ld, run in Node.js through the generated ES
module, checked against onnxruntime."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember  # noqa: E402
from ember.errors import EmberError  # noqa: E402
from ember.lowering.export import CompilerNotFoundError, ExportError  # noqa: E402
from tests.lowering.test_export import matmul_gelu  # noqa: E402

RUNNER = Path(__file__).with_name("run_wasm.mjs")
pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("wasm-ld") is None,
                                reason="needs node and wasm-ld (.ci/install-system-packages.sh)")


def run_in_node(script: Path, feeds: dict[str, np.ndarray], work: Path, repeat: int = 1
                ) -> tuple[list[np.ndarray], list[float]]:
    inputs, outputs = work / "in", work / "out"
    inputs.mkdir(parents=True)
    outputs.mkdir()
    for name, array in feeds.items():
        np.ascontiguousarray(array).tofile(inputs / f"{name}.bin")
    done = subprocess.run(["node", str(RUNNER), str(script), str(inputs), str(outputs),
                           str(repeat)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    count = len(list(outputs.iterdir()))
    return ([np.fromfile(outputs / f"{k}.bin", np.uint8) for k in range(count)],
            json.loads(done.stdout)["seconds"])


def _check(model, script, feeds, work, rtol=1e-4, atol=1e-5):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got, seconds = run_in_node(script, feeds, work, repeat=2)
    assert len(got) == len(want)
    for raw, expected in zip(got, want):
        value = raw.view(expected.dtype).reshape(expected.shape)
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol)
    return seconds


@pytest.mark.parametrize("name,config", [
    ("mobilenet_v2", {"image_size": 32, "num_classes": 10}),
    ("squeezenet", {"image_size": 48, "num_classes": 10}),
])
def test_zoo_models_run_in_node(name, config, tmp_path):
    from ember.zoo import build_model, random_inputs

    model = build_model(name, **config)
    script = ember.export_wasm(model, tmp_path / "web", name=name)
    assert {p.name for p in (tmp_path / "web").iterdir()} == {f"{name}.js", f"{name}.wasm",
                                                               f"{name}.weights"}
    wasm = (tmp_path / "web" / f"{name}.wasm").read_bytes()
    assert wasm[:4] == b"\0asm"
    seconds = _check(model, script, random_inputs(model, 4), tmp_path, 1e-3, 1e-4)
    assert all(s > 0 for s in seconds)


def test_gelu_erf_and_passthrough_outputs_in_node(tmp_path):
    """erf through the loader's Math imports; outputs that are an input and a weight."""
    model = matmul_gelu()
    script = ember.export_wasm(model, tmp_path / "web")
    rng = np.random.default_rng(2)
    _check(model, script, {"x": rng.standard_normal((8, 64)).astype(np.float32)}, tmp_path)


def test_wasm_export_errors(tmp_path, monkeypatch):
    with pytest.raises(ExportError, match="is not wasm32; use target='wasm'"):
        ember.export_wasm(matmul_gelu(), tmp_path, target="llvm")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="needs wasm-ld"):
        ember.export_wasm(matmul_gelu(), tmp_path)
    monkeypatch.setenv("WASM_LD", "/nonexistent/wasm-ld")
    with pytest.raises(CompilerNotFoundError, match="cannot run wasm-ld '/nonexistent"):
        ember.export_wasm(matmul_gelu(), tmp_path / "x")
    monkeypatch.setenv("WASM_LD", shutil.which("false", path="/bin:/usr/bin"))
    with pytest.raises(EmberError, match="linking 'model.wasm' failed"):
        ember.export_wasm(matmul_gelu(), tmp_path / "x")
