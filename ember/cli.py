"""The `ember` command line: a thin layer over the library.

    ember compile model.onnx -o model.ember      ember run model.ember
    ember compile model.onnx -o model.so         ember run model.so   (no compiler needed)
    ember inspect model.onnx --source GROUP      ember bench model.onnx --threads 2
    ember check model.onnx                       ember zoo resnet18 -o resnet18.onnx
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ember.errors import ArgumentError, EmberError


# helpers ----------------------------------------------------------------------------------
def _key_values(items: Sequence[str], what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ArgumentError(f"{what}: expected NAME=VALUE, got {item!r}")
        pairs.append((name, value))
    return pairs


def _input_shapes(args: argparse.Namespace) -> dict[str, tuple[int, ...]] | None:
    shapes = {}
    for name, text in _key_values(getattr(args, "shape", None) or [], "--shape"):
        try:
            shapes[name] = tuple(int(d) for d in text.split(","))
        except ValueError:
            raise ArgumentError(f"--shape {name}: expected comma-separated ints like "
                                f"1,3,224,224, got {text!r}") from None
    return shapes or None


def _is_compiled(path: str) -> bool:
    from ember.lowering.saved import is_compiled_dir

    return is_compiled_dir(path)


def _is_library(path: str) -> bool:
    """An exported model library (`ember compile -o model.so`)."""
    return path.endswith(".so") and Path(path).is_file()


def _onnx_model(path: str, shapes: dict[str, tuple[int, ...]] | None = None) -> Any:
    if not Path(path).is_file():
        raise ArgumentError(f"model file '{path}' does not exist")
    try:
        import onnx
    except ImportError:
        raise EmberError("reading ONNX models needs onnx: pip install 'ember[onnx]'") from None
    try:
        model = onnx.load(path)
    except Exception as error:  # noqa: BLE001 (DecodeError and friends)
        raise ArgumentError(f"cannot read '{path}' as an ONNX model: {error}") from None
    if shapes:
        for value in model.graph.input:
            if value.name in shapes:
                dims = value.type.tensor_type.shape.dim
                for dim, size in zip(dims, shapes[value.name]):
                    dim.ClearField("dim_param")
                    dim.dim_value = size
    return model


def _compile(args: argparse.Namespace) -> Any:
    """A CompiledModel: loaded from a compiled directory, or compiled from an ONNX file; or
    a LibraryModel loaded from an exported library."""
    if _is_library(args.model):
        from ember.runtime.library import load_library

        return load_library(args.model)
    import ember

    if _is_compiled(args.model):
        from ember.lowering.saved import load_compiled

        return load_compiled(args.model)
    if not Path(args.model).exists():
        raise ArgumentError(f"model '{args.model}' does not exist")
    return ember.compile(args.model, target=args.target, opt_level=args.opt_level,
                         input_shapes=_input_shapes(args), cache=not args.no_cache,
                         progress=True if sys.stderr.isatty() else None,
                         tuning_db=getattr(args, "db", None))



def _random_feeds(model: Any, onnx_model: Any = None, seed: int = 0) -> dict[str, np.ndarray]:
    if onnx_model is not None:
        try:
            from ember.zoo import random_inputs

            feeds = random_inputs(onnx_model, seed)
            if list(feeds) == model.input_names and all(
                    tuple(v.shape) == tuple(s.shape) for v, s in zip(feeds.values(),
                                                                      model.inputs)):
                return {k: v.astype(s.dtype) for (k, v), s in zip(feeds.items(),
                                                                  model.inputs)}
        except ImportError:
            pass
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in model.inputs:
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(spec.shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec.name] = rng.integers(0, 2, spec.shape).astype(dtype)
        else:
            feeds[spec.name] = rng.integers(0, 2, spec.shape).astype(dtype)
    return feeds


def _feeds(args: argparse.Namespace, model: Any, onnx_model: Any = None
           ) -> dict[str, np.ndarray]:
    feeds = _random_feeds(model, onnx_model, args.seed)
    for name, file in _key_values(getattr(args, "input", None) or [], "--input"):
        if name not in model.input_names:
            raise ArgumentError(f"--input {name}: the model has inputs {model.input_names}")
        try:
            feeds[name] = np.load(file)
        except (OSError, ValueError) as error:
            raise ArgumentError(f"--input {name}: cannot load '{file}': {error}") from None
    return feeds


def _summary(array: np.ndarray, count: int = 5) -> str:
    flat = array.reshape(-1)[:count]
    values = ", ".join(f"{v:.6g}" if array.dtype.kind == "f" else str(v) for v in flat)
    more = ", ..." if array.size > count else ""
    return f"{array.dtype}{list(array.shape)} [{values}{more}]"


# commands ---------------------------------------------------------------------------------
def _cmd_compile(args: argparse.Namespace) -> int:
    from ember.lowering.saved import save_compiled

    if args.output.endswith(".so"):
        return _export(args)
    kind = args.target.split()[0] if args.target.strip() else "llvm"
    if kind in ("c", "wasm"):
        return _export_source(args, kind)
    model = _compile(args)
    out = save_compiled(model, args.output)
    stats = model.stats
    print(f"compiled {model.plan.name}: {stats.get('groups', len(model.plan.calls))} fused "
          f"groups, {stats.get('kernels', len(model.plan.symbols))} distinct kernels "
          f"({stats.get('compiled', 0)} compiled, {stats.get('cached', 0)} from cache)")
    print(f"workspace {model.workspace_bytes} bytes; written to {out}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from ember.driver import export_library

    if not Path(args.model).is_file():
        raise ArgumentError(f"model file '{args.model}' does not exist")
    out = export_library(args.model, args.output, input_shapes=_input_shapes(args),
                         opt_level=args.opt_level, target=args.target, cache=not args.no_cache,
                         progress=True if sys.stderr.isatty() else None,
                         tuning_db=getattr(args, "db", None))
    print(f"exported {Path(args.model).name} to {out} ({out.stat().st_size} bytes); load it "
          "with ember.runtime.library.load_library")
    return 0


def _export_source(args: argparse.Namespace, kind: str) -> int:
    from ember.driver import export_c, export_wasm

    if not Path(args.model).is_file():
        raise ArgumentError(f"model file '{args.model}' does not exist")
    if kind == "c":
        out = export_c(args.model, args.output, input_shapes=_input_shapes(args),
                       opt_level=args.opt_level, target=args.target)
        print(f"wrote {out}/model.c, model.h, model_constants.c and model_weights.bin; build "
              "with: cc -std=c99 -O2 model.c model_constants.c your_main.c -lm")
    else:
        out = export_wasm(args.model, args.output, input_shapes=_input_shapes(args),
                          opt_level=args.opt_level, target=args.target,
                          cache=not args.no_cache)
        print(f"wrote {out} (import {{ load }} from it) with its .wasm and .weights")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    model = _compile(args)
    stored = _is_compiled(args.model) or _is_library(args.model)
    onnx_model = None if stored else _onnx_model(args.model, _input_shapes(args))
    feeds = _feeds(args, model, onnx_model)
    outputs = model.run(feeds)
    for name, array in zip(model.output_names, outputs):
        print(f"{name}: {_summary(array)}")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    if _is_library(args.model):
        if args.source:
            raise ArgumentError("--source needs the model file (.onnx), not a library")
        model = _compile(args)
        meta = model.metadata
        print(repr(model))
        print(f"ember {meta.get('ember_version')}, target {meta.get('target')}, "
              f"{len(meta['plan']['calls'])} kernel calls")
        plan = meta["plan"]
        _print_memory(plan["workspace_bytes"], plan["naive_bytes"], plan["peak_live_bytes"])
        _print_tuned(meta.get("knobs", {}), meta.get("tuned", []), "its tuning database")
        return 0
    if _is_compiled(args.model):
        from ember.lowering.saved import load_compiled

        if args.source:
            raise ArgumentError("--source needs the model file (.onnx), not a compiled model")
        model = load_compiled(args.model)
        print(getattr(model, "graph_text", None) or "(no graph stored)")
        _print_memory(model.plan.workspace_bytes, model.plan.naive_bytes,
                      model.plan.peak_live_bytes)
        return 0
    from ember.driver import import_model
    from ember.lowering.groups import fused_groups, optimize, plan_memory

    graph = optimize(import_model(args.model, _input_shapes(args)), args.opt_level)
    groups = fused_groups(graph)
    if args.source:
        return _print_source(groups, args.source, args.format, args.target)
    print(graph)
    memory = plan_memory(graph)
    print(f"{len(groups)} fused groups, {len({g.key for g in groups})} distinct kernels")
    _print_memory(memory.workspace_bytes, memory.naive_bytes, memory.peak_live_bytes)
    if args.db is not None:
        from ember.autotune.apply import database_knobs
        from ember.lowering.compile import choose_knobs, knobs_table
        from ember.driver import resolve_target

        target = resolve_target(args.target)
        chosen = database_knobs(args.db, target)
        table = knobs_table(choose_knobs(fused_groups(graph, True, target), target, chosen))
        _print_tuned(table, sorted(chosen.applied), f"'{args.db}'")
        if not chosen.applied:
            _print_other_targets(args.db, target)
    return 0


def _print_other_targets(path: str, target: Any) -> None:
    """Say which targets a database's records were made for when none apply to `target`
    (a record applies only on the CPU and thread count it was measured with)."""
    from ember.autotune.database import TuningDatabase

    with TuningDatabase(path, readonly=True) as db:
        others = sorted({r.target for r in db.records(ok_only=True)
                         if r.fingerprint != target.fingerprint})
    if others:
        print(f"  (records there were made for other targets: {', '.join(others[:5])}; "
              f"this is '{target}')")


def _print_tuned(table: dict[str, dict[str, Any]], tuned: Sequence[str], source: str) -> None:
    """Which groups run with knobs from tuning records (and those knobs)."""
    print(f"tuned knobs: {len(tuned)} of {len(table)} groups with knobs, from {source}"
          + (":" if tuned else ""))
    for name in tuned:
        values = ", ".join(f"{k}={v}" for k, v in table.get(name, {}).items()
                           if k != "family")
        print(f"  {name} ({table.get(name, {}).get('family', '?')}): {values}")


def _print_memory(planned: int, naive: int, peak: int) -> None:
    ratio = f" ({planned / naive:.1%} of naive)" if naive else ""
    print(f"memory plan: workspace {planned} bytes{ratio}; naive sum of intermediates "
          f"{naive} bytes; peak live {peak} bytes")


def _print_source(groups: Sequence[Any], wanted: str, fmt: str, target: str) -> int:
    from ember.codegen import jit
    from ember.lowering.compile import lower_group

    matches = [g for g in groups if wanted in (g.name, g.symbol)]
    if not matches:
        names = ", ".join(g.name for g in groups[:20])
        raise ArgumentError(f"--source: no fused group named '{wanted}'; groups: {names}"
                            + (", ..." if len(groups) > 20 else ""))
    group = matches[0]
    func = lower_group(group, target)
    formats = ["tir", "ll", "asm", "c"] if fmt == "all" else [fmt]
    print(f"# fused group '{group.name}' ({group.describe()}), kernel {group.symbol}")
    for f in formats:
        print(f"# ---- {f} ----")
        if f == "tir":
            print(func)
        elif f == "ll":
            print(jit.emit_llvm_ir([func], target))
        elif f == "asm":
            print(jit.emit_assembly([func], target))
        else:
            from ember.codegen.c import codegen_c

            print(codegen_c([func]))
    return 0


def _threads(args: argparse.Namespace) -> int:
    from ember.runtime import threadpool

    if args.threads is not None and args.threads < 1:
        raise ArgumentError(f"--threads must be >= 1, got {args.threads}")
    return args.threads or threadpool.num_threads()


def _cmd_bench(args: argparse.Namespace) -> int:
    if _is_library(args.model) or _is_compiled(args.model):
        return _bench_alone(args)
    from ember.compare import bench

    model = _compile(args)
    onnx_model = _onnx_model(args.model, _input_shapes(args))
    feeds = _feeds(args, model, onnx_model)
    report = bench(onnx_model, model, feeds, _threads(args), runs=args.runs,
                   warmup=args.warmup)
    print(f"model {args.model} ({len(model.plan.calls)} fused groups), {args.runs} runs")
    print(report)
    return _profile(args, model, feeds)


def _profile(args: argparse.Namespace, model: Any, feeds: Any) -> int:
    """With --profile: ember's time per fused group, in model order and re-run cached."""
    if not args.profile:
        return 0
    if not hasattr(model, "profile"):
        raise ArgumentError(f"--profile: '{args.model}' is an exported library, which keeps "
                            "no per-group calls; profile the .onnx or a compiled directory")
    print()
    print(model.profile(feeds, repeat=args.runs, cached=True))
    return 0


