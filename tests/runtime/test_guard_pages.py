"""EMBER_GUARD_PAGES=1 puts an inaccessible page right after every workspace, output and
input copy, so an out-of-bounds kernel access faults instead of corrupting the heap."""

import os
import subprocess
import sys

import numpy as np

SCRIPT = """
import ctypes, sys
import numpy as np
from ember.runtime.library import guarded_bytes
buf = guarded_bytes(100)
assert buf.ctypes.data % 64 == 0 and buf.size == 100 and not buf.any()
ctypes.memset(buf.ctypes.data, 1, 100)            # in bounds
assert buf.all()
print("in-bounds ok", flush=True)
ctypes.memset(buf.ctypes.data + 100, 1, int(sys.argv[1]))   # past the end
print("not caught", flush=True)
"""


def test_guarded_buffer_faults_past_its_end() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, "64"], capture_output=True, text=True,
                          timeout=60, cwd=os.getcwd())
    assert "in-bounds ok" in done.stdout and "not caught" not in done.stdout
    assert done.returncode == -11, (done.returncode, done.stderr)


def test_models_run_correctly_with_guard_pages() -> None:
    code = """
import numpy as np, ember
from ember.graph.ir import GraphBuilder
b = GraphBuilder("g")
x = b.input("x", (3, 5), "float32")
y, = b.add("Softmax", [x], {"axis": -1})
z, = b.add("Transpose", [y], {"perm": (1, 0)})
m = ember.compile(b.finish([z]), cache=False)
x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
e = np.exp(x - x.max(1, keepdims=True))
(out,) = m.run({"x": x})
assert np.allclose(out, (e / e.sum(1, keepdims=True)).T, rtol=1e-5), out
print("ok")
"""
    env = {**os.environ, "EMBER_GUARD_PAGES": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env, cwd=os.getcwd())
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
    assert np.__version__  # numpy only as the reference above
