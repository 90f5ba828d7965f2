"""A damaged exported library is refused before its code runs: a checksum over code,
constants and metadata, a plan whose sizes must equal those the code was exported with, and
metadata of the wrong shape are clear CorruptFileErrors, never a crash or a heap overrun.
The damaged files are loaded in a child process, so a regression kills the child only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from ember.errors import CorruptFileError
from ember.graph.ir import GraphBuilder
from ember.runtime import library
from ember.runtime.elf import read_elf

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF libraries")

LOADER = """
import sys
import numpy as np
from ember.errors import EmberError
from ember.runtime.library import load_library
for path in sys.argv[1:]:
    print(path, end=" ", flush=True)
    try:
        model = load_library(path)
        x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
        print("LOADED", model.run([x])[0].tolist(), flush=True)
    except EmberError as error:
        print(type(error).__name__, str(error).replace("\\n", " "), flush=True)
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import ember

    b = GraphBuilder("t")
    x = b.input("x", (4, 16), "float32")
    w = b.constant("w", np.arange(16, dtype="float32").reshape(16, 1))
    y, = b.add("Relu", [x])
    z, = b.add("MatMul", [y, w])
    path = tmp_path_factory.mktemp("lib") / "model.so"
    ember.export_library(b.finish([z]), path)
    return path, path.read_bytes()


def _load_all(paths) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", LOADER, *map(str, paths)], capture_output=True,
                          text=True, timeout=300, cwd=os.getcwd())
    assert done.returncode == 0, f"the loader died (exit {done.returncode}) on the last " \
                                 f"file of: {done.stdout[-500:]} {done.stderr[-1500:]}"
    return dict(line.split(" ", 1) for line in done.stdout.splitlines())


def _section(data: bytes, name: str):
    return next(s for s in read_elf(data, "lib").sections if s.name == name)


def _reseal(path) -> None:
    data = bytearray(path.read_bytes())
    offset = data.find(library.CHECKSUM_MAGIC)
    data[offset + 8:offset + 40] = bytes(32)
    path.write_bytes(bytes(data))
    library.seal_library(path)


def test_intact_library_loads_and_runs(exported) -> None:
    path, _ = exported
    model = library.load_library(path)
    x = np.linspace(-1, 1, 64, dtype="float32").reshape(4, 16)
    want = np.maximum(x, 0) @ np.arange(16, dtype="float32").reshape(16, 1)
    np.testing.assert_allclose(model.run([x])[0], want, rtol=1e-5)


def test_damage_anywhere_is_refused(exported, tmp_path) -> None:
    path, data = exported
    meta_at = data.find(b'"workspace_bytes":')
    text = _section(data, ".text")
    constants, _ = read_elf(data, "lib").file_range(library.CONSTANTS_SYMBOL)
    edits = {
        "metadata_same_length": (meta_at + len('"workspace_bytes":'), b"9"),
        "code_byte": (text.offset + text.size // 2, None),
        "constant_byte": (constants + 4, None),
        "checksum_byte": (data.find(library.CHECKSUM_MAGIC) + 12, None),
    }
    rng = np.random.default_rng(13)
    for k in range(40):  # seeded flips of 1-3 bytes anywhere
        edits[f"random_{k}"] = (int(rng.integers(0, len(data))), None)
    paths = []
    for name, (at, value) in edits.items():
        damaged = bytearray(data)
        damaged[at:at + 1] = value if value is not None else bytes([damaged[at] ^ 0x5A])
        paths.append(tmp_path / f"{name}.so")
        paths[-1].write_bytes(bytes(damaged))
    outcomes = _load_all(paths)
    for p in paths:
        outcome = outcomes[str(p)]
        assert not outcome.startswith("LOADED"), (p.name, outcome)
        assert outcome.split()[0] in ("CorruptFileError", "ArgumentError"), (p.name, outcome)
    assert "checksum does not match" in outcomes[str(paths[0])]


def _edit_metadata(data: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and data.count(old) == 1
    return data.replace(old, new)


@pytest.mark.parametrize("old,new,match", [
    (b'"workspace_bytes":', b'"workspace_bytes":9', "metadata says sizes .* exported for"),
    (b'"shape":[4,1]', b'"shape":[8,1]', "metadata says sizes"),
    (b'"name":"t"', b'"name":7  ', "metadata is not a valid plan"),
    (b'"format":"ember-library-2"', b'"format":"ember-library-2"', None),
])
def test_resealed_inconsistent_metadata_is_refused(exported, tmp_path, old, new, match) -> None:
    path, data = exported
    if old == b'"workspace_bytes":':  # the same number of digits, claiming another size
        digits = re.search(rb'"workspace_bytes":(\d+)', data).group(1)
        old = b'"workspace_bytes":' + digits
        new = b'"workspace_bytes":' + (b"8" if digits[:1] != b"8" else b"7") + digits[1:]
    edited = tmp_path / "edited.so"
    edited.write_bytes(_edit_metadata(data, old, new))
    _reseal(edited)  # as a buggy exporter would: checksum right, plan wrong
    outcome = _load_all([edited])[str(edited)]
    if match is None:
        assert outcome.startswith("LOADED")
    else:
        assert outcome.startswith("CorruptFileError") and re.search(match, outcome), outcome


def test_unsealed_library_is_refused(exported, tmp_path) -> None:
    path, data = exported
    raw = bytearray(data)
    offset = raw.find(library.CHECKSUM_MAGIC)
    raw[offset + 8:offset + 40] = bytes(32)
    unsealed = tmp_path / "unsealed.so"
    unsealed.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="was never sealed"):
        library.load_library(unsealed)


def test_metadata_json_parses(exported) -> None:
    _, data = exported
    start = data.find(b'{"format"')
    meta = json.loads(data[start:data.index(b"\0", start)])
    sizes = library.plan_sizes(meta["plan"], data.index(b"\0", start) - start)
    assert sizes[3:5] == [1, 1] and sizes[5:] == [4 * 16 * 4, 4 * 4]


@pytest.mark.parametrize("size", [20, 57, 63, 200])
def test_cut_headers_are_refused(exported, tmp_path, size: int) -> None:
    _, data = exported
    cut = tmp_path / f"cut{size}.so"
    cut.write_bytes(data[:size])
    with pytest.raises((CorruptFileError, library.ArgumentError),
                       match="not an ember library|damaged|truncated"):
        library.load_library(cut)


def test_header_offsets_past_the_file_are_refused(exported, tmp_path) -> None:
    _, data = exported
    raw = bytearray(data)
    raw[32:40] = (1 << 62).to_bytes(8, "little")  # e_phoff far past the end
    bad = tmp_path / "phoff.so"
    bad.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="damaged: its ELF headers"):
        library.load_library(bad)
