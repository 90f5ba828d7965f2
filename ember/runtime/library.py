"""Load a model exported by `ember.export_library`: ctypes, json and numpy only, no compiler.

    model = load_library("resnet50.so")
    (logits,) = model.run({"input": x})        # or model(x), or model.run([x])
    model.set_num_threads(4)

The library exports `model_main(in..., out..., workspace, constants)`, the constant blob
`ember_constants`, the plan as JSON (`ember_metadata`, `ember_metadata_size` bytes) and the
thread pool's controls; the loader allocates the workspace and makes ONE call per run. The
input checks here are shared with CompiledModel.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ember.errors import ArgumentError, EmberError
from ember.runtime import cpu
from ember.runtime.threadpool import default_num_threads  # plain Python: no compiler

FORMAT = "ember-library-1"
MAIN_SYMBOL = "model_main"
CONSTANTS_SYMBOL = "ember_constants"
METADATA_SYMBOL = "ember_metadata"
METADATA_SIZE_SYMBOL = "ember_metadata_size"
SET_THREADS_SYMBOL = "ember_set_num_threads"
GET_THREADS_SYMBOL = "ember_get_num_threads"
RESET_SYMBOL = "ember_reset_after_fork"
RUN_SYMBOL = "ember_model_run"       # model_main(args[0], args[1], ...) for C callers
ARITY_SYMBOL = "ember_model_arity"   # int32: how many pointers ember_model_run reads
REQUIRED_SYMBOLS = (MAIN_SYMBOL, CONSTANTS_SYMBOL, SET_THREADS_SYMBOL, GET_THREADS_SYMBOL,
                    RESET_SYMBOL)
ALIGN = 64


class LibraryTargetError(ArgumentError):
    """A library was built for another kind of machine, or for CPU features this one lacks."""


class TensorInfo(NamedTuple):
    """Name, static shape and dtype of a model input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


# shared with CompiledModel ----------------------------------------------------------------
def aligned_bytes(size: int, zero: bool = True) -> np.ndarray:
    """A uint8 array of `size` bytes (at least 1, zeroed unless `zero` is False) whose data
    is 64-byte aligned."""
    raw = (np.zeros if zero else np.empty)(max(1, size) + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + max(1, size)]


def check_inputs(model: str, specs: Sequence[Any],
                 inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
    """The input arrays of model `model` in the order of `specs` (name, shape, dtype),
    checked and C-contiguous; ArgumentError names what does not match."""
    names = [s.name for s in specs]
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in names]
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            raise ArgumentError(
                f"model '{model}' expects inputs {names}; "
                + (f"unknown: {unknown}" if unknown else "")
                + ("; " if unknown and missing else "")
                + (f"missing: {missing}" if missing else ""))
        arrays = [inputs[n] for n in names]
    else:
        arrays = list(inputs)
        if len(arrays) != len(specs):
            raise ArgumentError(f"model '{model}' takes {len(specs)} inputs {names}, got "
                                f"{len(arrays)}")
    checked = []
    for spec, array in zip(specs, arrays):
        want = np.dtype(spec.dtype)
        if not isinstance(array, np.ndarray):
            if np.isscalar(array) or isinstance(array, (list, tuple)):
                array = np.asarray(array, dtype=want)
            else:
                raise ArgumentError(f"input '{spec.name}': expected a numpy array, got "
                                    f"{type(array).__name__}")
        if array.dtype != want:
            raise ArgumentError(f"input '{spec.name}': expected dtype {spec.dtype}, got "
                                f"{array.dtype}")
        if tuple(array.shape) != tuple(spec.shape):
            raise ArgumentError(f"input '{spec.name}': expected shape {tuple(spec.shape)}, "
                                f"got {tuple(array.shape)}")
        checked.append(np.ascontiguousarray(array))
    return checked


def slot_value(kind: str, index: int, spec: Any, inputs: Sequence[np.ndarray],
               outputs: Sequence[np.ndarray], workspace: np.ndarray,
               constants: np.ndarray) -> np.ndarray:
    """The array a plan slot holds: input/output `index`, or `spec`'s bytes at byte offset
    `index` of the workspace or the constant blob."""
    if kind == "input":
        return inputs[index]
    if kind == "output":
        return outputs[index]
    base = workspace if kind == "workspace" else constants
    nbytes = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
    return base[index:index + nbytes].view(spec.dtype).reshape(spec.shape)


def median_seconds(run: Callable[[], Any], repeat: int = 10, warmup: int = 1) -> float:
    """Median seconds of `run()` over `repeat` calls after `warmup` untimed ones."""
    for _ in range(warmup):
        run()
    samples = []
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


