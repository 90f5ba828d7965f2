"""Export a model as ONE shared library that runs with ctypes and numpy alone (no compiler).

    ember.export_library("resnet50.onnx", "resnet50.so")
    model = ember.runtime.library.load_library("resnet50.so")    # llvmlite never imported

The library holds every kernel compiled position-independent, `model_main`, the thread pool
with `ember_num_threads` / `ember_set_num_threads`, the constant blob (the packed weights,
64-byte aligned in .rodata, assembled from a file with `.incbin`) and the plan metadata as a
JSON string (`ember_metadata`, `ember_metadata_size`). It is linked by the system C compiler
(`CC`, else cc / gcc / clang). `export_objects` writes the same pieces unlinked, for a
target without a linker on this machine.
"""

from __future__ import annotations

import _ctypes
import ctypes
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ember.codegen.llvm_target import required_features
from ember.errors import ArgumentError, EmberError
from ember.runtime import cpu, library
from ember.target import Target

# the pool's libgomp entry points: dropped from the library, which must not need libgomp
_GOMP_FUNCTIONS = ("gomp_launch", "gomp_body")
CONSTANTS_FILE = "constants.bin"
METADATA_FILE = "metadata.json"
DATA_FILE = "data.s"
LINK_FLAGS = ("-shared", "-Wl,-Bsymbolic", "-Wl,--no-undefined", "-Wl,-z,noexecstack")
LIBS = ("-lm", "-lpthread")


class ExportError(EmberError):
    """A model could not be written as a shared library."""


class CompilerNotFoundError(ExportError):
    """No C compiler (the linker driver) for the target was found."""


class LinkError(ExportError):
    """The C compiler failed to link the library."""


# the C compiler -------------------------------------------------------------------------
def find_c_compiler(target: Target | str = "llvm") -> list[str]:
    """The command line of the C compiler that links for `target`: $CC when set, else cc,
    gcc or clang for the host, <triple>-gcc for another target."""
    tgt = Target(target)
    explicit = os.environ.get("CC", "").strip()
    if explicit:
        argv = shlex.split(explicit)
        if shutil.which(argv[0]) is None:
            raise CompilerNotFoundError(f"CC={explicit!r}: '{argv[0]}' is not an executable "
                                        "on PATH; set CC to the C compiler's path")
        return argv
    if tgt.is_host:
        for name in ("cc", "gcc", "clang"):
            if shutil.which(name):
                return [name]
        raise CompilerNotFoundError("exporting a library needs a C compiler to link it; none "
                                    "of cc, gcc, clang is on PATH: install one or set the CC "
                                    "environment variable to its path")
    triple = tgt.triple
    names = cross_compiler_names(triple)
    for name in names:
        if shutil.which(name):
            return [name]
    raise CompilerNotFoundError(
        f"target triple '{triple}' is not this machine's and no linker for it was found "
        f"(looked for {', '.join(names)}): set CC to a cross C compiler for '{triple}', or "
        "write the unlinked objects with ember.driver.export_objects")


def cross_compiler_names(triple: str) -> list[str]:
    """The names a cross C compiler for `triple` goes by: the triple itself, without its
    vendor (aarch64-unknown-linux-gnu -> aarch64-linux-gnu-gcc) and, for 32-bit ARM, with
    Debian's arch name (armv7a-linux-gnueabihf -> arm-linux-gnueabihf-gcc)."""
    parts = triple.split("-")
    stems = [triple]
    if len(parts) == 4:
        stems.append("-".join([parts[0], *parts[2:]]))
    if cpu.family(parts[0]) == "arm" and parts[0] != "arm":
        stems += ["-".join(["arm", *stem.split("-")[1:]]) for stem in list(stems)]
    return [f"{stem}-{tool}" for stem in dict.fromkeys(stems) for tool in ("gcc", "cc")]


# the pieces -----------------------------------------------------------------------------
def runtime_ir(target: Target) -> str:
    """The thread pool plus the library's thread-count global and exported entry points."""
    from ember.codegen.pool import pool_ir
    from ember.runtime import threadpool

    arch = target.triple.split("-")[0]
    futex = threadpool.futex_number(arch)
    if futex is None or "linux" not in target.triple:
        raise ExportError(f"target triple '{target.triple}': the thread pool runs on Linux "
                          f"on {', '.join(sorted(threadpool.FUTEX_SYSCALLS))} only")
    text = pool_ir(target.llvm_triple, arch, futex, threadpool.DEFAULT_SPIN)
    return text + f"""
@{threadpool.NUM_THREADS_SYMBOL} = global i32 1, align 64
@{threadpool.LAUNCH_SYMBOL} = alias void (ptr, ptr, i32), ptr @pool_launch
@{library.RESET_SYMBOL} = alias void (), ptr @pool_reset_after_fork

define void @{library.SET_THREADS_SYMBOL}(i32 %count) {{
  %positive = icmp sgt i32 %count, 0
  %n = select i1 %positive, i32 %count, i32 1
  store i32 %n, ptr @{threadpool.NUM_THREADS_SYMBOL}, align 4
  ret void
}}

define i32 @{library.GET_THREADS_SYMBOL}() {{
  %n = load i32, ptr @{threadpool.NUM_THREADS_SYMBOL}, align 4
  ret i32 %n
}}
"""


