"""LLVM's own lists of CPU names and features per triple, and the check of a Target against them.

    check_llvm_target(Target("llvm -mcpu=nonsense"))   # TargetError, before LLVM sees it

LLVM answers an unknown CPU with a warning and then, for some triples, a fatal error that
ends the process ("64-bit code requested on a subtarget that doesn't support it"); an unknown
feature only warns and compiles for something else. So every CPU and feature a user names is
checked against the lists LLVM prints for `-mcpu=help`, which llvmlite does not expose as data:
a child process asks LLVM for them once per triple and LLVM version, and the answer is kept in
memory and in the cache directory.

Known names can still combine into a machine LLVM cannot generate code for, and LLVM says so
with a fatal error too: a 32-bit CPU for a 64-bit triple (`-mcpu=i386`), x86-64 without SSE
(`-mattr=-sse`: "SSE register return with SSE disabled"). So each distinct CPU and feature
list is first compiled once in a child process (a probe module with the scalar, vector, half
and libm-call code kernels contain); its failure becomes a TargetError with LLVM's message.
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
from ember.runtime import cpu as host_cpu
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
    """Raise TargetError unless LLVM knows the target's -mcpu and every -mattr feature, and
    (probed once in a child process) can generate code for its triple, CPU and features."""
    cpu = target.mcpu or (target.option("arch") if target.kind == "cuda" else "")
    if target.kind not in LLVM_KINDS or not (cpu or target.mattr or target.mtriple):
        return target
    _check_triple_known(target)
    _check_names(target, cpu)
    if target.kind in ("llvm", "wasm"):
        failure = probe_failure(target.llvm_triple, target.cpu, ",".join(target.features))
        if failure:
            raise TargetError(f"target '{target}': LLVM cannot generate code for this "
                              f"triple, CPU and features ({failure})")
    return target


def _check_names(target: Target, cpu: str) -> None:
    """TargetError unless LLVM's lists for the triple have the CPU and each feature."""
    info = llvm_target_info(target.triple) if cpu or target.mattr else None
    if info is None:
        return
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


# a module with what kernels contain: float, double and half arithmetic, vectors, FMAs,
# float returns and a libm call (the code paths a feature set without SSE or FPU breaks)
_PROBE_IR = """
declare float @llvm.exp.f32(float)
declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)
define float @probe_float(float %a, float %b) {
  %s = fadd float %a, %b
  %e = call float @llvm.exp.f32(float %s)
  ret float %e
}
define double @probe_double(double %a, i64 %n) {
  %f = sitofp i64 %n to double
  %m = fmul double %a, %f
  ret double %m
}
define half @probe_half(half %a, half %b) {
  %p = fmul half %a, %b
  ret half %p
}
define i32 @probe_vector(ptr %out, ptr %in, <8 x float> %c) {
  %v = load <8 x float>, ptr %in, align 4
  %r = call <8 x float> @llvm.fma.v8f32(<8 x float> %v, <8 x float> %v, <8 x float> %c)
  store <8 x float> %r, ptr %out, align 4
  %h = fptrunc <8 x float> %r to <8 x half>
  %q = getelementptr i8, ptr %out, i64 64
  store <8 x half> %h, ptr %q, align 2
  ret i32 0
}
"""
_PROBE_SCRIPT = """
import re
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
machine = llvm.Target.from_triple(sys.argv[1]).create_target_machine(
    cpu=sys.argv[2], features=sys.argv[3], opt=2, reloc="pic")
module = llvm.parse_assembly(sys.stdin.read())
module.triple = sys.argv[1]
module.data_layout = str(machine.target_data)
machine.emit_object(module)
# x86 with neither SSE nor x87 compiles float arithmetic to soft-float routines (__addsf3)
# and passes floats in integer registers: the C library's math functions take them in SSE
# registers, and this process has no such routines (a call to address 0)
soft = sorted(set(re.findall(r"\\b__(?:add|mul)[sd]f3\\b", machine.emit_assembly(module))))
if soft and sys.argv[1].split("-")[0] in ("x86_64", "i386", "i486", "i586", "i686"):
    sys.exit("error: no floating-point unit left for float or double (SSE or SSE2 and "
             f"x87 off): arithmetic becomes soft-float calls ({', '.join(soft)}) with a "
             "calling convention the C library's math functions do not share")
print("ok")
"""


# part of the cached answers' names: a probe that checks more does not reuse older answers
_PROBE_VERSION = 2


@functools.cache
def probe_failure(triple: str, cpu: str, features: str) -> str:
    """LLVM's message if it cannot generate code for this CPU and feature list (found in a
    child process, since LLVM ends the process that tries); '' when it can. Kept per LLVM
    version in memory and in the cache directory."""
    import hashlib

    import llvmlite

    text = f"{_PROBE_VERSION}\0{triple}\0{cpu}\0{features}"
    name = hashlib.sha256(text.encode()).hexdigest()[:24]
    cache_file = _cache_dir() / f"llvm{llvmlite.__version__}-probe-{name}.json"
    try:
        return str(json.loads(cache_file.read_text())["failure"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE_SCRIPT, triple, cpu, features],
                              input=_PROBE_IR, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return ""  # no child to ask: compile as before
    if done.returncode == 0 and done.stdout.strip() == "ok":
        failure = ""
    else:
        lines = [line.strip() for line in done.stderr.splitlines()
                 if line.strip() and not line.startswith((" ", "Traceback"))]
        failure = lines[-1] if lines else f"the compiler exited with status {done.returncode}"
        failure = failure[failure.find("Assertion"):] if "Assertion" in failure else failure
    _write_json(cache_file, {"failure": failure})
    return failure


def required_features(target: Target) -> list[str]:
    """The features code for `target` may use that a CPU's Linux flags can show: -mattr's and
    the CPU level's (`Target.code_features`) with the named CPU's extensions (AVX512-FP16,
    AMX, VNNI: `Target.facts`), less what -mattr turns off."""
    table = host_cpu.LINUX_FLAGS.get(host_cpu.family(target.triple.split("-")[0]), {})
    named = set(target.code_features) | set(target.facts.extensions)
    return sorted(f for f in named if f in table)


def check_runs_here(target: Target) -> None:
    """Raise TargetError if code for `target` (a host triple) may use instructions this CPU
    lacks: in-process code would die on its first illegal instruction (SIGILL), so such a
    target is for `export_library` / `emit_object` to another machine, never for the JIT.
    EMBER_CPU_CHECK=0 skips the check (a kernel that does not report a flag the CPU has)."""
    if os.environ.get("EMBER_CPU_CHECK", "1").strip() in ("0", "false", "no"):
        return
    missing = host_cpu.missing_features(target.triple.split("-")[0], required_features(target))
    if missing:
        raise TargetError(f"target '{target}' uses {', '.join(missing)}, which this CPU lacks: "
                          "its code cannot run in this process; compile for target='llvm' "
                          "(this CPU), or export it for the CPU it names (ember.export_library)")


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