def _bench_alone(args: argparse.Namespace) -> int:
    """An exported library or a compiled directory alone (no onnxruntime comparison: the
    .onnx is not at hand)."""
    from ember.runtime import threadpool
    from ember.runtime.library import default_num_threads

    if args.threads is not None and args.threads < 1:
        raise ArgumentError(f"--threads must be >= 1, got {args.threads}")
    model = _compile(args)
    threads = args.threads or default_num_threads()
    if hasattr(model, "set_num_threads"):
        model.set_num_threads(threads)
    else:
        threadpool.set_num_threads(threads)
    feeds = _feeds(args, model)
    seconds = model.time(feeds, repeat=args.runs, warmup=args.warmup)
    print(f"model {args.model}, {threads} threads, {args.runs} runs: median "
          f"{seconds * 1e3:.3f} ms")
    return _profile(args, model, feeds)


def _cmd_check(args: argparse.Namespace) -> int:
    from ember.compare import check

    if _is_compiled(args.model):
        raise ArgumentError("check compares with onnxruntime: pass the .onnx model file")
    model = _compile(args)
    onnx_model = _onnx_model(args.model, _input_shapes(args))
    report = check(onnx_model, model, _feeds(args, model, onnx_model), rtol=args.rtol,
                   atol=args.atol)
    print(f"compared {report.compared} tensors with onnxruntime")
    if report.compared <= len(model.output_names):
        print(f"(at -O{args.opt_level} only the model outputs have onnxruntime names to "
              "compare with; -O0 keeps one fused group per node and compares at each)")
    if report.worst is not None:
        w = report.worst
        print(f"largest difference: '{w.value}' (node '{w.node}' {w.op}, group '{w.group}'): "
              f"abs {w.max_abs:.2e}, rel {w.max_rel:.2e}")
    if report.first is None:
        print("all tensors agree")
        return 0
    f = report.first
    print(f"FIRST DIVERGENCE: '{f.value}' from node '{f.node}' ({f.op}) in fused group "
          f"'{f.group}': abs {f.max_abs:.2e}, rel {f.max_rel:.2e}")
    return 1


