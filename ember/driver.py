"""compile(): the whole flow, in order — import, optimize and fuse, compile kernels, plan, link.

    model = ember.compile("resnet18.onnx", target="llvm", opt_level=3)
    (logits,) = model.run({"input": x})

The front door: `import_model` turns what the user has into an ember Graph, then
ember.lowering.compile.prepare does everything up to linking and this module links the
result into this process (`compile`) or into a shared library (`export_library`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.errors import ArgumentError, EmberError
from ember.graph.ir import Graph, without_constant_values
from ember.lowering import export
from ember.lowering.cache import KernelCache
from ember.lowering.compile import KnobsArg, Prepared, prepare
from ember.lowering.link import link
from ember.lowering.prepack import run_pack_jobs
from ember.runtime import threadpool
from ember.runtime.executor import CompiledModel

if TYPE_CHECKING:
    from ember.specialize import SpecializedModel
from ember.target import Target

__all__ = ["CompiledModel", "compile", "export_c", "export_library", "export_objects",
           "export_wasm", "import_model", "resolve_target"]

CacheArg = bool | str | os.PathLike[str] | KernelCache


def import_model(model: Any, input_shapes: Mapping[str, Sequence[int]] | None = None,
                 example_inputs: Sequence[Any] | None = None) -> Graph:
    """A Graph from a path to an .onnx file, an onnx.ModelProto, a torch.nn.Module (exported
    on `example_inputs`) or a Graph (returned as is)."""
    if _is_torch_module(model):
        if example_inputs is None:
            raise ArgumentError("compile: a torch.nn.Module needs example_inputs=(tensor, ...) "
                                "to be exported with torch.export")
        from ember.frontend.torch import from_torch

        return from_torch(model, example_inputs)
    if example_inputs is not None:
        raise ArgumentError("example_inputs only applies to torch.nn.Module models")
    if isinstance(model, Graph):
        if input_shapes:
            raise ArgumentError("input_shapes only applies to ONNX models; an ember Graph "
                                "already has static input shapes")
        return model
    from ember.frontend.onnx import from_onnx
    from ember.lowering.evaluate import evaluate_node

    return from_onnx(_onnx_model(model), input_shapes=input_shapes, evaluate=evaluate_node)


def _onnx_model(model: Any) -> Any:
    """An onnx.ModelProto from a path or a ModelProto; ArgumentError for anything else."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            what = "is a directory, not an .onnx file" if path.is_dir() else "does not exist"
            raise ArgumentError(f"model file '{path}' {what}")
        try:
            import onnx
        except ImportError:
            raise EmberError("reading ONNX models needs the onnx package: "
                             "pip install 'ember[onnx]'") from None
        try:
            model = onnx.load(str(path))
        except Exception as error:  # noqa: BLE001 (DecodeError, ValueError, ...)
            raise ArgumentError(f"cannot read '{path}' as an ONNX model: {error}") from None
    if type(model).__name__ == "ModelProto":
        return model
    raise ArgumentError(f"compile: expected a path, an onnx.ModelProto, a torch.nn.Module or an "
                        f"ember Graph, got {type(model).__name__}")


def _is_torch_module(model: Any) -> bool:
    """True for a torch.nn.Module, without importing torch for other models."""
    return any(c.__module__ == "torch.nn.modules.module" and c.__name__ == "Module"
               for c in type(model).__mro__)


def resolve_target(target: str | Target) -> Target:
    """The target with its thread count filled in: a host CPU target without -num-cores
    gets the runtime's current thread count, so schedules read it from the target and the
    kernel cache keeps kernels tuned for different thread counts apart."""
    tgt = Target(target)
    if tgt.kind == "llvm" and tgt.is_host and not tgt.option("num-cores"):
        tgt = Target(f"{tgt} -num-cores={threadpool.num_threads()}")
    return tgt


def _prepack_default(prepack: bool | None) -> bool:
    """`prepack`, else EMBER_PREPACK (default on)."""
    if prepack is not None:
        if not isinstance(prepack, bool):
            raise ArgumentError(f"prepack must be True, False or None, got {prepack!r}")
        return prepack
    return os.environ.get("EMBER_PREPACK", "1").strip() not in ("0", "false", "no")


