"""Default GPU schedules per op family, chosen by `schedule_gpu` (the one dispatch point)."""

from ember.ops.gpu.dispatch import GPU_KINDS, gpu_compute, gpu_knobs, is_gpu, schedule_gpu

__all__ = ["GPU_KINDS", "gpu_compute", "gpu_knobs", "is_gpu", "schedule_gpu"]
