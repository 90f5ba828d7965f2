"""A compiled-model directory carries checksums of its files: a damaged plan, constant blob
or kernel object is refused before anything is linked or run."""

import json

import numpy as np
import pytest

import ember
from ember.errors import ArgumentError, CorruptFileError
from ember.graph.ir import GraphBuilder
from ember.lowering.saved import load_compiled, save_compiled


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    b = GraphBuilder("tiny")
    x = b.input("x", (2, 8), "float32")
    w = b.constant("w", np.arange(8, dtype="float32"))
    y, = b.add("Mul", [x, w])
    z, = b.add("Relu", [y])
    return save_compiled(ember.compile(b.finish([z]), cache=False),
                         tmp_path_factory.mktemp("s") / "tiny.ember")


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_intact_directory_loads(saved) -> None:
    x = np.linspace(-1, 1, 16, dtype="float32").reshape(2, 8)
    out = load_compiled(saved).run({"x": x})[0]
    np.testing.assert_allclose(out, np.maximum(x * np.arange(8, dtype="float32"), 0))


@pytest.mark.parametrize("name", ["plan.json", "constants.bin", "kernel"])
def test_damaged_file_is_refused(saved, tmp_path, name: str) -> None:
    root = _copy(saved, tmp_path / "copy.ember")
    file = next((root / "kernels").iterdir()) if name == "kernel" else root / name
    data = bytearray(file.read_bytes())
    if name == "plan.json":  # a same-length edit of the workspace size
        text = data.decode()
        at = text.index('"workspace_bytes":') + len('"workspace_bytes":')
        data[at] = ord("9") if text[at] != "9" else ord("8")
    else:
        data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"'{file.relative_to(root)}' is damaged"):
        load_compiled(root)


def test_missing_checksums_and_bad_meta(saved, tmp_path) -> None:
    root = _copy(saved, tmp_path / "old.ember")
    meta = json.loads((root / "meta.json").read_text())
    del meta["sha256"]
    (root / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CorruptFileError, match="meta.json has no checksums"):
        load_compiled(root)
    (root / "meta.json").write_bytes(b"\xff{")
    with pytest.raises(CorruptFileError, match="meta.json is not valid JSON"):
        load_compiled(root)
    (root / "meta.json").write_text('{"format": "ember-compiled-1"}')
    with pytest.raises(ArgumentError, match="unknown format 'ember-compiled-1'"):
        load_compiled(root)