def check_arguments(opt_level: Any, input_shapes: Any, cache: Any, jobs: Any, progress: Any,
                    prepack: Any) -> None:
    """ArgumentError for a compile argument of the wrong kind (True is not opt level 1, a
    cache is not an int, -1 jobs are not 'all'), before any work starts."""
    if isinstance(opt_level, bool) or not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ArgumentError(f"opt_level must be an int in [0, 3], got {opt_level!r}")
    if input_shapes is not None and not isinstance(input_shapes, Mapping):
        raise ArgumentError(f"input_shapes must map input names to shapes, e.g. "
                            f"{{'x': (1, 3, 224, 224)}}, got {type(input_shapes).__name__}")
    if not isinstance(cache, (bool, str, os.PathLike, KernelCache)) and cache is not None:
        raise ArgumentError(f"cache must be True, False, a directory or a KernelCache, got "
                            f"{type(cache).__name__} {cache!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ArgumentError(f"jobs must be a positive int (or None: one per CPU), got "
                            f"{jobs!r}")
    for name, flag in (("progress", progress), ("prepack", prepack)):
        if flag is not None and not isinstance(flag, bool):
            raise ArgumentError(f"{name} must be True, False or None, got {flag!r}")


def _prepare(model: Any, target: Target, opt_level: int,
             input_shapes: Mapping[str, Sequence[int]] | None, cache: CacheArg,
             jobs: int | None, progress: bool | None, prepack: bool, pic: bool = False,
             knobs: KnobsArg = None, example_inputs: Sequence[Any] | None = None
             ) -> Prepared:
    check_arguments(opt_level, input_shapes, cache, jobs, progress, prepack)
    start = time.perf_counter()
    graph = import_model(model, input_shapes, example_inputs)
    seconds = time.perf_counter() - start
    built = prepare(graph, target, opt_level, cache, jobs, progress, prepack, pic, knobs)
    built.timings["import"] = seconds
    return built


