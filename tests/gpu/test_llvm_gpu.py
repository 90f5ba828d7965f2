"""GPU kernels through LLVM: PTX from the NVPTX backend (assembled by ptxas when the CUDA
toolkit is here, libdevice linked for math) and amdgcn code objects for rocm."""

import subprocess

import pytest

from ember.codegen.gpu_kernels import split_kernels
from ember.codegen.gpu_llvm_build import emit_amdgpu, emit_ptx
from ember.codegen.llvm_gpu import codegen_llvm_gpu
from ember.codegen.nvptx import find_ptxas
from ember.errors import CodegenError
from ember.graph.ir import Node, Value, tensor_type
from ember.lowering.build import lower_gpu
from ember.lowering.kernel import lower_group_kernels
from ember.ops.registry import get_op
from ember.target import Target
from ember.zoo import build_model

OPS = [("Conv", [(1, 8, 14, 14), (16, 8, 3, 3)], {"pads": [1, 1, 1, 1]}),
       ("Softmax", [(4, 300)], {}),
       ("Tanh", [(4, 30)], {}),
       ("MaxPool", [(1, 4, 9, 9)], {"kernel_shape": [3, 3], "strides": [2, 2]})]
needs_ptxas = pytest.mark.usefixtures("ptxas_tool")


def program(op, shapes, attrs, target, dtype="float32"):
    opdef = get_op(op)
    full = opdef.complete_attrs(attrs, op)
    values = [Value(f"x{i}", tensor_type(s, dtype)) for i, s in enumerate(shapes)]
    types = opdef.infer(full, [v.type for v in values])
    outs = [Value(f"y{i}", t) for i, t in enumerate(types)]
    node = Node(op, "n", tuple(values), tuple(outs), full)
    kernels = lower_group_kernels([node], values, outs[:1], "k", target)
    return split_kernels(lower_gpu(kernels.main), 1024)


def ptxas(ptx, tmp_path, arch="sm_90"):
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    return subprocess.run([find_ptxas(), f"-arch={arch}", str(path), "-o",
                           str(tmp_path / "k.o")], capture_output=True, text=True)


def test_kernel_ir_uses_thread_registers_shared_memory_and_barriers():
    target = Target("cuda")
    text = str(codegen_llvm_gpu(program(*OPS[0], target), target))
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in text and "llvm.nvvm.read.ptx.sreg.ctaid.z" in text
    assert "internal addrspace(3) global" in text
    assert 'call void @"llvm.nvvm.barrier0"()' in text
    assert 'define ptx_kernel void @"k_kernel0"' in text


@needs_ptxas
@pytest.mark.parametrize("op,shapes,attrs", OPS, ids=[o[0] for o in OPS])
def test_ptx_assembles_with_ptxas(op, shapes, attrs, tmp_path):
    target = Target("cuda -arch=sm_90")
    ptx = emit_ptx(program(op, shapes, attrs, target), target)
    assert ".target sm_90" in ptx and ".entry k_kernel0" in ptx
    result = ptxas(ptx, tmp_path)
    assert result.returncode == 0, result.stderr
    if op == "Softmax":  # exp from libdevice, inlined; nothing left external
        assert ".extern" not in ptx and "ex2.approx" in ptx
    if op in ("Conv", "MaxPool"):
        assert "bar.sync" in ptx and ".shared" in ptx


def test_libdevice_missing_is_a_clear_error(monkeypatch):
    import ember.codegen.gpu_llvm_build as build

    monkeypatch.setattr(build, "find_libdevice", lambda: None)
    target = Target("cuda")
    with pytest.raises(CodegenError, match="__nv_expf from libdevice, and no libdevice.10.bc"):
        emit_ptx(program("Softmax", [(4, 300)], {}, target), target)


@needs_ptxas
def test_zoo_model_ptx_through_llvm_assembles(tmp_path):
    from ember.driver_gpu import model_llvm_code

    ptx = model_llvm_code(build_model("bert-tiny", layers=1), "cuda -arch=sm_80")
    assert ptx.count(".entry") >= 10
    result = ptxas(ptx, tmp_path, "sm_80")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("gfx", ["gfx90a", "gfx1100"])
def test_amdgpu_code_objects(gfx):
    from ember.driver_gpu import model_llvm_code

    target = Target(f"rocm -mcpu={gfx}")
    for op, shapes, attrs in OPS:
        obj = emit_amdgpu(program(op, shapes, attrs, target), target)
        assert obj[:4] == b"\x7fELF"
    obj = model_llvm_code(build_model("resnet18", image_size=32), target)
    assert obj[:4] == b"\x7fELF" and b"k_" in obj
