"""fp32 GEMM: ember's x86 schedule against numpy (OpenBLAS), same process, alternating runs.

    python benchmarks/gemm.py            # table
    python benchmarks/gemm.py --json     # JSON list: shape, threads, ember_gflops, ...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SHAPES = [(1024, 1024, 1024), (512, 512, 512), (128, 3072, 768)]
BLOCK = 5  # timed calls per turn
GAP_SECONDS = 0.3  # pause before each turn: longer than OpenBLAS's spin-wait


def measure(M: int, N: int, K: int, repeat: int) -> dict[str, object]:
    """Run inside a process whose thread count is fixed by the environment."""
    import numpy as np

    import ember
    from ember.ops.matmul import matmul, schedule_matmul_x86
    from ember.runtime.threadpool import num_threads

    A, B, Bp, C = matmul(M, N, K)
    s = schedule_matmul_x86(C, Bp, f"llvm -num-cores={num_threads()}")
    start = time.perf_counter()
    f = ember.build(s, [A, B, C], name=f"gemm_{M}_{N}_{K}")
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
    out = np.empty((M, N), "float32")
    ember_t: list[float] = []
    numpy_t: list[float] = []
    # Alternate in blocks so both see the same machine noise. OpenBLAS's worker threads keep
    # spinning for about 0.1 s after a call: an ember call inside that window loses a core
    # to them, so each block starts after a pause and an untimed call.
    for _ in range(max(1, repeat // BLOCK)):
        for fn, times in ((lambda: f(a, b, c), ember_t),
                          (lambda: np.matmul(a, b, out=out), numpy_t)):
            time.sleep(GAP_SECONDS)
            fn()
            for _ in range(BLOCK):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
    flops = 2.0 * M * N * K
    ember_g = flops / float(np.median(ember_t)) / 1e9
    numpy_g = flops / float(np.median(numpy_t)) / 1e9
    return {"shape": [M, N, K], "ember_gflops": round(ember_g, 2),
            "numpy_gflops": round(numpy_g, 2), "ratio": round(ember_g / numpy_g, 3),
            "compile_s": round(compile_s, 3)}


def run_child(M: int, N: int, K: int, threads: int, repeat: int) -> dict[str, object]:
    env = dict(os.environ, EMBER_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import gemm; print(json.dumps(gemm.measure({M}, {N}, {K}, {repeat})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["threads"] = threads
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, nargs="*", default=[2, 1])
    args = parser.parse_args()
    results = [run_child(M, N, K, t, args.repeat) for (M, N, K) in SHAPES for t in args.threads]
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"{'shape':>16} {'threads':>7} {'ember GF/s':>11} {'numpy GF/s':>11} {'ratio':>6} "
          f"{'compile s':>9}")
    for r in results:
        shape = "x".join(map(str, r["shape"]))  # type: ignore[arg-type]
        print(f"{shape:>16} {r['threads']:>7} {r['ember_gflops']:>11} {r['numpy_gflops']:>11} "
              f"{r['ratio']:>6} {r['compile_s']:>9}")


if __name__ == "__main__":
    main()