def compile(model: Any, target: str | Target = "llvm", opt_level: int = 3,
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            cache: CacheArg = True, jobs: int | None = None, progress: bool | None = None,
            prepack: bool | None = None, knobs: KnobsArg = None,
            tuning_db: str | os.PathLike[str] | None = None,
            example_inputs: Sequence[Any] | None = None) -> CompiledModel | SpecializedModel:
    """Compile a model (path, onnx.ModelProto, torch.nn.Module or ember Graph) into a
    runnable CompiledModel::

        model = ember.compile("mobilenet.onnx")
        (probs,) = model(x)
        model = ember.compile(net.eval(), example_inputs=(torch.randn(1, 3, 224, 224),))

    Args:
        model: a path to an .onnx file, an onnx.ModelProto, a torch.nn.Module (with
            `example_inputs`) or an ember Graph.
        target: a target string or Target ("llvm" = this CPU; e.g. "llvm -mcpu=znver4",
            "llvm -num-cores=4"; GPU kinds "cuda", "rocm", "opencl", "metal"). CPU and
            feature names are checked against LLVM's lists (`ember target --list-cpus`);
            code for features this CPU lacks is refused (export it instead).
        opt_level: 0 (one kernel per op) to 3 (all graph passes, blocked layouts; default).
        input_shapes: static shapes for inputs with symbolic dims,
            {"input": (1, 3, 224, 224)}; dims must be ints >= 0.
        cache: True (the kernel cache in EMBER_CACHE_DIR, else ~/.cache/ember), False
            (none), a directory, or a KernelCache. Entries are checked before use and
            rebuilt if bad.
        jobs: worker processes compiling kernels (default: the CPUs this process may use;
            1, or inside a daemonic process: compile here).
        progress: a progress bar on stderr (default: when stderr is a terminal and there
            are many kernels).
        prepack: compute the weight-only stages of the kernels (packed panels, transposed
            weights) once here instead of on every run (default: on unless EMBER_PREPACK=0).
        knobs: the schedules' choices: a mapping from fused group name to Knobs, or a
            function (group, task) -> Knobs | None (None: the default); the knobs each
            group ran with are in `model.stats["knobs"]`.
        tuning_db: a tuning database whose best record for each group's task on this
            target supplies the group's knobs (groups without one, or given by `knobs`,
            keep their default or given knobs).
        example_inputs: for a torch.nn.Module, the tensors it is traced with (their shapes
            are the compiled model's input shapes).

    Returns:
        A CompiledModel; an ONNX model whose shapes are decided at run time (input dims
        that `input_shapes` leave symbolic or unknown, a Reshape's shape computed from input
        data, an If's condition) gives a SpecializedModel instead: it compiles per distinct
        shape decision at run time and caches (ember.specialize).

    Raises:
        EmberError: bad input, as a subclass naming what was wrong and where.
    """
    tgt = resolve_target(target)
    if tuning_db is not None:
        from ember.autotune.apply import database_knobs

        knobs = database_knobs(tuning_db, tgt, knobs)
    if tgt.kind in ("cuda", "rocm", "opencl", "metal"):
        from ember.driver_gpu import compile_gpu

        if example_inputs is not None:
            model = import_model(model, input_shapes, example_inputs)
            input_shapes = None
        return compile_gpu(model, tgt, opt_level, input_shapes,  # type: ignore[return-value]
                           knobs=knobs, cache=cache)
    start = time.perf_counter()
    if not isinstance(model, Graph) and not _is_torch_module(model):
        from ember.frontend.onnx import UnsupportedModelError
        from ember.specialize import SpecializedModel, needs_specialization

        proto = _onnx_model(model)

        def compile_graph(graph: Graph) -> CompiledModel:
            compiled = compile(graph, tgt, opt_level, None, cache, jobs, progress, prepack,
                               knobs)
            assert isinstance(compiled, CompiledModel)
            return compiled

        if needs_specialization(proto, input_shapes):
            return SpecializedModel(proto, compile_graph, input_shapes)
        try:
            model = import_model(proto, input_shapes)
        except UnsupportedModelError as error:
            if not error.dynamic_values:
                raise
            return SpecializedModel(proto, compile_graph, input_shapes)
        input_shapes = None
    imported = time.perf_counter() - start
    built = _prepare(model, tgt, opt_level, input_shapes, cache, jobs, progress,
                     _prepack_default(prepack), knobs=knobs, example_inputs=example_inputs)
    built.timings["import"] += imported
    built.stats["tuned"] = _tuned(knobs)
    timings = built.timings
    linked = link(built.plan, built.objects, tgt)
    timings["link"] = time.perf_counter() - start - sum(timings.values())
    run_pack_jobs(built.pack_jobs, linked.address, built.blob, built.offsets)
    timings["prepack"] = time.perf_counter() - start - sum(timings.values())
    # the blob holds every weight the kernels read; the graph kept for display does not
    compiled = CompiledModel(built.plan, built.objects, built.blob, str(tgt),
                             graph=without_constant_values(built.graph), stats=built.stats,
                             linked=linked)
    compiled.stats["seconds"] = timings
    compiled.memory_plan = built.memory
    return compiled


def _tuned(knobs: KnobsArg) -> list[str]:
    """The fused groups whose knobs a tuning database's record gave (none without one)."""
    return sorted(getattr(knobs, "applied", {}))


def _exportable(model: Any) -> None:
    if isinstance(model, CompiledModel):
        raise ArgumentError("export takes the model itself (a path, an onnx.ModelProto or an "
                            "ember Graph), not a CompiledModel: its kernels are compiled for "
                            "this process's JIT")


