"""A compiled model on disk (a directory): plan, constants, kernel objects, fused-graph text.

    save_compiled(model, "out.ember")      # written to a temp dir, then renamed into place
    model = load_compiled("out.ember")     # links the stored objects; no recompilation

The format is ember's working format (it needs llvmlite to link); the portable
export artifact is defined separately.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ember.errors import ArgumentError, CorruptFileError
from ember.lowering.link import link
from ember.runtime.executor import CompiledModel
from ember.runtime.plan import ExecPlan

FORMAT = "ember-compiled-2"


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
        files = ["plan.json", "constants.bin",
                 *(f"kernels/{symbol}.o" for symbol in model.objects)]
        meta = {"format": FORMAT, "target": model.target, "compiler": compiler_version(),
                "sha256": {name: _sha256(temp / name) for name in files}}
        (temp / "meta.json").write_text(json.dumps(meta, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify(root: Path, meta: dict) -> None:  # type: ignore[type-arg]
    """Every file save_compiled wrote is there with the content it had: a damaged plan or
    kernel would otherwise be linked and run."""
    digests = meta.get("sha256")
    if not isinstance(digests, dict) or "plan.json" not in digests:
        raise CorruptFileError(f"'{root}': meta.json has no checksums; compile it again")
    for name, want in digests.items():
        file = root / str(name)
        if not file.is_file():
            raise ArgumentError(f"'{root}': '{name}' is missing")
        if _sha256(file) != want:
            raise CorruptFileError(f"'{root}': '{name}' is damaged (its checksum does not "
                                   "match); compile the model again")


def load_compiled(path: str | os.PathLike[str]) -> CompiledModel:
    """The CompiledModel stored at `path` by save_compiled."""
    root = Path(path)
    if not is_compiled_dir(root):
        raise ArgumentError(f"'{root}' is not a compiled ember model (no meta.json/plan.json)")
    try:
        meta = json.loads((root / "meta.json").read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise CorruptFileError(f"'{root}': meta.json is not valid JSON ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ArgumentError(f"'{root}': unknown format {found!r}, expected "
                            f"{FORMAT!r}")
    _verify(root, meta)
    try:
        plan = ExecPlan.from_json((root / "plan.json").read_text())
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptFileError(f"'{root}': plan.json is not a valid plan ({error})") from None
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
