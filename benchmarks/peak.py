"""This machine's fp32 FMA peak, measured: GFLOP/s of one and of N concurrent processes.

Each process runs 12 independent chains of fused multiply-adds of the widest vectors the C
compiler's -march=native has (AVX-512, AVX2 or SSE on x86; NEON on AArch64), enough chains
to hide the FMA latency on every core ember targets, so the figure is the FMA pipes'
throughput at the clock the core holds under that load. Two vCPUs that share one core's
FMA units show it here: the 2-process figure is then about the 1-process one, not twice it.

    python benchmarks/peak.py              # 1 and `os.cpu_count()` processes
    python benchmarks/peak.py --procs 1 2 --seconds 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ember.target_facts import host_cpu_model  # noqa: E402

SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define SET1(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#elif defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define SET1(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#elif defined(__ARM_NEON)
#include <arm_neon.h>
typedef float32x4_t vec;
#define LANES 4
#define SET1(x) vdupq_n_f32(x)
#define FMA(a, b, c) vfmaq_f32(c, a, b)
#else
typedef float vec;
#define LANES 1
#define SET1(x) (x)
#define FMA(a, b, c) ((a) * (b) + (c))
#endif
#define CHAINS 12
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    vec acc[CHAINS], b = SET1(0.9999999f), c = SET1(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);
    long steps = 0;
    double start = now(), elapsed = 0;
    while (elapsed < seconds) {
        for (long k = 0; k < 1000000; k++) {
#pragma GCC unroll 12
            for (int i = 0; i < CHAINS; i++) acc[i] = FMA(acc[i], b, c);
        }
        steps += 1000000;
        elapsed = now() - start;
    }
    float sink = 0;
    for (int i = 0; i < CHAINS; i++) sink += ((float *)&acc[i])[0];
    printf("%.3f %d %g\n", steps * (double)CHAINS * LANES * 2 / elapsed / 1e9, LANES, sink);
    return 0;
}
"""


def build(workdir: Path) -> Path:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        sys.exit("peak.py needs a C compiler (cc, gcc, or CC=...)")
    source, binary = workdir / "peak.c", workdir / "peak"
    source.write_text(SOURCE)
    subprocess.run([compiler, "-O2", "-march=native", "-o", str(binary), str(source)],
                   check=True)
    return binary


def measure(binary: Path, procs: int, seconds: float) -> tuple[float, int]:
    """Total GFLOP/s of `procs` copies running at once, and the vector lanes used."""
    runs = [subprocess.Popen([str(binary), str(seconds)], stdout=subprocess.PIPE, text=True)
            for _ in range(procs)]
    outs = [r.communicate()[0].split() for r in runs]
    return sum(float(o[0]) for o in outs), int(outs[0][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, nargs="*", default=None,
                        help="process counts to run at once (default: 1 and the CPU count)")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    procs = args.procs or sorted({1, os.cpu_count() or 1})
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        print(f"CPU: {host_cpu_model()}")
        for n in procs:
            best, lanes = max(measure(binary, n, args.seconds) for _ in range(args.repeat))
            print(f"{n} process(es): {best:.1f} GFLOP/s fp32 ({best / n:.1f} per process, "
                  f"{lanes}-lane FMAs)")


if __name__ == "__main__":
    main()
