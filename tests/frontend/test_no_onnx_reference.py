"""ember computes every result, folded constant and shape itself: onnx's reference evaluator
(which wrote the expected outputs of ONNX's node tests) is never used at compile or run time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import ember

EMBER_DIR = os.path.dirname(os.path.abspath(ember.__file__))
ROOT = os.path.dirname(EMBER_DIR)

# a model whose shapes come from constant subgraphs (Shape -> Gather -> Concat -> Reshape,
# Range and Expand of computed sizes, an If on a computed condition) and whose second
# output depends on initializers only, so that ember must compute all of it itself
SCRIPT = textwrap.dedent("""
    import importlib.abc
    import sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "onnx.reference" or name.startswith("onnx.reference."):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocker())

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    import ember
    from ember import onnx_backend

    I64, F = TensorProto.INT64, TensorProto.FLOAT

    def const(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F, [12])])
    else_g = helper.make_graph([helper.make_node("Abs", ["r"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F, [12])])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["d0"], axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["d1"], axis=0),
        helper.make_node("Gather", ["shape", "i2"], ["d2"], axis=0),
        helper.make_node("Mul", ["d1", "d2"], ["inner"]),
        helper.make_node("Unsqueeze", ["d0", "axes"], ["d0_1"]),
        helper.make_node("Unsqueeze", ["inner", "axes"], ["inner_1"]),
        helper.make_node("Concat", ["d0_1", "minus_one"], ["new_shape"], axis=0),
        helper.make_node("Reshape", ["x", "new_shape"], ["flat"]),
        helper.make_node("Range", ["zero", "inner", "one"], ["steps"]),
        helper.make_node("Cast", ["steps"], ["r"], to=F),
        helper.make_node("Greater", ["d0", "one"], ["cond"]),
        helper.make_node("If", ["cond"], ["picked"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Concat", ["d0_1", "inner_1"], ["full"], axis=0),
        helper.make_node("Expand", ["picked", "full"], ["wide"]),
        helper.make_node("Add", ["flat", "wide"], ["y"]),
        helper.make_node("Mul", ["a", "b"], ["z"]),
    ]
    inits = [const("i0", np.int64(0)), const("i1", np.int64(1)), const("i2", np.int64(2)),
             const("axes", [0]), const("minus_one", [-1]), const("zero", np.int64(0)),
             const("one", np.int64(1)),
             const("a", np.arange(6, dtype=np.float32).reshape(2, 3)),
             const("b", np.full((2, 3), 0.5, np.float32))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", F, [2, 12]),
                               helper.make_tensor_value_info("z", F, [2, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    want_y = x.reshape(2, 12) - np.arange(12, dtype=np.float32)
    want_z = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5
    for got_y, got_z in (ember.compile(model).run([x]), onnx_backend.run_model(model, [x])):
        np.testing.assert_allclose(got_y, want_y, rtol=1e-6)
        np.testing.assert_allclose(got_z, want_z, rtol=1e-6)
    loaded = sorted(m for m in sys.modules if m.startswith("onnx.reference"))
    assert not loaded, loaded
    print("ok")
""")


def test_compiles_and_runs_with_onnx_reference_unimportable():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("ok")


def test_the_blocker_blocks():
    # the check above would pass vacuously if the blocker did not work
    probe = SCRIPT.split("import numpy as np")[0] + "import onnx.reference\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "onnx.reference is blocked in this test" in done.stderr


def test_ember_source_never_names_onnx_reference():
    pattern = re.compile(r"onnx\s*\.\s*reference|ReferenceEvaluator|"
                         r"from\s+onnx\s+import\s+[^\n]*\breference\b")
    offenders = []
    for folder, _, files in os.walk(EMBER_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        if pattern.search(line):
                            offenders.append(f"{os.path.relpath(path, ROOT)}:{number}")
    assert not offenders, f"ember's source uses onnx.reference: {offenders}"
