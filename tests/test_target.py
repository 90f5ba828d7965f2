"""Target: parsing, round-tripping, host detection, vector widths and error messages."""

from __future__ import annotations

import os

import pytest

from ember.errors import TargetError
from ember.target import Target


def test_parse_full_llvm_target() -> None:
    t = Target("llvm -mcpu=znver4 -mattr=+avx2,+fma -mtriple=x86_64-linux-gnu -num-cores=2")
    assert (t.kind, t.mcpu, t.mattr, t.mtriple) == ("llvm", "znver4", ("+avx2", "+fma"),
                                                     "x86_64-linux-gnu")
    assert t.num_cores == 2 and t.options == (("num-cores", "2"),)
    assert Target(str(t)) == t and hash(Target(str(t))) == hash(t)
    assert t.vector_bits == 512 and t.vector_lanes("float32") == 16
    assert t.vector_lanes("int8") == 64 and t.vector_lanes("float64") == 8


@pytest.mark.parametrize("text", ["llvm", "c", "cuda", "rocm", "opencl", "metal", "wasm",
                                  "llvm -mtriple=aarch64-linux-gnu -mattr=+neon",
                                  "llvm -mtriple=armv7a-linux-gnueabihf -mattr=+neon,+vfp4",
                                  "cuda -arch=sm_80", "llvm -fast-math -opt-level=2"])
def test_round_trip(text: str) -> None:
    t = Target(text)
    assert Target(str(t)) == t
    assert Target(t) == t


def test_equivalent_spellings() -> None:
    expected = Target("llvm -mcpu=znver4 -num-cores=4")
    assert Target({"kind": "llvm", "mcpu": "znver4", "num_cores": 4}) == expected
    assert Target({"kind": "llvm", "mcpu": "znver4", "options": {"num-cores": 4}}) == expected
    assert Target("llvm", mcpu="znver4", options={"num_cores": 4}) == expected
    assert Target("  llvm   -num-cores=4 -mcpu=znver4 ") == expected


def test_wasm_is_llvm_wasm32_with_simd() -> None:
    t = Target("wasm")
    assert t.triple == "wasm32-unknown-unknown" and "+simd128" in t.mattr
    assert t.vector_bits == 128 and t.vector_lanes("float32") == 4
    assert not t.is_host


def test_vector_widths() -> None:
    assert Target("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell").vector_bits == 256
    assert Target("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64").vector_bits == 128
    assert Target("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx512f").vector_bits \
        == 512
    assert Target("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512f").vector_bits \
        == 256
    assert Target("llvm -mtriple=aarch64-linux-gnu -mattr=+neon").vector_bits == 128
    assert Target("llvm -mtriple=aarch64-linux-gnu").vector_lanes("float16") == 8


def test_host_detection() -> None:
    import llvmlite.binding as llvm

    host = Target.host()
    assert host.mcpu == llvm.get_host_cpu_name()
    assert host.mtriple == llvm.get_process_triple()
    assert host.is_host and Target(str(host)) == host
    plain = Target("llvm")
    assert plain.is_host and plain.cpu == host.mcpu and plain.features == host.mattr
    assert plain.vector_bits == host.vector_bits
    if "+avx512f" in host.mattr:
        assert host.vector_bits == 512
    assert plain.num_cores == len(os.sched_getaffinity(0))
    # a cross triple is not the host; its CPU is generic unless given
    cross = Target("llvm -mtriple=aarch64-linux-gnu")
    assert not cross.is_host and cross.cpu == "generic" and cross.features == ()


@pytest.mark.parametrize("text,message", [
    ("", "empty target string"),
    ("foo -mcpu=x", "unknown target kind 'foo'"),
    ("llvm -mcpuu=znver4", "unknown option '-mcpuu' for kind 'llvm'"),
    ("cuda -mfloat-abi=hard", "unknown option '-mfloat-abi' for kind 'cuda'"),
    ("llvm -mtriple=bogus", "bad triple 'bogus'"),
    ("llvm -mtriple=sparc99-sun-solaris", "bad triple 'sparc99-sun-solaris'"),
    ("llvm -mcpu", "'-mcpu' needs a value"),
    ("llvm -num-cores=0", "'-num-cores' expects a positive integer, got '0'"),
    ("llvm -mattr=avx2", "feature 'avx2' in -mattr must start with '\\+' or '-'"),
    ("llvm znver4", "expected an option like -mcpu=NAME, got 'znver4'"),
    ("wasm -mtriple=x86_64-linux-gnu", "kind 'wasm' needs a wasm32/wasm64 triple"),
    ("llvm -fast-math=maybe", "'-fast-math' is a flag"),
])
def test_bad_targets_name_the_bad_part(text: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        Target(text)


def test_bad_spec_types() -> None:
    with pytest.raises(TargetError, match="expected a target string, dict or Target, got int"):
        Target(3)  # type: ignore[arg-type]
    with pytest.raises(TargetError, match="has no 'kind'"):
        Target({"mcpu": "znver4"})
    with pytest.raises(TargetError, match="unknown option '-colour'"):
        Target({"kind": "llvm", "colour": "red"})
