"""Portable libraries: the target recorded in the library, the loader's CPU check, presets."""

import json
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ember.driver import export_library  # noqa: E402
from ember.errors import ArgumentError, TargetError  # noqa: E402
from ember.runtime import cpu  # noqa: E402
from ember.runtime.library import LibraryTargetError, check_cpu_features, load_library  # noqa: E402
from ember.target import PRESETS, Target  # noqa: E402
from tests.lowering.test_export import conv_relu_pool  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="exporting needs cc")


@pytest.fixture(scope="module")
def v2_library(tmp_path_factory):
    model = conv_relu_pool()
    return model, export_library(model, tmp_path_factory.mktemp("v2") / "conv.so",
                                 target="x86-64-v2")


def _feeds(lib, seed=3):
    rng = np.random.default_rng(seed)
    return {s.name: rng.standard_normal(s.shape).astype(s.dtype) for s in lib.inputs}


@pytest.mark.skipif(cpu.host_family() != "x86_64", reason="an x86-64 library")
def test_x86_64_v2_library_records_its_target_and_uses_no_avx(v2_library):
    model, path = v2_library
    lib = load_library(path)
    meta = lib.metadata
    assert meta["cpu"] == "x86-64-v2" and meta["triple"] == "x86_64-linux-gnu"
    assert {"sse4.2", "popcnt", "ssse3"} <= set(meta["requires"])
    assert not {"avx", "avx2", "avx512f", "fma"} & set(meta["requires"])
    feeds = _feeds(lib)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(lib.run(feeds)[0], session.run(None, feeds)[0],
                               rtol=1e-4, atol=1e-5)
    if shutil.which("objdump"):  # the code itself: SSE registers only
        text = subprocess.run(["objdump", "-d", str(path)], capture_output=True, text=True,
                              check=True).stdout
        assert "xmm" in text and "%ymm" not in text and "%zmm" not in text


def test_loader_refuses_a_cpu_without_the_features(v2_library, monkeypatch):
    _, path = v2_library
    meta = {"target": "llvm -mcpu=x86-64-v4", "cpu": "x86-64-v4", "triple": "x86_64-linux-gnu",
            "requires": ["sse2", "avx2", "avx512f", "avx512bw"]}
    old_cpu = frozenset({"sse", "sse2", "pni", "ssse3", "avx", "avx2"})
    with pytest.raises(LibraryTargetError, match=r"uses avx512f, avx512bw, which this CPU "
                                                 r"lacks.*x86-64-v2"):
        check_cpu_features(path, meta, old_cpu)
    check_cpu_features(path, dict(meta, requires=["sse2", "avx2"]), old_cpu)  # has them
    monkeypatch.setenv("EMBER_CPU_CHECK", "0")
    check_cpu_features(path, meta, old_cpu)  # told not to check
    monkeypatch.delenv("EMBER_CPU_CHECK")
    with pytest.raises(ArgumentError, match="'requires' is not a list"):
        check_cpu_features(path, dict(meta, requires="avx2"), old_cpu)
    # the loader runs the same check on this machine's flags, before any library code runs
    monkeypatch.setattr(cpu, "host_flags", lambda: frozenset({"sse", "sse2"}))
    if cpu.host_family() == "x86_64":
        with pytest.raises(LibraryTargetError, match="uses pni|uses .*sse4.2"):
            load_library(path)


def test_arm_flags_map_from_llvm_names():
    pi4 = frozenset("fp asimd evtstrm crc32 cpuid".split())  # a Raspberry Pi 4's Features
    assert cpu.missing_features("aarch64", Target("cortex-a72").code_features, pi4) == []
    assert cpu.missing_features("aarch64", ["neon", "dotprod", "lse"], pi4) == ["dotprod",
                                                                                 "lse"]
    armv7 = frozenset("half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva".split())
    assert cpu.missing_features("armv7a", Target("armv7").code_features, armv7) == []


def test_host_flags_parse_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 avx2\n\nprocessor\t: 1\n"
                    "Features\t: fp asimd\n")
    assert cpu.host_flags(str(info)) == {"fpu", "sse", "sse2", "avx2", "fp", "asimd"}
    assert cpu.host_flags(str(tmp_path / "absent")) is None


def test_unknown_flags_check_nothing(monkeypatch):
    monkeypatch.setattr(cpu, "host_flags", lambda: None)  # no /proc/cpuinfo: cannot tell
    assert cpu.missing_features("x86_64", ["avx512f"]) == []


def test_a_host_library_loads_here(tmp_path):
    lib = load_library(export_library(conv_relu_pool(), tmp_path / "host.so"))
    assert set(lib.metadata["requires"]) <= set(cpu.LINUX_FLAGS.get(cpu.host_family(), {}))
    assert lib.metadata["features"] == list(Target("llvm").code_features)


def test_a_library_for_another_architecture_is_refused_before_dlopen(tmp_path):
    if cpu.host_family() == "aarch64":
        pytest.skip("needs a foreign architecture")
    fake = tmp_path / "arm.so"
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    head[16:18] = (3).to_bytes(2, "little")      # ET_DYN
    head[18:20] = (183).to_bytes(2, "little")    # EM_AARCH64
    fake.write_bytes(bytes(head))
    with pytest.raises(LibraryTargetError, match="built for aarch64, this machine is"):
        load_library(fake)


def test_presets_expand_to_targets():
    assert Target("cortex-a72") == Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")
    assert Target("x86-64-v3").vector_bits == 256 and Target("x86-64-v4").vector_bits == 512
    assert Target("x86-64-v2").vector_bits == 128
    assert "avx2" in Target("x86-64-v3").code_features
    assert "avx512f" not in Target("x86-64-v3").code_features
    assert "avx512bw" not in Target("llvm -mcpu=x86-64-v4 -mattr=-avx512f").code_features
    for name in PRESETS:
        assert Target(Target(name)) == Target(name) and str(Target(name))
    with pytest.raises(TargetError, match="unknown target kind 'cortex-a99'"):
        Target("cortex-a99")
    json.dumps(list(Target("armv7").code_features))
