"""The built-in demo: an fp32 GEMM compiled by ember, checked and timed against numpy."""

from __future__ import annotations

import os
import time

import numpy as np

from ember.target_facts import host_cpu_model


def _gflops(size: int, seconds: float) -> float:
    return 2.0 * size**3 / seconds / 1e9


def _median_time(fn, repeat: int = 7) -> float:  # type: ignore[no-untyped-def]
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def run_gemm_demo(size: int = 1024, threads: int | None = None, target: str = "llvm") -> int:
    """Build, check and time C = A @ B at size^3; print both GFLOP/s. Returns an exit code."""
    if threads is not None:
        os.environ["EMBER_NUM_THREADS"] = str(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import ember
    from ember.ops.matmul import matmul, schedule_matmul_x86

    A, B, Bp, C = matmul(size, size, size)
    tgt = f"{target} -num-cores={threads}" if threads else target
    s = schedule_matmul_x86(C, Bp, tgt)
    start = time.perf_counter()
    f = ember.build(s, [A, B, C], target=target, name="gemm")
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype("float32")
    b = rng.standard_normal((size, size)).astype("float32")
    c = np.zeros((size, size), "float32")
    f(a, b, c)
    expected = a @ b
    error = float(np.max(np.abs(c - expected)) / max(1e-30, float(np.max(np.abs(expected)))))
    ember_s = _median_time(lambda: f(a, b, c))
    numpy_s = _median_time(lambda: a @ b)
    ok = error < 1e-4
    print(f"ember GEMM {size}x{size}x{size} fp32, target {target}")
    print(f"  compile time      {compile_s * 1000:8.1f} ms")
    print(f"  max rel. error    {error:8.2e}  ({'ok' if ok else 'WRONG'} vs numpy)")
    print(f"  ember             {_gflops(size, ember_s):8.1f} GFLOP/s  ({ember_s * 1e3:.2f} ms)")
    print(f"  numpy (BLAS)      {_gflops(size, numpy_s):8.1f} GFLOP/s  ({numpy_s * 1e3:.2f} ms)")
    print(f"  speed ember/numpy {numpy_s / ember_s:8.2f}  (numpy's time over ember's: above 1, "
          "ember is faster)")
    print(f"  cpu               {host_cpu_model()}")
    return 0 if ok else 1


def run_model_demo(name: str = "resnet18", image_size: int = 224, threads: int | None = None,
                   target: str = "llvm", runs: int = 10) -> int:
    """Zoo model -> ember.compile -> run -> compare with onnxruntime; print latency and error."""
    if threads is not None:
        os.environ["EMBER_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import ember
    from ember import zoo
    from ember.runtime import threadpool
    from ember.compare import bench

    config = {"image_size": image_size} if "image_size" in _config_keys(name) else {}
    model = zoo.build_model(name, **config)
    start = time.perf_counter()
    compiled = ember.compile(model, target=target)
    compile_s = time.perf_counter() - start
    feeds = zoo.random_inputs(model, 0)
    count = threads or threadpool.num_threads()
    report = bench(model, compiled, feeds, count, runs=runs)
    stats = compiled.stats
    ok = report.max_rel < 1e-3
    print(f"ember {name}, target {target}, {count} threads")
    print(f"  fused groups      {stats['groups']:8d}  ({stats['kernels']} distinct kernels, "
          f"{stats['cached']} from the disk cache)")
    print(f"  compile time      {compile_s:8.2f} s")
    print(f"  ember             {report.ember_seconds * 1e3:8.2f} ms")
    print(f"  onnxruntime       {report.ort_seconds * 1e3:8.2f} ms")
    print(f"  time ember/ort    {report.ratio:8.2f}  (ember's time over onnxruntime's: below "
          "1, ember is faster)")
    print(f"  max abs. error    {report.max_abs:8.2e}")
    print(f"  max rel. error    {report.max_rel:8.2e}  ({'ok' if ok else 'WRONG'} vs onnxruntime)")
    print(f"  cpu               {host_cpu_model()}")
    return 0 if ok else 1


def _config_keys(name: str) -> set[str]:
    import inspect

    from ember import zoo

    builder = zoo.MODELS.get(name)
    return set(inspect.signature(builder).parameters) if builder is not None else set()
