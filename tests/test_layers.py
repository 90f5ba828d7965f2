"""The import graph runs one way: each layer imports only the layers below it.

Checked statically over every module of the package (imports inside functions count too),
and dynamically: loading and running an exported library imports no compiler module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "ember"

BASE = {"errors", "dtype", "target", "target_facts", "types", "version"}
# layer -> the layers it may import (besides itself); "ember" is the package root
ALLOWED: dict[str, set[str]] = {
    "base": BASE,
    "runtime": {"errors", "dtype", "version"},
    "arith": BASE | {"tir"},
    "tir": BASE | {"arith"},
    "te": BASE | {"tir", "arith"},
    "ops": BASE | {"tir", "arith", "te"},
    "graph": BASE | {"tir", "arith", "te", "ops"},
    "frontend": BASE | {"tir", "arith", "te", "ops", "graph"},
    "codegen": BASE | {"tir", "arith", "runtime"},
    "lowering": BASE | {"tir", "arith", "te", "ops", "graph", "codegen", "runtime"},
    "autotune": BASE | {"tir", "arith", "te", "ops", "graph", "frontend", "codegen", "runtime",
                        "lowering"},
    "zoo": set(),
}
TOP = {"driver", "driver_gpu", "cli", "demo", "compare", "onnx_backend", "serve_web",
       "specialize", "torch_compile", "testing", "testing_arith", "tune_check", "__init__",
       "__main__"}
# third-party packages that only some layers may use
THIRD_PARTY = {"llvmlite": {"codegen", "lowering", "base"}, "onnx": {"frontend", "zoo", "top"},
               "onnxruntime": {"top"}, "torch": {"frontend", "zoo", "top"}}


def layer_of(module: str) -> str:
    """The layer of a module name such as ember.ops.conv ('ops') or ember.target ('base')."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    if head in BASE:
        return "base"
    if head in TOP:
        return "top"
    return head


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] + (["__init__"] if len(parts) == 1 else [])
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    package = _module_name(path).rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "ember":  # from ember import te -> ember.te
                out += [(node.lineno, f"ember.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, name))
    return out


def _violations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        layer = layer_of(module)
        for line, name in _imports(path):
            top = name.split(".")[0]
            where = f"{path.relative_to(ROOT.parent)}:{line}"
            if top == "ember" and layer != "top":
                target = layer_of(name)
                if name == "ember" or target in ("top",) or (
                        target != layer and target not in ALLOWED[layer]
                        and not (target == "base" and layer != "runtime")):
                    if not (layer == "runtime" and name in ("ember.errors", "ember.dtype",
                                                            "ember.version")):
                        found.append(f"{where}: {layer} imports {name} ({target})")
            elif top in THIRD_PARTY and layer not in THIRD_PARTY[top]:
                found.append(f"{where}: {layer} imports {name}")
    return found


def test_layers_import_only_layers_below_them() -> None:
    assert _violations() == []


def test_the_checker_sees_a_wrong_way_import(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "ember"
    (fake / "ops").mkdir(parents=True)
    (fake / "ops" / "bad.py").write_text("def f():\n    from ember.graph.ir import Graph\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake)
    assert _violations() == ["ember/ops/bad.py:2: ops imports ember.graph.ir (graph)"]


_DEPLOYED = textwrap.dedent("""
    import sys
    import numpy as np
    from ember.runtime.library import load_library
    model = load_library(sys.argv[1])
    x = np.ones(model.inputs[0].shape, model.inputs[0].dtype)
    model.run([x])
    banned = ("llvmlite", "onnx", "ember.te", "ember.ops", "ember.graph", "ember.tir",
              "ember.codegen", "ember.lowering", "ember.frontend", "ember.driver")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("llvmlite", "onnx")
                    or any(m == b or m.startswith(b + ".") for b in banned))
    print("LOADED", loaded)
""")


def test_a_deployed_model_loads_no_compiler_module(tmp_path: Path) -> None:
    import shutil

    if shutil.which("cc") is None:
        pytest.skip("exporting needs a C compiler")
    import numpy as np

    import ember
    from ember.graph.ir import GraphBuilder

    b = GraphBuilder("tiny")
    x = b.input("x", (4, 8), "float32")
    w = b.constant("w", np.random.default_rng(0).standard_normal((8, 3)).astype("float32"))
    (y,) = b.add("MatMul", [x, w])
    (z,) = b.add("Relu", [y])
    path = ember.export_library(b.finish([z]), tmp_path / "tiny.so", cache=False)
    done = subprocess.run([sys.executable, "-c", _DEPLOYED, str(path)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT.parent)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout, done.stdout
