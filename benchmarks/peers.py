"""Peer runners for benchmarks/models.py: one worker process per system, driven over pipes.

    worker = Worker("torch", "model.onnx", "feeds.npz", threads=2, workdir=tmp)
    worker.start(timeout=600)          # load / build; raises PeerError with a reason
    times = worker.run(5, warmup=1)    # seconds of each timed run
    stats = worker.finish()            # peak RSS of the worker, in MB

Each system runs in its own process so that its peak RSS is its own. The worker builds the
model (ember: a child process exports it as a shared library, which the worker loads with
ctypes, so the compiler never enters the worker; ember-jit: compile in the worker and run
through the JIT; onnxruntime: a session with every graph optimization; torch: the
ONNX model through onnx2torch, run eager under inference_mode; torch-compile: the same
module through torch.compile (inductor, default mode, static shapes), its first call, which
compiles, part of the build; tvm: the relax ONNX frontend and relax.build for this CPU),
writes the outputs of its first run for the error check, then times runs when asked. Peak
RSS during inference is VmHWM after a reset (clear_refs) taken once the build is done and
freed memory is trimmed; peak_rss_total_mb includes the build (ru_maxrss).
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import json
import os
import select
import subprocess
import sys
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

SYSTEMS = ["ember", "ember-tuned", "ember-jit", "onnxruntime", "torch", "torch-compile", "tvm"]
MODULES = {"ember": "ember", "ember-tuned": "ember", "ember-jit": "ember",
           "onnxruntime": "onnxruntime",
           "torch": "onnx2torch", "torch-compile": "onnx2torch", "tvm": "tvm"}
INSTALL = "pip install 'ember[bench]'"


class PeerError(Exception):
    """A system could not build or run a model; str() is the short reason for the table."""


def missing(system: str) -> str | None:
    """Why `system` cannot run here (a module is not installed), or None."""
    needed = [MODULES[system]] + (["torch"] if system.startswith("torch") else [])
    absent = [m for m in needed if importlib.util.find_spec(m) is None]
    return f"not installed: {INSTALL}" if absent else None


def host_cpu() -> str:
    """LLVM's name for this CPU (e.g. znver4), as TVM's target wants it."""
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_name()


# ---- the systems (run inside a worker) --------------------------------------------------

Run = Callable[[], list[np.ndarray]]


_EXPORT = """
import json, sys, time
from ember.driver import export_library
path, out, cache, cold, db, target = sys.argv[1:]
info = {}
db = db or None
if cold == "cold":
    start = time.perf_counter()
    export_library(path, out, target=target, cache=cache, tuning_db=db)
    info["compile_cold_s"] = round(time.perf_counter() - start, 2)
