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
from tests.lowering.test_export import conv_relu_pool, matmul_gelu  # noqa: E402

RUNNER = Path(__file__).with_name("run_wasm.mjs")
pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("wasm-ld") is None,
                                reason="needs node and wasm-ld (.ci/install-system-packages.sh)")


RELAXED_FLAG = "--experimental-wasm-relaxed-simd"


def node_major() -> int:
    return int(subprocess.run(["node", "--version"], capture_output=True, text=True,
                              check=True).stdout.strip().lstrip("v").split(".")[0])


def node_runs_relaxed_simd(flags: tuple[str, ...]) -> bool:
    """V8 ships relaxed SIMD from 11.4 (Node.js 21); Node.js 20 needs the flag."""
    return RELAXED_FLAG in flags or node_major() >= 21


def run_in_node(script: Path, feeds: dict[str, np.ndarray], work: Path, repeat: int = 1,
                flags: tuple[str, ...] = ()) -> tuple[list[np.ndarray], dict]:
    inputs, outputs = work / "in", work / "out"
    shutil.rmtree(inputs, ignore_errors=True)
    shutil.rmtree(outputs, ignore_errors=True)
    inputs.mkdir(parents=True)
    outputs.mkdir()
    for name, array in feeds.items():
        np.ascontiguousarray(array).tofile(inputs / f"{name}.bin")
    done = subprocess.run(["node", *flags, str(RUNNER), str(script), str(inputs),
                           str(outputs), str(repeat)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    count = len(list(outputs.iterdir()))
    return ([np.fromfile(outputs / f"{k}.bin", np.uint8) for k in range(count)],
            json.loads(done.stdout))


def _check(model, script, feeds, work, rtol=1e-4, atol=1e-5, flags=()):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got, report = run_in_node(script, feeds, work, repeat=2, flags=flags)
    assert len(got) == len(want)
    for raw, expected in zip(got, want):
        value = raw.view(expected.dtype).reshape(expected.shape)
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol)
    return report


def test_zoo_model_with_simd128_fallback_in_node(tmp_path):
    """The relaxed-SIMD module where the engine runs it, the simd128 copy elsewhere; both
    match onnxruntime."""
    from ember.zoo import build_model, random_inputs

    name = "mobilenet_v2"
    model = build_model(name, image_size=32, num_classes=10)
    script = ember.export_wasm(model, tmp_path / "web", name=name)
    web = tmp_path / "web"
    assert {p.name for p in web.iterdir()} == {f"{name}.js", f"{name}.wasm",
                                                f"{name}.simd128.wasm", f"{name}.weights"}
    for path in (web / f"{name}.wasm", web / f"{name}.simd128.wasm"):
        assert path.read_bytes()[:4] == b"\0asm"
    # f32x4.relaxed_madd is opcode 0xfd 0x85 0x02: in the relaxed module only
    assert b"\xfd\x85\x02" in (web / f"{name}.wasm").read_bytes()
    assert b"\xfd\x85\x02" not in (web / f"{name}.simd128.wasm").read_bytes()
    feeds = random_inputs(model, 4)
    for flags in ((), (RELAXED_FLAG,)):
        report = _check(model, script, feeds, tmp_path, 1e-3, 1e-4, flags)
        assert report["simd"] == ("relaxed-simd" if node_runs_relaxed_simd(flags)
                                  else "simd128")
        assert all(s > 0 for s in report["seconds"])


def test_zoo_model_without_fallback_in_node(tmp_path):
    from ember.zoo import build_model, random_inputs

    model = build_model("squeezenet", image_size=48, num_classes=10)
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "squeezenet.simd128.wasm").write_bytes(b"stale")
    script = ember.export_wasm(model, tmp_path / "web", name="squeezenet", fallback=False)
    assert {p.name for p in (tmp_path / "web").iterdir()} == {
        "squeezenet.js", "squeezenet.wasm", "squeezenet.weights"}
    report = _check(model, script, random_inputs(model, 4), tmp_path, 1e-3, 1e-4,
                    (RELAXED_FLAG,))
    assert report["simd"] == "relaxed-simd"
    if node_major() < 21:  # an engine without relaxed SIMD and no fallback: a clear error
        done = subprocess.run(["node", str(RUNNER), str(script), str(tmp_path / "in"),
                               str(tmp_path / "out")], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode != 0
        assert "uses WebAssembly relaxed SIMD, which this engine lacks" in done.stderr


def test_simd128_target_has_no_fallback(tmp_path):
    model = matmul_gelu()
    script = ember.export_wasm(model, tmp_path / "web", target="wasm -mattr=-relaxed-simd")
    assert {p.name for p in (tmp_path / "web").iterdir()} == {"model.js", "model.wasm",
                                                               "model.weights"}
    rng = np.random.default_rng(5)
    report = _check(model, script, {"x": rng.standard_normal((8, 64)).astype(np.float32)},
                    tmp_path)
    assert report["simd"] == "simd128"


def test_gelu_erf_and_passthrough_outputs_in_node(tmp_path):
    """erf through the loader's Math imports; outputs that are an input and a weight."""
    model = matmul_gelu()
    script = ember.export_wasm(model, tmp_path / "web")
    rng = np.random.default_rng(2)
    _check(model, script, {"x": rng.standard_normal((8, 64)).astype(np.float32)}, tmp_path)


def test_wasm_export_errors(tmp_path, monkeypatch):
    with pytest.raises(ExportError, match="is not wasm32; use target='wasm'"):
        ember.export_wasm(matmul_gelu(), tmp_path, target="llvm")
    with pytest.raises(EmberError, match="fallback must be True or False, got 'yes'"):
        ember.export_wasm(matmul_gelu(), tmp_path / "f", fallback="yes")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="needs wasm-ld"):
        ember.export_wasm(matmul_gelu(), tmp_path)
    monkeypatch.setenv("WASM_LD", "/nonexistent/wasm-ld")
    with pytest.raises(CompilerNotFoundError, match="cannot run wasm-ld '/nonexistent"):
        ember.export_wasm(matmul_gelu(), tmp_path / "x")
    monkeypatch.setenv("WASM_LD", shutil.which("false", path="/bin:/usr/bin"))
    with pytest.raises(EmberError, match="linking 'model.wasm' failed"):
        ember.export_wasm(matmul_gelu(), tmp_path / "x")