def entry_ir(plan: Any, target: Target) -> str:
    """`ember_model_run(void** args)`: model_main with its pointers from an array, for C
    callers that learn the argument count at run time (the RPC server, the C API); and
    `ember_model_arity`, that count."""
    count = len(plan.inputs) + len(plan.outputs) + 2
    loads = "".join(f"  %s{k} = getelementptr ptr, ptr %args, i32 {k}\n"
                    f"  %a{k} = load ptr, ptr %s{k}\n" for k in range(count))
    params = ", ".join(["ptr"] * count)
    values = ", ".join(f"ptr %a{k}" for k in range(count))
    return (f'target triple = "{target.llvm_triple}"\n'
            f"@{library.ARITY_SYMBOL} = constant i32 {count}\n"
            f"declare i32 @{library.MAIN_SYMBOL}({params})\n"
            f"define i32 @{library.RUN_SYMBOL}(ptr %args) {{\n{loads}"
            f"  %r = call i32 @{library.MAIN_SYMBOL}({values})\n  ret i32 %r\n}}\n")


def entry_object(plan: Any, target: Target) -> bytes:
    return _ir_object(entry_ir(plan, target), target)


def runtime_object(target: Target) -> bytes:
    """`runtime_ir` compiled position-independent, without the libgomp launch."""
    return _ir_object(runtime_ir(target), target)


def _ir_object(text: str, target: Target) -> bytes:
    import llvmlite.binding as llvm

    from ember.codegen import jit

    machine = jit.target_machine(target, jit=False)
    module = llvm.parse_assembly(text)
    module.verify()
    names = {f.name for f in module.functions}
    for name in _GOMP_FUNCTIONS:
        if name in names:
            module.get_function(name).linkage = "internal"
    manager = llvm.create_new_module_pass_manager()
    manager.add_global_dead_code_eliminate_pass()
    manager.run(module, llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options()))
    return bytes(machine.emit_object(module))


def main_object(plan: Any, target: Target) -> bytes:
    """model_main, position-independent."""
    from ember.codegen import jit
    from ember.lowering.link import main_function

    return jit.emit_object([main_function(plan)], target)