def _cmd_zoo(args: argparse.Namespace) -> int:
    from ember import zoo

    if args.list or not args.name:
        print("models: " + ", ".join(zoo.MODELS))
        return 0
    if args.name not in zoo.MODELS:
        raise ArgumentError(f"zoo: unknown model '{args.name}'; models: {', '.join(zoo.MODELS)}")
    if not args.output:
        raise ArgumentError("zoo: pass -o FILE.onnx")
    config: dict[str, Any] = {}
    for key, value in _key_values(args.config or [], "--config"):
        try:
            config[key] = int(value)
        except ValueError:
            config[key] = value
    path = zoo.save_model(args.name, args.output, **config)
    print(f"wrote {args.name} to {path}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.gemm:
        from ember.demo import run_gemm_demo

        return run_gemm_demo(size=args.size, threads=args.threads, target=args.target)
    from ember.demo import run_model_demo

    return run_model_demo(args.model, image_size=args.image_size, threads=args.threads,
                          target=args.target)


def _cmd_tune(args: argparse.Namespace) -> int:
    from ember.autotune.command import run
    from ember.autotune.database import default_path
    from ember.tune_check import check_in_model, verdict_lines

    done = run(args, _input_shapes(args) if args.model else None)
    if (done != 0 or args.report or args.no_model_check or args.model is None
            or args.export or args.import_file):
        return done
    verdicts = check_in_model(args.model, args.db or default_path(), args.target,
                              input_shapes=_input_shapes(args))
    for line in verdict_lines(verdicts):
        print(line)
    return 0


def _cmd_target(args: argparse.Namespace) -> int:
    from ember.target import Target

    t = Target(args.spec) if args.spec else Target.host()
    if t.kind in ("llvm", "wasm", "cuda", "rocm"):
        from ember.codegen.llvm_target import check_llvm_target, llvm_target_info

        if args.list_cpus or args.list_features:
            info = llvm_target_info(t.triple)
            if info is None:
                raise EmberError(f"LLVM cannot list the CPUs of triple '{t.triple}' here")
            print("\n".join(sorted(info.cpus if args.list_cpus else info.features)))
            return 0
        check_llvm_target(t)
    print(f"target:       {t}")
    print(f"triple:       {t.triple}")
    print(f"cpu:          {t.cpu}")
    print(f"vector bits:  {t.vector_bits}")
    print(f"cores:        {t.num_cores}")
    return 0


def _cmd_cache(args: argparse.Namespace) -> int:
    from ember.lowering.cache import KernelCache, max_cache_bytes

    cache = KernelCache(args.dir) if args.dir else KernelCache()
    if args.action == "clear":
        print(f"removed {cache.clear()} kernels from {cache.directory}")
        return 0
    if args.action == "prune":
        print(f"removed {cache.prune()} kernels from {cache.directory}")
    count, size = cache.info()
    print(f"kernel cache: {cache.directory}")
    print(f"entries:      {count} ({size / 1e6:.1f} MB; cap {max_cache_bytes() / 2**20:.0f} MB, "
          "EMBER_CACHE_MAX_MB)")
    return 0


def _cmd_serve_rpc(args: argparse.Namespace) -> int:
    from ember.runtime import rpc

    key = rpc.read_key_file(args.key_file) if args.key_file else rpc.check_key(None)
    server = rpc.Server(key, args.host, args.port, args.idle_timeout, args.max_message)
    host, port = server.address
    print(f"ember serve-rpc listening on {host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def _cmd_serve_web(args: argparse.Namespace) -> int:
    import time

    from ember.serve_web import build_site, start_server

    site = build_site(args.model, args.root) if args.model else Path(args.root)
    server = start_server(site, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"serving {site} on http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()
    return 0


def _cmd_rpc_server(args: argparse.Namespace) -> int:
    from ember.lowering.crt import build_rpc_server

    print(f"wrote {build_rpc_server(args.target, args.output)} for {args.target}")
    return 0


# parser -----------------------------------------------------------------------------------
def _model_options(p: argparse.ArgumentParser, compiled_ok: bool = True,
                   db: bool = True) -> None:
    what = "an .onnx file" + (" or a directory or .so written by 'ember compile'"
                              if compiled_ok else "")
    if db:
        p.add_argument("model", help=f"the model: {what}")
    else:  # 'ember tune --export/--import' needs no model
        p.add_argument("model", nargs="?", help=f"the model: {what}")
    p.add_argument("--target", default="llvm", help="target string (default: llvm, this CPU)")
    p.add_argument("-O", "--opt-level", type=int, default=3, choices=range(4),
                   help="graph optimization level (default 3)")
    p.add_argument("--shape", action="append", metavar="NAME=D0,D1,...",
                   help="static shape of a dynamic input (repeatable)")
    p.add_argument("--no-cache", action="store_true", help="do not use the kernel disk cache")
    if db:  # 'ember tune' has its own --db (where records go)
        p.add_argument("--db", default=None, metavar="FILE",
                       help="tuning database: each kernel takes its task's best record for "
                            "this target (made by 'ember tune'; default: default schedules)")


def _input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="an input from a .npy file (repeatable; others are random)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember", description="ember: an end-to-end deep learning compiler")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("compile", help="compile a model and store the result",
                       description="Compile an ONNX model and write the compiled model (plan, "
                                   "constants, kernel objects) to a directory, or with an "
                                   "output ending in .so export it as one shared library "
                                   "that runs without the compiler.")
    _model_options(p, compiled_ok=False)
    p.add_argument("-o", "--output", required=True,
                   help="output directory, or FILE.so for a shared library (--target c / "
                        "wasm: a directory of C source / WebAssembly + JavaScript)")
    p.set_defaults(func=_cmd_compile)

    p = sub.add_parser("run", help="run a model on random or given inputs",
                       description="Run a model (compiling it first if it is an .onnx file) and "
                                   "print the output shapes and first values.")
    _model_options(p)
    _input_options(p)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("inspect", help="print the fused graph, memory plan or kernel code",
                       description="Print the optimized, fused graph and the memory plan "
                                   "(planned vs naive bytes); with --source, the loop program "
                                   "and generated code of one fused group.")
    _model_options(p)
    p.add_argument("--source", metavar="GROUP", help="fused group name (or kernel symbol)")
    p.add_argument("--format", default="all", choices=["all", "tir", "ll", "asm", "c"],
                   help="which code to print with --source (default: all)")
    p.set_defaults(func=_cmd_inspect)

    p = sub.add_parser("bench", help="time ember against onnxruntime",
                       description="Median latency of ember and onnxruntime on the same inputs "
                                   "and thread count, their ratio and the max output error "
                                   "(for an exported .so: its latency alone).")
    _model_options(p)
    _input_options(p)
    p.add_argument("--threads", type=int, default=None, help="threads for both (default: all)")
    p.add_argument("--runs", type=int, default=20, help="timed runs (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--profile", action="store_true",
                   help="then ember's time per fused group: in model order, and re-run back "
                        "to back with its data cached")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("check", help="find the first tensor where ember and onnxruntime differ",
                       description="Run ember and onnxruntime on the same random inputs, "
                                   "compare every intermediate both expose and name the first "
                                   "node whose output diverges, with its fused group.")
    _model_options(p, compiled_ok=False)
    _input_options(p)
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (1e-3)")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (1e-4)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("zoo", help="write a model-zoo model as ONNX",
                       description="Build a model of the zoo with seeded random weights and "
                                   "write it as an ONNX file.")
    p.add_argument("name", nargs="?", help="model name (see --list)")
    p.add_argument("-o", "--output", help="output .onnx file")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="builder option, e.g. image_size=64 (repeatable)")
    p.add_argument("--list", action="store_true", help="list the models")
    p.set_defaults(func=_cmd_zoo)

    p = sub.add_parser("demo", help="compile ResNet-18, check it against onnxruntime, time "
                                    "both (--gemm: the GEMM demo)",
                       description="Build ResNet-18 from the zoo, compile it, run it, compare "
                                   "with onnxruntime and print the latency of both and the max "
                                   "error. --gemm runs the fp32 GEMM demo instead.")
    p.add_argument("--gemm", action="store_true", help="run the GEMM demo")
    p.add_argument("--model", default="resnet18", help="zoo model (default resnet18)")
    p.add_argument("--image-size", type=int, default=224, help="image size (default 224)")
    p.add_argument("--size", type=int, default=1024, help="GEMM: M = N = K (default 1024)")
    p.add_argument("--threads", type=int, default=None,
                   help="thread count (default: all cores)")
    p.add_argument("--target", default="llvm", help="target string (default: llvm, the "
                                                    "host CPU)")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("tune", help="tune a model's kernels into a tuning database",
                       description="Measure schedule candidates of the model's tasks, keep "
                                   "every measurement in the tuning database; compile with "
                                   "tuning_db= to use the best.")
    _model_options(p, compiled_ok=False, db=False)
    from ember.autotune.command import add_arguments

    add_arguments(p)
    p.set_defaults(func=_cmd_tune)

    p = sub.add_parser("cache", help="show, prune or clear the kernel cache",
                       description="The on-disk cache of compiled kernels (EMBER_CACHE_DIR, "
                                   "else $XDG_CACHE_HOME/ember, else ~/.cache/ember), kept "
                                   "under EMBER_CACHE_MAX_MB (default 2048) by evicting the "
                                   "least recently used kernels.")
    p.add_argument("action", nargs="?", default="info", choices=["info", "prune", "clear"],
                   help="info (default): location and size; prune: evict down to the cap; "
                        "clear: remove every kernel")
    p.add_argument("--dir", help="the cache directory (default: as above)")
    p.set_defaults(func=_cmd_cache)

    p = sub.add_parser("target", help="show what a target string means on this machine",
                       description="Parse a target string (default: the host) and print "
                                   "its triple, CPU and vector width.")
    p.add_argument("spec", nargs="?", default="", help='e.g. "llvm -mcpu=znver4"')
    p.add_argument("--list-cpus", action="store_true",
                   help="list the CPU names LLVM knows for the target's triple")
    p.add_argument("--list-features", action="store_true",
                   help="list the -mattr features LLVM knows for the target's triple")
    p.set_defaults(func=_cmd_target)

    p = sub.add_parser("serve-rpc", help="serve RPC: hosts upload, run and time libraries here",
                       description="Serve ember's RPC protocol (see ember.runtime.rpc) on this "
                                   "device: an authenticated host uploads exported libraries, "
                                   "runs them on its inputs and fetches outputs and times. "
                                   "The shared key: --key-file or EMBER_RPC_KEY.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9090, help="port (default 9090; 0: any)")
    p.add_argument("--key-file", help="file holding the shared key (else EMBER_RPC_KEY)")
    p.add_argument("--idle-timeout", type=float, default=60.0,
                   help="seconds before an idle peer is dropped (default 60)")
    p.add_argument("--max-message", type=int, default=1 << 30,
                   help="largest frame accepted, in bytes (default 1 GiB)")
    p.set_defaults(func=_cmd_serve_rpc)

    from ember.serve_web import DEFAULT_ROOT

    p = sub.add_parser("serve-web", help="serve the in-browser classification example",
                       description="Compile a model to WebAssembly beside the example page "
                                   "(examples/web) and serve the page on this machine.")
    p.add_argument("--model", help="an .onnx image classifier (default: the page's current "
                                   "model/ directory)")
    p.add_argument("--root", default=str(DEFAULT_ROOT), help="the page's directory")
    p.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any)")
    p.set_defaults(func=_cmd_serve_web)

    p = sub.add_parser("rpc-server", help="build the C RPC server for a device",
                       description="Compile ember's C RPC server (no Python needed on the "
                                   "device) with the target's C compiler.")
    p.add_argument("--target", default="llvm", help="e.g. cortex-a72, armv7 (default: here)")
    p.add_argument("-o", "--output", required=True, help="the program to write")
    p.set_defaults(func=_cmd_rpc_server)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from ember.version import __version__

        print(__version__)
        return 0
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except BrokenPipeError:  # e.g. `ember inspect m.onnx | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("ember: interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as err:
        extra = {"onnx": "onnx", "onnxruntime": "onnx", "torch": "bench"}.get(
            (err.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"ember: error: this command needs the '{err.name}' package: "
              f"pip install 'ember[{extra}]'", file=sys.stderr)
        return 2
    except OSError as err:  # an unwritable -o, a full disk, a vanished input file
        where = f" '{err.filename}'" if err.filename else ""
        print(f"ember: error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except EmberError as err:
        message = " ".join(str(err).split())
        if len(message) > 2000:
            message = message[:2000] + " ..."
        print(f"ember: error: {type(err).__name__}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
