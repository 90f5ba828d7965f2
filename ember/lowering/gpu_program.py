"""GPU kernels of fused groups, cached on disk, and the one source text of a model.

A group's code is its kernels' printed source, the helper functions they call, their
launches and its temporaries' sizes (`GroupCode`). It is cached in the kernel cache under
the group's key (its structure and knobs), the target string (kind and options: -arch,
-max-threads-per-block...) and the compiler version, so compiling a model again (or another
model with the same layers) skips lowering those groups. The model's source joins every
group's kernels behind one prelude; for CUDA its PTX is cached too, keyed by that source.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ember.codegen.gpu import check_shared_memory, gpu_dialect, max_threads
from ember.codegen.gpu_kernels import DeviceProgram, split_kernels
from ember.codegen.gpu_source import assemble, print_kernels
from ember.errors import EmberError
from ember.lowering.cache import KernelCache, cache_key
from ember.lowering.groups import FusedGroup
from ember.runtime.device_module import Launch
from ember.target import Target
from ember.tir.expr import Var
from ember.tir.function import Buffer

FORMAT = "ember-gpu-group/2"
# graph optimization level of GPU compiles: level 3's blocked (NCHWc) layout is sized for
# CPU vector registers
GPU_GRAPH_LEVEL = 2


@dataclass(frozen=True)
class GroupCode:
    """What one fused group contributes to a GPU program (see the module docstring)."""

    bodies: tuple[str, ...]
    helpers: tuple[str, ...]
    launches: tuple[Launch, ...]
    temporaries: tuple[int, ...]

    def to_bytes(self) -> bytes:
        launches = [[a.kernel, list(a.buffers), list(a.scalars), list(a.grid), list(a.block),
                     list(a.values)] for a in self.launches]
        return json.dumps({"format": FORMAT, "bodies": self.bodies, "helpers": self.helpers,
                           "launches": launches, "temporaries": self.temporaries}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> GroupCode | None:
        """The code stored by `to_bytes`, or None for an entry of another format."""
        try:
            d = json.loads(data)
            if d.get("format") != FORMAT:
                return None
            launches = tuple(Launch(k, tuple(b), tuple(s), tuple(g), tuple(bl),  # type: ignore
                                    tuple(v)) for k, b, s, g, bl, v in d["launches"])
            return cls(tuple(d["bodies"]), tuple(d["helpers"]), launches,
                       tuple(int(t) for t in d["temporaries"]))
        except (ValueError, KeyError, TypeError):
            return None


def _nbytes(buf: Buffer) -> int:
    from ember.lowering.build import _nbytes as nbytes

    return nbytes(buf)


def lower_group_program(group: FusedGroup, target: Target
                        ) -> tuple[DeviceProgram, tuple[Launch, ...], tuple[int, ...]]:
    """One group's kernels, their launches (buffer indices: the group's arguments, then
    its temporaries) and its temporaries' byte sizes."""
    from ember.lowering.build import lower_gpu
    from ember.lowering.kernel import lower_group_kernels

    try:
        kernels = lower_group_kernels(group.nodes, group.inputs, group.outputs, group.symbol,
                                      target, knobs=group.knobs)
        func = lower_gpu(kernels.main)
        program = split_kernels(func, max_threads(target))
        check_shared_memory(program, target)
    except EmberError as error:
        raise type(error)(f"fused group '{group.name}' ({group.describe()}): {error}") from None
    buffers = [p for p in func.params if isinstance(p, Buffer)] + list(program.temporaries)
    return program, program_launches(program, buffers, []), tuple(
        _nbytes(b) for b in program.temporaries)


def program_launches(program: DeviceProgram, buffers: Sequence[Buffer],
                     scalars: Sequence[Var]) -> tuple[Launch, ...]:
    """The launches of `program` in order (a host loop's kernels once per step, the step
    passed as an int32 value), buffers and scalars as indices into `buffers` / `scalars`."""
    position = {b.data: i for i, b in enumerate(buffers)}
    launches = []
    for k, step in program.launch_order():
        own = tuple(scalars.index(v) for v in k.scalars if v is not k.step)
        launches.append(Launch(k.name, tuple(position[b.data] for b in k.buffers), own,
                               k.grid, k.block, () if step is None else (step,)))
    return tuple(launches)


def lower_group_code(group: FusedGroup, target: Target) -> GroupCode:
    """Lower, split and print one group's kernels."""
    program, launches, temporaries = lower_group_program(group, target)
    try:
        bodies, helpers = print_kernels(program, gpu_dialect(target))
    except EmberError as error:
        raise type(error)(f"fused group '{group.name}' ({group.describe()}): {error}") from None
    return GroupCode(tuple(bodies), tuple(sorted(helpers)), launches, temporaries)


def llvm_code(groups: Sequence[FusedGroup], target: Target
              ) -> tuple[bytes | str, dict[str, tuple[Launch, ...]], dict[str, tuple[int, ...]]]:
    """Every distinct group's kernels in one LLVM module, emitted as PTX text (cuda) or an
    HSA code object (rocm, linked by ld.lld), with the launches and temporaries per group
    symbol."""
    from ember.codegen.gpu_llvm_build import emit_code_object, emit_ptx

    kernels = []
    launches: dict[str, tuple[Launch, ...]] = {}
    temporaries: dict[str, tuple[int, ...]] = {}
    for g in groups:
        if g.symbol in launches:
            continue
        program, launches[g.symbol], temporaries[g.symbol] = lower_group_program(g, target)
        kernels += program.kernels
    whole = DeviceProgram("model", (), (), tuple(kernels))
    code = emit_ptx(whole, target) if target.kind == "cuda" else emit_code_object(whole, target)
    return code, launches, temporaries


def group_code(group: FusedGroup, target: Target, cache: KernelCache | None = None
               ) -> GroupCode:
    """A group's code from `cache` when there, else lowered (and stored)."""
    key = cache_key(group.key, f"{target} /gpu-source")
    if cache is not None:
        blob = cache.get(key)
        code = GroupCode.from_bytes(blob) if blob is not None else None
        if code is not None:
            return code
    code = lower_group_code(group, target)
    if cache is not None:
        cache.put(key, code.to_bytes())
    return code


def model_source(codes: Sequence[GroupCode], target: Target) -> str:
    """One source text with every group's kernels (helpers once)."""
    bodies = [b for c in codes for b in c.bodies]
    helpers = {h for c in codes for h in c.helpers}
    return assemble(bodies, helpers, gpu_dialect(target))


def device_code(source: str, target: Target, cache: KernelCache | None = None) -> str:
    """What the device loads: the source itself (OpenCL), or PTX from nvcc (CUDA, cached
    by the source's digest and the target)."""
    if target.kind == "opencl":
        return source
    if target.kind == "cuda":
        from ember.codegen.nvptx import cuda_to_ptx

        digest = hashlib.sha256(source.encode()).hexdigest()
        key = cache_key(digest, f"{target} /ptx")
        if cache is not None:
            blob = cache.get(key)
            if blob is not None:
                return blob.decode()
        ptx = cuda_to_ptx(source, target)
        if cache is not None:
            cache.put(key, ptx.encode())
        return ptx
    raise EmberError(f"ember.compile for target kind '{target.kind}' generates code only; "
                     "use ember.driver_gpu.model_source to see it (OpenCL and CUDA run)")
