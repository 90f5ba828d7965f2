"""Build ember's C runtime programs (the RPC server) for a target with its C compiler.

    build_rpc_server("cortex-a72", "rpc_server")   # aarch64-linux-gnu-gcc, static libc off

The sources live in ember/runtime/c/ (C99 + POSIX, libc and libdl only); they are plain
files, so a board with a C compiler can build them itself:
`cc -std=c99 -O2 rpc_server.c sha256.c -ldl -o rpc_server`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from ember.lowering.export import LinkError, find_c_compiler
from ember.target import Target

SOURCE_DIR = Path(__file__).resolve().parents[1] / "runtime" / "c"
RPC_SOURCES = ("rpc_server.c", "sha256.c")
C_FLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror")


def build_rpc_server(target: Target | str, output: str | os.PathLike[str]) -> Path:
    """The C RPC server compiled for `target` (its cross C compiler, or CC) at `output`,
    written atomically."""
    tgt = Target(target)
    cc = find_c_compiler(tgt)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    command = [*cc, *C_FLAGS, *(str(SOURCE_DIR / s) for s in RPC_SOURCES), "-ldl", "-o", temp]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        Path(temp).unlink(missing_ok=True)
        raise LinkError(f"building the RPC server failed ({shlex.join(command)}):\n"
                        f"{done.stderr.strip()}")
    os.chmod(temp, 0o755)
    os.replace(temp, out)
    return out
