"""Targets whose code cannot run, or cannot even be generated, are refused with a TargetError
before anything dies: code for CPU features this one lacks is never run in this process (it
ended Python with SIGILL: a float16 model compiled for AVX512-FP16 on a Zen 4), an exported
library records the named CPU's extensions for the loader's check, and a CPU / feature
combination LLVM cannot generate code for (a 32-bit CPU for x86-64, x86-64 without SSE) is
found in a child process (LLVM's fatal errors ended the compiling process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ember.codegen.llvm_target import check_llvm_target, check_runs_here, required_features
from ember.errors import TargetError
from ember.runtime import cpu
from ember.target import PRESETS, Target

# x86-64 flags of an AVX2 machine (Haswell-like), as Linux names them
AVX2_FLAGS = frozenset({"sse", "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16",
                        "lahf_lm", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "abm",
                        "movbe"})


def test_required_features_include_the_named_cpus_extensions() -> None:
    spr = required_features(Target("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids"))
    assert {"avx512f", "avx512fp16", "amx-tile", "avxvnni"} <= set(spr)
    off = required_features(Target("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids "
                                   "-mattr=-avx512fp16,-amx-tile"))
    assert "avx512fp16" not in off and "amx-tile" not in off and "avx512f" in off
    v2 = required_features(Target("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64-v2"))
    assert "sse4.2" in v2 and not {"avx", "avx2", "avx512f"} & set(v2)


@pytest.mark.skipif(cpu.host_family() != "x86_64", reason="x86-64 host targets")
def test_jit_refuses_features_this_cpu_lacks(monkeypatch) -> None:
    monkeypatch.setattr(cpu, "host_flags", lambda *args: AVX2_FLAGS)
    with pytest.raises(TargetError, match="uses avx512fp16, which this CPU lacks: its code "
                                          "cannot run in this process"):
        check_runs_here(Target("llvm -mcpu=haswell -mattr=+avx512fp16"))
    with pytest.raises(TargetError, match="uses .*avx512f.*which this CPU lacks"):
        check_runs_here(Target("llvm -mcpu=znver4"))
    check_runs_here(Target("llvm -mcpu=haswell"))  # a subset of the CPU: runs
    check_runs_here(Target("llvm -mcpu=znver4 -mattr=-avx512f,-avx512bf16,-avx512vnni"))
    monkeypatch.setenv("EMBER_CPU_CHECK", "0")  # the documented way out
    check_runs_here(Target("llvm -mcpu=znver4"))


def _lacking_feature() -> str | None:
    """An x86 feature this CPU lacks (for a JIT target that must be refused)."""
    flags = cpu.host_flags()
    if cpu.host_family() != "x86_64" or flags is None:
        return None
    table = cpu.LINUX_FLAGS["x86_64"]
    return next((f for f in ("avx512fp16", "amx-tile", "sse4a", "avx512f")
                 if table[f] not in flags), None)


RUN_HALF = """
import sys
import numpy as np
import ember
from onnx import TensorProto as T, helper as h
vi = h.make_tensor_value_info
graph = h.make_graph([h.make_node("Add", ["x", "x"], ["a"]), h.make_node("Mul", ["a", "x"], ["y"])],
                     "half", [vi("x", T.FLOAT16, [64])], [vi("y", T.FLOAT16, [64])])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
try:
    ember.compile(model, target=sys.argv[1], cache=False).run({"x": np.ones(64, "float16")})
    print("ran")
except ember.errors.TargetError as error:
    print("TargetError:", error)
"""


@pytest.mark.skipif(_lacking_feature() is None, reason="this CPU has every candidate feature")
def test_compiled_model_for_a_richer_cpu_is_refused_not_killed() -> None:
    pytest.importorskip("onnx")
    feature = _lacking_feature()
    # in a child: before the check, +avx512fp16 on a Zen 4 died here with SIGILL
    done = subprocess.run([sys.executable, "-c", RUN_HALF, f"llvm -mattr=+{feature}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"uses {feature}, which this CPU lacks" in done.stdout, done.stdout


@pytest.mark.parametrize("text,match", [
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=i386", "64-bit code requested on a subtarget"),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=pentium4", "64-bit code requested on a subtarget"),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=-sse", "SSE register return with "
                                                               "SSE disabled"),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=-sse2", "SSE2 register return"),
])
def test_combinations_llvm_cannot_generate_are_refused(text: str, match: str) -> None:
    with pytest.raises(TargetError, match=f"LLVM cannot generate code for this triple, CPU "
                                          f"and features \\(.*{match}"):
        check_llvm_target(Target(text))


@pytest.mark.parametrize("preset", ["x86-64-v2", "x86-64-v4", "aarch64", "cortex-a72", "armv7",
                                    "wasm"])
def test_real_targets_pass_the_probe(preset: str) -> None:
    assert check_llvm_target(Target(PRESETS[preset])) == Target(PRESETS[preset])


def test_compile_for_a_32_bit_cpu_does_not_end_the_process() -> None:
    code = ("import ember\nfrom ember import te\n"
            "a = te.placeholder((4,), 'float32', name='a')\n"
            "b = te.compute((4,), lambda i: a[i] * 2.0, name='b')\n"
            "try:\n    ember.build(te.create_schedule(b), [a, b], "
            "target='llvm -mtriple=x86_64-linux-gnu -mcpu=i386')\n"
            "except ember.errors.TargetError as e:\n    print('TargetError', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "64-bit code requested" in done.stdout, done.stderr


@pytest.mark.parametrize("text", ["llvm -mattr=-x87,-sse",
                                  "llvm -mcpu=generic -mattr=-x87,-avx,-sse -opt-level=9",
                                  "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=-x87,-sse2"])
def test_x86_without_a_floating_point_unit_is_refused(text: str) -> None:
    # LLVM compiles these (soft-float): float arithmetic through __addsf3, which this process
    # lacks (a compiled model segfaulted on its first run), floats passed in integer
    # registers to libm functions that take them in SSE registers
    with pytest.raises(TargetError, match="soft-float calls"):
        check_llvm_target(Target(text))


def test_x86_without_x87_alone_still_compiles() -> None:
    assert check_llvm_target(Target("llvm -mattr=-x87")) == Target("llvm -mattr=-x87")


RUN_DENSE = """
import sys
import numpy as np
import ember
from onnx import TensorProto as T, helper as h, numpy_helper
vi = h.make_tensor_value_info
w = numpy_helper.from_array(np.ones((8, 5), np.float32), "w")
graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"]),
                      h.make_node("Softmax", ["m"], ["y"])], "dense",
                     [vi("x", T.FLOAT, [2, 8])], [vi("y", T.FLOAT, [2, 5])], [w])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
try:
    ember.compile(model, target=sys.argv[1], cache=False).run({"x": np.ones((2, 8), "float32")})
    print("ran")
except ember.errors.TargetError as error:
    print("TargetError:", error)
"""


@pytest.mark.skipif(cpu.host_family() != "x86_64", reason="an x86-64 host target")
def test_soft_float_model_is_refused_not_killed() -> None:
    pytest.importorskip("onnx")
    # the fuzz case (target family, seed 505002393) that ended the process with SIGSEGV
    done = subprocess.run([sys.executable, "-c", RUN_DENSE,
                           "llvm -mcpu=generic -mattr=-x87,-avx,-sse -opt-level=9"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TargetError:" in done.stdout and "soft-float" in done.stdout, done.stdout
