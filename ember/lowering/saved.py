"""A compiled model on disk (a directory): plan, constants, kernel objects, fused-graph text.

    save_compiled(model, "out.ember")      # written to a temp dir, then renamed into place
    model = load_compiled("out.ember")     # links the stored objects; no recompilation

The format is ember's working format (it needs llvmlite to link); the portable
export artifact is defined separately.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ember.errors import ArgumentError
from ember.lowering.link import link
from ember.runtime.executor import CompiledModel
from ember.runtime.plan import ExecPlan

FORMAT = "ember-compiled-1"


def is_compiled_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / "meta.json").is_file() and (Path(path) / "plan.json").is_file()


def save_compiled(model: CompiledModel, path: str | os.PathLike[str]) -> Path:
    """Write `model` to directory `path` (replacing an earlier compiled model there)."""
    from ember.lowering.cache import compiler_version

    target = Path(path)
    if target.exists() and not is_compiled_dir(target):
        raise ArgumentError(f"'{target}' exists and is not a compiled ember model; "
                            "choose another output path")
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        (temp / "plan.json").write_text(model.plan.to_json())
        model.constant_bytes().tofile(temp / "constants.bin")
        (temp / "kernels").mkdir()
        for symbol, blob in model.objects.items():
            (temp / "kernels" / f"{symbol}.o").write_bytes(blob)
        if model.graph is not None:
            (temp / "graph.txt").write_text(str(model.graph) + "\n")
        meta = {"format": FORMAT, "target": model.target, "compiler": compiler_version()}
        (temp / "meta.json").write_text(json.dumps(meta, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def load_compiled(path: str | os.PathLike[str]) -> CompiledModel:
    """The CompiledModel stored at `path` by save_compiled."""
    root = Path(path)
    if not is_compiled_dir(root):
        raise ArgumentError(f"'{root}' is not a compiled ember model (no meta.json/plan.json)")
    meta = json.loads((root / "meta.json").read_text())
    if meta.get("format") != FORMAT:
        raise ArgumentError(f"'{root}': unknown format {meta.get('format')!r}, expected "
                            f"{FORMAT!r}")
    plan = ExecPlan.from_json((root / "plan.json").read_text())
    objects = {}
    for symbol in plan.symbols:
        file = root / "kernels" / f"{symbol}.o"
        if not file.is_file():
            raise ArgumentError(f"'{root}': kernel object '{file.name}' is missing")
        objects[symbol] = file.read_bytes()
    constants = np.fromfile(root / "constants.bin", np.uint8)
    if constants.size < plan.constant_bytes:
        raise ArgumentError(f"'{root}': constants.bin has {constants.size} bytes, the plan "
                            f"needs {plan.constant_bytes}")
    graph_text = (root / "graph.txt").read_text() if (root / "graph.txt").is_file() else None
    target = meta.get("target", "llvm")
    model = CompiledModel(plan, objects, constants, target, linked=link(plan, objects, target))
    model.graph_text = graph_text  # type: ignore[attr-defined]
    return model
