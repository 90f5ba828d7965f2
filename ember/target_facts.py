"""Target facts: what a schedule's defaults may reason from (vector and FMA width, caches, ISA
extensions), read from this machine for a host target and from per-CPU tables otherwise.

    >>> facts = Target("llvm -mcpu=sapphirerapids").facts
    >>> facts.vector_bits, facts.fma_units, facts.has("amx-bf16")
    (512, 2, True)

Only facts live here, no policy: a knob family's `default(task)` turns them into choices.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.target import Target

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")

# ISA extensions a schedule may care about (LLVM feature names)
EXTENSIONS = ("fma", "avx", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512vnni",
              "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-int8", "amx-bf16",
              "amx-fp16", "neon", "sve", "sve2", "dotprod", "i8mm", "bf16", "fullfp16",
              "simd128", "relaxed-simd")

# (FMA units, bits each) per CPU name; a unit is a pipe that starts one vector FMA a cycle.
# Zen 4 runs 512-bit FMAs on two 256-bit pipes; client Ice Lake has one 512-bit FMA unit.
_FMA: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake", "icelake-server",
                     "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
                     "diamondrapids", "knl", "knm", "znver5"), (2, 512)),
    **dict.fromkeys(("icelake-client", "tigerlake", "rocketlake", "cannonlake"), (1, 512)),
    **dict.fromkeys(("znver4", "znver2", "znver3", "haswell", "broadwell", "skylake",
                     "alderlake", "raptorlake", "meteorlake", "arrowlake", "arrowlake-s",
                     "lunarlake", "x86-64-v3", "x86-64-v4"), (2, 256)),
    **dict.fromkeys(("znver1", "bdver4", "gracemont"), (2, 128)),
    **dict.fromkeys(("neoverse-v1",), (2, 256)),
    **dict.fromkeys(("neoverse-v2", "apple-m1", "apple-m2", "apple-m3", "apple-a14",
                     "cortex-x1", "cortex-x2", "cortex-x3"), (4, 128)),
    **dict.fromkeys(("neoverse-n1", "neoverse-n2", "cortex-a72", "cortex-a76", "cortex-a78",
                     "cortex-a710", "thunderx2t99", "a64fx"), (2, 128)),
    **dict.fromkeys(("cortex-a53", "cortex-a55", "cortex-a7", "cortex-a9"), (1, 128)),
}

# cycles from an FMA's issue to its result, where it is not 4 (most x86 cores since Skylake and
# Zen 3, Neoverse N1 and later): a chain of dependent FMAs must be this many deep in flight
_FMA_LATENCY: dict[str, int] = {
    **dict.fromkeys(("haswell", "broadwell", "znver1", "znver2", "bdver4"), 5),
    **dict.fromkeys(("cortex-a72", "cortex-a57", "cortex-a53", "cortex-a55", "cortex-a7",
                     "cortex-a9"), 7),
}

# (L1d, L2 per core, L3 total) in KiB for a cross target (a host target reads sysfs)
_CACHES: dict[str, tuple[int, int, int]] = {
    **dict.fromkeys(("znver4", "znver5"), (32, 1024, 32768)),
    **dict.fromkeys(("znver2", "znver3"), (32, 512, 32768)),
    "znver1": (32, 512, 8192),
    **dict.fromkeys(("skylake-avx512", "cascadelake", "cooperlake"), (32, 1024, 28160)),
    "icelake-server": (48, 1280, 49152),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids"), (48, 2048, 107520)),
    **dict.fromkeys(("graniterapids", "graniterapids-d", "diamondrapids"), (48, 2048, 258048)),
    **dict.fromkeys(("icelake-client", "tigerlake", "rocketlake"), (48, 512, 8192)),
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake", "arrowlake"), (48, 1280, 30720)),
    **dict.fromkeys(("haswell", "broadwell", "skylake"), (32, 256, 8192)),
    **dict.fromkeys(("neoverse-n1", "neoverse-n2", "neoverse-v1", "neoverse-v2"),
                    (64, 1024, 32768)),
    **dict.fromkeys(("apple-m1", "apple-m2", "apple-m3"), (128, 4096, 0)),
    **dict.fromkeys(("cortex-a72", "cortex-a76", "cortex-a78"), (32, 512, 2048)),
    **dict.fromkeys(("cortex-a53", "cortex-a55"), (32, 256, 0)),
}
_ARCH_CACHES = {"x86": (32, 1024, 16384), "arm": (32, 512, 0), "other": (32, 256, 0)}

# ISA extensions of a CPU name, for a cross target named only by -mcpu
_AVX512_BASE = ("fma", "avx", "avx2", "avx512f", "avx512bw", "avx512vl")
_CPU_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "skylake-avx512": _AVX512_BASE,
    "cascadelake": _AVX512_BASE + ("avx512vnni",),
    "cooperlake": _AVX512_BASE + ("avx512vnni", "avx512bf16"),
    **dict.fromkeys(("icelake-client", "icelake-server", "tigerlake", "rocketlake"),
                    _AVX512_BASE + ("avx512vnni",)),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids"),
                    _AVX512_BASE + ("avx512vnni", "avx512bf16", "avx512fp16", "avxvnni",
                                    "amx-tile", "amx-int8", "amx-bf16")),
    **dict.fromkeys(("graniterapids", "graniterapids-d", "diamondrapids"),
                    _AVX512_BASE + ("avx512vnni", "avx512bf16", "avx512fp16", "avxvnni",
                                    "amx-tile", "amx-int8", "amx-bf16", "amx-fp16")),
    **dict.fromkeys(("znver4", "znver5"), _AVX512_BASE + ("avx512vnni", "avx512bf16")),
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake", "arrowlake"),
                    ("fma", "avx", "avx2", "avxvnni")),
    **dict.fromkeys(("haswell", "broadwell", "skylake", "znver1", "znver2", "znver3",
                     "x86-64-v3"), ("fma", "avx", "avx2")),
    **dict.fromkeys(("neoverse-n1", "cortex-a76", "cortex-a78"),
                    ("neon", "dotprod", "fullfp16")),
    **dict.fromkeys(("neoverse-n2", "neoverse-v1", "neoverse-v2"),
                    ("neon", "dotprod", "fullfp16", "sve", "i8mm", "bf16")),
    **dict.fromkeys(("apple-m1", "apple-m2", "apple-m3"), ("neon", "dotprod", "fullfp16")),
}


@dataclass(frozen=True)
class TargetFacts:
    """Facts about a target's CPU that schedules reason from (sizes in bytes).

    `source` says where the cache sizes came from: "sysfs" (this machine), "table" (the
    CPU name) or "fallback" (the architecture family)."""

    cpu: str
    arch: str                        # "x86", "arm" or "other"
    vector_bits: int
    fma_units: int
    fma_bits: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    cache_line_bytes: int
    num_cores: int
    extensions: frozenset[str]
    source: str
    vector_registers: int = 16       # architectural SIMD registers of `vector_bits`
    fma_latency: int = 4             # cycles from an FMA's issue to its result


    def has(self, extension: str) -> bool:
        """True when the target has the ISA extension (an LLVM feature name, e.g. "amx-bf16")."""
        return extension in self.extensions

    @property
    def vector_fmas_per_cycle(self) -> int:
        """Full-width (`vector_bits`) FMAs a core starts each cycle: 1 on Zen 4 (a 512-bit FMA
        takes both 256-bit pipes), 2 on Sapphire Rapids and on AVX2 cores."""
        return max(1, self.fma_units * self.fma_bits // self.vector_bits)

    @property
    def latency_accumulators(self) -> int:
        """Independent accumulators that keep every FMA pipe busy: a dependent FMA can start
        only `fma_latency` cycles after the one before it."""
        return self.fma_latency * self.vector_fmas_per_cycle

    @property
    def fma_lanes_per_cycle(self) -> int:
        """float32 FMAs a core can start each cycle (units x lanes of each)."""
        return self.fma_units * self.fma_bits // 32

    def to_dict(self) -> dict[str, object]:
        return {"cpu": self.cpu, "arch": self.arch, "vector_bits": self.vector_bits,
                "fma_units": self.fma_units, "fma_bits": self.fma_bits,
                "l1d_bytes": self.l1d_bytes, "l2_bytes": self.l2_bytes,
                "l3_bytes": self.l3_bytes, "cache_line_bytes": self.cache_line_bytes,
                "num_cores": self.num_cores, "extensions": sorted(self.extensions),
                "source": self.source, "vector_registers": self.vector_registers,
                "fma_latency": self.fma_latency}


def target_facts(target: Target) -> TargetFacts:
    """The facts of `target`: sysfs caches and LLVM's host features for a host target without
    -mcpu, per-CPU tables (then per-architecture fallbacks) for any other."""
    host = target.is_host and not target.mcpu
    return _facts(str(target), host)


@functools.cache
def _facts(spec: str, host: bool) -> TargetFacts:
    from ember.target import _DEPENDENT_FEATURES, Target, _feature_state

    target = Target(spec)
    arch = _arch_family(target.triple)
    cpu = target.cpu
    enabled, disabled = _feature_state(target.features)
    named = set(_CPU_EXTENSIONS.get(cpu, ()))
    if target.kind == "wasm":
        named.add("simd128")
    if arch == "arm" and target.triple.startswith(("aarch64", "arm64")):
        named.add("neon")  # AArch64 always has Advanced SIMD
    for base, dependents in _DEPENDENT_FEATURES.items():
        if base in disabled:  # as in LLVM: -avx512f turns off every AVX-512 extension
            disabled |= {e for e in EXTENSIONS if e.startswith(dependents) and e not in enabled}
    extensions = frozenset(e for e in EXTENSIONS if e in (enabled | named) and e not in disabled)
    vector_bits = target.vector_bits
    units, bits = _FMA.get(cpu, (0, 0))
    if "amx-tile" in extensions and units * bits < 2 * 512:
        # every CPU with AMX is a server core (Sapphire Rapids and later) with two 512-bit FMA
        # pipes; a virtual machine may report a client model (KVM: model 167, "rocketlake")
        units, bits = 2, 512
    if not units:  # unknown CPU: two pipes of the vector width where there is an FMA
        has_fma = "fma" in extensions or arch == "arm" or "relaxed-simd" in extensions
        units, bits = (2 if has_fma else 1), vector_bits
    bits = min(bits, vector_bits)  # -mattr=-avx512f on an AVX-512 CPU: 256-bit FMAs
    caches = _sysfs_caches() if host else None
    source = "sysfs"
    if caches is None:
        table = _CACHES.get(cpu)
        source = "table" if table else "fallback"
        l1, l2, l3 = table or _ARCH_CACHES[arch]
        caches = (l1 * 1024, l2 * 1024, l3 * 1024, 64)
    return TargetFacts(cpu, arch, vector_bits, units, bits, *caches, target.num_cores,
                       extensions, source, _vector_registers(target.triple, vector_bits),
                       _FMA_LATENCY.get(cpu, 4))


def _vector_registers(triple: str, vector_bits: int) -> int:
    """SIMD registers of the widest kind: x86-64 has 16 (xmm/ymm) or 32 with AVX-512 (zmm),
    32-bit x86 8; AArch64 32 (v0-v31); 32-bit ARM NEON 16 (q0-q15); others 16."""
    arch = triple.split("-")[0]
    if arch == "x86_64":
        return 32 if vector_bits >= 512 else 16
    if arch in ("i386", "i486", "i586", "i686"):
        return 8
    if arch.startswith(("aarch64", "arm64")):
        return 32
    return 16


def _arch_family(triple: str) -> str:
    arch = triple.split("-")[0]
    if arch in ("x86_64", "i386", "i486", "i586", "i686"):
        return "x86"
    if arch.startswith(("aarch64", "arm", "thumb")):
        return "arm"
    return "other"


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else 0


def _sysfs_caches(root: Path = SYSFS_CACHE) -> tuple[int, int, int, int] | None:
    """(L1d, L2, L3, line) bytes of cpu0 from sysfs; None when it is not readable."""
    sizes = {1: 0, 2: 0, 3: 0}
    line = 0
    try:
        entries = sorted(root.glob("index*"))
        for entry in entries:
            kind = (entry / "type").read_text().strip()
            level = int((entry / "level").read_text())
            if kind == "Instruction" or level not in sizes:
                continue
            sizes[level] = _parse_size((entry / "size").read_text())
            line = line or int((entry / "coherency_line_size").read_text() or 0)
    except (OSError, ValueError):
        return None
    if not sizes[1]:
        return None
    return sizes[1], sizes[2], sizes[3], line or 64


def host_cpu_model() -> str:
    """The host CPU's marketing name from /proc/cpuinfo (benchmark reports; "Model" or
    "Hardware" on ARM boards), else the machine name."""
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith(("model name", "Model", "Hardware")):
                return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


__all__ = ["EXTENSIONS", "TargetFacts", "host_cpu_model", "target_facts"]