def metadata(plan: Any, target: Target, stats: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """What the loader reads: format, versions, target and the plan (inputs, outputs,
    output sources, workspace and constant bytes, kernel calls); and for the user, from the
    compile's `stats`, each group's knobs (name -> family and values) and the groups whose
    knobs came from tuning records."""
    stats = stats or {}
    from ember.version import __version__
    from ember.lowering.cache import compiler_version

    return {"format": library.FORMAT, "ember_version": __version__,
            "compiler": compiler_version(), "target": str(target), "triple": target.triple,
            "cpu": target.cpu, "features": list(target.code_features),
            "requires": required_features(target), "plan": json.loads(plan.to_json()),
            "knobs": dict(stats.get("knobs", {})), "tuned": list(stats.get("tuned", []))}


def data_assembly(constant_bytes: int, metadata_bytes: int, sizes: Sequence[int] = ()) -> str:
    """Assembler for the constant blob (64-byte aligned, read-only), the metadata, the sizes
    the code was compiled for and the checksum record (written by `seal_library`)."""
    c, m, n = library.CONSTANTS_SYMBOL, library.METADATA_SYMBOL, library.METADATA_SIZE_SYMBOL
    k, z = library.CHECKSUM_SYMBOL, library.SIZES_SYMBOL
    quads = ", ".join(str(int(v)) for v in sizes) or "0"
    record = (f"\t.section .rodata.{k},\"a\",%progbits\n\t.balign 8\n\t.globl {k}\n"
              f"\t.type {k}, %object\n{k}:\n\t.ascii \"{library.CHECKSUM_MAGIC.decode()}\"\n"
              f"\t.zero 32\n\t.size {k}, {len(library.CHECKSUM_MAGIC) + 32}\n"
              f"\t.globl {z}\n\t.type {z}, %object\n{z}:\n\t.quad {quads}\n"
              f"\t.size {z}, {8 * max(1, len(sizes))}\n")
    pad = "" if constant_bytes else "\t.zero 64\n"  # a symbol with bytes behind it
    return (f"\t.section .rodata.{c},\"a\",%progbits\n\t.balign 64\n\t.globl {c}\n"
            f"\t.type {c}, %object\n{c}:\n\t.incbin \"{CONSTANTS_FILE}\"\n{pad}"
            f"\t.size {c}, {constant_bytes or 64}\n"
            f"\t.section .rodata.{m},\"a\",%progbits\n\t.balign 8\n\t.globl {n}\n"
            f"\t.type {n}, %object\n{n}:\n\t.quad {metadata_bytes}\n\t.size {n}, 8\n"
            f"\t.globl {m}\n\t.type {m}, %object\n{m}:\n\t.incbin \"{METADATA_FILE}\"\n"
            f"\t.byte 0\n\t.size {m}, {metadata_bytes + 1}\n"
            + record + "\t.section .note.GNU-stack,\"\",%progbits\n")


def _write_objects(built: Any, target: Target, work: Path) -> list[str]:
    """Kernel, model_main and runtime objects into `work`; their file names."""
    names = []
    for k, symbol in enumerate(built.plan.symbols):
        name = f"k{k:04d}.o"
        (work / name).write_bytes(built.objects[symbol])
        names.append(name)
    (work / "main.o").write_bytes(main_object(built.plan, target))
    (work / "runtime.o").write_bytes(runtime_object(target))
    (work / "entry.o").write_bytes(entry_object(built.plan, target))
    return names + ["main.o", "runtime.o", "entry.o"]


def _write_data(built: Any, target: Target, work: Path) -> list[str]:
    built.blob[:built.plan.constant_bytes].tofile(work / CONSTANTS_FILE)
    meta = metadata(built.plan, target, built.stats)
    text = json.dumps(meta, separators=(",", ":")).encode()
    (work / METADATA_FILE).write_bytes(text)
    sizes = library.plan_sizes(meta["plan"], len(text))
    (work / DATA_FILE).write_text(data_assembly(built.plan.constant_bytes, len(text), sizes))
    return [DATA_FILE]


def link_command(cc: Sequence[str], output: str, files: Sequence[str]) -> list[str]:
    return [*cc, *LINK_FLAGS, "-o", output, *files, *LIBS]


def _link(cc: Sequence[str], output: Path, files: Sequence[str], work: Path) -> None:
    command = link_command(cc, str(output), files)
    try:
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    except OSError as error:
        raise CompilerNotFoundError(f"cannot run the C compiler '{cc[0]}': {error}; set CC "
                                    "to a working C compiler") from None
    if done.returncode != 0:
        raise LinkError(f"linking '{output.name}' failed ({shlex.join(command)}, exit "
                        f"{done.returncode}):\n{done.stderr.strip()}")


def _run_pack_jobs(built: Any, cc: Sequence[str], objects: Sequence[str], work: Path) -> None:
    """Fill the packed-weight slots of the blob by running the pack kernels from a helper
    library linked from the same objects (serially: no pool threads outlive it)."""
    from ember.lowering.prepack import run_pack_jobs

    helper = work / "pack_helper.so"
    _link(cc, helper, [o for o in objects if o not in ("main.o", "entry.o")], work)
    lib = ctypes.CDLL(str(helper))
    try:
        getattr(lib, library.SET_THREADS_SYMBOL)(1)

        def address(symbol: str) -> int:
            return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value or 0

        run_pack_jobs(built.pack_jobs, address, built.blob, built.offsets)
    finally:
        _ctypes.dlclose(lib._handle)


def check_output_path(path: str | os.PathLike[str]) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"export_library: the output path must be a str or Path, got "
                            f"{type(path).__name__} {path!r}")
    out = Path(path)
    if out.is_dir():
        raise ArgumentError(f"export_library: '{out}' is a directory; expected a file path "
                            "such as model.so")
    return out


def check_output_directory(directory: str | os.PathLike[str]) -> Path:
    if not isinstance(directory, (str, os.PathLike)):
        raise ArgumentError(f"export_objects: the directory must be a str or Path, got "
                            f"{type(directory).__name__} {directory!r}")
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ArgumentError(f"export_objects: '{root}' exists and is not a directory")
    return root


def write_library(built: Any, target: Target, cc: Sequence[str], out: Path) -> Path:
    """Link a prepared model (position-independent objects) into the shared library `out`,
    atomically: a temp file next to it, renamed into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ember-export-") as name:
        work = Path(name)
        objects = _write_objects(built, target, work)
        if built.pack_jobs:
            _run_pack_jobs(built, cc, objects, work)
        files = objects + _write_data(built, target, work)
        fd, temp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        os.close(fd)
        try:
            _link(cc, Path(temp).resolve(), files, work)
            library.seal_library(temp)
            os.chmod(temp, 0o755)
            os.replace(temp, out)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    return out


def write_objects(built: Any, target: Target, root: Path) -> Path:
    """A prepared model's objects, data.s and link.sh in `root`, to link on the target."""
    root.mkdir(parents=True, exist_ok=True)
    files = _write_objects(built, target, root) + _write_data(built, target, root)
    command = shlex.join(link_command(["${CC:-cc}"], "model.so", files)).replace(
        "'${CC:-cc}'", "${CC:-cc}")
    seal = ("${PYTHON:-python3} -c 'from ember.runtime.library import seal_library; "
            "seal_library(\"model.so\")'")
    (root / "link.sh").write_text(f"#!/bin/sh\n# links model.so for {target.triple}, then "
                                  "writes its checksum (the loader refuses it without)\n"
                                  f"cd \"$(dirname \"$0\")\" && {command} && {seal}\n")
    os.chmod(root / "link.sh", 0o755)
    return root
