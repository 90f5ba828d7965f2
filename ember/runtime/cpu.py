"""What this CPU can run: its architecture and instruction-set flags (from the ELF machine
names and /proc/cpuinfo, no cpuid), and which of a library's required LLVM features it lacks.

    missing_features("x86_64", ["avx2", "avx512f"])    # -> ["avx512f"] on an AVX2-only CPU

Only the instruction-set extensions that compiled numeric code can contain are checked
(SIMD, FMA, half/bfloat conversions, bit manipulation, dot products, LSE atomics): an
exporter records the features of its target that appear in `LINUX_FLAGS`, the loader
refuses a library whose features this CPU lacks instead of dying on an illegal instruction.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterable
from pathlib import Path

# the architecture families, by the names platform.machine() and LLVM triples use
_FAMILIES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
             "aarch64_be": "aarch64"}
# ELF e_machine values
ELF_MACHINES = {62: "x86_64", 183: "aarch64", 40: "arm", 3: "i386", 243: "riscv"}

# LLVM feature name -> the Linux /proc/cpuinfo flag that says the CPU has it
LINUX_FLAGS: dict[str, dict[str, str]] = {
    "x86_64": {
        "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1",
        "sse4.2": "sse4_2", "sse4a": "sse4a", "popcnt": "popcnt", "cx16": "cx16",
        "sahf": "lahf_lm", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
        "bmi": "bmi1", "bmi2": "bmi2", "lzcnt": "abm", "movbe": "movbe", "adx": "adx",
        "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512cd": "avx512cd",
        "avx512dq": "avx512dq", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
        "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2",
        "avx512vnni": "avx512_vnni", "avx512bitalg": "avx512_bitalg",
        "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16",
        "avx512fp16": "avx512_fp16", "avxvnni": "avx_vnni", "gfni": "gfni",
        "amx-tile": "amx_tile", "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
    },
    "aarch64": {
        "neon": "asimd", "fp-armv8": "fp", "fullfp16": "asimdhp", "dotprod": "asimddp",
        "i8mm": "i8mm", "bf16": "bf16", "sve": "sve", "sve2": "sve2", "lse": "atomics",
        "rcpc": "lrcpc", "fp16fml": "asimdfhm",
    },
    "arm": {
        "neon": "neon", "vfp2": "vfp", "vfp3": "vfpv3", "vfp4": "vfpv4", "d32": "vfpd32",
        "fp16": "half", "hwdiv-arm": "idiva", "dotprod": "asimddp",
    },
}


def family(machine: str) -> str:
    """The architecture family of a platform.machine() or triple arch name: x86_64,
    aarch64, arm (any 32-bit ARM), or the name itself."""
    name = machine.lower()
    if name.startswith(("armv", "thumbv")) or name == "arm":
        return "arm"
    return _FAMILIES.get(name, name)


def host_family() -> str:
    return family(platform.machine())


@functools.cache
def host_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """The CPU flags Linux reports (x86 `flags`, ARM `Features`), None where unknown."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return frozenset(flags) if flags else None


def missing_features(arch: str, required: Iterable[str],
                     flags: frozenset[str] | None = None) -> list[str]:
    """The LLVM features in `required` (for architecture `arch`) that a CPU with `flags`
    (default: this one's) does not report; [] when the flags are unknown."""
    have = host_flags() if flags is None else flags
    if have is None:
        return []
    table = LINUX_FLAGS.get(family(arch), {})
    return [f for f in required if f in table and table[f] not in have]
