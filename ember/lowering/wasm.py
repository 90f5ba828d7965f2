"""Export a model as WebAssembly: `NAME.wasm` (kernels, model_main, a runtime without
threads or libc), `NAME.weights` (the constant blob) and `NAME.js`, an ES module whose
`load()` instantiates it, places the constants and returns `{run(inputs) -> outputs}` on
typed arrays (in a browser or in Node.js).

    ember.export_wasm("mobilenet.onnx", "web/")      # web/mobilenet.{wasm,weights,js}

The objects are LLVM's wasm32 (SIMD128) code; wasm-ld (LLVM's lld: Debian's `lld`, or
`WASM_LD`) links them; the math library calls (expf, tanhf, ...) become imports that the
loader serves from JavaScript's Math.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ember.lowering.export import ExportError, CompilerNotFoundError, LinkError, metadata
from ember.target import Target

_LOADER = Path(__file__).with_name("wasm_loader.js")
_RUNTIME = Path(__file__).resolve().parents[1] / "codegen" / "wasm_runtime.ll"
STACK_BYTES = 1 << 20
EXPORTS = ("model_main", "ember_malloc", "ember_free", "ember_set_num_threads")


def find_wasm_ld() -> list[str]:
    """$WASM_LD, else wasm-ld (or wasm-ld-NN) on PATH."""
    explicit = os.environ.get("WASM_LD", "").strip()
    if explicit:
        return shlex.split(explicit)
    for name in ("wasm-ld", *(f"wasm-ld-{v}" for v in range(30, 13, -1))):
        if shutil.which(name):
            return [name]
    raise CompilerNotFoundError("linking WebAssembly needs wasm-ld (LLVM's lld: apt-get "
                                "install lld), or set WASM_LD to its path")


def check_wasm_target(target: Target) -> Target:
    if not target.triple.startswith("wasm32"):
        raise ExportError(f"export_wasm: target '{target}' is not wasm32; use target='wasm'")
    return target


def runtime_object(target: Target) -> bytes:
    import llvmlite.binding as llvm

    from ember.codegen import jit

    text = _RUNTIME.read_text().replace("${triple}", target.llvm_triple)
    module = llvm.parse_assembly(text)
    module.verify()
    return bytes(jit.target_machine(target, jit=False).emit_object(module))


def fallback_target(target: Target) -> Target | None:
    """The target without relaxed SIMD, for engines that lack it; None if it has none."""
    if "relaxed-simd" not in target.code_features:
        return None
    kept = tuple(f for f in target.mattr if f.lstrip("+-") != "relaxed-simd")
    return Target(target.kind, target.mcpu, (*kept, "-relaxed-simd"), target.mtriple,
                  target.options)


def _link(built: Any, target: Target, out: Path, name: str) -> None:
    """wasm-ld the kernels, model_main and the runtime of `built` into `out`."""
    from ember.lowering.export import main_object

    linker = find_wasm_ld()
    with tempfile.TemporaryDirectory(prefix=".ember-wasm-") as temp:
        work = Path(temp)
        files = []
        for k, symbol in enumerate(built.plan.symbols):
            (work / f"k{k:04d}.o").write_bytes(built.objects[symbol])
            files.append(f"k{k:04d}.o")
        (work / "main.o").write_bytes(main_object(built.plan, target))
        (work / "runtime.o").write_bytes(runtime_object(target))
        files += ["main.o", "runtime.o"]
        command = [*linker, "--no-entry", "--allow-undefined", "--gc-sections",
                   "-z", f"stack-size={STACK_BYTES}", "--initial-memory=2097152",
                   *(f"--export={e}" for e in EXPORTS), "-o", "model.wasm", *files]
        try:
            done = subprocess.run(command, cwd=work, capture_output=True, text=True,
                                  check=False)
        except OSError as error:
            raise CompilerNotFoundError(f"cannot run wasm-ld '{linker[0]}': {error.strerror}; "
                                        "set WASM_LD to LLVM's wasm-ld") from None
        if done.returncode != 0:
            raise LinkError(f"linking '{out.name}' failed ({shlex.join(command)}):\n"
                            f"{done.stderr.strip()}")
        os.replace(work / "model.wasm", out)


def _interface(plan: Any) -> dict[str, Any]:
    """What the loader reads of a plan: the buffers it allocates and fills."""
    meta = json.loads(plan.to_json())
    return {k: meta[k] for k in ("inputs", "outputs", "output_sources", "workspace_bytes",
                                 "constant_bytes")}


def write_wasm(built: Any, target: Target, directory: Path, name: str,
               fallback: tuple[Target, Any] | None = None) -> Path:
    """NAME.wasm, NAME.weights and NAME.js of a prepared model in `directory` (and
    NAME.simd128.wasm from `fallback`, the same model prepared for its target); the .js."""
    directory.mkdir(parents=True, exist_ok=True)
    _link(built, target, directory / f"{name}.wasm", name)
    meta = metadata(built.plan, target)
    spare = directory / f"{name}.simd128.wasm"
    if fallback is not None:
        portable, other = fallback
        # one .weights and one loader serve both modules: same constants, same buffers
        # (their kernels differ, and so their symbols and calls)
        if (_interface(other.plan) != _interface(built.plan)
                or other.blob[:other.plan.constant_bytes].tobytes()
                != built.blob[:built.plan.constant_bytes].tobytes()):
            raise ExportError(f"export_wasm: the simd128 fallback of '{name}' was planned "
                              "differently from the relaxed-SIMD module; export with "
                              "fallback=False")
        _link(other, portable, spare, name)
        meta["fallback"] = {"wasm": spare.name, "target": str(portable),
                            "features": list(portable.code_features)}
    elif spare.exists():
        spare.unlink()  # a stale fallback of an earlier export would be loaded instead
    built.blob[:built.plan.constant_bytes].tofile(directory / f"{name}.weights")
    script = (_LOADER.read_text().replace("__NAME__", name)
              .replace("__METADATA__", json.dumps(meta, separators=(",", ":"))))
    (directory / f"{name}.js").write_text(script)
    return directory / f"{name}.js"