# loading ----------------------------------------------------------------------------------
def _check_elf(path: Path) -> None:
    """Reject what is not an ELF shared object, or is cut short, before dlopen maps it (a
    segment past the end of the file would fault on first touch)."""
    size = path.stat().st_size
    with path.open("rb") as file:
        head = file.read(64)
        if len(head) < 52 or head[:4] != b"\x7fELF":
            raise ArgumentError(f"'{path}' is not an ember library (not an ELF shared object)")
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        if struct.unpack_from(order + "H", head, 16)[0] != 3:  # ET_DYN
            raise ArgumentError(f"'{path}' is not an ember library (not a shared object)")
        _check_machine(path, struct.unpack_from(order + "H", head, 18)[0])
        if wide:
            phoff, shoff = struct.unpack_from(order + "QQ", head, 32)
            phsize, phnum, shsize, shnum = struct.unpack_from(order + "HHHH", head, 54)
            entry, fields = order + "IIQQQQ", (2, 5)
        else:
            phoff, shoff = struct.unpack_from(order + "II", head, 28)
            phsize, phnum, shsize, shnum = struct.unpack_from(order + "HHHH", head, 42)
            entry, fields = order + "IIIIII", (1, 4)
        ends = [phoff + phsize * phnum, shoff + shsize * shnum]
        file.seek(phoff)
        table = file.read(phsize * phnum)
        if len(table) == phsize * phnum:
            for k in range(phnum):
                header = struct.unpack_from(entry, table, k * phsize)
                if header[0] == 1:  # PT_LOAD: offset + file size
                    ends.append(header[fields[0]] + header[fields[1]])
    if max(ends) > size:
        raise ArgumentError(f"'{path}' is truncated: {size} bytes, its headers need "
                            f"{max(ends)}")


def _check_machine(path: Path, machine: int) -> None:
    """Refuse a library for another architecture before dlopen (which says only 'wrong
    ELF class' or 'cannot open')."""
    built = cpu.ELF_MACHINES.get(machine, f"ELF machine {machine}")
    here = cpu.host_family()
    if cpu.family(built) != here:
        raise LibraryTargetError(f"'{path.name}' is built for {built}, this machine is "
                                 f"{here}: run it on a {built} machine (over RPC: ember "
                                 "serve-rpc or the C rpc_server there) or export the model "
                                 "for this one")


def check_cpu_features(path: Path, meta: dict[str, Any],
                       flags: frozenset[str] | None = None) -> None:
    """Refuse a library whose code uses instructions this CPU (Linux `flags`, default this
    machine's) does not report, naming them and the target it was built for."""
    if os.environ.get("EMBER_CPU_CHECK", "1").strip() in ("0", "false", "no"):
        return  # e.g. a kernel too old to name a flag the CPU has
    required = meta.get("requires", [])
    if not isinstance(required, list):
        raise ArgumentError(f"'{path}': its metadata's 'requires' is not a list")
    arch = str(meta.get("triple", "")).split("-")[0] or cpu.host_family()
    missing = cpu.missing_features(arch, [str(f) for f in required], flags)
    if missing:
        raise LibraryTargetError(
            f"'{path.name}' was built for target '{meta.get('target', '?')}' (CPU "
            f"'{meta.get('cpu', '?')}') and uses {', '.join(missing)}, which this CPU "
            f"lacks; export it for a portable CPU (e.g. target='x86-64-v2' or "
            f"'llvm -mcpu=x86-64-v3') or for this machine (EMBER_CPU_CHECK=0 skips this "
            "check, for a kernel that does not report a flag the CPU has)")


def _symbol(lib: ctypes.CDLL, name: str, path: Path) -> Any:
    try:
        return getattr(lib, name)
    except AttributeError:
        raise ArgumentError(f"'{path}' is not an ember library: symbol '{name}' is "
                            "missing") from None


def _read_metadata(lib: ctypes.CDLL, path: Path) -> dict[str, Any]:
    try:
        size = ctypes.c_uint64.in_dll(lib, METADATA_SIZE_SYMBOL).value
        start = ctypes.addressof(ctypes.c_char.in_dll(lib, METADATA_SYMBOL))
    except ValueError:
        raise ArgumentError(f"'{path}' is not an ember library: no '{METADATA_SYMBOL}' "
                            "symbol") from None
    try:
        meta = json.loads(ctypes.string_at(start, size))
    except (ValueError, UnicodeDecodeError) as error:
        raise ArgumentError(f"'{path}': its metadata is not valid JSON ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ArgumentError(f"'{path}': library format {found!r}, this ember reads "
                            f"{FORMAT!r}; export the model again with this version")
    return meta


