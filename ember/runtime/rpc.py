"""RPC to a device: upload an exported model library, run it on inputs, fetch outputs, time it.

    with connect("127.0.0.1", 9090, key=b"...") as remote:        # host side
        model = remote.upload("mobilenet.so")                      # built for the device
        (probs,) = model.run({"input": x})
        seconds = model.time({"input": x}, repeat=10)

The device runs `ember serve-rpc` (this module's `serve`) or the C server
(ember/runtime/c/rpc_server.c, no Python needed there). Both speak the protocol below.

Frames: the bytes "EMBR", u32 type, u64 payload length, payload (little-endian). The server
opens with HELLO (u32 version, 32-byte nonce); the client answers AUTH: HMAC-SHA256(key,
"ember-rpc client" || nonce) and its own 32-byte nonce; the server replies OK with
HMAC(key, "ember-rpc server" || client nonce), proving it holds the key too. The key never
crosses the wire, and nothing else is read before AUTH (a frame of at most 256 bytes).
UPLOAD (the library's bytes) -> OK (u32 module id, metadata JSON); RUN (u32 module, u32
threads, u32 repeat, u32 inputs, u32 outputs, u64 workspace bytes, each input as u64 bytes +
data, each output's u64 bytes) -> OK (u32 outputs, each u64 bytes + data, u32 repeat,
repeat f64 seconds); FREE (u32 module); INFO -> OK ("machine=..\\ncpus=..\\nflags=..");
BYE. Any failure is an ERROR frame with a message; a malformed request gets one and the
connection goes on; a bad magic or an oversized frame gets one and the connection closes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import struct
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ember.dtype import numpy_dtype
from ember.errors import ArgumentError, EmberError
from ember.runtime import cpu

MAGIC = b"EMBR"
VERSION = 1
HELLO, AUTH, OK, ERROR, UPLOAD, RUN, FREE, INFO, BYE = range(1, 10)
TYPES = {HELLO, AUTH, OK, ERROR, UPLOAD, RUN, FREE, INFO, BYE}
PREAUTH_LIMIT = 256
DEFAULT_MAX_MESSAGE = 1 << 30
DEFAULT_PORT = 9090
MIN_KEY_BYTES = 8
_HEADER = struct.Struct("<4sIQ")
_RUN_HEAD = struct.Struct("<IIIIIQ")


class RPCError(EmberError):
    """The RPC peer refused a request, broke the protocol, or could not be reached."""


class AuthenticationError(RPCError):
    """The peer does not hold the shared key."""


def check_key(key: bytes | str | None) -> bytes:
    """The shared key as bytes; RPCError unless it has at least MIN_KEY_BYTES."""
    if key is None:
        key = os.environ.get("EMBER_RPC_KEY", "")
    raw = key.encode() if isinstance(key, str) else bytes(key)
    if len(raw) < MIN_KEY_BYTES:
        raise RPCError(f"RPC needs a shared key of at least {MIN_KEY_BYTES} bytes (a key file "
                       "or EMBER_RPC_KEY); got " + (f"{len(raw)} bytes" if raw else "none"))
    return raw


def read_key_file(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes().rstrip(b"\r\n")
    except OSError as error:
        raise RPCError(f"cannot read the key file '{path}': {error.strerror}") from None


def mac(key: bytes, role: bytes, nonce: bytes) -> bytes:
    return hmac.new(key, role + nonce, hashlib.sha256).digest()


# frames ----------------------------------------------------------------------------------
def encode_frame(kind: int, payload: bytes = b"") -> bytes:
    return _HEADER.pack(MAGIC, kind, len(payload)) + payload


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 24))
        if not chunk:
            raise RPCError("connection closed by the peer")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(sock: socket.socket, limit: int) -> tuple[int, bytes]:
    """(type, payload) of the next frame; RPCError for a bad magic or a frame over `limit`
    (the stream cannot be trusted after either)."""
    magic, kind, size = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if magic != MAGIC:
        raise RPCError("malformed frame: bad magic")
    if size > limit:
        raise RPCError(f"frame of {size} bytes exceeds the limit of {limit}")
    return kind, _recv_exact(sock, size)


# the client ------------------------------------------------------------------------------
class RemoteModel:
    """A library uploaded to a device: `run(inputs) -> outputs`, `time(...)`, `free()`."""

    def __init__(self, session: RPCSession, module: int, metadata: dict[str, Any]) -> None:
        from ember.runtime.library import TensorInfo

        self.session, self.module, self.metadata = session, module, metadata
        plan = metadata["plan"]
        self.name: str = plan["name"]
        self.inputs = tuple(TensorInfo(s["name"], tuple(s["shape"]), s["dtype"])
                            for s in plan["inputs"])
        self.outputs = tuple(TensorInfo(s["name"], tuple(s["shape"]), s["dtype"])
                             for s in plan["outputs"])
        self._sources = [(s["kind"], int(s["index"])) for s in plan["output_sources"]]
        self.workspace_bytes = int(plan["workspace_bytes"])

    def run_timed(self, inputs: Mapping[str, Any] | Sequence[Any], repeat: int = 1,
                  threads: int = 0) -> tuple[list[np.ndarray], list[float]]:
        """Outputs and the device's seconds for each of `repeat` runs (threads 0: all)."""
        from ember.runtime.library import check_inputs

        if not isinstance(repeat, int) or repeat < 1:
            raise ArgumentError(f"repeat must be a positive integer, got {repeat!r}")
        arrays = check_inputs(self.name, self.inputs, inputs)
        nbytes = [int(np.prod(s.shape, dtype=np.int64)) * numpy_dtype(s.dtype).itemsize
                  for s in self.outputs]
        parts = [_RUN_HEAD.pack(self.module, threads, repeat, len(arrays), len(nbytes),
                                self.workspace_bytes)]
        for a in arrays:
            parts += [struct.pack("<Q", a.nbytes), a.tobytes()]
        parts += [struct.pack("<Q", n) for n in nbytes]
        reply = self.session.request(RUN, b"".join(parts))
        count, at = struct.unpack_from("<I", reply)[0], 4
        outputs = []
        for spec in self.outputs[:count]:
            (size,), at = struct.unpack_from("<Q", reply, at), at + 8
            dtype = numpy_dtype(spec.dtype)
            outputs.append(np.frombuffer(reply, dtype, size // dtype.itemsize,
                                         at).reshape(spec.shape).copy())
            at += size
        (runs,), at = struct.unpack_from("<I", reply, at), at + 4
        seconds = list(struct.unpack_from(f"<{runs}d", reply, at))
        for i, (kind, index) in enumerate(self._sources):  # outputs no kernel writes
            if kind == "input":
                outputs[i] = arrays[index].copy()
            elif kind != "output":
                raise RPCError(f"output '{self.outputs[i].name}' is read from the model's "
                               f"{kind} (not written by a kernel), which RPC does not fetch")
        return outputs, seconds

    def run(self, inputs: Mapping[str, Any] | Sequence[Any], threads: int = 0
            ) -> list[np.ndarray]:
        return self.run_timed(inputs, 1, threads)[0]

    def time(self, inputs: Mapping[str, Any] | Sequence[Any], repeat: int = 10,
             threads: int = 0) -> float:
        """Median seconds of one run on the device, after one untimed run."""
        self.run_timed(inputs, 1, threads)
        return float(np.median(self.run_timed(inputs, repeat, threads)[1]))

    def free(self) -> None:
        self.session.request(FREE, struct.pack("<I", self.module))


