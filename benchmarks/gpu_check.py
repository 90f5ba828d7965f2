"""GPU check: zoo models compiled for a GPU target against onnxruntime in the same run: one
JSON line per model with the max error, ember's and onnxruntime's median latencies.

    python benchmarks/gpu_check.py --target cuda --models resnet18,mobilenet_v2,bert-tiny
    python benchmarks/gpu_check.py --target opencl --small     # PoCL on a CPU: tiny inputs

Latency: `DeviceModel.time` (one copy in, the kernels, one copy back; median of --repeat
runs after a warm-up); onnxruntime runs on the CPU with every core (its CUDA provider when
`--ort-cuda` is given and available).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ember.target_facts import host_cpu_model  # noqa: E402

SMALL = {"resnet18": {"image_size": 32}, "mobilenet_v2": {"image_size": 32},
         "bert-tiny": {"layers": 1}}


def ort_latency(model, feeds, repeat: int, cuda: bool) -> tuple[list[np.ndarray], float]:
    import onnxruntime as ort

    from benchmarks.peers import ort_session

    session = ort_session(model.SerializeToString(), os.cpu_count() or 1)
    if cuda and "CUDAExecutionProvider" in ort.get_available_providers():
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CUDAExecutionProvider"])
    outputs = session.run(None, feeds)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        samples.append(time.perf_counter() - start)
    return outputs, statistics.median(samples)


def check(name: str, target: str, small: bool, repeat: int, ort_cuda: bool) -> dict:
    import ember
    from ember.zoo import build_model, random_inputs

    model = build_model(name, **(SMALL.get(name, {}) if small else {}))
    feeds = random_inputs(model, seed=0)
    start = time.perf_counter()
    compiled = ember.compile(model, target=target)
    compile_s = time.perf_counter() - start
    got = compiled.run(feeds)
    ref, ort_s = ort_latency(model, feeds, repeat, ort_cuda)
    error = max(float(np.max(np.abs(g.astype(np.float64) - r))) for g, r in zip(got, ref))
    ember_s = compiled.time(feeds, repeat=repeat)
    return {"model": name, "target": target, "small": small, "max_abs_error": error,
            "ember_ms": round(ember_s * 1e3, 3), "onnxruntime_ms": round(ort_s * 1e3, 3),
            "ratio": round(ember_s / ort_s, 3), "compile_s": round(compile_s, 1),
            "kernels": compiled.stats.get("kernels"), "cpu": host_cpu_model(),
            "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--models", default="resnet18,mobilenet_v2,bert-tiny")
    parser.add_argument("--small", action="store_true", help="small inputs (slow devices)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--ort-cuda", action="store_true")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    args = parser.parse_args(argv)
    failed = 0
    for name in args.models.split(","):
        row = check(name, args.target, args.small, args.repeat, args.ort_cuda)
        row["ok"] = row["max_abs_error"] <= args.tolerance
        failed += not row["ok"]
        print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
