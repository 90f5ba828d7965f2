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

from ember.dtype import numpy_dtype
from ember.errors import ArgumentError, CorruptFileError, EmberError
from ember.runtime import cpu
from ember.runtime.elf import ET_DYN, read_elf
from ember.runtime.threadpool import (  # plain Python: no compiler
    check_thread_count,
    default_num_threads,
)

FORMAT = "ember-library-2"
MAIN_SYMBOL = "model_main"
CONSTANTS_SYMBOL = "ember_constants"
METADATA_SYMBOL = "ember_metadata"
METADATA_SIZE_SYMBOL = "ember_metadata_size"
SET_THREADS_SYMBOL = "ember_set_num_threads"
GET_THREADS_SYMBOL = "ember_get_num_threads"
RESET_SYMBOL = "ember_reset_after_fork"
CHECKSUM_SYMBOL = "ember_checksum"      # "EMBERSUM" + SHA-256 of the file, these 32 zeroed
SIZES_SYMBOL = "ember_plan_sizes"       # uint64s the code was compiled for, see plan_sizes
CHECKSUM_MAGIC = b"EMBERSUM"
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
def guard_pages() -> bool:
    """EMBER_GUARD_PAGES=1: workspace, outputs and input copies end at an inaccessible page,
    so a kernel reading or writing past a buffer faults at once (for tests and fuzzing)."""
    return os.environ.get("EMBER_GUARD_PAGES", "").strip().lower() in ("1", "true", "yes")


