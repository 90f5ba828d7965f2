"""Models built here for ARM boards, run through the C RPC server under qemu-user (the path
a user takes with a real board on the network), checked against onnxruntime."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ember.driver import export_library  # noqa: E402
from ember.errors import ArgumentError  # noqa: E402
from ember.runtime import rpc  # noqa: E402
from tests.deploy.conftest import KEY, board_or_skip, start_c_server, stop  # noqa: E402
from tests.lowering.test_export import conv_relu_pool  # noqa: E402

# tiny inputs: qemu runs ARM code tens of times slower than native
MODELS = {"aarch64": ("mobilenet_v2", {"image_size": 32, "num_classes": 10}),
          "armv7": ("squeezenet", {"image_size": 48, "num_classes": 10})}


def _reference(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture(scope="module", params=sorted(MODELS))
def board(request, tmp_path_factory):
    """The C server cross-compiled for the board, running under qemu on 127.0.0.1."""
    from ember.lowering.crt import build_rpc_server

    target, emulator = board_or_skip(request.param)
    root = tmp_path_factory.mktemp(request.param)
    program = build_rpc_server(target, root / "rpc_server")
    server = start_c_server(program, root / "work", emulator)
    yield request.param, target, server
    stop(server)


def test_zoo_model_on_the_board_matches_onnxruntime(board, tmp_path):
    from ember.zoo import build_model, random_inputs

    name, target, server = board
    model_name, config = MODELS[name]
    model = build_model(model_name, **config)
    path = export_library(model, tmp_path / f"{model_name}.so", target=target)
    feeds = random_inputs(model, 11)
    with rpc.connect(server.host, server.port, KEY) as session:
        info = session.info()
        assert info["machine"].startswith("aarch64" if name == "aarch64" else "armv7")
        remote = session.upload(path)
        assert remote.metadata["triple"].startswith(name[:5])
        one, seconds = remote.run_timed(feeds, repeat=2, threads=1)
        two = remote.run(feeds, threads=2)  # the thread pool on the board
        remote.free()
    want = _reference(model, feeds)
    np.testing.assert_allclose(one[0], want[0], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(two[0], one[0], rtol=1e-5, atol=1e-6)
    assert len(seconds) == 2 and all(s > 0 for s in seconds)


def test_board_refuses_a_library_for_another_machine(board, tmp_path):
    name, _, server = board
    other = "llvm" if name == "aarch64" else "cortex-a72"
    if other == "llvm" and shutil.which("cc") is None:
        pytest.skip("needs cc")
    path = export_library(conv_relu_pool(), tmp_path / "other.so", target=other)
    with rpc.connect(server.host, server.port, KEY) as session:
        with pytest.raises(rpc.RPCError, match="cannot load the module"):
            session.upload(path)
        assert session.info()["cpus"]  # still serving


def test_python_server_runs_a_library_and_checks_the_cpu(tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("needs cc")
    model = conv_relu_pool()
    path = export_library(model, tmp_path / "conv.so")
    server = rpc.Server(KEY, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        x = np.random.default_rng(5).standard_normal((1, 8, 16, 16)).astype(np.float32)
        with rpc.connect(*server.address, key=KEY) as session:
            remote = session.upload(path)
            np.testing.assert_allclose(remote.run({"x": x})[0], _reference(model, {"x": x})[0],
                                       rtol=1e-4, atol=1e-5)
            assert remote.time({"x": x}, repeat=3) > 0
            with pytest.raises(ArgumentError, match=r"input 'x': expected shape \(1, 8, 16"):
                remote.run({"x": x[:, :4]})  # checked on the host, before the wire
            with pytest.raises(ArgumentError, match="repeat must be a positive integer"):
                remote.run_timed({"x": x}, repeat=0)
    finally:
        server.shutdown()


def test_upload_refuses_a_device_without_the_features(tmp_path, monkeypatch):
    if shutil.which("cc") is None:
        pytest.skip("needs cc")
    path = export_library(conv_relu_pool(), tmp_path / "v3.so", target="x86-64-v3")
    server = rpc.Server(KEY, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from ember.runtime import cpu

    try:
        with rpc.connect(*server.address, key=KEY) as session:
            # the device reports an SSE-only CPU: the host refuses before running anything
            monkeypatch.setattr(session, "info", lambda: {"flags": "sse sse2 pni ssse3"})
            monkeypatch.setattr(cpu, "host_flags", lambda: None)  # the server side: unknown
            with pytest.raises(rpc.RPCError, match="uses .*avx2.*which the device's CPU lacks"):
                session.upload(path)
    finally:
        server.shutdown()
