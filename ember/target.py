"""Target: what machine code is generated for, e.g. Target("llvm -mcpu=znver4"); host detection."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ember import dtype as dt
from ember.errors import TargetError

if TYPE_CHECKING:
    from ember.target_facts import TargetFacts

KINDS = ("llvm", "c", "cuda", "rocm", "opencl", "metal", "wasm")

# options each kind accepts besides -mcpu/-mattr/-mtriple (value-less ones are flags)
_COMMON_OPTIONS = ("num-cores", "fast-math", "opt-level")
_KIND_OPTIONS: dict[str, tuple[str, ...]] = {
    "llvm": ("mabi", "mfloat-abi"),
    "c": ("mabi",),
    "cuda": ("arch", "ptx", "codegen", "max-threads-per-block", "max-shared-memory-per-block"),
    "rocm": ("max-threads-per-block", "max-shared-memory-per-block", "code-object"),
    "opencl": ("device", "max-threads-per-block", "max-shared-memory-per-block"),
    "metal": ("max-threads-per-block", "max-shared-memory-per-block"),
    "wasm": (),
}
_INT_OPTIONS = ("num-cores", "opt-level", "max-threads-per-block", "max-shared-memory-per-block")
_FLAG_OPTIONS = ("fast-math",)

_DEFAULT_TRIPLES = {
    "wasm": "wasm32-unknown-unknown",
    "cuda": "nvptx64-nvidia-cuda",
    "rocm": "amdgcn-amd-amdhsa",
}
_ARCH = re.compile(r"^(x86_64|i[3-6]86|aarch64(_be)?|arm64|armv\d+[a-z]*|arm|thumbv\d+[a-z]*|"
                   r"wasm32|wasm64|nvptx64|nvptx|amdgcn|riscv32|riscv64|powerpc64le|"
                   r"powerpc64|ppc64le|mips64el|mipsel|s390x|loongarch64)$")

_OS_NAMES = ("linux", "none", "windows", "freebsd", "android", "darwin", "wasi", "emscripten")

# CPUs whose vector registers are 512 (AVX-512) or 256 (AVX2) bits wide
_AVX512_CPUS = ("skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "sapphirerapids", "emeraldrapids",
                "graniterapids", "graniterapids-d", "rocketlake", "znver4", "znver5",
                "knl", "knm", "x86-64-v4", "diamondrapids")
_AVX2_CPUS = ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
              "arrowlake", "arrowlake-s", "lunarlake", "gracemont", "znver1", "znver2",
              "znver3", "x86-64-v3", "bdver4")

# the x86-64 micro-architecture levels (psABI): each adds to the one before
_X86_V1 = ("sse", "sse2")
_X86_V2 = _X86_V1 + ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf")
_X86_V3 = _X86_V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")
_X86_V4 = _X86_V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_X86_V2_CPUS = ("x86-64-v2", "nehalem", "westmere", "sandybridge", "ivybridge", "silvermont",
                "goldmont", "goldmont-plus", "tremont", "btver2", "bdver1", "bdver2",
                "bdver3")
_ARMV8_CPUS = ("cortex-a35", "cortex-a53", "cortex-a55", "cortex-a57", "cortex-a72",
               "cortex-a73", "cortex-a75", "cortex-a76", "neoverse-n1", "apple-m1")
# cores whose ISA includes LSE atomics and fp16 / dot products (ARMv8.2-A and later)
_ARMV82_CPUS = ("cortex-a55", "cortex-a75", "cortex-a76", "neoverse-n1", "apple-m1")
_DEPENDENT_FEATURES = {"avx512f": ("avx512",), "avx": ("avx", "fma", "f16c"),
                       "avx2": ("avx2", "avx512"), "neon": ("dotprod", "i8mm", "sve")}

#: named portable targets: build on any machine, run on every machine of the kind
PRESETS: dict[str, str] = {
    "x86-64": "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64",
    "x86-64-v2": "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v2",
    "x86-64-v3": "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v3",
    "x86-64-v4": "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v4",
    "aarch64": "llvm -mtriple=aarch64-linux-gnu -mcpu=generic -mattr=+neon",
    "cortex-a53": "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53",  # Raspberry Pi 3
    "cortex-a72": "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",  # Raspberry Pi 4
    "cortex-a76": "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76",  # Raspberry Pi 5
    "armv7": "llvm -mtriple=armv7a-linux-gnueabihf -mattr=+neon",      # 32-bit Raspberry Pi OS
    "wasm": "wasm",
}


@dataclass(frozen=True)
class Target:
    """A code generation target: kind plus CPU, features, triple and options.

    >>> t = Target("llvm -mcpu=znver4 -mattr=+avx2,+fma -num-cores=2")
    >>> t.kind, t.mcpu, t.mattr, t.num_cores
    ('llvm', 'znver4', ('+avx2', '+fma'), 2)
    """

    kind: str
    mcpu: str = ""
    mattr: tuple[str, ...] = ()
    mtriple: str = ""
    options: tuple[tuple[str, str], ...] = field(default=())

    def __init__(self, spec: Target | str | dict[str, Any] = "llvm", mcpu: str = "",
                 mattr: tuple[str, ...] | list[str] = (), mtriple: str = "",
                 options: tuple[tuple[str, str], ...] | dict[str, Any] = ()) -> None:
        if isinstance(spec, Target):
            parsed = (spec.kind, spec.mcpu, spec.mattr, spec.mtriple, spec.options)
        elif isinstance(spec, dict):
            parsed = _from_dict(spec)
        elif isinstance(spec, str):
            spec = PRESETS.get(spec.strip(), spec)
            if mcpu or mattr or mtriple or options:
                spec = " ".join([spec] + _fields_to_flags(mcpu, tuple(mattr), mtriple,
                                                         _norm_options(options)))
            parsed = _parse(spec)
        else:
            raise TargetError(f"expected a target string, dict or Target, got "
                              f"{type(spec).__name__} {spec!r}")
        for name, value in zip(("kind", "mcpu", "mattr", "mtriple", "options"), parsed):
            object.__setattr__(self, name, value)

    @staticmethod
    def host() -> Target:
        """This machine: `llvm -mcpu=<host cpu> -mattr=<host features> -mtriple=<triple>`."""
        cpu, features, triple = _host_info()
        return Target("llvm", mcpu=cpu, mattr=features, mtriple=triple)

    def __str__(self) -> str:
        return " ".join([self.kind] + _fields_to_flags(self.mcpu, self.mattr, self.mtriple,
                                                       self.options))

    # resolved properties -----------------------------------------------------------------
    def option(self, key: str, default: str = "") -> str:
        return dict(self.options).get(key, default)

    @property
    def is_host(self) -> bool:
        """True for an LLVM CPU target that runs on this machine (no -mcpu means host CPU)."""
        if self.kind != "llvm":
            return False
        return not self.mtriple or _same_triple(self.mtriple, _host_info()[2])

    @property
    def triple(self) -> str:
        """The LLVM target triple (the process triple for a plain "llvm" or "c" target)."""
        if self.mtriple:
            return self.mtriple
        if self.kind in _DEFAULT_TRIPLES:
            return _DEFAULT_TRIPLES[self.kind]
        return _host_info()[2]

    @property
    def llvm_triple(self) -> str:
        """The triple as LLVM parses it: a vendor-less `arch-os-env` (aarch64-linux-gnu) gets
        `unknown` inserted, else LLVM reads 'linux' as the vendor and loses the environment
        (on armv7a-linux-gnueabihf: the hard-float ABI)."""
        parts = self.triple.split("-")
        if len(parts) == 3 and parts[1] in _OS_NAMES:
            return "-".join([parts[0], "unknown", *parts[1:]])
        return self.triple

    @property
    def cpu(self) -> str:
        """The CPU name given to LLVM: -mcpu, else the host CPU for a host target."""
        if self.mcpu:
            return self.mcpu
        if self.kind == "cuda":
            return self.option("arch", "sm_70")
        if self.is_host:
            return _host_info()[0]
        return "generic" if self.kind in ("llvm", "wasm") else ""

    @property
    def features(self) -> tuple[str, ...]:
        """LLVM feature flags: the host's (for a host target without -mcpu) then -mattr."""
        base: tuple[str, ...] = ()
        if self.is_host and not self.mcpu:
            base = _host_info()[1]
        return base + self.mattr

    @property
    def code_features(self) -> tuple[str, ...]:
        """LLVM feature names the generated code may use: those the CPU implies (its x86-64
        level, its ARM architecture) plus -mattr's, less -mattr's '-' ones; a host target
        without -mcpu: the host's."""
        enabled, disabled = _feature_state(_implied_features(self.triple, self.cpu)
                                           + self.features)
        # LLVM turns off what builds on a disabled feature (AVX-512 on AVX, ...)
        for base, dependents in _DEPENDENT_FEATURES.items():
            if base in disabled:
                enabled -= {f for f in enabled if f.startswith(dependents)}
        return tuple(sorted(enabled - disabled))

    @property
    def num_cores(self) -> int:
        if self.option("num-cores"):
            return int(self.option("num-cores"))
        return len(os.sched_getaffinity(0)) if self.is_host else 1

    @property
    def fast_math(self) -> bool:
        return "fast-math" in dict(self.options)

    @property
    def vector_bits(self) -> int:
        """Width of the widest SIMD register: 512 (AVX-512), 256 (AVX2), 128 (SSE/NEON/simd128)."""
        enabled, disabled = _feature_state(self.features)
        arch = self.triple.split("-")[0]
        if arch == "x86_64" or re.match(r"i[3-6]86$", arch):
            if (("avx512f" in enabled or self.cpu in _AVX512_CPUS)
                    and "avx512f" not in disabled):
                return 512
            if (("avx2" in enabled or "avx" in enabled or self.cpu in _AVX2_CPUS + _AVX512_CPUS)
                    and "avx" not in disabled):
                return 256
        return 128  # SSE, NEON, wasm simd128; GPUs: float4-style accesses

    @property
    def facts(self) -> "TargetFacts":
        """Vector and FMA width, cache sizes and ISA extensions (see ember.target_facts)."""
        from ember.target_facts import target_facts

        return target_facts(self)

    @property
    def fingerprint(self) -> str:
        """What makes measurements on this target comparable: kind, triple, CPU, features and
        thread count, resolved for a host target (so "llvm" on two machines differs)."""
        import hashlib

        features = ",".join(self.features)
        digest = hashlib.sha256(features.encode()).hexdigest()[:12]
        return (f"{self.kind} {self.triple} cpu={self.cpu} cores={self.num_cores} "
                f"features={digest}")

    def vector_lanes(self, dtype: str | dt.DType) -> int:
        """How many `dtype` elements fill one vector register: float32 on AVX-512 -> 16."""
        element = dt.parse(dtype).element
        return max(1, self.vector_bits // (element.storage_bytes * 8))


# ------------------------------------------------------------------------------------------
def _parse(text: str) -> tuple[str, str, tuple[str, ...], str, tuple[tuple[str, str], ...]]:
    parts = text.split()
    if not parts:
        raise TargetError("empty target string; expected e.g. 'llvm' or 'llvm -mcpu=znver4'")
    kind = parts[0]
    if kind not in KINDS:
        raise TargetError(f"unknown target kind {kind!r} in {text!r}; expected one of "
                          f"{', '.join(KINDS)}")
    mcpu, mattr, mtriple = "", (), ""
    options: dict[str, str] = {}
    for part in parts[1:]:
        if not part.startswith("-") or part == "-":
            raise TargetError(f"target {text!r}: expected an option like -mcpu=NAME, "
                              f"got {part!r}")
        key, eq, value = part.lstrip("-").partition("=")
        if key == "mcpu":
            mcpu = _require_value(text, key, value, eq)
        elif key == "mattr":
            mattr = tuple(_check_feature(text, f)
                          for f in _require_value(text, key, value, eq).split(",") if f)
        elif key == "mtriple":
            mtriple = _check_triple(text, _require_value(text, key, value, eq))
        elif key in _COMMON_OPTIONS or key in _KIND_OPTIONS[kind]:
            options[key] = _check_option(text, key, value, eq)
        else:
            known = ["mcpu", "mattr", "mtriple", *_COMMON_OPTIONS, *_KIND_OPTIONS[kind]]
            raise TargetError(f"target {text!r}: unknown option '-{key}' for kind '{kind}'; "
                              f"known: {', '.join('-' + k for k in known)}")
    if kind == "wasm":
        mtriple = mtriple or _DEFAULT_TRIPLES["wasm"]
        if not mtriple.startswith("wasm"):
            raise TargetError(f"target {text!r}: kind 'wasm' needs a wasm32/wasm64 triple, "
                              f"got {mtriple!r}")
        if "+simd128" not in mattr and "-simd128" not in mattr:
            mattr = mattr + ("+simd128",)
        # relaxed SIMD's fused multiply-add (f32x4.relaxed_madd) halves the arithmetic of
        # every dot product; engines without it load the simd128 fallback (export_wasm)
        if "-simd128" not in mattr and not {"+relaxed-simd", "-relaxed-simd"} & set(mattr):
            mattr = mattr + ("+relaxed-simd",)
    return kind, mcpu, mattr, mtriple, tuple(sorted(options.items()))


def _from_dict(spec: dict[str, Any]) -> tuple[str, str, tuple[str, ...], str,
                                               tuple[tuple[str, str], ...]]:
    known = {"kind", "mcpu", "mattr", "mtriple", "options"}
    extra = set(spec) - known
    options = _norm_options(spec.get("options", ()))
    for key in sorted(extra):  # allow {"num_cores": 2} and {"num-cores": 2} at top level
        options = options + ((key.replace("_", "-"), _option_text(spec[key])),)
    mattr = spec.get("mattr", ())
    if isinstance(mattr, str):
        mattr = tuple(f for f in mattr.split(",") if f)
    if "kind" not in spec:
        raise TargetError(f"target dict {spec!r} has no 'kind'; expected e.g. "
                          "{'kind': 'llvm', 'mcpu': 'znver4'}")
    flags = _fields_to_flags(str(spec.get("mcpu", "")), tuple(mattr),
                             str(spec.get("mtriple", "")), options)
    return _parse(" ".join([str(spec["kind"])] + flags))


def _norm_options(options: tuple[tuple[str, str], ...] | dict[str, Any]) -> tuple[
        tuple[str, str], ...]:
    items = options.items() if isinstance(options, dict) else options
    return tuple((str(k).replace("_", "-"), _option_text(v)) for k, v in items)


def _option_text(value: Any) -> str:
    if value is True:
        return ""
    return str(value)


def _fields_to_flags(mcpu: str, mattr: tuple[str, ...], mtriple: str,
                     options: tuple[tuple[str, str], ...]) -> list[str]:
    flags = []
    if mtriple:
        flags.append(f"-mtriple={mtriple}")
    if mcpu:
        flags.append(f"-mcpu={mcpu}")
    if mattr:
        flags.append(f"-mattr={','.join(mattr)}")
    for key, value in options:
        flags.append(f"-{key}={value}" if value else f"-{key}")
    return flags


def _require_value(text: str, key: str, value: str, eq: str) -> str:
    if not eq or not value:
        raise TargetError(f"target {text!r}: option '-{key}' needs a value, e.g. -{key}=...")
    return value


def _check_feature(text: str, feature: str) -> str:
    if feature[0] not in "+-" or len(feature) < 2:
        raise TargetError(f"target {text!r}: feature {feature!r} in -mattr must start with "
                          f"'+' or '-', e.g. +avx2")
    return feature


def _check_triple(text: str, triple: str) -> str:
    parts = triple.split("-")
    if len(parts) < 2 or not _ARCH.match(parts[0]) or not all(parts):
        raise TargetError(f"target {text!r}: bad triple {triple!r}; expected "
                          f"<arch>-<vendor>-<os>[-<env>], e.g. aarch64-linux-gnu")
    return triple


def _check_option(text: str, key: str, value: str, eq: str) -> str:
    if key in _FLAG_OPTIONS:
        if eq and value not in ("", "1", "true"):
            raise TargetError(f"target {text!r}: '-{key}' is a flag and takes no value")
        return ""
    value = _require_value(text, key, value, eq)
    if key in _INT_OPTIONS and not (value.isdigit() and int(value) > 0):
        raise TargetError(f"target {text!r}: '-{key}' expects a positive integer, "
                          f"got {value!r}")
    return value


def _implied_features(triple: str, cpu: str) -> tuple[str, ...]:
    """The '+' features CPU `cpu` of `triple`'s architecture has by definition (as far as
    this table knows it: the x86-64 level, ARM's NEON and FP)."""
    arch = triple.split("-")[0]
    if arch == "x86_64":
        level: tuple[str, ...]
        if cpu in _AVX512_CPUS:
            level = _X86_V4
        elif cpu in _AVX2_CPUS:
            level = _X86_V3
        elif cpu in _X86_V2_CPUS:
            level = _X86_V2
        else:
            level = _X86_V1
        return tuple("+" + f for f in level)
    if arch in ("aarch64", "arm64"):
        extra = ("lse", "fullfp16", "dotprod", "rcpc") if cpu in _ARMV82_CPUS else ()
        return tuple("+" + f for f in ("neon", "fp-armv8") + extra)
    return ()


def _feature_state(features: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """(enabled, disabled) feature names; a later flag overrides an earlier one."""
    state: dict[str, bool] = {}
    for f in features:
        state[f[1:]] = f[0] == "+"
    return {k for k, on in state.items() if on}, {k for k, on in state.items() if not on}


def _same_triple(a: str, b: str) -> bool:
    def norm(t: str) -> tuple[str, str]:
        parts = t.split("-")
        return parts[0], "linux" if "linux" in parts else parts[-1]

    return norm(a) == norm(b)


@functools.cache
def _host_info() -> tuple[str, tuple[str, ...], str]:
    """(cpu name, enabled feature flags, process triple) of this machine, via llvmlite."""
    try:
        import llvmlite.binding as llvm
    except ImportError:  # pragma: no cover - llvmlite is a dependency of the LLVM back end
        import platform

        return "generic", (), f"{platform.machine()}-unknown-linux-gnu"
    llvm.initialize_native_target()
    cpu = llvm.get_host_cpu_name()
    try:
        features = tuple(sorted(f"+{name}" for name, on in llvm.get_host_cpu_features().items()
                                if on))
    except RuntimeError:
        features = ()
    return cpu, features, llvm.get_process_triple()
