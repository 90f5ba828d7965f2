"""Fixtures for deployment tests: RPC servers (C, native or under qemu-user; Python)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

KEY = b"test-key-0123456789"
# per board: the target preset, its cross compiler, the qemu-user command
BOARDS = {
    "aarch64": ("cortex-a72", "aarch64-linux-gnu-gcc",
                ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]),
    "armv7": ("armv7", "arm-linux-gnueabihf-gcc",
              ["qemu-arm", "-L", "/usr/arm-linux-gnueabihf"]),
}


@dataclass
class RunningServer:
    host: str
    port: int
    work_dir: Path
    process: subprocess.Popen | None = None

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None


def board_or_skip(board: str) -> tuple[str, list[str]]:
    target, cc, emulator = BOARDS[board]
    if shutil.which(cc) is None or shutil.which(emulator[0]) is None:
        pytest.skip(f"needs {cc} and {emulator[0]} (.ci/install-system-packages.sh)")
    return target, emulator


def start_c_server(program: Path, work_dir: Path, emulator: list[str] = (),
                   *options: str) -> RunningServer:
    work_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, EMBER_RPC_KEY=KEY.decode())
    process = subprocess.Popen([*emulator, str(program), "--port", "0", "--work-dir",
                                str(work_dir), *options], stdout=subprocess.PIPE, env=env,
                               text=True)
    line = process.stdout.readline()
    assert "listening on" in line, line
    host, port = line.split()[-1].rsplit(":", 1)
    return RunningServer(host, int(port), work_dir, process)


def stop(server: RunningServer) -> None:
    if server.process is not None:
        server.process.terminate()
        server.process.wait(timeout=10)


@pytest.fixture(scope="session")
def c_server_program(tmp_path_factory) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    from ember.lowering.crt import build_rpc_server

    return build_rpc_server("llvm", tmp_path_factory.mktemp("crt") / "rpc_server")


@pytest.fixture(params=["c", "python"])
def any_server(request, c_server_program, tmp_path):
    """A C or Python RPC server on 127.0.0.1 with a 2-second idle timeout."""
    if request.param == "c":
        server = start_c_server(c_server_program, tmp_path / "work", (), "--idle-timeout",
                                "2", "--max-message", "1000000")
        yield server
        stop(server)
    else:
        from ember.runtime.rpc import Server

        py = Server(KEY, "127.0.0.1", 0, idle_timeout=2.0, max_message=1000000)
        thread = threading.Thread(target=py.serve_forever, daemon=True)
        thread.start()
        yield RunningServer(*py.address, work_dir=tmp_path)
        py.shutdown()