def guarded_bytes(size: int) -> np.ndarray:
    """A zeroed, 64-byte aligned uint8 array of `size` bytes that ends within 63 bytes of a
    PROT_NONE page (and has another before it)."""
    import mmap

    page = mmap.PAGESIZE
    body = -(-max(1, size) // page) * page
    region = mmap.mmap(-1, body + 2 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for at in (base, base + page + body):
        if libc.mprotect(ctypes.c_void_p(at), page, 0) != 0:  # PROT_NONE
            raise EmberError(f"EMBER_GUARD_PAGES: mprotect failed (errno "
                             f"{ctypes.get_errno()})")
    start = page + body - (-(-max(1, size) // ALIGN) * ALIGN)
    return np.frombuffer(region, np.uint8, count=max(1, size), offset=start)


def output_array(shape: Sequence[int], dtype: str) -> np.ndarray:
    """An uninitialized output array (guarded under EMBER_GUARD_PAGES)."""
    numpy = numpy_dtype(dtype)
    if not guard_pages():
        return np.empty(shape, numpy)
    nbytes = int(np.prod(shape, dtype=np.int64)) * numpy.itemsize
    return guarded_bytes(nbytes)[:nbytes].view(numpy).reshape(shape)


def aligned_bytes(size: int, zero: bool = True) -> np.ndarray:
    """A uint8 array of `size` bytes (at least 1, zeroed unless `zero` is False) whose data
    is 64-byte aligned."""
    if guard_pages():
        return guarded_bytes(size)
    raw = (np.zeros if zero else np.empty)(max(1, size) + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + max(1, size)]


def aligned_array(shape: Sequence[int], dtype: Any, like: np.ndarray | None = None
                  ) -> np.ndarray:
    """A zeroed array (or a copy of `like`) whose data is 64-byte aligned, as the runtime
    lays out the buffers its kernels share: timed on numpy's own (16-byte aligned) arrays,
    a kernel splits a cache line on every vector load and store."""
    numpy = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * numpy.itemsize
    array = aligned_bytes(nbytes, zero=like is None)[:nbytes].view(numpy).reshape(tuple(shape))
    if like is not None:
        array[...] = like
    return array


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
    elif isinstance(inputs, (str, bytes)) or not isinstance(inputs, (Sequence, np.ndarray)):
        raise ArgumentError(f"model '{model}': expected the inputs as a dict (name -> array) or "
                            f"a list of arrays in the order {names}, got "
                            f"{type(inputs).__name__}")
    else:
        arrays = list(inputs)
        if len(arrays) != len(specs):
            raise ArgumentError(f"model '{model}' takes {len(specs)} inputs {names}, got "
                                f"{len(arrays)}")
    checked = []
    for spec, array in zip(specs, arrays):
        want = numpy_dtype(spec.dtype)
        if not isinstance(array, np.ndarray):
            if np.isscalar(array) or isinstance(array, (list, tuple)):
                try:
                    array = np.asarray(array, dtype=want)
                except (ValueError, TypeError, OverflowError) as error:
                    raise ArgumentError(f"input '{spec.name}': cannot convert the given "
                                        f"{type(array).__name__} to {spec.dtype}: "
                                        f"{error}") from None
            else:
                raise ArgumentError(f"input '{spec.name}': expected a numpy array, got "
                                    f"{type(array).__name__}")
        if array.dtype != want:
            raise ArgumentError(f"input '{spec.name}': expected dtype {spec.dtype}, got "
                                f"{array.dtype}")
        if tuple(array.shape) != tuple(spec.shape):
            raise ArgumentError(f"input '{spec.name}': expected shape {tuple(spec.shape)}, "
                                f"got {tuple(array.shape)}")
        if guard_pages():
            copy = output_array(array.shape, spec.dtype)
            copy[...] = array
            array = copy
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
    nbytes = int(np.prod(spec.shape, dtype=np.int64)) * numpy_dtype(spec.dtype).itemsize
    return base[index:index + nbytes].view(numpy_dtype(spec.dtype)).reshape(spec.shape)


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
    try:
        _check_elf_headers(path)
    except EmberError:
        raise
    except (struct.error, OSError, ValueError, OverflowError) as error:
        raise CorruptFileError(f"'{path}' is damaged: its ELF headers are cut short or point "
                               f"outside the file ({error})") from None


def _check_elf_headers(path: Path) -> None:
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


def plan_sizes(plan: Mapping[str, Any], metadata_bytes: int) -> list[int]:
    """What the exporter records beside the code and the loader compares with the metadata:
    workspace, constant and metadata bytes, input and output counts, then each input's and
    output's bytes. A metadata edit that disagrees would let kernels write past buffers."""
    def nbytes(spec: Mapping[str, Any]) -> int:
        return int(np.prod(spec["shape"], dtype=np.int64)) * numpy_dtype(spec["dtype"]).itemsize

    return [int(plan["workspace_bytes"]), int(plan["constant_bytes"]), metadata_bytes,
            len(plan["inputs"]), len(plan["outputs"]),
            *(nbytes(s) for s in plan["inputs"]), *(nbytes(s) for s in plan["outputs"])]


def library_digest(data: bytes | memoryview, offset: int) -> bytes:
    """SHA-256 of a library file with the 32 digest bytes after the magic at `offset` zeroed:
    it covers the code, the constants and the metadata alike."""
    import hashlib

    view = memoryview(data)
    start = offset + len(CHECKSUM_MAGIC)
    digest = hashlib.sha256(view[:start])
    digest.update(bytes(32))
    digest.update(view[start + 32:])
    return digest.digest()


def _checksum_offset(data: bytes, what: str) -> int:
    elf = read_elf(data, what)
    if elf.type != ET_DYN:
        raise ArgumentError(f"{what} is not an ember library (not a shared object)")
    if CHECKSUM_SYMBOL not in elf.symbols:
        raise ArgumentError(f"{what} is not an ember library: no '{CHECKSUM_SYMBOL}' symbol "
                            "(not exported by ember, or by a version before checksums)")
    offset, size = elf.file_range(CHECKSUM_SYMBOL)
    if size != len(CHECKSUM_MAGIC) + 32 or data[offset:offset + 8] != CHECKSUM_MAGIC:
        raise CorruptFileError(f"{what} is damaged: its checksum record is not intact")
    return offset


def seal_library(path: str | os.PathLike[str]) -> None:
    """Write the checksum into a freshly linked library (export does this; a library linked
    on the target by link.sh is sealed by the same call)."""
    file = Path(path)
    data = file.read_bytes()
    offset = _checksum_offset(data, f"'{file}'")
    with file.open("r+b") as out:
        out.seek(offset + len(CHECKSUM_MAGIC))
        out.write(library_digest(data, offset))


def verify_library(path: Path) -> None:
    """CorruptFileError unless the file's checksum matches its content."""
    data = path.read_bytes()
    offset = _checksum_offset(data, f"'{path}'")
    stored = data[offset + len(CHECKSUM_MAGIC):offset + len(CHECKSUM_MAGIC) + 32]
    if stored == bytes(32):
        raise CorruptFileError(f"'{path}' was never sealed: after linking it on the target, "
                               "run ember.runtime.library.seal_library on it (link.sh does)")
    if library_digest(data, offset) != stored:
        raise CorruptFileError(f"'{path}' is damaged: its checksum does not match its content "
                               "(code, constants or metadata changed since it was exported); "
                               "export the model again")


def _check_plan(meta: dict[str, Any], lib: ctypes.CDLL, metadata_bytes: int, path: Path) -> None:
    """The plan's fields have the types the loader relies on, its slots lie inside their
    buffers, and its sizes are the ones the code was exported with."""
    plan = meta.get("plan")
    try:
        specs = [*plan["inputs"], *plan["outputs"]]
        for spec in specs:
            if (not isinstance(spec["name"], str) or not isinstance(spec["shape"], list)
                    or not all(isinstance(d, int) and d >= 0 for d in spec["shape"])):
                raise TypeError(f"tensor entry {spec!r}")
            numpy_dtype(spec["dtype"])
        if not isinstance(plan["name"], str):
            raise TypeError("plan name")
        sizes = plan_sizes(plan, metadata_bytes)
        sources = plan["output_sources"]
        if not isinstance(sources, list) or len(sources) != len(plan["outputs"]):
            raise TypeError("output_sources")
        for source, spec in zip(sources, plan["outputs"]):
            _check_source(source, spec, plan)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise CorruptFileError(f"'{path}': its metadata is not a valid plan ({type(error).__name__}"
                               f": {error})") from None
    try:
        recorded = ctypes.c_uint64 * len(sizes)
        code_sizes = list(recorded.in_dll(lib, SIZES_SYMBOL))
    except ValueError:
        raise CorruptFileError(f"'{path}': no '{SIZES_SYMBOL}' symbol") from None
    if code_sizes != sizes:
        raise CorruptFileError(f"'{path}': its metadata says sizes {sizes} (workspace, "
                               f"constants, metadata, counts, tensor bytes) but its code was "
                               f"exported for {code_sizes}; export the model again")


def _check_source(source: Any, spec: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
    kind, index = source["kind"], source["index"]
    if not isinstance(index, int) or index < 0:
        raise ValueError(f"output source {source!r}")
    nbytes = int(np.prod(spec["shape"], dtype=np.int64)) * numpy_dtype(spec["dtype"]).itemsize
    if kind in ("input", "output"):
        other = plan[kind + "s"][index]
        if other["shape"] != spec["shape"] or other["dtype"] != spec["dtype"]:
            raise ValueError(f"output source {source!r} does not match its output")
    elif kind in ("workspace", "constant"):
        if index + nbytes > int(plan[kind + "_bytes"]):
            raise ValueError(f"output source {source!r} lies past the end of the {kind}")
    else:
        raise ValueError(f"output source kind {kind!r}")


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
        verify_library(self.path)  # before dlopen maps (and runs initializers of) its code
        try:
            self._lib = ctypes.CDLL(str(self.path))
        except OSError as error:
            raise ArgumentError(f"cannot load '{self.path}' as a shared library: "
                                f"{error}") from None
        self.metadata = _read_metadata(self._lib, self.path)
        check_cpu_features(self.path, self.metadata)  # before any of its code runs
        for name in REQUIRED_SYMBOLS:
            _symbol(self._lib, name, self.path)
        _check_plan(self.metadata, self._lib, self._metadata_size(), self.path)
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

    def _metadata_size(self) -> int:
        return int(ctypes.c_uint64.in_dll(self._lib, METADATA_SIZE_SYMBOL).value)

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
        self._set_threads(check_thread_count(count))

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
        outputs = [output_array(s.shape, s.dtype) for s in self.outputs]
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
