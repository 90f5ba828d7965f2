"""Seeded fuzzing of ember: mutated ONNX models, abused run calls, damaged libraries and
kernel caches, random target strings.

    python benchmarks/fuzz.py --minutes 30          # the long run; counts per outcome
    python benchmarks/fuzz.py --cases 300 --seed 0  # a fixed, short run (as CI does)
    python benchmarks/fuzz.py --family target --case 505002393   # replay one case

Each case is a (family, seed) pair; a worker process runs cases one after another and
reports each outcome on a pipe, so a case that kills the process (a segfault, an LLVM fatal
error, os._exit) is seen as a death of that case and the next worker carries on after it;
a case that runs past its time-out is killed the same way. Outcomes:

  match        ember ran and agreed with onnxruntime (or the reference the family states)
  ember_error  a clean EmberError subclass, onnxruntime rejected the input too or ran it
  accepted     ember ran a model onnxruntime rejects (reported, not a failure)
  nan_policy   equal to onnxruntime wherever neither is nan (a nan through a max reduction
               survives or not by comparison order, in both; reported, not a failure)
  mismatch     ember ran and disagreed with the reference          -- failure
  internal     an exception that is not an EmberError escaped      -- failure
  death        the process died                                    -- failure
  timeout      the case ran past its time-out                      -- failure
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

FAILURES = ("mismatch", "internal", "death", "timeout")
FAMILIES = ("attribute", "dims", "dtype", "structure", "bytes", "initializer", "run_call",
            "library", "target", "cache")


# ------------------------------------------------------------------------------------------
# base models: small, fast to compile, covering the common op kinds
def base_models() -> list[Any]:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    rng = np.random.default_rng(0)

    def init(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Any:
        values = rng.standard_normal(shape).astype(dtype) if dtype.startswith("float") else \
            rng.integers(0, 3, shape).astype(dtype)
        return onnx.numpy_helper.from_array(values, name)

    def model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any]) -> Any:
        graph = h.make_graph(nodes, "fuzz", inputs, outputs, initializer=inits)
        return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])

    vi = h.make_tensor_value_info
    conv = model([h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3], strides=[1, 1]),
                  h.make_node("Relu", ["c"], ["r"], name="relu"),
                  h.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2])],
                 [vi("x", T.FLOAT, [1, 3, 8, 8])], [vi("y", T.FLOAT, [1, 4, 4, 4])],
                 [init("w", (4, 3, 3, 3)), init("b", (4,))])
    dense = model([h.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
                   h.make_node("Add", ["m", "b"], ["a"], name="add"),
                   h.make_node("Softmax", ["a"], ["y"], name="softmax", axis=-1)],
                  [vi("x", T.FLOAT, [2, 8])], [vi("y", T.FLOAT, [2, 5])],
                  [init("w", (8, 5)), init("b", (5,))])
    shape = model([h.make_node("Gather", ["x", "i"], ["g"], name="gather", axis=0),
                   h.make_node("Concat", ["g", "g"], ["c"], name="concat", axis=1),
                   h.make_node("Reshape", ["c", "s"], ["r"], name="reshape"),
                   h.make_node("Transpose", ["r"], ["y"], name="transpose", perm=[1, 0])],
                  [vi("x", T.FLOAT, [4, 6])], [vi("y", T.FLOAT, [6, 6])],
                  [onnx.numpy_helper.from_array(np.array([0, 2, 3], np.int64), "i"),
                   onnx.numpy_helper.from_array(np.array([6, 6], np.int64), "s")])
    reduce = model([h.make_node("ReduceMean", ["x"], ["m"], name="mean", axes=[1], keepdims=1),
                    h.make_node("Sub", ["x", "m"], ["d"], name="sub"),
                    h.make_node("Mul", ["d", "d"], ["q"], name="square"),
                    h.make_node("ReduceSum", ["q", "axes"], ["y"], name="sum", keepdims=0)],
                   [vi("x", T.FLOAT, [3, 7])], [vi("y", T.FLOAT, [3])],
                   [onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")])
    return [conv, dense, shape, reduce]


# ------------------------------------------------------------------------------------------
# mutations: each takes a fresh copy of a base model and a seeded generator
_WEIRD_INTS = [0, -1, -2, 1, 2, 3, 7, 1 << 20, 1 << 31, -(1 << 31), 1 << 62]
_WEIRD_FLOATS = [0.0, -1.0, 0.5, 1e30, -1e30, float("nan"), float("inf")]


def _weird_value(rng: np.random.Generator) -> Any:
    kind = rng.integers(0, 5)
    if kind == 0:
        return int(rng.choice(_WEIRD_INTS))
    if kind == 1:
        return float(rng.choice(_WEIRD_FLOATS))
    if kind == 2:
        return [int(rng.choice(_WEIRD_INTS)) for _ in range(rng.integers(0, 5))]
    if kind == 3:
        return "nonsense"
    return []


def mutate_attribute(model: Any, rng: np.random.Generator) -> None:
    from onnx import helper as h

    node = model.graph.node[rng.integers(0, len(model.graph.node))]
    if node.attribute and rng.random() < 0.7:
        index = int(rng.integers(0, len(node.attribute)))
        name = node.attribute[index].name
        del node.attribute[index]
    else:
        name = str(rng.choice(["axis", "perm", "pads", "strides", "kernel_shape", "keepdims",
                               "group", "dilations", "auto_pad", "alpha", "split"]))
        for k, a in enumerate(node.attribute):
            if a.name == name:
                del node.attribute[k]
                break
    value = _weird_value(rng)
    if value == []:
        return  # the attribute stays deleted
    node.attribute.append(h.make_attribute(name, value))


def mutate_dims(model: Any, rng: np.random.Generator) -> None:
    value = model.graph.input[0] if rng.random() < 0.7 else model.graph.output[0]
    dims = value.type.tensor_type.shape.dim
    if rng.random() < 0.2 and len(dims):
        del dims[int(rng.integers(0, len(dims)))]
        return
    if rng.random() < 0.1:
        dims.add().dim_value = int(rng.integers(1, 4))
        return
    dim = dims[int(rng.integers(0, len(dims)))]
    choice = rng.integers(0, 4)
    if choice == 0:
        dim.dim_param = "batch"
    elif choice == 1:
        dim.ClearField("dim_value")
        dim.ClearField("dim_param")
    else:
        dim.dim_value = int(rng.choice([0, -1, -7, 1, 2, 5, 1 << 31, 1 << 40]))


def mutate_dtype(model: Any, rng: np.random.Generator) -> None:
    value = model.graph.input[0] if rng.random() < 0.6 else model.graph.output[0]
    value.type.tensor_type.elem_type = int(rng.choice([0, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12,
                                                       16, 17, 99]))


def mutate_structure(model: Any, rng: np.random.Generator) -> None:
    graph = model.graph
    choice = rng.integers(0, 8)
    if choice == 0:
        del graph.node[int(rng.integers(0, len(graph.node)))]
    elif choice == 1:
        del graph.output[:]
    elif choice == 2:
        del graph.node[:]
    elif choice == 3:
        node = graph.node[int(rng.integers(0, len(graph.node)))]
        if node.input:
            node.input[int(rng.integers(0, len(node.input)))] = str(
                rng.choice(["", "undefined", node.output[0]]))
    elif choice == 4:
        node = graph.node[int(rng.integers(0, len(graph.node)))]
        node.op_type = str(rng.choice(["NoSuchOp", "Relu", "Identity", "Split", "If", ""]))
    elif choice == 5:
        graph.node.append(graph.node[0])  # a value defined twice
    elif choice == 6:
        graph.output[0].name = str(rng.choice(["", "x", "missing"]))
    else:
        node = graph.node[int(rng.integers(0, len(graph.node)))]
        node.output.append(node.output[0])


def mutate_initializer(model: Any, rng: np.random.Generator) -> None:
    if not model.graph.initializer:
        return mutate_structure(model, rng)
    tensor = model.graph.initializer[int(rng.integers(0, len(model.graph.initializer)))]
    choice = rng.integers(0, 5)
    raw = tensor.raw_data
    if choice == 0 and raw:
        tensor.raw_data = raw[:int(rng.integers(0, len(raw)))]
    elif choice == 1:
        tensor.raw_data = raw + bytes(int(rng.integers(1, 64)))
    elif choice == 2 and tensor.dims:
        tensor.dims[int(rng.integers(0, len(tensor.dims)))] = int(rng.choice([0, -1, 1 << 33]))
    elif choice == 3:
        tensor.data_type = int(rng.choice([0, 6, 7, 9, 10, 11, 99]))
    else:
        tensor.name = "x"  # an initializer shadowing the graph input
    return None


MUTATIONS: dict[str, Callable[[Any, np.random.Generator], None]] = {
    "attribute": mutate_attribute, "dims": mutate_dims, "dtype": mutate_dtype,
    "structure": mutate_structure, "initializer": mutate_initializer,
}


# ------------------------------------------------------------------------------------------
# one case, inside a worker
def _feeds(model: Any, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
    from onnx import helper

    feeds = {}
    names = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in names:
            continue
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim]
        if any(d < 0 or d > 1 << 16 for d in dims):
            return None
        try:
            dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
        except (KeyError, ValueError, TypeError):
            return None
        feeds[vi.name] = (rng.standard_normal(dims) * 3).astype(dtype)
    return feeds


def _reference(data: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds)
    except Exception:  # noqa: BLE001 (onnxruntime rejects the model or the inputs)
        return None


def _input_type(spec: Any) -> tuple[tuple[int, ...], Any]:
    """(shape, dtype) to feed an input: a compiled model's TensorSpec, or the ONNX ValueInfo
    a SpecializedModel lists (model dims left unknown run at 1)."""
    import onnx

    if isinstance(spec, onnx.ValueInfoProto):
        tensor = spec.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                      for d in tensor.shape.dim)
        return shape, onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    return tuple(spec.shape), spec.dtype


def _agree(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return False
        if g.dtype.kind in "fc":
            # float16: ember and onnxruntime may each round once or per operation (2 ulps)
            rtol, atol = (2e-3, 1e-3) if g.dtype == np.float16 else (1e-3, 1e-4)
            if not np.allclose(g.astype("float64"), w.astype("float64"), rtol=rtol, atol=atol,
                               equal_nan=True):
                return False
        elif not np.array_equal(g, w):
            return False
    return True


def model_case(family: str, seed: int, workdir: str) -> tuple[str, str]:
    import onnx

    rng = np.random.default_rng(seed)
    bases = base_models()
    model = bases[int(rng.integers(0, len(bases)))]
    if family == "bytes":
        data = bytearray(model.SerializeToString())
        for at in rng.integers(0, len(data), int(rng.integers(1, 6))):
            data[int(at)] = int(rng.integers(0, 256))
        data = bytes(data)
        try:
            model = onnx.load_from_string(data)
        except Exception:  # noqa: BLE001 (protobuf refuses the bytes: give ember the file)
            model = None
    else:
        MUTATIONS[family](model, rng)
        data = model.SerializeToString()
    path = os.path.join(workdir, f"case{seed}.onnx")
    with open(path, "wb") as out:
        out.write(data)
    return compile_and_compare(path, data, rng, parsed=model is not None,
                               cache=os.path.join(workdir, "cache"))


def compile_and_compare(model: Any, data: bytes, rng: np.random.Generator, parsed: bool = True,
                        **options: Any) -> tuple[str, str]:
    """Compile `model` (`data`: its bytes) with ember.compile(**options), run it on seeded
    inputs and compare with onnxruntime: the outcome and its detail."""
    import ember
    from ember.errors import EmberError

    try:
        compiled = ember.compile(model, **options)
        feeds = {spec.name: (rng.standard_normal(shape) * 3).astype(dtype)
                 for spec in compiled.inputs for shape, dtype in [_input_type(spec)]}
        got = compiled.run(feeds)
    except EmberError as error:
        return "ember_error", f"{type(error).__name__}: {error}"[:300]
    if not parsed:
        return "accepted", "ember ran bytes onnx cannot parse"
    want = _reference(data, feeds)
    if want is None:
        return "accepted", "onnxruntime rejects this model or its inputs"
    if _agree(got, want):
        return "match", ""
    if _agree(_masked(got, want), _masked(want, got)):
        # equal wherever both are numbers: where nan meets a max reduction (MaxPool,
        # ReduceMax), whether it survives depends on the order of comparisons, in ember and in
        # onnxruntime's vector code alike (ONNX leaves it open)
        return "nan_policy", "differs only where one side is nan"
    return "mismatch", f"ember {[g.shape for g in got]} vs onnxruntime {[w.shape for w in want]}"


def _masked(a: list[np.ndarray], b: list[np.ndarray]) -> list[np.ndarray]:
    """`a` with nan wherever `a` or `b` is nan (same shapes assumed; else `a`)."""
    out = []
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype.kind != "f" or y.dtype.kind != "f":
            out.append(x)
            continue
        out.append(np.where(np.isnan(x) | np.isnan(y), np.nan, x))
    return out


def half_model() -> Any:
    """A float16 elementwise net: the code paths AVX512-FP16 changes."""
    from onnx import TensorProto as T
    from onnx import helper as h

    vi = h.make_tensor_value_info
    graph = h.make_graph([h.make_node("Add", ["x", "x"], ["a"], name="add"),
                          h.make_node("Mul", ["a", "x"], ["m"], name="mul"),
                          h.make_node("Relu", ["m"], ["y"], name="relu")], "half",
                         [vi("x", T.FLOAT16, [4, 16])], [vi("y", T.FLOAT16, [4, 16])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


# target strings: CPUs (this one, others with more or fewer features, 32-bit ones, unknown),
# features on and off, options and triples; each must compile and match, or be refused
_CPUS = ["", "", "znver4", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "sapphirerapids",
         "graniterapids", "skylake-avx512", "icelake-server", "haswell", "i386", "pentium4",
         "generic", "nonsense", "cortex-a72"]
_FEATURES = ["+avx512fp16", "-avx512f", "-avx2", "-avx", "+amx-tile", "-fma", "+avx512bf16",
             "-sse4.2", "-sse2", "-sse", "+sse4a", "+avxvnni", "-avx512bw", "+avx512vnni",
             "+bogus", "-x87", "avx2", "+"]
_OPTIONS = ["-num-cores=1", "-num-cores=3", "-num-cores=0", "-num-cores=-1",
            "-num-cores=99999999999", "-fast-math", "-opt-level=1", "-opt-level=9",
            "-mtriple=x86_64-linux-gnu", "-mtriple=aarch64-linux-gnu", "-mtriple=i686-linux-gnu",
            "-mtriple=nonsense", "-foo=bar", "-mcpu", "--mcpu=znver4"]


def random_target(rng: np.random.Generator) -> str:
    """A target string from the lists above (sometimes not even well-formed)."""
    parts = ["llvm" if rng.random() < 0.85 else str(rng.choice(["c", "wasm", "nonsense"]))]
    cpu = str(rng.choice(_CPUS))
    if cpu:
        parts.append(f"-mcpu={cpu}")
    if rng.random() < 0.5:
        count = int(rng.integers(1, 4))
        parts.append("-mattr=" + ",".join(str(f) for f in rng.choice(_FEATURES, count)))
    if rng.random() < 0.4:
        parts.append(str(rng.choice(_OPTIONS)))
    return " ".join(parts)


def target_case(seed: int, workdir: str) -> tuple[str, str]:
    """A base model compiled for a random target string and run here: it must match
    onnxruntime or be refused with an EmberError (code this CPU cannot run is refused too)."""
    rng = np.random.default_rng(seed)
    models = base_models() + [half_model()]
    model = models[int(rng.integers(0, len(models)))]
    target = random_target(rng)
    outcome, detail = compile_and_compare(model, model.SerializeToString(), rng, target=target,
                                          cache=os.path.join(workdir, "cache"))
    return outcome, f"target {target!r}: {detail}"[:400]


def run_call_case(seed: int, workdir: str, state: dict[str, Any]) -> tuple[str, str]:
    import ember
    from ember.errors import EmberError
    from ember.runtime import threadpool

    rng = np.random.default_rng(seed)
    if "dense" not in state:
        state["dense"] = ember.compile(base_models()[1], cache=os.path.join(workdir, "cache"))
    model = state["dense"]
    x = rng.standard_normal((2, 8)).astype("float32")
    abuses: list[Callable[[], Any]] = [
        lambda: model.run({"x": x.astype("float64")}),
        lambda: model.run({"x": x[:1]}),
        lambda: model.run({"x": "a string"}),
        lambda: model.run({"x": [[1, 2], [3]]}),
        lambda: model.run({"x": None}),
        lambda: model.run(None),
        lambda: model.run(7),
        lambda: model.run("x"),
        lambda: model.run({"y": x}),
        lambda: model.run({"x": x, "extra": x}),
        lambda: model.run([x, x]),
        lambda: model.run([]),
        lambda: model.run({"x": object()}),
        lambda: model.run({"x": x.reshape(8, 2)}),
        lambda: model.run({"x": np.array(x, dtype=object)}),
        lambda: threadpool.set_num_threads(int(rng.choice([0, -1, 1 << 40]))),
        lambda: threadpool.set_num_threads(True),
        lambda: threadpool.set_num_threads(1.5),
    ]
    # valid but unusual: must run and equal the plain call
    unusual: list[Callable[[], np.ndarray]] = [
        lambda: np.asfortranarray(x),
        lambda: np.repeat(x, 2, axis=1)[:, ::2],  # a strided view equal to x
        lambda: x.tolist(),
        lambda: _readonly(x),
    ]
    k = int(rng.integers(0, len(abuses) + len(unusual)))
    try:
        if k < len(abuses):
            abuses[k]()
            return "accepted", f"abuse {k} ran"
        given = unusual[k - len(abuses)]()
        got = model.run({"x": given})
        want = model.run({"x": np.ascontiguousarray(x)})
        return ("match", "") if _agree(got, want) else ("mismatch", f"unusual input {k}")
    except EmberError as error:
        return ("ember_error" if k < len(abuses) else "mismatch"), str(error)[:300]
    finally:
        threadpool.set_num_threads(1)


def _readonly(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    y.setflags(write=False)
    return y


def library_case(seed: int, workdir: str, state: dict[str, Any]) -> tuple[str, str]:
    import ember
    from ember.errors import EmberError
    from ember.runtime.library import load_library

    rng = np.random.default_rng(seed)
    if "library" not in state:
        path = os.path.join(workdir, "base.so")
        ember.export_library(base_models()[1], path, cache=os.path.join(workdir, "cache"))
        with open(path, "rb") as file:
            state["library"] = file.read()
    data = bytearray(state["library"])
    if rng.random() < 0.3:
        data = data[:int(rng.integers(0, len(data)))]
    else:
        for at in rng.integers(0, len(data), int(rng.integers(1, 4))):
            data[int(at)] ^= int(rng.integers(1, 256))
    path = os.path.join(workdir, f"damaged{seed}.so")
    with open(path, "wb") as out:
        out.write(bytes(data))
    try:
        lib = load_library(path)
        lib.run({"x": rng.standard_normal((2, 8)).astype("float32")})
    except EmberError as error:
        return "ember_error", f"{type(error).__name__}: {error}"[:300]
    return "mismatch", "a damaged library loaded and ran"


def cache_case(seed: int, workdir: str, state: dict[str, Any]) -> tuple[str, str]:
    """A base model compiled from a kernel cache whose entries were damaged (bytes flipped,
    cut, emptied, swapped between kernels, or replaced by another kernel's object or by
    garbage under a recomputed digest): it must rebuild what it cannot trust and match
    onnxruntime, or fail with an EmberError."""
    import shutil

    from ember.lowering import cache as kernel_cache

    rng = np.random.default_rng(seed)
    models = base_models()
    index = int(rng.integers(0, len(models)))
    pristine = os.path.join(workdir, f"pristine-cache{index}")
    if pristine not in state:
        import ember

        ember.compile(models[index], cache=pristine)
        state[pristine] = sorted(kernel_cache.KernelCache(pristine).entries())
    entries: list[Any] = state[pristine]
    root = os.path.join(workdir, f"damaged-cache{seed}")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(pristine, root)
    damaged = [os.path.join(root, os.path.relpath(e, pristine)) for e in entries]
    for _ in range(int(rng.integers(1, 3))):
        _damage_entry(damaged, rng, entries)
    try:
        return compile_and_compare(models[index], models[index].SerializeToString(), rng,
                                   cache=root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _damage_entry(paths: list[str], rng: np.random.Generator,
                  originals: Sequence[str] | None = None) -> None:
    """One kind of damage to one of the cache entries at `paths`. A payload re-signed under a
    recomputed digest is a whole object of another entry (or garbage, or a cut of one) taken
    from `originals` (the undamaged entries, same order), never bytes an earlier damage
    flipped: flipped code under a valid digest is a different valid program, which no loader
    can tell from the compiler's (the digest is what tells flipped bytes)."""
    from ember.lowering import cache as kernel_cache

    path = paths[int(rng.integers(0, len(paths)))]
    other = paths[int(rng.integers(0, len(paths)))]
    with open(path, "rb") as file:
        data = bytearray(file.read())
    header = len(kernel_cache.MAGIC) + 32
    key = os.path.basename(path)[:-len(".obj")]
    choice = int(rng.integers(0, 7))
    if not data:
        choice = 3  # emptied already: another kernel's entry goes there
    if choice == 0:  # flipped bytes anywhere
        for at in rng.integers(0, len(data), int(rng.integers(1, 8))):
            data[int(at)] ^= int(rng.integers(1, 256))
    elif choice == 1:  # cut short
        data = data[:int(rng.integers(0, len(data)))]
    elif choice == 2:  # emptied
        data = bytearray()
    elif choice == 3:  # another kernel's entry as it is
        with open(other, "rb") as file:
            data = bytearray(file.read())
    else:  # a payload under this key's own, recomputed digest: the digest cannot tell
        source = other if originals is None else originals[paths.index(other)]
        with open(source, "rb") as file:
            payload = file.read()[header:]
        if choice == 5:
            payload = rng.bytes(int(rng.integers(1, 4096)))
        elif choice == 6:
            payload = payload[:int(rng.integers(0, max(1, len(payload))))]
        data = bytearray(kernel_cache.MAGIC + kernel_cache._digest(key, payload) + payload)
    with open(path, "wb") as out:
        out.write(bytes(data))