def test_fallback_planned_differently_is_refused(tmp_path):
    from ember.driver import import_model
    from ember.lowering import wasm
    from ember.lowering.compile import prepare

    relaxed, portable = ember.target.Target("wasm"), ember.target.Target(
        "wasm -mattr=-relaxed-simd")
    assert wasm.fallback_target(relaxed).code_features == portable.code_features == (
        "simd128",)
    assert wasm.fallback_target(portable) is None
    built = prepare(import_model(matmul_gelu()), relaxed, 3, False, None, False, False)
    other = prepare(import_model(conv_relu_pool()), portable, 3, False, None, False, False)
    with pytest.raises(ExportError, match="fallback of 'm' was planned differently"):
        wasm.write_wasm(built, relaxed, tmp_path, "m", (portable, other))


def test_float16_compare_and_select_in_node(tmp_path):
    """A float16 ReLU and Max: LLVM's WebAssembly back end loops forever on a float16 vector
    compare, so ember compares lane by lane there (and keeps SLP from fusing it back)."""
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Mul", ["a", "x"], ["m"]),
         helper.make_node("Relu", ["m"], ["r"]), helper.make_node("Max", ["r", "x"], ["y"])],
        "half", [vi("x", TensorProto.FLOAT16, [4, 16])], [vi("y", TensorProto.FLOAT16, [4, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    script = ember.export_wasm(model, tmp_path / "web")
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float16)
    _check(model, script, {"x": x}, tmp_path, rtol=1e-3, atol=1e-3)


def test_loader_float16_conversions_match_numpy(tmp_path):
    """The loader's __extendhfsf2 / __truncsfhf2: every half exactly, and float32 values at,
    beside and between halves (ties to even), overflow, underflow and NaN, as numpy rounds."""
    import warnings

    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].astype(np.float64)
    middles = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xs = np.concatenate([halves.astype(np.float32), middles, middles * (1 + 1e-7),
                             middles * (1 - 1e-7), rng.standard_normal(5000) * 1e3,
                             [65520.0, 3e38, -3e38, 1e-8, 2.0**-25, 2.0**-25 * 1.001]]
                            ).astype(np.float32)
        want = xs.astype(np.float16)
    xs.tofile(tmp_path / "x.bin")
    loader = Path(ember.__file__).parent / "lowering" / "wasm_loader.js"
    done = subprocess.run(["node", str(Path(__file__).with_name("half_convert.mjs")), str(loader),
                           str(tmp_path / "x.bin")], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    up = np.array([float(v) for v in report["up"]])
    np.testing.assert_array_equal(up, halves.astype(np.float64))  # NaN == NaN here
    down = np.array(report["down"], dtype=np.uint16).view(np.float16)
    nan = np.isnan(xs)
    assert np.isnan(down[nan]).all()
    np.testing.assert_array_equal(down[~nan].view(np.uint16), want[~nan].view(np.uint16))
