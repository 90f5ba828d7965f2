"""RPC servers (C and Python) against a hostile or careless peer: authentication, bounded
frames, malformed requests, idle peers, and a loopback fuzz of the frame parser."""

from __future__ import annotations

import hashlib
import subprocess
import hmac
import socket
import struct
import time

import numpy as np
import pytest

from ember.runtime import rpc
from tests.deploy.conftest import KEY, start_c_server, stop


def _raw(server, hello: list | None = None) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    kind, payload = rpc.read_frame(sock, rpc.PREAUTH_LIMIT)
    assert kind == rpc.HELLO and len(payload) == 36
    if hello is not None:
        hello.append(payload)
    return sock


def _authenticated(server) -> socket.socket:
    hello: list[bytes] = []
    sock = _raw(server, hello)
    nonce = hello[0][4:]
    mine = bytes(range(32))
    sock.sendall(rpc.encode_frame(rpc.AUTH, rpc.mac(KEY, b"ember-rpc client", nonce) + mine))
    kind, proof = rpc.read_frame(sock, rpc.PREAUTH_LIMIT)
    assert kind == rpc.OK and proof == rpc.mac(KEY, b"ember-rpc server", mine)
    return sock


def _reply(sock: socket.socket) -> tuple[int, bytes]:
    return rpc.read_frame(sock, 1 << 30)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_binds_loopback_by_default(c_server_program, tmp_path):
    server = start_c_server(c_server_program, tmp_path)
    try:
        assert server.host == "127.0.0.1"
    finally:
        stop(server)
    assert rpc.Server(KEY, port=0).address[0] == "127.0.0.1"


def test_a_wrong_key_is_refused(any_server):
    with pytest.raises(rpc.AuthenticationError, match="authentication failed"):
        rpc.connect(any_server.host, any_server.port, b"not-the-key-at-all")
    with rpc.connect(any_server.host, any_server.port, KEY) as session:  # still serving
        assert session.info()["machine"]


def test_the_key_never_crosses_the_wire(any_server):
    sent = []
    real = socket.socket.sendall

    def spy(self, data, *args):
        sent.append(bytes(data))
        return real(self, data, *args)

    socket.socket.sendall = spy  # type: ignore[method-assign]
    try:
        with rpc.connect(any_server.host, any_server.port, KEY) as session:
            session.info()
    finally:
        socket.socket.sendall = real  # type: ignore[method-assign]
    wire = b"".join(sent)
    assert KEY not in wire and hashlib.sha256(KEY).digest() not in wire
    assert len(sent) >= 2 and sent[0][:4] == rpc.MAGIC


def test_nothing_runs_for_an_unauthenticated_peer(any_server, tmp_path):
    library = tmp_path / "evil.so"
    library.write_bytes(b"\x7fELF" + bytes(200))
    for first in (rpc.encode_frame(rpc.UPLOAD, library.read_bytes()),
                  rpc.encode_frame(rpc.RUN, bytes(28)), rpc.encode_frame(rpc.INFO)):
        sock = _raw(any_server)
        sock.sendall(first)
        kind, message = _reply(sock)
        assert kind == rpc.ERROR and b"authentication required" in message
        assert _closed(sock)
        sock.close()
    assert not list(any_server.work_dir.glob("ember-rpc-*"))  # no upload reached the disk
    # a huge frame before authentication is refused on its header, never read
    sock = _raw(any_server)
    sock.sendall(struct.pack("<4sIQ", rpc.MAGIC, rpc.AUTH, 1 << 40))
    assert _reply(sock)[0] == rpc.ERROR and _closed(sock)


