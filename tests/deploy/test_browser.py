"""The example page in headless Chromium: it loads a WebAssembly model, classifies a picked
image, and its scores match onnxruntime on the same preprocessed input."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
playwright = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists() or shutil.which("wasm-ld") is None,
                                reason="needs Debian's chromium and wasm-ld")
PAGE = Path(__file__).resolve().parents[2] / "examples" / "web"
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


def write_png(path: Path, rgb: np.ndarray) -> None:
    """An 8-bit RGB PNG (no filtering)."""
    height, width, _ = rgb.shape
    raw = b"".join(b"\0" + rgb[y].astype(np.uint8).tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_page_classifies_an_image_like_onnxruntime(tmp_path):
    from ember.serve_web import build_site, start_server
    from ember.zoo import build_model

    size = 32
    model = build_model("mobilenet_v2", image_size=size, num_classes=10)
    site = tmp_path / "site"
    site.mkdir()
    for name in ("index.html", "app.js"):
        shutil.copy(PAGE / name, site / name)
    build_site(model, site)
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (size, size, 3))
    write_png(tmp_path / "picture.png", pixels)
    server = start_server(site, "127.0.0.1", 0)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
            page.wait_for_function("window.emberReady === true", timeout=60000)
            page.set_input_files("#file", str(tmp_path / "picture.png"))
            page.wait_for_function("window.emberResult !== undefined", timeout=60000)
            result = page.evaluate("window.emberResult")
            listed = page.inner_text("#results")
            page.screenshot(path=str(tmp_path / "page.png"))
            browser.close()
    finally:
        server.shutdown()
    assert errors == []
    assert result["simd"] == "relaxed-simd"  # Chromium runs the fused multiply-add module
    # the page's preprocessing: the same picture, normalized as ImageNet models expect
    expected = ((pixels / 255 - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)
    seen = np.array(result["input"], np.float32).reshape(expected.shape)
    np.testing.assert_allclose(seen, expected, rtol=1e-5, atol=1e-5)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {model.graph.input[0].name: seen})
    np.testing.assert_allclose(np.array(result["scores"]), want[0], rtol=1e-3, atol=1e-4)
    assert result["top"] == [int(k) for k in np.argsort(-want[0])[:5]]
    assert f"class {result['top'][0]}" in listed.splitlines()[0]
    assert (tmp_path / "page.png").stat().st_size > 1000
