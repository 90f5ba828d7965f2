"""Kernel objects calling a function nothing defines are refused before the JIT links them:
the linker leaves such a call jumping to address 0, so the model's first run would crash the
process (code for x86-64 without SSE and x87 called soft-float routines this process lacks)."""

from __future__ import annotations

import sys

import pytest

from ember.errors import CodegenError
from ember.lowering.link import check_resolved, object_symbols

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="ELF kernel objects")

KERNEL = """
declare float @{callee}(float)
define i32 @{name}(ptr %out, ptr %in) {{
  %x = load float, ptr %in
  %y = call float @{callee}(float %x)
  store float %y, ptr %out
  ret i32 0
}}
"""


def _object(name: str, callee: str) -> bytes:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(jit=True)
    module = llvm.parse_assembly(KERNEL.format(name=name, callee=callee))
    module.triple = llvm.get_process_triple()
    return bytes(machine.emit_object(module))


def test_a_call_nothing_defines_is_refused_by_name() -> None:
    obj = _object("k_calls_missing", "ember_test_no_such_function")
    defined, used = object_symbols(obj, "test object")
    assert "k_calls_missing" in defined and "ember_test_no_such_function" in used
    with pytest.raises(CodegenError, match="ember_test_no_such_function \\(called by k_a\\)"):
        check_resolved({"k_a": obj})


def test_calls_into_libm_and_between_objects_resolve() -> None:
    check_resolved({"k_b": _object("k_b", "expf")})  # libm: in this process
    # one object calling a function another object of the same link defines
    check_resolved({"k_c": _object("k_c", "k_d_helper"), "k_d": _object("k_d_helper", "expf")})
    check_resolved({"k_e": _object("k_e", "model_main_helper")}, ["model_main_helper"])
    with pytest.raises(CodegenError, match="__addsf3"):
        check_resolved({"k_f": _object("k_f", "__addsf3")})
