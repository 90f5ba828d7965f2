"""The GPU kernel cache: a group's code is reused across compiles (same structure, target
and knobs) and rebuilt when any of them changes or the entry is damaged."""

import numpy as np
import pytest

from ember.lowering.cache import KernelCache
from ember.lowering.gpu_program import GroupCode
from ember.runtime.device_module import Launch
from ember.target import Target
from ember.zoo import build_model, random_inputs


def test_group_code_round_trips_and_rejects_other_formats():
    code = GroupCode(("__kernel void k() {}",), ("ember_floordiv_i32",),
                     (Launch("k", (0, 2), (), (4, 1, 1), (64, 2, 1)),), (128,))
    assert GroupCode.from_bytes(code.to_bytes()) == code
    assert GroupCode.from_bytes(b"not json") is None
    assert GroupCode.from_bytes(b'{"format": "other"}') is None


def test_second_compile_reuses_every_group(opencl, tmp_path):
    from ember.driver_gpu import compile_gpu

    model = build_model("bert-tiny", layers=1)
    feeds = random_inputs(model, seed=0)
    cache = KernelCache(tmp_path)
    first = compile_gpu(model, Target("opencl"), cache=cache)
    assert first.stats["cached"] == 0
    unique = len({g for g in first.launches})
    second = compile_gpu(model, Target("opencl"), cache=cache)
    assert second.stats["cached"] == unique
    for a, b in zip(first.run(feeds), second.run(feeds)):
        np.testing.assert_array_equal(a, b)
    # another thread limit is another target: nothing reused
    third = compile_gpu(model, Target("opencl -max-threads-per-block=128"), cache=cache)
    assert third.stats["cached"] == 0


def test_changed_knobs_miss_and_damaged_entries_rebuild(opencl, tmp_path):
    from ember.driver_gpu import compile_gpu
    from ember.ops.gpu.knobs import GpuInjectiveKnobs, GpuReductionKnobs

    model = build_model("bert-tiny", layers=1)
    feeds = random_inputs(model, seed=1)
    cache = KernelCache(tmp_path)
    base = compile_gpu(model, Target("opencl"), cache=cache)
    expected = base.run(feeds)

    from ember.lowering.kernel import knob_family
    from ember.ops.registry import get_op

    def other(group, task):
        family = knob_family(get_op(task.op), task.target)
        if family is GpuInjectiveKnobs:
            return GpuInjectiveKnobs(threads=64)
        if family is GpuReductionKnobs:
            return GpuReductionKnobs(threads=32)
        return None

    changed = compile_gpu(model, Target("opencl"), cache=cache, knobs=other)
    assert changed.stats["cached"] < len(changed.launches)
    for got, ref in zip(changed.run(feeds), expected):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    for path in (tmp_path / "kernels").rglob("*.obj"):
        path.write_bytes(path.read_bytes()[:-7])  # truncated entries
    rebuilt = compile_gpu(model, Target("opencl"), cache=cache)
    assert rebuilt.stats["cached"] == 0 and cache.corrupted > 0
    for got, ref in zip(rebuilt.run(feeds), expected):
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("kind,marker", [("metal", "kernel void"), ("cuda", "__global__"),
                                         ("opencl", "__kernel")])
def test_model_source_for_every_source_kind(kind, marker):
    from ember.driver_gpu import model_source

    source = model_source(build_model("resnet18", image_size=32), kind)
    assert source.count(marker) >= 10
    assert "pad_shared" in source or "col_shared" in source  # the conv schedules