def run_case(family: str, seed: int, workdir: str, state: dict[str, Any]) -> tuple[str, str]:
    try:
        if family == "selftest_crash":  # the harness's own check: a segfault is a death
            import ctypes

            ctypes.string_at(0)
        if family == "selftest_internal":
            raise KeyError("selftest")
        if family == "run_call":
            return run_call_case(seed, workdir, state)
        if family == "library":
            return library_case(seed, workdir, state)
        if family == "target":
            return target_case(seed, workdir)
        if family == "cache":
            return cache_case(seed, workdir, state)
        return model_case(family, seed, workdir)
    except Exception as error:  # noqa: BLE001 (the point: anything but an EmberError)
        where = traceback.extract_tb(error.__traceback__)[-1]
        return "internal", (f"{type(error).__name__}: {error} "
                            f"({os.path.basename(where.filename)}:{where.lineno})")[:400]


def worker_main() -> None:
    """Read `family seed` lines on stdin; write one JSON outcome line per case."""
    import warnings

    warnings.filterwarnings("ignore")
    workdir = sys.argv[2]
    state: dict[str, Any] = {}
    for line in sys.stdin:
        family, seed = line.split()
        outcome, detail = run_case(family, int(seed), workdir, state)
        print(json.dumps([family, int(seed), outcome, detail]), flush=True)