start = time.perf_counter()
export_library(path, out, target=target, cache=cache, tuning_db=db)
info["compile_warm_s"] = round(time.perf_counter() - start, 2)
print(json.dumps(info))
"""


def _target(threads: int) -> str:
    """ember's target for a run on `threads` threads: this CPU, its schedules split for that
    many (and the tuning records made for it apply)."""
    return f"llvm -num-cores={threads}"


def build_ember(path: str, feeds: dict[str, np.ndarray], threads: int,
                info: dict[str, Any], cache: str, cold: bool, tuning_db: str = "") -> Run:
    """A child process exports the model as one shared library; this process only loads it
    (ctypes + numpy: llvmlite and the compiler stay out of its memory). ember-tuned: the
    export applies the best record per task from the tuning database `tuning_db`."""
    import shutil
    import tempfile

    from ember.runtime.library import load_library

    directory = tempfile.mkdtemp(prefix="ember-lib-")
    try:
        library = os.path.join(directory, "model.so")
        done = subprocess.run([sys.executable, "-c", _EXPORT, path, library, cache,
                               "cold" if cold else "warm", tuning_db, _target(threads)],
                              capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or ["(no output)"]
            raise PeerError(f"export failed: {lines[-1]}")
        info.update(json.loads(done.stdout.strip().splitlines()[-1]))
        model = load_library(library)  # mapped: the file may go
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    plan = model.metadata["plan"]
    info["tuned_groups"] = len(model.metadata.get("tuned", []))
    info.update(workspace_mb=round(plan["workspace_bytes"] / 2**20, 2),
                peak_live_mb=round(plan["peak_live_bytes"] / 2**20, 2),
                naive_mb=round(plan["naive_bytes"] / 2**20, 2),
                library_mb=round(model.constant_bytes().nbytes / 2**20, 1))
    model.set_num_threads(threads)
    return lambda: model.run(feeds)


def build_ember_jit(path: str, feeds: dict[str, np.ndarray], threads: int,
                    info: dict[str, Any], cache: str, cold: bool) -> Run:
    """ember.compile in this process, run through the JIT (llvmlite stays loaded)."""
    import ember
    from ember.runtime import threadpool

    if cold:  # the first worker of a model compiles with an empty cache, then again warm
        start = time.perf_counter()
        ember.compile(path, target=_target(threads), cache=cache)
        info["compile_cold_s"] = round(time.perf_counter() - start, 2)
        gc.collect()
    start = time.perf_counter()
    compiled = ember.compile(path, target=_target(threads), cache=cache)
    info["compile_warm_s"] = round(time.perf_counter() - start, 2)
    plan = compiled.memory_plan
    info.update(workspace_mb=round(plan.workspace_bytes / 2**20, 2),
                peak_live_mb=round(plan.peak_live_bytes / 2**20, 2),
                naive_mb=round(plan.naive_bytes / 2**20, 2))
    threadpool.set_num_threads(threads)
    return lambda: compiled.run(feeds)


def ort_session(model: str | bytes, threads: int, profile_prefix: str | None = None) -> Any:
    """An onnxruntime session (a path or serialized model) with every graph optimization,
    `threads` intra-op threads, sequential execution; with `profile_prefix`, its node
    profiler on (`end_profiling()` writes the file)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def build_onnxruntime(path: str, feeds: dict[str, np.ndarray], threads: int,
                      info: dict[str, Any], **_: Any) -> Run:
    import onnxruntime as ort

    session = ort_session(path, threads)
    names = [o.name for o in session.get_outputs()]
    info["version"] = ort.__version__
    return lambda: session.run(names, feeds)


def _usable_torchvision() -> None:
    """onnx2torch imports torchvision for NMS/RoIAlign only; a torchvision wheel built for
    another torch fails on import, so stand in a module that fails only if those are used."""
    try:
        import torchvision  # noqa: F401
        return
    except Exception:  # noqa: BLE001 (RuntimeError from its C extension)
        for name in [n for n in sys.modules if n.split(".")[0] == "torchvision"]:
            del sys.modules[name]

    def unavailable(*_: Any, **__: Any) -> Any:
        raise RuntimeError("torchvision is not usable with this torch")

    stub, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    ops.nms = ops.roi_align = ops.box_convert = unavailable  # type: ignore[attr-defined]
    stub.ops = ops  # type: ignore[attr-defined]
    sys.modules.update({"torchvision": stub, "torchvision.ops": ops})


