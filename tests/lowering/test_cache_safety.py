"""A damaged or swapped kernel-cache entry is detected and rebuilt, and an object that does
not define its kernel is refused before the JIT links it (each used to segfault the first run).
The compiles run in a child process, so a regression crashes that child, not the test run."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ember.errors import CorruptFileError
from ember.lowering.cache import KernelCache
from ember.lowering.link import check_kernel_object

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF objects")

SETUP = """
import glob, os, sys
import numpy as np
import ember
from ember.graph.ir import GraphBuilder
from ember.lowering.cache import KernelCache

def graph(op):
    b = GraphBuilder("t")
    x = b.input("x", (4, 16), "float32")
    y, = b.add(op, [x])
    return b.finish([y])

root = sys.argv[1]
cache = KernelCache(root)
x = np.linspace(-2, 2, 64, dtype="float32").reshape(4, 16)
ember.compile(graph("Relu"), cache=cache)
relu_entry = glob.glob(root + "/kernels/*/*.obj")
ember.compile(graph("Tanh"), cache=cache)
tanh_entry = [p for p in glob.glob(root + "/kernels/*/*.obj") if p not in relu_entry]
relu_key = os.path.basename(relu_entry[0])[:-4]
tanh_payload = cache.get(os.path.basename(tanh_entry[0])[:-4])
"""

DAMAGE = {
    # another kernel's valid object, stored (with a valid digest) under this kernel's key
    "other_kernel": "cache.put(relu_key, tanh_payload)",
    # garbage with a valid digest
    "garbage": "cache.put(relu_key, os.urandom(4000))",
    # an ELF header followed by garbage
    "elf_garbage": "cache.put(relu_key, tanh_payload[:64] + os.urandom(len(tanh_payload) - 64))",
    # cut short: section headers past the end
    "truncated": "cache.put(relu_key, tanh_payload[:len(tanh_payload) // 2])",
    # the files of two entries exchanged (each keeps a digest of its own content)
    "swapped": "a, b = open(relu_entry[0], 'rb').read(), open(tanh_entry[0], 'rb').read(); "
               "open(relu_entry[0], 'wb').write(b); open(tanh_entry[0], 'wb').write(a)",
}

CHECK = """
fresh = KernelCache(root)
model = ember.compile(graph("Relu"), cache=fresh)
out = model.run({"x": x})[0]
assert np.array_equal(out, np.maximum(x, 0)), out
print("corrupted", fresh.corrupted, "compiled", model.stats.get("compiled"))
"""


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_rebuilt_not_run(damage: str, tmp_path) -> None:
    script = SETUP + DAMAGE[damage] + "\n" + CHECK
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=300, cwd=os.getcwd())
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert "corrupted 1" in done.stdout, done.stdout


def test_entry_under_another_key_is_a_miss(tmp_path) -> None:
    cache = KernelCache(tmp_path)
    cache.put("a" * 40, b"payload")
    assert cache.get("a" * 40) == b"payload"
    os.replace(cache.path("a" * 40), (tmp_path / "x"))
    cache.path("b" * 40).parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp_path / "x", cache.path("b" * 40))
    assert cache.get("b" * 40) is None and cache.corrupted == 1


def test_check_kernel_object_messages() -> None:
    from ember import te
    from ember.codegen.jit import emit_object

    a = te.placeholder((8,), "float32", name="a")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="b")
    import ember

    data = emit_object([ember.lower(te.create_schedule(b), [a, b], name="twice")], "llvm")
    check_kernel_object(data, ["twice"], "obj")
    with pytest.raises(CorruptFileError, match="obj: defines no function other"):
        check_kernel_object(data, ["other"], "obj")
    with pytest.raises(CorruptFileError, match="obj: not an ELF file"):
        check_kernel_object(b"\0" * 100, ["twice"], "obj")
    with pytest.raises(CorruptFileError, match="obj: .*(past the end|cut short)"):
        check_kernel_object(data[:len(data) // 2], ["twice"], "obj")
    rng = np.random.default_rng(0)
    for _ in range(200):  # random byte flips: refused or still well-formed, never a crash
        damaged = bytearray(data)
        for at in rng.integers(0, len(data), 4):
            damaged[at] = int(rng.integers(0, 256))
        try:
            check_kernel_object(bytes(damaged), ["twice"], "obj")
        except CorruptFileError:
            pass


def test_link_refuses_an_object_without_its_kernel() -> None:
    from ember.graph.ir import GraphBuilder

    import ember
    from ember.lowering.link import link

    b = GraphBuilder("t")
    x = b.input("x", (4, 16), "float32")
    y, = b.add("Relu", [x])
    model = ember.compile(b.finish([y]), cache=False)
    (symbol,) = model.plan.symbols
    with pytest.raises(CorruptFileError, match=f"object code of kernel '{symbol}': "):
        link(model.plan, {symbol: b"\x7fELF" + bytes(200)})


def test_cache_info_prune_clear_and_cli(tmp_path, monkeypatch, capsys) -> None:
    import time as _time

    from ember.cli import main
    from ember.errors import ArgumentError
    from ember.lowering.cache import max_cache_bytes

    cache = KernelCache(tmp_path)
    for k in range(4):
        cache.put(f"{k:040d}", bytes(1000))
        past = _time.time() - 100 + k
        os.utime(cache.path(f"{k:040d}"), (past, past))
    assert cache.get(f"{0:040d}") is not None  # used now: the newest
    assert cache.info() == (4, 4 * (1000 + 40))
    assert cache.prune(2 * 1040) == 2
    assert cache.get(f"{0:040d}") is not None and cache.get(f"{3:040d}") is not None
    assert cache.get(f"{1:040d}") is None and cache.get(f"{2:040d}") is None
    monkeypatch.setenv("EMBER_CACHE_MAX_MB", "lots")
    with pytest.raises(ArgumentError, match="EMBER_CACHE_MAX_MB must be a number"):
        max_cache_bytes()
    monkeypatch.setenv("EMBER_CACHE_MAX_MB", "1")
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    assert "entries:      2" in capsys.readouterr().out
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "removed 2 kernels" in capsys.readouterr().out and cache.info() == (0, 0)