# ------------------------------------------------------------------------------------------
# the driver: cases through restartable workers
def cases(count: int, seed: int, families: Sequence[str] = FAMILIES
          ) -> Iterator[tuple[str, int]]:
    """`count` cases, families in turn, seeds derived from `seed`."""
    for k in range(count):
        yield families[k % len(families)], seed * 1_000_003 + k


def run(todo: Iterable[tuple[str, int]], timeout: float = 60.0, deadline: float | None = None,
        workdir: str | None = None) -> list[tuple[str, int, str, str]]:
    """Outcomes of `todo` (family, seed, outcome, detail), in order; cases are handed to a
    worker one at a time, and a worker that dies or hangs is replaced."""
    own = tempfile.TemporaryDirectory(prefix="ember-fuzz-") if workdir is None else None
    root = workdir or own.name  # type: ignore[union-attr]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    # guard pages: a kernel writing past a buffer faults, counted as a death
    env = {**os.environ, "EMBER_NUM_THREADS": "1", "PYTHONPATH": path, "EMBER_GUARD_PAGES": "1"}
    results: list[tuple[str, int, str, str]] = []
    worker: subprocess.Popen[str] | None = None
    try:
        for family, seed in todo:
            if deadline is not None and time.monotonic() > deadline:
                break
            if worker is None:
                worker = subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--worker", root],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    text=True, env=env, start_new_session=True)
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write(f"{family} {seed}\n")
            worker.stdin.flush()
            ready, _, _ = select.select([worker.stdout], [], [], timeout)
            line = worker.stdout.readline() if ready else None
            if line:
                results.append(tuple(json.loads(line)))  # type: ignore[arg-type]
                continue
            worker.kill()
            code = worker.wait()
            outcome = "timeout" if line is None else "death"
            results.append((family, seed, outcome, f"exit {code}"))
            worker = None
    finally:
        if worker is not None:
            worker.kill()
            worker.wait()
        if own is not None:
            own.cleanup()
    return results


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main()
        return 0
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n")[:2]))
    parser.add_argument("--minutes", type=float, default=None, help="run for this long")
    parser.add_argument("--cases", type=int, default=300, help="cases (without --minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--show", type=int, default=20, help="failures to print")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated families (default: all of {', '.join(FAMILIES)})")
    parser.add_argument("--failures", metavar="FILE.jsonl",
                        help="write every failure (and accepted case) as a JSON line")
    parser.add_argument("--case", type=int, metavar="SEED",
                        help="replay the one case with this seed (a failure's seed), with "
                             "--family")
    parser.add_argument("--family", help="the family of the case --case replays")
    parser.add_argument("--show-accepted", action="store_true",
                        help="also print the models ember ran and onnxruntime rejected")
    args = parser.parse_args()
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes else None
    count = 10**7 if args.minutes else args.cases
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    if args.case is not None:
        if args.family not in FAMILIES:
            parser.error(f"--case needs --family, one of {', '.join(FAMILIES)}")
        families = [args.family]
        todo: Iterable[tuple[str, int]] = [(args.family, args.case)]
    else:
        todo = cases(count, args.seed, families)
    results = run(todo, args.timeout, deadline)
    counts = Counter(r[2] for r in results)
    by_family = Counter((r[0], r[2]) for r in results)
    print(f"{len(results)} cases in {time.monotonic() - start:.0f} s (seed {args.seed})")
    for outcome in ("match", "ember_error", "accepted", "nan_policy", *FAILURES):
        print(f"  {outcome:12s} {counts.get(outcome, 0)}")
    for family in families:
        row = ", ".join(f"{o} {n}" for (f, o), n in sorted(by_family.items()) if f == family)
        print(f"  {family:12s} {row}")
    shown = FAILURES + (("accepted",) if args.show_accepted else ())
    failures = [r for r in results if r[2] in shown]
    if args.failures:
        with open(args.failures, "w") as out:
            for r in results:
                if r[2] in FAILURES + ("accepted",):
                    out.write(json.dumps(r) + "\n")
    for family, seed, outcome, detail in failures[:args.show]:
        print(f"FAIL {outcome} {family} seed {seed}: {detail}")
    return 1 if any(r[2] in FAILURES for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