def test_oversized_and_malformed_frames_get_errors_and_the_server_goes_on(any_server):
    sock = _authenticated(any_server)
    sock.sendall(rpc.encode_frame(rpc.RUN, b"\x00" * 5))  # cut short: same connection goes on
    kind, message = _reply(sock)
    assert kind == rpc.ERROR and b"malformed" in message
    sock.sendall(rpc.encode_frame(77))  # unknown type
    kind, message = _reply(sock)
    assert kind == rpc.ERROR and b"unknown type" in message
    sock.sendall(rpc.encode_frame(rpc.FREE, struct.pack("<I", 9)))
    assert _reply(sock)[0] == rpc.ERROR
    sock.sendall(rpc.encode_frame(rpc.INFO))
    assert _reply(sock)[0] == rpc.OK
    sock.sendall(struct.pack("<4sIQ", rpc.MAGIC, rpc.UPLOAD, 2_000_000))  # over 1 MB limit
    kind, message = _reply(sock)
    assert kind == rpc.ERROR and b"exceeds the limit of 1000000" in message
    assert _closed(sock)
    sock = _authenticated(any_server)
    sock.sendall(b"JUNK" + bytes(12))
    kind, message = _reply(sock)
    assert kind == rpc.ERROR and b"bad magic" in message
    with rpc.connect(any_server.host, any_server.port, KEY) as session:
        assert session.info()["cpus"]


def test_idle_peers_time_out(any_server):
    sock = _authenticated(any_server)
    start = time.monotonic()
    kind, message = _reply(sock)  # the server speaks first: after its 2 s idle timeout
    assert kind == rpc.ERROR and b"idle timeout" in message
    assert 1.5 < time.monotonic() - start < 8
    assert _closed(sock)
    silent = _raw(any_server)  # one that never authenticates is dropped too
    assert _reply(silent)[0] == rpc.ERROR and _closed(silent)


def test_frame_parser_fuzz(any_server, tmp_path):
    """Random frames (seeded, bounded): every one gets a reply or a clean close; the server
    then still runs a real model."""
    rng = np.random.default_rng(1234)
    sock = _authenticated(any_server)
    replies = 0
    for _ in range(150):
        kind = int(rng.choice([rpc.RUN, rpc.FREE, rpc.INFO, rpc.UPLOAD, 0, 50, rpc.OK]))
        size = int(rng.choice([0, 3, 4, 27, 28, 29, 64, int(rng.integers(0, 4096))]))
        payload = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        if kind == rpc.RUN and size >= 28 and rng.random() < 0.5:  # plausible headers
            payload = struct.pack("<IIIIIQ", int(rng.integers(0, 3)), 1, 1,
                                  int(rng.integers(0, 3)), int(rng.integers(0, 3)),
                                  int(rng.integers(0, 1 << 20))) + payload[28:]
        head = struct.pack("<4sIQ", rpc.MAGIC, kind, len(payload))
        garbage = rng.random() < 0.03
        if garbage:  # the server answers, then closes: the stream cannot be resynchronized
            head = bytes(rng.integers(0, 256, 16, dtype=np.uint8))
        sock.sendall(head + payload)
        reply_kind, _ = _reply(sock)
        assert reply_kind in (rpc.OK, rpc.ERROR)
        replies += 1
        if garbage:
            assert reply_kind == rpc.ERROR and _closed(sock)
            sock.close()
            sock = _authenticated(any_server)
    sock.close()
    assert replies == 150 and any_server.alive()
    with rpc.connect(any_server.host, any_server.port, KEY) as session:
        assert session.info()["machine"]


def test_key_checks():
    with pytest.raises(rpc.RPCError, match="at least 8 bytes"):
        rpc.check_key(b"short")
    with pytest.raises(rpc.RPCError, match="cannot read the key file"):
        rpc.read_key_file("/nonexistent/key")
    with pytest.raises(rpc.RPCError, match="cannot connect to the RPC server"):
        rpc.connect("127.0.0.1", 1, KEY)
    assert hmac.compare_digest(rpc.mac(KEY, b"a", b"b"), hmac.new(KEY, b"ab", "sha256").digest())