def _register_lstm() -> None:
    """An onnx2torch converter for the ONNX LSTM (forward, default activations) onto
    torch.nn.LSTM: gates reordered from ONNX's i, o, f, c to torch's i, f, g, o."""
    import torch
    from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY, add_converter
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

    class OnnxLSTM(torch.nn.Module):
        def __init__(self, lstm: torch.nn.LSTM, outputs: int) -> None:
            super().__init__()
            self.lstm, self.outputs = lstm, outputs

        def forward(self, x: Any, initial_h: Any = None, initial_c: Any = None) -> Any:
            state = None if initial_h is None else (initial_h, initial_c)
            y, (h, c) = self.lstm(x, state)
            results = (y.unsqueeze(1), h, c)[:self.outputs]
            return results[0] if self.outputs == 1 else results

    def convert(node: Any, graph: Any) -> Any:
        attrs = node.attributes
        unsupported = {k: v for k, v in attrs.items() if k not in ("hidden_size", "direction")}
        inputs = list(node.input_values) + [""] * (8 - len(node.input_values))
        if (attrs.get("direction", "forward") != "forward" or unsupported
                or inputs[4] or inputs[7] or bool(inputs[5]) != bool(inputs[6])):
            raise NotImplementedError(f"LSTM {node.name}: only forward LSTMs with default "
                                      "attributes and no sequence_lens or peepholes")
        hidden = int(attrs["hidden_size"])
        w, r = (graph.initializers[inputs[i]].to_torch()[0] for i in (1, 2))
        order = [0, 2, 3, 1]  # torch gate k is ONNX gate order[k]

        def gates(t: Any) -> Any:
            return torch.cat([t[k * hidden:(k + 1) * hidden] for k in order])

        lstm = torch.nn.LSTM(w.shape[1], hidden, bias=True)
        bias = graph.initializers[inputs[3]].to_torch()[0] if inputs[3] else \
            torch.zeros(8 * hidden)
        with torch.no_grad():
            lstm.weight_ih_l0.copy_(gates(w))
            lstm.weight_hh_l0.copy_(gates(r))
            lstm.bias_ih_l0.copy_(gates(bias[:4 * hidden]))
            lstm.bias_hh_l0.copy_(gates(bias[4 * hidden:]))
        outputs = len(node.output_values)
        extra = tuple(inputs[5:7]) if inputs[5] else ()
        return OperationConverterResult(
            torch_module=OnnxLSTM(lstm, outputs),
            onnx_mapping=OnnxMapping(inputs=(inputs[0],) + extra, outputs=node.output_values))

    for version in (7, 14):
        if ("", "LSTM", version) not in _CONVERTER_REGISTRY:
            add_converter(operation_type="LSTM", version=version)(convert)


def _register_static_reshape() -> None:
    """onnx2torch's Reshape builds torch.Size from its shape tensor, which TorchDynamo cannot
    trace; a Reshape whose shape is an initializer instead keeps that shape as Python ints
    (the same result, eager or compiled; other Reshapes keep onnx2torch's converter)."""
    import torch
    from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

    class StaticReshape(torch.nn.Module):
        def __init__(self, shape: Sequence[int]) -> None:
            super().__init__()
            self.shape = tuple(shape)

        def forward(self, x: Any) -> Any:  # ONNX: 0 copies the input's dimension
            return torch.reshape(x, [x.shape[i] if d == 0 else d
                                     for i, d in enumerate(self.shape)])

    for version in (5, 13, 14):
        key = ("", "Reshape", version)
        original = _CONVERTER_REGISTRY.get(key)  # type: ignore[call-overload]
        if original is None or getattr(original, "static_reshape", False):
            continue

        def convert(node: Any, graph: Any, original: Any = original) -> Any:
            data, shape = (list(node.input_values) + [""])[:2]
            if shape not in graph.initializers or node.attributes.get("allowzero", 0):
                return original(node, graph)
            dims = [int(d) for d in graph.initializers[shape].to_numpy().reshape(-1)]
            return OperationConverterResult(
                torch_module=StaticReshape(dims),
                onnx_mapping=OnnxMapping(inputs=(data,), outputs=node.output_values))

        convert.static_reshape = True  # type: ignore[attr-defined]
        _CONVERTER_REGISTRY[key] = convert  # type: ignore[index]


def _torch_run(path: str, feeds: dict[str, np.ndarray], threads: int, info: dict[str, Any],
               wrap: Callable[[Any], Any] = lambda m: m) -> Run:
    """The ONNX model through onnx2torch (wrapped by `wrap`), run under inference_mode."""
    import onnx
    import torch

    _usable_torchvision()
    import onnx2torch

    _register_lstm()
    _register_static_reshape()
    torch.set_num_threads(threads)
    model = onnx2torch.convert(onnx.load(path))
    model.eval()
    model = wrap(model)
    args = [torch.from_numpy(feeds[name]) for name in feeds]
    info["version"] = torch.__version__

    def run() -> list[np.ndarray]:
        with torch.inference_mode():
            out = model(*args)
        return [t.numpy() for t in (out if isinstance(out, (tuple, list)) else [out])]

    return run


def build_torch(path: str, feeds: dict[str, np.ndarray], threads: int,
                info: dict[str, Any], **_: Any) -> Run:
    return _torch_run(path, feeds, threads, info)


