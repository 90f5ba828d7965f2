"""Target facts: per-CPU tables for cross targets, sysfs caches for the host, -mattr limits."""

import pytest

from ember.target import Target
from ember.target_facts import _parse_size, _sysfs_caches


def test_intel_server_with_amx():
    f = Target("llvm -mcpu=sapphirerapids").facts
    assert (f.vector_bits, f.fma_units, f.fma_bits) == (512, 2, 512)
    assert f.has("amx-bf16") and f.has("avx512fp16") and f.has("avx512vnni")
    assert (f.l1d_bytes, f.l2_bytes, f.source) == (48 * 1024, 2 * 1024 ** 2, "table")
    assert f.fma_lanes_per_cycle == 32  # two 16-lane FMAs a cycle


def test_a_client_model_with_amx_is_a_server_core():
    # a virtual machine on Sapphire Rapids may report model 167, which LLVM names rocketlake
    # (one 512-bit FMA pipe); AMX exists only on the server cores, which have two
    vm = Target("llvm -mcpu=rocketlake -mattr=+amx-tile,+amx-bf16,+avx512fp16").facts
    assert (vm.fma_units, vm.fma_bits, vm.latency_accumulators) == (2, 512, 8)
    client = Target("llvm -mcpu=rocketlake").facts
    assert (client.fma_units, client.fma_bits, client.latency_accumulators) == (1, 512, 4)


def test_zen4_two_256_bit_pipes_no_amx():
    f = Target("llvm -mcpu=znver4").facts
    assert (f.vector_bits, f.fma_units, f.fma_bits) == (512, 2, 256)
    assert f.has("avx512bf16") and not f.has("amx-tile") and not f.has("avx512fp16")


def test_disabled_features_narrow_the_facts():
    f = Target("llvm -mcpu=sapphirerapids -mattr=-avx512f,-amx-tile").facts
    assert f.vector_bits == 256 and f.fma_bits == 256
    assert not f.has("avx512f") and not f.has("amx-tile") and f.has("amx-bf16")


def test_arm_and_unknown_cpus_fall_back():
    n1 = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1").facts
    assert (n1.arch, n1.vector_bits, n1.l1d_bytes) == ("arm", 128, 64 * 1024)
    assert n1.has("neon") and n1.has("dotprod")
    generic = Target("llvm -mtriple=aarch64-linux-gnu").facts
    assert generic.source == "fallback" and generic.has("neon") and generic.fma_units == 2
    assert Target("wasm").facts.has("simd128")


def test_host_facts_and_fingerprint():
    host = Target("llvm").facts
    assert host.l1d_bytes > 0 and host.num_cores >= 1
    assert host.vector_bits == Target.host().vector_bits
    one, two = Target("llvm -num-cores=1"), Target("llvm -num-cores=2")
    assert one.fingerprint != two.fingerprint
    assert Target("llvm -mcpu=znver4").fingerprint != Target("llvm -mcpu=znver3").fingerprint


def test_sysfs_parsing(tmp_path):
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "105M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "coherency_line_size").write_text("64\n")
    assert _sysfs_caches(tmp_path) == (48 * 1024, 2048 * 1024, 105 * 1024 ** 2, 64)
    assert _sysfs_caches(tmp_path / "missing") is None
    assert _parse_size("1024K") == 1024 ** 2 and _parse_size("junk") == 0


@pytest.mark.parametrize("cpu", ["cascadelake", "icelake-server", "alderlake", "znver3"])
def test_every_table_cpu_has_consistent_facts(cpu):
    f = Target(f"llvm -mcpu={cpu}").facts
    assert f.fma_bits <= f.vector_bits and f.l2_bytes > f.l1d_bytes and f.has("fma")


@pytest.mark.parametrize("spec, registers, latency, accumulators", [
    ("llvm -mcpu=znver4", 32, 4, 4),               # one 512-bit FMA a cycle (two 256-bit pipes)
    ("llvm -mcpu=sapphirerapids", 32, 4, 8),       # two 512-bit FMA pipes
    ("llvm -mcpu=znver4 -mattr=-avx512f", 16, 4, 8),  # ymm only: 16 registers, two pipes
    ("llvm -mcpu=skylake", 16, 4, 8),
    ("llvm -mcpu=haswell", 16, 5, 10),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", 32, 7, 14),
    ("llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7", 16, 7, 7),
    ("llvm -mcpu=x86-64-v2", 16, 4, 4),
])
def test_register_file_and_fma_depth(spec, registers, latency, accumulators):
    f = Target(spec).facts
    assert (f.vector_registers, f.fma_latency, f.latency_accumulators) == (
        registers, latency, accumulators)
    assert f.to_dict()["vector_registers"] == registers