def load_library(path: str | os.PathLike[str]) -> LibraryModel:
    """The model in the shared library `path` written by `ember.export_library`."""
    return LibraryModel(path)


class LibraryModel:
    """An exported model: `run(inputs) -> list of outputs`, the API of CompiledModel."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise ArgumentError(f"model library '{path}' does not exist")
        _check_elf(self.path)
        try:
            self._lib = ctypes.CDLL(str(self.path))
        except OSError as error:
            raise ArgumentError(f"cannot load '{self.path}' as a shared library: "
                                f"{error}") from None
        self.metadata = _read_metadata(self._lib, self.path)
        check_cpu_features(self.path, self.metadata)  # before any of its code runs
        for name in REQUIRED_SYMBOLS:
            _symbol(self._lib, name, self.path)
        plan = self.metadata["plan"]
        self.name: str = plan["name"]
        self.target: str = self.metadata.get("target", "")
        self.inputs = tuple(TensorInfo(s["name"], tuple(s["shape"]), s["dtype"])
                            for s in plan["inputs"])
        self.outputs = tuple(TensorInfo(s["name"], tuple(s["shape"]), s["dtype"])
                             for s in plan["outputs"])
        self._sources = [(s["kind"], int(s["index"])) for s in plan["output_sources"]]
        self._direct = [src == ("output", i) for i, src in enumerate(self._sources)]
        self.workspace_bytes = int(plan["workspace_bytes"])
        self._constant_bytes = int(plan["constant_bytes"])
        self._workspace = aligned_bytes(self.workspace_bytes)
        address = ctypes.addressof(ctypes.c_uint8.in_dll(self._lib, CONSTANTS_SYMBOL))
        count = max(1, self._constant_bytes)
        self._constants = np.ctypeslib.as_array((ctypes.c_uint8 * count).from_address(address))
        self._constants.setflags(write=False)  # the library's read-only pages
        self._main = _symbol(self._lib, MAIN_SYMBOL, self.path)
        self._main.restype = ctypes.c_int32
        self._main.argtypes = [ctypes.c_void_p] * (len(self.inputs) + len(self.outputs) + 2)
        self._set_threads = self._lib[SET_THREADS_SYMBOL]
        self._set_threads.argtypes, self._set_threads.restype = [ctypes.c_int32], None
        self._get_threads = self._lib[GET_THREADS_SYMBOL]
        self._get_threads.argtypes, self._get_threads.restype = [], ctypes.c_int32
        reset = self._lib[RESET_SYMBOL]
        reset.argtypes, reset.restype = [], None
        os.register_at_fork(after_in_child=reset)  # the child has none of the pool's threads
        self._tail = (self._workspace.ctypes.data, address)
        self._lock = threading.Lock()
        self.set_num_threads(default_num_threads())

    # names -------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [s.name for s in self.outputs]

    def constant_bytes(self) -> np.ndarray:
        """The constant blob the kernels read (read-only, inside the library)."""
        return self._constants[:self._constant_bytes]

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return (f"LibraryModel({self.name}: ({ins}) -> ({outs}), from {self.path.name}, "
                f"target {self.target})")

    # threads -----------------------------------------------------------------------------
    def set_num_threads(self, count: int) -> None:
        """Use at most `count` threads in this library's parallel loops (1 = serially)."""
        if not isinstance(count, int) or count < 1:
            raise ArgumentError(f"set_num_threads: expected a positive thread count, got "
                                f"{count!r}")
        self._set_threads(count)

    @property
    def num_threads(self) -> int:
        return int(self._get_threads())

    # running -----------------------------------------------------------------------------
    def check_inputs(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """The input arrays in model-input order, checked and C-contiguous."""
        return check_inputs(self.name, self.inputs, inputs)

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
        """Outputs in model-output order for inputs given by name (dict) or position (list)."""
        arrays = self.check_inputs(inputs)
        outputs = [np.empty(s.shape, s.dtype) for s in self.outputs]
        pointers = [a.ctypes.data for a in arrays] + [o.ctypes.data for o in outputs]
        with self._lock:
            status = self._main(*pointers, *self._tail)
            if status != 0:
                raise EmberError(f"model '{self.name}' failed with status {status}")
            for i, direct in enumerate(self._direct):
                if not direct:
                    kind, index = self._sources[i]
                    outputs[i][...] = slot_value(kind, index, self.outputs[i], arrays, outputs,
                                                 self._workspace, self._constants)
        return outputs

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        return self.run(list(arrays))

    def time(self, inputs: Mapping[str, Any] | Sequence[Any], repeat: int = 10,
             warmup: int = 1) -> float:
        """Median seconds of one run (input checks and output allocation included)."""
        return median_seconds(lambda: self.run(inputs), repeat, warmup)
