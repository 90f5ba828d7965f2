"""float16 arithmetic on x86 has two code paths, and each is forced here by target features
whatever CPU runs the tests:

- conversion through float32 (no AVX512-FP16: `-mattr=-avx512fp16`, or a CPU without it):
  every operation is computed in float and rounded back to half, exactly numpy's answers;
  with F16C the conversions are instructions, without it (x86-64-v2) library calls.
- native half arithmetic (`-mattr=+avx512fp16`): vaddph / vfmsub213ph, where a multiply and
  a subtract contract into one FMA that rounds once. It runs only on a CPU with AVX512-FP16
  (Sapphire Rapids and later); elsewhere its assembly is checked, and running it in this
  process is refused (it would die on an illegal instruction).
"""

from __future__ import annotations

import numpy as np
import pytest

from ember.codegen.jit import build_llvm, emit_assembly
from ember.errors import TargetError
from ember.runtime import cpu
from ember.target import Target
from tests.codegen.test_llvm import elementwise

pytestmark = pytest.mark.skipif(cpu.host_family() != "x86_64", reason="x86-64 code paths")

N = 64
HAS_FP16 = "avx512_fp16" in (cpu.host_flags() or ())


def _kernel(lanes: int):
    return elementwise(lambda a, b: (a + b) * a - b, ["float16"] * 2, "float16", n=N,
                       lanes=lanes)


def _inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.uniform(-9, 9, N).astype("float16"), rng.uniform(-9, 9, N).astype("float16"))


def _run(target: str, lanes: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(N, "float16")
    build_llvm(_kernel(lanes), Target(target))(a, b, out)
    return out


def _ops(asm: str) -> set[str]:
    return {line.split()[0] for line in asm.splitlines() if line.strip().startswith("v")}


@pytest.mark.parametrize("lanes", [1, 16])
@pytest.mark.parametrize("target", [
    "llvm -mattr=-avx512fp16",                  # this CPU, native half arithmetic off
    "llvm -mcpu=x86-64-v3 -mattr=-avx512fp16",  # F16C conversions, AVX2 float arithmetic
    "llvm -mcpu=x86-64-v2",                     # no F16C: conversions are library calls
])
def test_conversion_path_rounds_every_operation_like_numpy(target: str, lanes: int) -> None:
    cpu_name = Target(target).mcpu
    if cpu_name and cpu.missing_features("x86_64", Target(target).code_features):
        pytest.skip(f"this CPU cannot run {cpu_name}")
    a, b = _inputs(lanes)
    np.testing.assert_array_equal(_run(target, lanes, a, b), (a + b) * a - b)


@pytest.mark.parametrize("lanes", [1, 16])
def test_conversion_path_assembly(lanes: int) -> None:
    asm = emit_assembly([_kernel(lanes)], "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids "
                                          "-mattr=-avx512fp16")
    ops = _ops(asm)
    assert not any(op.endswith(("ph", "sh")) and op.startswith(("vadd", "vfm", "vmul"))
                   for op in ops), ops
    assert {"vcvtph2ps", "vcvtps2ph"} <= ops, ops


@pytest.mark.parametrize("lanes", [1, 16])
def test_native_path_assembly(lanes: int) -> None:
    # forced by the feature alone, on this machine's CPU name (a Zen 4 has no AVX512-FP16)
    asm = emit_assembly([_kernel(lanes)], "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 "
                                          "-mattr=+avx512fp16")
    ops = _ops(asm)
    assert any(op.startswith("vadd") and op.endswith(("ph", "sh")) for op in ops), ops
    assert any(op.startswith("vfmsub") and op.endswith(("ph", "sh")) for op in ops), ops
    assert "vcvtps2ph" not in ops, ops


@pytest.mark.skipif(HAS_FP16, reason="this CPU has AVX512-FP16: the native path runs")
def test_native_path_is_refused_where_it_cannot_run() -> None:
    with pytest.raises(TargetError, match="uses avx512fp16, which this CPU lacks"):
        build_llvm(_kernel(16), Target("llvm -mattr=+avx512fp16"))


@pytest.mark.skipif(not HAS_FP16, reason="needs a CPU with AVX512-FP16")
@pytest.mark.parametrize("lanes", [1, 16])
def test_native_path_rounds_once_per_fma(lanes: int) -> None:
    a, b = _inputs(10 + lanes)
    out = _run("llvm -mattr=+avx512fp16", lanes, a, b)
    total = a + b  # rounded to half, by vaddph as by numpy
    fused = (total.astype("float64") * a - b).astype("float16")  # exact, then one rounding
    per_op = total * a - b
    assert ((out == fused) | (out == per_op)).all(), np.flatnonzero((out != fused)
                                                                   & (out != per_op))