def export_library(model: Any, path: str | os.PathLike[str], target: str | Target = "llvm",
                   opt_level: int = 3,
                   input_shapes: Mapping[str, Sequence[int]] | None = None,
                   cache: CacheArg = True, jobs: int | None = None,
                   progress: bool | None = None, prepack: bool | None = None,
                   tuning_db: str | os.PathLike[str] | None = None) -> Path:
    """Compile `model` (path, onnx.ModelProto or ember Graph) into the shared library `path`
    (written atomically, then sealed with its checksum); load it with
    `ember.runtime.library.load_library`. The other arguments are `compile`'s, in its order
    (`tuning_db`: the best record of each group's task on the target supplies its knobs).

    Weights are prepacked for host targets (as by `ember.compile`); a library for another
    machine packs them on every run.
    """
    _exportable(model)
    tgt = resolve_target(target)
    if tgt.kind in ("wasm", "c"):
        raise ArgumentError(f"export_library: target '{tgt}' makes no shared library; use "
                            f"ember.export_{tgt.kind}(model, directory)")
    out = export.check_output_path(path)
    cc = export.find_c_compiler(tgt)  # before the compile: fail fast
    knobs = None
    if tuning_db is not None:
        from ember.autotune.apply import database_knobs

        knobs = database_knobs(tuning_db, tgt)
    built = _prepare(model, tgt, opt_level, input_shapes, cache, jobs, progress,
                     _prepack_default(prepack) and tgt.is_host, pic=True, knobs=knobs)
    built.stats["tuned"] = _tuned(knobs)
    return export.write_library(built, tgt, cc, out)


def export_c(model: Any, directory: str | os.PathLike[str],
             input_shapes: Mapping[str, Sequence[int]] | None = None, opt_level: int = 3,
             target: str | Target = "c", embed_constants: bool = True) -> Path:
    """`model` as standalone C99 in `directory`: model.c, model.h, model_weights.bin and
    (embed_constants) model_constants.c; see ember.lowering.c_model."""
    from ember.lowering.c_model import write_c_model

    _exportable(model)
    return write_c_model(import_model(model, input_shapes), directory, target, opt_level,
                         embed_constants)


def export_wasm(model: Any, directory: str | os.PathLike[str], name: str | None = None,
                input_shapes: Mapping[str, Sequence[int]] | None = None,
                opt_level: int = 3, target: str | Target = "wasm",
                cache: CacheArg = True, jobs: int | None = None,
                progress: bool | None = None, fallback: bool = True) -> Path:
    """`model` as WebAssembly in `directory`: NAME.wasm, NAME.weights and the ES module
    NAME.js (`const m = await load(); m.run({input: Float32Array})`); returns the .js.
    NAME defaults to the model file's stem, else "model".

    The default target uses relaxed SIMD (fused multiply-add); with `fallback` the same
    model is also built without it as NAME.simd128.wasm, which the loader picks in an
    engine that lacks relaxed SIMD (Node.js 20 without --experimental-wasm-relaxed-simd)."""
    from ember.lowering import wasm

    _exportable(model)
    tgt = wasm.check_wasm_target(Target(target))
    root = export.check_output_directory(directory)
    wasm.find_wasm_ld()  # before the compile: fail fast
    if name is None:
        name = Path(model).stem if isinstance(model, (str, os.PathLike)) else "model"
    check_arguments(opt_level, input_shapes, cache, jobs, progress, False)
    if not isinstance(fallback, bool):
        raise ArgumentError(f"export_wasm: fallback must be True or False, got {fallback!r}")
    graph = import_model(model, input_shapes)
    built = prepare(graph, tgt, opt_level, cache, jobs, progress, False)
    portable = wasm.fallback_target(tgt) if fallback else None
    spare = (portable, prepare(graph, portable, opt_level, cache, jobs, progress, False)
             ) if portable is not None else None
    return wasm.write_wasm(built, tgt, root, name, spare)


def export_objects(model: Any, directory: str | os.PathLike[str],
                   target: str | Target = "llvm", opt_level: int = 3,
                   input_shapes: Mapping[str, Sequence[int]] | None = None,
                   cache: CacheArg = True, jobs: int | None = None,
                   progress: bool | None = None) -> Path:
    """The library's pieces, unlinked, in `directory` (for a machine without a linker for
    the target): objects, data.s with constants.bin and metadata.json, and link.sh, the
    command that links them there. Weights are not prepacked (the kernels pack them)."""
    _exportable(model)
    tgt = Target(target)
    root = export.check_output_directory(directory)
    built = _prepare(model, tgt, opt_level, input_shapes, cache, jobs, progress, False,
                     pic=True)
    return export.write_objects(built, tgt, root)