def test_command_line_builds_the_c_server(tmp_path, capsys):
    import os
    import shutil

    from ember.cli import main

    if shutil.which("cc") is None:
        pytest.skip("needs cc")
    assert main(["rpc-server", "-o", str(tmp_path / "rpc_server")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert os.access(tmp_path / "rpc_server", os.X_OK)
    assert (tmp_path / "rpc_server").read_bytes()[:4] == b"\x7fELF"
    server = start_c_server(tmp_path / "rpc_server", tmp_path / "work")
    try:
        with rpc.connect(server.host, server.port, KEY) as session:
            assert session.info()["machine"]
    finally:
        stop(server)
    no_key = subprocess.run([str(tmp_path / "rpc_server")], capture_output=True, text=True,
                            env={"PATH": "/usr/bin"})
    assert no_key.returncode == 2 and "shared key of at least 8 bytes" in no_key.stderr


def _fake_server(script):
    """A one-connection server on 127.0.0.1 that runs `script(conn)`; its port."""
    import threading

    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        conn, _ = listener.accept()
        try:
            script(conn)
        finally:
            conn.close()
            listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def _hello(version=rpc.VERSION, kind=rpc.HELLO):
    return rpc.encode_frame(kind, struct.pack("<I", version) + bytes(32))


@pytest.mark.parametrize("reply,message", [
    (lambda c: c.sendall(_hello(kind=rpc.OK)), "not an ember RPC server"),
    (lambda c: c.sendall(_hello(version=7)), "speaks protocol 7, this client 1"),
    (lambda c: (c.sendall(_hello()), c.recv(100), c.sendall(rpc.encode_frame(rpc.OK, bytes(32)))),
     "could not prove it holds the shared key"),
    (lambda c: c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"), "bad magic"),
])
def test_client_refuses_a_server_that_is_not_one(reply, message):
    port = _fake_server(reply)
    with pytest.raises(rpc.RPCError, match=message):
        rpc.connect("127.0.0.1", port, KEY, timeout=10)


def test_client_reports_replies_it_cannot_use():
    def script(conn):
        conn.sendall(_hello())
        body = rpc.read_frame(conn, rpc.PREAUTH_LIMIT)[1]
        conn.sendall(rpc.encode_frame(rpc.OK, rpc.mac(KEY, b"ember-rpc server", body[32:])))
        rpc.read_frame(conn, 1 << 20)
        conn.sendall(rpc.encode_frame(rpc.HELLO, b""))  # neither OK nor ERROR
        rpc.read_frame(conn, 1 << 20)
        # a RUN reply for a model whose second output is read from the workspace
        conn.sendall(rpc.encode_frame(rpc.OK, struct.pack("<IQ4sI", 1, 4, bytes(4), 1)
                                      + struct.pack("<d", 0.5)))

    session = rpc.connect("127.0.0.1", _fake_server(script), KEY, timeout=10)
    with pytest.raises(rpc.RPCError, match="unexpected reply type 1"):
        session.info()
    plan = {"name": "m", "inputs": [{"name": "x", "shape": [1], "dtype": "float32"}],
            "outputs": [{"name": "y", "shape": [1], "dtype": "float32"},
                        {"name": "z", "shape": [1], "dtype": "float32"}],
            "output_sources": [{"kind": "output", "index": 0},
                               {"kind": "workspace", "index": 0}], "workspace_bytes": 4}
    remote = rpc.RemoteModel(session, 0, {"plan": plan})
    with pytest.raises(rpc.RPCError, match="output 'z' is read from the model's workspace"):
        remote.run({"x": np.zeros(1, np.float32)})
    session.sock.close()


def test_an_upload_that_is_no_library_is_refused_and_the_session_goes_on(any_server, tmp_path):
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + bytes(300))
    with rpc.connect(any_server.host, any_server.port, KEY) as session:
        with pytest.raises(rpc.RPCError, match="cannot load|not an ember library|truncated"):
            session.upload(junk)
        assert session.info()["machine"]
    assert not list(any_server.work_dir.glob("ember-rpc-*"))  # nothing left on disk
