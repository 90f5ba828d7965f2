"""LLVM's own lists of CPU names and features per triple, and the check of a Target against them.

    check_llvm_target(Target("llvm -mcpu=nonsense"))   # TargetError, before LLVM sees it

LLVM answers an unknown CPU with a warning and then, for some triples, a fatal error that
ends the process ("64-bit code requested on a subtarget that doesn't support it"); an unknown
feature only warns and compiles for something else. So every CPU and feature a user names is
checked against the lists LLVM prints for `-mcpu=help`, which llvmlite does not expose as data:
a child process asks LLVM for them once per triple and LLVM version, and the answer is kept in
memory and in the cache directory.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ember.errors import TargetError
from ember.target import Target

# kinds whose -mcpu/-mattr go to an LLVM target machine
LLVM_KINDS = ("llvm", "wasm", "cuda", "rocm")

_HELP_SCRIPT = """
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu="help", features="")
"""
_CPU_HEADER = "Available CPUs for this target:"
_FEATURE_HEADER = "Available features for this target:"


@dataclass(frozen=True)
class TargetInfo:
    """The CPU names and feature names LLVM knows for one triple."""

    triple: str
    cpus: frozenset[str]
    features: frozenset[str]


def parse_help(text: str, triple: str) -> TargetInfo:
    """Read LLVM's `-mcpu=help` listing ("  name - description" lines under two headers)."""
    cpus: set[str] = set()
    features: set[str] = set()
    section: set[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == _CPU_HEADER:
            section = cpus
        elif stripped == _FEATURE_HEADER:
            section = features
        elif section is not None and line.startswith("  ") and " - " in line:
            section.add(stripped.split()[0])
        elif stripped.startswith("Use +feature"):
            section = None
    return TargetInfo(triple, frozenset(cpus), frozenset(features))


@functools.cache
def llvm_target_info(triple: str) -> TargetInfo | None:
    """LLVM's CPU and feature lists for `triple`; None if LLVM cannot list them here."""
    import llvmlite

    cache_file = _cache_dir() / f"llvm{llvmlite.__version__}-{_safe(triple)}.json"
    try:
        data = json.loads(cache_file.read_text())
        return TargetInfo(triple, frozenset(data["cpus"]), frozenset(data["features"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        done = subprocess.run([sys.executable, "-c", _HELP_SCRIPT, triple],
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    info = parse_help(done.stderr + done.stdout, triple)
    if not info.cpus:
        return None
    _write_json(cache_file, {"cpus": sorted(info.cpus), "features": sorted(info.features)})
    return info


def check_llvm_target(target: Target) -> Target:
    """Raise TargetError unless LLVM knows the target's -mcpu and every -mattr feature."""
    cpu = target.mcpu or (target.option("arch") if target.kind == "cuda" else "")
    if target.kind not in LLVM_KINDS or not (cpu or target.mattr):
        return target
    _check_triple_known(target)
    info = llvm_target_info(target.triple)
    if info is None:
        return target
    if cpu and cpu not in info.cpus:
        raise TargetError(f"target '{target}': LLVM does not know CPU {cpu!r} for "
                          f"triple '{target.triple}'; {_suggest(cpu, info.cpus)}"
                          "`ember target --list-cpus` lists them")
    for feature in target.mattr:
        if feature[1:] not in info.features:
            raise TargetError(f"target '{target}': LLVM does not know feature {feature!r} "
                              f"for triple '{target.triple}'; "
                              f"{_suggest(feature[1:], info.features)}"
                              "`ember target --list-features` lists them")
    return target


def _check_triple_known(target: Target) -> None:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    try:
        llvm.Target.from_triple(target.triple)
    except RuntimeError as error:
        raise TargetError(f"target '{target}': LLVM cannot generate code for triple "
                          f"'{target.triple}': {error}") from None


def _suggest(name: str, known: frozenset[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    return f"did you mean {', '.join(close)}? " if close else ""


def _cache_dir() -> Path:
    explicit = os.environ.get("EMBER_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser() / "llvm-targets"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ember" / "llvm-targets"


def _safe(triple: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in triple)


def _write_json(path: Path, data: object) -> None:
    """Atomic write (temp file + rename); a cache that cannot be written is only slower."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
