"""Executor pieces: the AOT entry point, address_of, plans as JSON, the kernel disk cache."""

import os

import numpy as np
import pytest

import ember
from ember import dtype as dt
from ember.codegen.llvm import codegen_llvm
from ember.errors import CodegenError, EmberError
from ember.graph.ir import GraphBuilder
from ember.lowering.link import MAIN_SYMBOL, link, main_function
from ember.lowering.cache import KernelCache, cache_key, default_cache_dir
from ember.runtime.executor import CompiledModel, aligned_bytes
from ember.runtime.plan import ExecPlan, KernelCall, Slot, TensorSpec
from ember.tir.expr import Call, IntImm
from ember.tir.function import Buffer, PrimFunc
from ember.tir.stmt import Evaluate


def _plan() -> ExecPlan:
    call = KernelCall("g0", "k_a", (Slot("input", 0), Slot("constant", 64), Slot("workspace", 0)),
                      ("float32",) * 3, ((4,), (4,), (4,)), "add", "BROADCAST",
                      ("x", "w", "t"), 2)
    call2 = KernelCall("g1", "k_b", (Slot("workspace", 0), Slot("output", 0)),
                       ("float32",) * 2, ((4,), (4,)), "relu", "ELEMWISE", ("t", "y"), 1)
    return ExecPlan("m", (TensorSpec("x", (4,), "float32"),), (TensorSpec("y", (4,), "float32"),),
                    (Slot("output", 0),), (call, call2), 64, 128, 64, 64)


def test_plan_json_round_trip():
    plan = _plan()
    assert ExecPlan.from_json(plan.to_json()) == plan
    assert plan.symbols == ["k_a", "k_b"]


def test_main_function_calls_every_kernel_in_order():
    func = main_function(_plan())
    assert func.name == MAIN_SYMBOL
    assert [p.name for p in func.params] == ["in0", "out0", "workspace", "constants"]
    text = str(codegen_llvm([func], "llvm"))
    assert text.index('call i32 @"k_a"') < text.index('call i32 @"k_b"')
    assert "getelementptr inbounds i8, ptr %\"constants\", i64 64" in text


def test_address_of_rejects_non_loads():
    buf = Buffer("b", (IntImm(4, dt.int64),), dt.float32)
    bad = Call(dt.handle, "address_of", (IntImm(3, dt.int32),))
    func = PrimFunc("f", (buf,), Evaluate(Call(dt.int32, "g", (bad,))))
    with pytest.raises(CodegenError, match="address_of takes one scalar load"):
        codegen_llvm([func], "llvm")


def test_link_reports_missing_kernels():
    with pytest.raises(CodegenError, match="no object code for kernel"):
        link(_plan(), {"k_a": b""}, "llvm")


def test_aligned_bytes():
    for size in (0, 1, 100):
        a = aligned_bytes(size)
        assert a.ctypes.data % 64 == 0 and a.size == max(1, size) and not a.any()


def _chain():
    b = GraphBuilder("chain")
    x = b.input("x", (2, 40), "float32")
    w = b.constant("w", np.linspace(-1, 1, 80, dtype="float32").reshape(2, 40))
    y, = b.add("Add", [x, w])
    z, = b.add("Relu", [y])
    u, = b.add("Add", [z, x])
    return b.finish([u]), w.data


def test_trace_and_per_group_calls_match_numpy():
    graph, w = _chain()
    model = ember.compile(graph, opt_level=0, cache=False)
    x = np.random.default_rng(0).standard_normal((2, 40)).astype("float32")
    trace = model.trace({"x": x})
    assert [group for group, _, _ in trace] == [c.group for c in model.plan.calls]
    y = x + w
    want = [y, np.maximum(y, 0), np.maximum(y, 0) + x]
    for (_, _, got), ref in zip(trace, want):
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    np.testing.assert_allclose(model(x)[0], want[-1], rtol=1e-6)


def test_constant_blob_too_small_is_rejected():
    graph, _ = _chain()
    model = ember.compile(graph, cache=False)
    with pytest.raises(EmberError, match="constant blob has 1 bytes"):
        CompiledModel(model.plan, model.objects, np.zeros(1, np.uint8), linked=object())


def test_cache_round_trip_and_corruption(tmp_path):
    cache = KernelCache(tmp_path)
    assert cache.get("ab" * 20) is None and cache.misses == 1
    cache.put("ab" * 20, b"payload")
    assert cache.get("ab" * 20) == b"payload" and cache.hits == 1
    path = cache.path("ab" * 20)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # one flipped bit in the payload
    path.write_bytes(bytes(raw))
    assert cache.get("ab" * 20) is None and cache.corrupted == 1
    path.write_bytes(b"EMBERKO1")  # header only
    assert cache.get("ab" * 20) is None and cache.corrupted == 2
    cache.put("ab" * 20, b"again")
    assert cache.get("ab" * 20) == b"again"
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".obj"]
    assert leftovers == []


def test_cache_key_and_directory(monkeypatch, tmp_path):
    assert cache_key("k", "llvm") != cache_key("k", "llvm -mcpu=skylake")
    assert cache_key("k", "llvm") == cache_key("k", "llvm")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("EMBER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "ember"


def test_unwritable_cache_is_skipped(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = KernelCache(blocker)
    cache.put("cd" * 20, b"x")  # cannot create directories under a file: silently skipped
    assert cache.get("cd" * 20) is None
    assert os.listdir(tmp_path) == ["file"]
