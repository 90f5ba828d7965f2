"""Compile generated C with the system C compiler into a shared library and load it."""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence

from ember.codegen.c import c_function_name, codegen_c
from ember.errors import CodegenError
from ember.codegen.params import params_of
from ember.runtime.module import Module
from ember.tir.function import PrimFunc

COMPILE_TIMEOUT_S = 600
_BASE_FLAGS = ("-O3", "-std=c99", "-fPIC", "-shared")
_lock = threading.Lock()
_work_dir: str | None = None
_probes: dict[tuple[str, ...], bool] = {}
_libraries: dict[str, ctypes.CDLL] = {}


def find_compiler() -> list[str]:
    """The C compiler command: $CC (may carry flags) or the first of cc, gcc, clang on PATH."""
    env = os.environ.get("CC", "").strip()
    if env:
        command = shlex.split(env)
        if shutil.which(command[0]) is None:
            raise CodegenError(f"the C compiler CC={env!r} was not found on PATH")
        return command
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path is not None:
            return [path]
    raise CodegenError("no C compiler found (looked for cc, gcc, clang on PATH); install one "
                       "or set CC")


def _directory() -> str:
    """A per-process temporary folder holding sources and compiled libraries."""
    global _work_dir
    with _lock:
        if _work_dir is None:
            _work_dir = tempfile.mkdtemp(prefix="ember-c-")
            atexit.register(shutil.rmtree, _work_dir, True)
        return _work_dir


def _supports(compiler: list[str], flag: str) -> bool:
    """Whether `compiler` builds a shared library with `flag` (answers are cached)."""
    key = (*compiler, flag)
    with _lock:
        if key in _probes:
            return _probes[key]
    folder = tempfile.mkdtemp(prefix="probe-", dir=_directory())
    source = os.path.join(folder, "probe.c")
    with open(source, "w") as f:
        f.write("int ember_probe(void) { return 0; }\n")
    command = [*compiler, *_BASE_FLAGS, flag, source, "-o", os.path.join(folder, "probe.so")]
    try:
        ok = subprocess.run(command, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    shutil.rmtree(folder, ignore_errors=True)
    with _lock:
        _probes[key] = ok
    return ok


def _atomic_write(path: str, text: str) -> None:
    temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(temporary, "w") as f:
        f.write(text)
    os.replace(temporary, path)


def _offending_lines(stderr: str, source_name: str, source: str, limit: int = 5) -> str:
    """The source lines the compiler complained about, numbered, with one line around each."""
    lines = source.splitlines()
    numbers: list[int] = []
    for match in re.finditer(re.escape(source_name) + r":(\d+)", stderr):
        number = int(match.group(1))
        if number not in numbers:
            numbers.append(number)
    shown: list[str] = []
    for number in numbers[:limit]:
        for n in range(max(1, number - 1), min(len(lines), number + 1) + 1):
            mark = ">" if n == number else " "
            shown.append(f"{mark}{n:5d} | {lines[n - 1]}")
        shown.append("")
    return "\n".join(shown)


def compile_shared(source: str, extra_flags: Sequence[str] = (), openmp: bool = True,
                   native: bool = True) -> str:
    """Compile C source into a shared library; returns its path (cached by content).

    Flags: -O3 -std=c99 -fPIC -shared [-march=native] [-fopenmp] <extra_flags> ... -lm, where
    the bracketed ones are used when the compiler accepts them.
    """
    compiler = find_compiler()
    flags = list(_BASE_FLAGS)
    if native and _supports(compiler, "-march=native"):
        flags.append("-march=native")
    if openmp and _supports(compiler, "-fopenmp"):
        flags.append("-fopenmp")
    flags.extend(extra_flags)
    key = hashlib.sha256("\0".join([*compiler, *flags, source]).encode()).hexdigest()[:32]
    folder = _directory()
    library = os.path.join(folder, f"{key}.so")
    if os.path.exists(library):
        return library
    source_path = os.path.join(folder, f"{key}.c")
    _atomic_write(source_path, source)
    temporary = f"{library}.{os.getpid()}.{threading.get_ident()}.tmp"
    command = [*compiler, *flags, source_path, "-o", temporary, "-lm"]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CodegenError(f"the C compiler took longer than {COMPILE_TIMEOUT_S} s: "
                           f"{shlex.join(command)}") from None
    except OSError as error:
        raise CodegenError(f"cannot run the C compiler {compiler[0]!r}: {error}") from None
    if result.returncode != 0:
        if os.path.exists(temporary):
            os.remove(temporary)
        where = _offending_lines(result.stderr, os.path.basename(source_path), source)
        raise CodegenError(f"the C compiler failed (exit {result.returncode}): "
                           f"{shlex.join(command)}\n{result.stderr.strip()}\n"
                           f"offending source lines:\n{where}")
    os.replace(temporary, library)
    return library


def load_library(path: str) -> ctypes.CDLL:
    """Load a shared library once per process."""
    with _lock:
        if path not in _libraries:
            _libraries[path] = ctypes.CDLL(path)
        return _libraries[path]


def build_c(func: PrimFunc) -> Module:
    """Generate C for `func`, compile it with the system compiler and load it.

    >>> module = build_c(func); module(a, b, c)   # numpy arrays; results written in place
    """
    source = codegen_c([func])
    library = load_library(compile_shared(source))
    symbol = getattr(library, c_function_name(func))
    address = ctypes.cast(symbol, ctypes.c_void_p).value
    assert address is not None
    return Module(func.name, params_of(func), address, sources={"c": source}, keepalive=library)