class RPCSession:
    """An authenticated connection to an RPC server."""

    def __init__(self, sock: socket.socket, key: bytes) -> None:
        self.sock = sock
        kind, hello = read_frame(sock, PREAUTH_LIMIT)
        if kind != HELLO or len(hello) != 36:
            raise RPCError("the peer is not an ember RPC server (no HELLO)")
        version = struct.unpack_from("<I", hello)[0]
        if version != VERSION:
            raise RPCError(f"the server speaks protocol {version}, this client {VERSION}")
        mine = secrets.token_bytes(32)
        sock.sendall(encode_frame(AUTH, mac(key, b"ember-rpc client", hello[4:]) + mine))
        kind, proof = read_frame(sock, PREAUTH_LIMIT)
        if kind == ERROR:
            raise AuthenticationError(f"the server refused: {proof.decode(errors='replace')}")
        if kind != OK or not hmac.compare_digest(proof, mac(key, b"ember-rpc server", mine)):
            raise AuthenticationError("the server could not prove it holds the shared key")

    def request(self, kind: int, payload: bytes = b"") -> bytes:
        self.sock.sendall(encode_frame(kind, payload))
        reply_kind, reply = read_frame(self.sock, DEFAULT_MAX_MESSAGE * 2)
        if reply_kind == ERROR:
            raise RPCError(f"the server replied: {reply.decode(errors='replace')}")
        if reply_kind != OK:
            raise RPCError(f"unexpected reply type {reply_kind}")
        return reply

    def info(self) -> dict[str, str]:
        """machine, cpus and flags (the Linux CPU flags) of the device."""
        text = self.request(INFO).decode(errors="replace")
        return dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)

    def upload(self, path: str | os.PathLike[str], check_cpu: bool = True) -> RemoteModel:
        """Load the library at `path` (exported for the device) there. `check_cpu`: refuse
        it if the device's CPU lacks a feature its code uses."""
        reply = self.request(UPLOAD, Path(path).read_bytes())
        module = struct.unpack_from("<I", reply)[0]
        meta = json.loads(reply[4:].rstrip(b"\0"))
        if check_cpu:
            flags = frozenset(self.info().get("flags", "").split())
            arch = str(meta.get("triple", "")).split("-")[0]
            missing = cpu.missing_features(arch, meta.get("requires", []), flags or None)
            if missing:
                self.request(FREE, struct.pack("<I", module))
                raise RPCError(f"'{Path(path).name}' uses {', '.join(missing)}, which the "
                               "device's CPU lacks; export it for the device's CPU")
        return RemoteModel(self, module, meta)

    def close(self) -> None:
        try:
            self.sock.sendall(encode_frame(BYE))
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> RPCSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(host: str, port: int, key: bytes | str | None = None,
            timeout: float = 120.0) -> RPCSession:
    """An authenticated session with the RPC server at host:port (key: the shared key,
    default EMBER_RPC_KEY)."""
    raw = check_key(key)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        raise RPCError(f"cannot connect to the RPC server at {host}:{port}: "
                       f"{error.strerror or error}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        return RPCSession(sock, raw)
    except BaseException:
        sock.close()
        raise


# the Python server -----------------------------------------------------------------------
class Server:
    """`ember serve-rpc`: the same protocol as the C server, one thread per connection."""

    def __init__(self, key: bytes, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 idle_timeout: float = 60.0, max_message: int = DEFAULT_MAX_MESSAGE) -> None:
        self.key = check_key(key)
        self.idle_timeout, self.max_message = idle_timeout, max_message
        self.listener = socket.create_server((host, port))
        self.address = self.listener.getsockname()[:2]
        self._stop = threading.Event()

    def serve_forever(self) -> None:
        self.listener.settimeout(0.5)
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def shutdown(self) -> None:
        self._stop.set()
        self.listener.close()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(self.idle_timeout)
        modules: dict[int, Any] = {}
        try:
            if self._authenticate(conn):
                while self._one_request(conn, modules):
                    pass
        except TimeoutError:
            _send_error(conn, "idle timeout")
        except (OSError, RPCError):
            pass
        finally:
            conn.close()

    def _authenticate(self, conn: socket.socket) -> bool:
        nonce = secrets.token_bytes(32)
        conn.sendall(encode_frame(HELLO, struct.pack("<I", VERSION) + nonce))
        try:
            kind, body = read_frame(conn, PREAUTH_LIMIT)
        except RPCError:
            kind, body = 0, b""
        if kind != AUTH or len(body) != 64:
            _send_error(conn, "authentication required: expected an AUTH frame")
            return False
        if not hmac.compare_digest(body[:32], mac(self.key, b"ember-rpc client", nonce)):
            _send_error(conn, "authentication failed")
            return False
        conn.sendall(encode_frame(OK, mac(self.key, b"ember-rpc server", body[32:])))
        return True

    def _one_request(self, conn: socket.socket, modules: dict[int, Any]) -> bool:
        try:
            kind, body = read_frame(conn, self.max_message)
        except RPCError as error:
            if "closed" not in str(error):
                _send_error(conn, str(error))
            return False
        if kind == BYE:
            return False
        try:
            conn.sendall(encode_frame(OK, self._handle(kind, body, modules)))
        except (EmberError, struct.error, ValueError) as error:  # the peer's request
            _send_error(conn, str(error) if not isinstance(error, struct.error)
                        else "malformed request: cut short")
        return True

    def _handle(self, kind: int, body: bytes, modules: dict[int, Any]) -> bytes:
        from ember.runtime.library import load_library

        if kind == UPLOAD:
            with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as file:
                file.write(body)
            try:
                model = load_library(file.name)
            finally:
                os.unlink(file.name)
            module = max(modules, default=-1) + 1
            modules[module] = model
            return struct.pack("<I", module) + json.dumps(model.metadata).encode()
        if kind == RUN:
            return _run(body, modules)
        if kind == FREE:
            if len(body) != 4 or struct.unpack("<I", body)[0] not in modules:
                raise RPCError("FREE: no such module")
            del modules[struct.unpack("<I", body)[0]]
            return b""
        if kind == INFO:
            flags = " ".join(sorted(cpu.host_flags() or ()))
            return (f"machine={os.uname().machine}\ncpus={os.cpu_count()}\n"
                    f"flags={flags}").encode()
        raise RPCError("malformed frame: unknown type")


def _run(body: bytes, modules: dict[int, Any]) -> bytes:
    import time

    module, threads, repeat, n_in, n_out, _ = _RUN_HEAD.unpack_from(body)
    if module not in modules:
        raise RPCError("RUN: no such module")
    model = modules[module]
    if n_in != len(model.inputs) or n_out != len(model.outputs):
        raise RPCError("RUN: the input and output counts do not match the model")
    if not 1 <= repeat <= 100000:
        raise RPCError("RUN: bad repeat count")
    at, arrays = _RUN_HEAD.size, []
    for spec in model.inputs:
        (size,), at = struct.unpack_from("<Q", body, at), at + 8
        if at + size > len(body):
            raise RPCError("malformed RUN request: an input is cut short")
        arrays.append(np.frombuffer(body, np.uint8, size, at).view(numpy_dtype(spec.dtype)).reshape(
            spec.shape) if size else np.empty(spec.shape, numpy_dtype(spec.dtype)))
        at += size
    if at + 8 * n_out != len(body):
        raise RPCError("malformed RUN request: bad length")
    model.set_num_threads(threads or os.cpu_count() or 1)
    seconds, outputs = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        outputs = model.run(arrays)
        seconds.append(time.perf_counter() - start)
    parts = [struct.pack("<I", len(outputs))]
    for out in outputs:
        parts += [struct.pack("<Q", out.nbytes), out.tobytes()]
    parts.append(struct.pack(f"<I{repeat}d", repeat, *seconds))
    return b"".join(parts)


def _send_error(conn: socket.socket, message: str) -> None:
    try:
        conn.sendall(encode_frame(ERROR, message.encode()))
    except OSError:
        pass
