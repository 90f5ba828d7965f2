"""Target CPU names and features are checked against LLVM's own lists before LLVM sees them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import te
from ember.cli import main
from ember.codegen.jit import emit_object
from ember.codegen.llvm_target import check_llvm_target, llvm_target_info, parse_help
from ember.errors import TargetError
from ember.target import Target

HELP = """Available CPUs for this target:

  cortex-a76   - Select the cortex-a76 processor.
  generic      - Select the generic processor.

Available features for this target:

  neon         - Enable Advanced SIMD instructions.
  v8.2a        - Support ARM v8.2a architecture.

Use +feature to enable a feature, or -feature to disable it.
For example, llc -mcpu=mycpu -mattr=+feature1,-feature2
"""


def _add_schedule():
    a = te.placeholder((16,), "float32", name="a")
    b = te.compute((16,), lambda i: a[i] + 1.0, name="b")
    return te.create_schedule(b), [a, b]


def test_parse_help_reads_both_lists() -> None:
    info = parse_help(HELP, "aarch64-linux-gnu")
    assert info.cpus == {"cortex-a76", "generic"}
    assert info.features == {"neon", "v8.2a"}


@pytest.mark.parametrize("triple,cpu,feature", [
    ("x86_64-unknown-linux-gnu", "znver4", "avx512f"),
    ("aarch64-linux-gnu", "neoverse-v1", "neon"),
    ("armv7a-linux-gnueabihf", "cortex-a53", "neon"),
    ("wasm32-unknown-unknown", "generic", "simd128"),
])
def test_llvm_lists_know_the_usual_names(triple: str, cpu: str, feature: str) -> None:
    info = llvm_target_info(triple)
    assert info is not None and cpu in info.cpus and feature in info.features
    assert "nonsense" not in info.cpus


@pytest.mark.parametrize("text", ["llvm", "llvm -mcpu=znver4 -mattr=+avx2,-fma", "wasm",
                                  "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -mattr=+neon",
                                  "cuda -arch=sm_80"])
def test_known_targets_pass(text: str) -> None:
    assert check_llvm_target(Target(text)) == Target(text)


@pytest.mark.parametrize("text,match", [
    ("llvm -mcpu=nonsense", "does not know CPU 'nonsense'"),
    ("llvm -mcpu=skylake-avx51", "did you mean skylake-avx512"),
    ("llvm -mattr=+bogus", "does not know feature '\\+bogus'"),
    ("llvm -mtriple=aarch64-linux-gnu -mattr=+avx2", "feature '\\+avx2'.*aarch64"),
    ("cuda -arch=sm_7", "CPU 'sm_7'"),
])
def test_unknown_cpu_or_feature_is_a_target_error(text: str, match: str) -> None:
    with pytest.raises(TargetError, match=match):
        check_llvm_target(Target(text))


def test_build_and_emit_reject_before_llvm_sees_it() -> None:
    s, args = _add_schedule()
    with pytest.raises(TargetError, match="CPU 'nonsense'"):
        ember.build(s, args, target="llvm -mcpu=nonsense")
    func = ember.lower(s, args, name="add_one")
    with pytest.raises(TargetError, match="feature '\\+bogus'"):
        emit_object([func], "llvm -mattr=+bogus")
    f = ember.build(s, args, target="llvm -mcpu=x86-64-v2")  # a real CPU still compiles
    x, out = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    f(x, out)
    np.testing.assert_array_equal(out, x + 1)


def test_compile_rejects_unknown_cpu() -> None:
    from ember.graph.ir import GraphBuilder

    b = GraphBuilder("tiny")
    x = b.input("x", (2, 4), "float32")
    y, = b.add("Relu", [x])
    with pytest.raises(TargetError, match="CPU 'nonsense'"):
        ember.compile(b.finish([y]), target="llvm -mcpu=nonsense", cache=False)


def test_unknown_cpu_does_not_kill_the_process() -> None:
    # before the check this ended Python with "LLVM ERROR: 64-bit code requested ..."
    code = ("import ember\nfrom ember import te\n"
            "a = te.placeholder((4,), 'float32', name='a')\n"
            "b = te.compute((4,), lambda i: a[i] * 2.0, name='b')\n"
            "try:\n    ember.build(te.create_schedule(b), [a, b], target='llvm -mcpu=nonsense')\n"
            "except ember.errors.TargetError as e:\n    print('TargetError')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "TargetError" in done.stdout, done.stderr


def test_cli_target_agrees(capsys) -> None:
    assert main(["target", "llvm -mcpu=nonsense"]) == 2
    assert "does not know CPU 'nonsense'" in capsys.readouterr().err
    assert main(["target", "llvm -mattr=+bogus"]) == 2
    assert "feature '+bogus'" in capsys.readouterr().err
    assert main(["target", "llvm -mcpu=znver4"]) == 0
    assert "cpu:          znver4" in capsys.readouterr().out
    assert main(["target", "llvm -mtriple=aarch64-linux-gnu", "--list-cpus"]) == 0
    assert "cortex-a76" in capsys.readouterr().out.split()