def build_torch_compile(path: str, feeds: dict[str, np.ndarray], threads: int,
                        info: dict[str, Any], **_: Any) -> Run:
    """torch.compile (inductor, default mode, dynamic=False) of the onnx2torch module; the
    first call compiles (torch_compile_s). Inductor's cache is the worker's
    TORCHINDUCTOR_CACHE_DIR (benchmarks/models.py: one per model, so the first thread count
    compiles cold). Graph breaks fall back to eager between the compiled graphs (graphs)."""
    import torch
    from torch._dynamo.utils import counters

    run = _torch_run(path, feeds, threads, info,
                     lambda m: torch.compile(m, backend="inductor", dynamic=False))
    start = time.perf_counter()
    run()
    info["torch_compile_s"] = round(time.perf_counter() - start, 2)
    info["graphs"] = int(counters["stats"].get("unique_graphs", 0))
    return run


def build_tvm(path: str, feeds: dict[str, np.ndarray], threads: int,
              info: dict[str, Any], **_: Any) -> Run:
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load(path)
    mod = from_onnx(model, shape_dict={k: list(v.shape) for k, v in feeds.items()},
                    dtype_dict={k: str(v.dtype) for k, v in feeds.items()})
    del model
    target = tvm.target.Target({"kind": "llvm", "mcpu": host_cpu(), "num-cores": threads})
    info["target"] = str(target)
    start = time.perf_counter()
    executable = relax.build(mod, target=target)
    info["tvm_build_s"] = round(time.perf_counter() - start, 2)
    del mod
    vm = relax.VirtualMachine(executable, tvm.cpu())
    to_tensor = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    args = [to_tensor(v) for v in feeds.values()]
    main = vm["main"]
    info["version"] = tvm.__version__

    def run() -> list[np.ndarray]:
        out = main(*args)
        items = out if isinstance(out, (tuple, list)) or type(out).__name__ == "Array" \
            else [out]
        return [t.numpy() for t in items]

    return run


IMPORTS = {"ember": ["ember.runtime.library"], "ember-tuned": ["ember.runtime.library"],
           "ember-jit": ["ember"],
           "onnxruntime": ["onnxruntime"], "torch": ["torch", "onnx", "onnx2torch"],
           "torch-compile": ["torch", "onnx", "onnx2torch"],
           "tvm": ["onnx", "tvm", "tvm.relax"]}
BUILDERS = {"ember": build_ember, "ember-tuned": build_ember, "ember-jit": build_ember_jit,
            "onnxruntime": build_onnxruntime, "torch": build_torch,
            "torch-compile": build_torch_compile, "tvm": build_tvm}


# ---- the worker process ---------------------------------------------------------------

def _status_mb(field: str) -> float:
    """A size from /proc/self/status (VmHWM: peak RSS of this process image, VmRSS: now).
    ru_maxrss is not used: it keeps the parent's RSS from before the exec."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _reset_peak() -> bool:
    """Return freed heap to the OS, then restart VmHWM from the current RSS."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def worker_main(argv: Sequence[str]) -> None:
    system, path, feeds_path, threads, outputs = argv[:5]
    cache, cold = (argv[5], argv[6] == "cold") if len(argv) > 5 else ("", False)
    options: dict[str, Any] = {"cache": cache, "cold": cold}
    if system == "ember-tuned":
        options["tuning_db"] = argv[7]
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # library chatter on stdout must not corrupt the channel
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")

    info: dict[str, Any] = {}
    with np.load(feeds_path) as archive:
        feeds = {name: archive[name] for name in archive.files}
    try:
        if system.startswith("torch"):
            _usable_torchvision()
        for module in IMPORTS[system]:
            importlib.import_module(module)
        info["rss_imports_mb"] = _status_mb("VmRSS")
        start = time.perf_counter()
        run = BUILDERS[system](path, feeds, int(threads), info, **options)
        info["build_s"] = round(time.perf_counter() - start, 2)
        build_peak = _status_mb("VmHWM")
        reset = _reset_peak()
        start = time.perf_counter()
        first = run()
        info["first_run_s"] = time.perf_counter() - start
        np.savez(outputs, *[np.asarray(a) for a in first])
        del first
    except Exception as error:  # noqa: BLE001 (any library's error becomes a table note)
        send({"error": f"{type(error).__name__}: {error}".strip(), "short": _reason(error)})
        return
    send({"ready": True, **info})
    while line := sys.stdin.readline():
        words = line.split() or ["none"]
        if words[0] == "run":
            count, warmup = int(words[1]), int(words[2])
            for _ in range(warmup):
                run()
            times = []
            for _ in range(count):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
            send({"times": times})
        elif words[0] == "done":
            peak = _status_mb("VmHWM")
            send({"peak_rss_mb": peak if reset else None,
                  "peak_rss_total_mb": max(peak, build_peak)})
            return


def _reason(error: Exception) -> str:
    """A few words for the table: the unsupported operators, else the error's first line."""
    text = str(error)
    if "not supported for frontend ONNX:" in text:
        ops = text.split("not supported for frontend ONNX:", 1)[1].split("\n")[0].strip()
        return f"{ops} not supported by its ONNX frontend"
    if "Converter is not implemented" in text and "operation_type=" in text:
        op = text.split("operation_type=", 1)[1].split(",")[0].strip("'\"")
        return f"{op} not supported by onnx2torch"
    lines = [line for line in text.splitlines() if line.strip()]
    if type(error).__name__ == "BackendCompilerFailed" and len(lines) > 1:
        return _short(f"inductor: {lines[1]}")  # the first line only names the backend
    return _short(f"{type(error).__name__}: {lines[0] if lines else ''}")


# ---- the parent's handle on a worker ----------------------------------------------------

def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Worker:
    """One system's worker process for one model at one thread count."""

    def __init__(self, system: str, model_path: str, feeds_path: str, threads: int,
                 workdir: str, cache: str = "", cold: bool = False, tuning_db: str = "") -> None:
        self.system, self.threads, self._workdir = system, threads, workdir
        self.outputs = os.path.join(workdir, f"{system}-{threads}.npz")
        self.log = os.path.join(workdir, f"{system}-{threads}.log")
        self.info: dict[str, Any] = {}
        self._argv = [sys.executable, os.path.abspath(__file__), "worker", system, model_path,
                      feeds_path, str(threads), self.outputs, cache, "cold" if cold else "warm",
                      tuning_db]
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self.full_error = ""

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        count = str(self.threads)
        env.update(OMP_NUM_THREADS=count, EMBER_NUM_THREADS=count, TVM_NUM_THREADS=count,
                   MKL_NUM_THREADS=count)
        if self.system.startswith("ember"):
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        if self.system == "torch-compile":  # per model directory: cold on its first build
            env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self._workdir, "inductor-cache")
        return env

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                raise PeerError(f"timed out after {timeout:.0f}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self._proc.wait()
                raise PeerError(f"worker died (exit {code}): {self._last_log_line()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _last_log_line(self) -> str:
        try:
            with open(self.log, errors="replace") as log:
                lines = [ln for ln in log.read().splitlines() if ln.strip()]
        except OSError:
            return ""
        return _short(lines[-1]) if lines else ""

    def start(self, timeout: float) -> dict[str, Any]:
        """Build the model in the worker; the worker's info (build_s, ...) or PeerError."""
        with open(self.log, "w") as log:
            self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=log, env=self._env())
        message = self._receive(timeout)
        if "error" in message:
            self.kill()
            self.full_error = message["error"]
            raise PeerError(message.get("short") or _short(message["error"]))
        self.info = message
        return message

    def _send(self, text: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(text.encode() + b"\n")
        self._proc.stdin.flush()

    def run(self, count: int, warmup: int, timeout: float) -> list[float]:
        self._send(f"run {count} {warmup}")
        return list(self._receive(timeout)["times"])

    def finish(self, timeout: float = 60) -> dict[str, Any]:
        self._send("done")
        stats = self._receive(timeout)
        assert self._proc is not None
        self._proc.wait(timeout)
        return stats

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit("usage: run benchmarks/models.py (this module is its worker)")
