"""Deployment targets side by side: code size (runtime + model code, constants apart) and
median latency of zoo models as an x86-64 library, standalone C, aarch64 and armv7 libraries
(run through the C RPC server under qemu-user: EMULATED figures), and WebAssembly in
Node.js and headless Chromium (the relaxed-SIMD module where the engine runs it, else the
simd128 fallback; the label says which); onnxruntime on this CPU in the same run as the reference.

    python benchmarks/deploy.py --models mobilenet_v2 resnet18 --image-size 224 --runs 5

Prints a markdown table. Every output is checked against onnxruntime (max abs error).
Threads: 1 everywhere (WebAssembly has none here), so the rows compare code, not cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ember.target_facts import host_cpu_model  # noqa: E402

HARNESS = ROOT / "tests" / "deploy" / "c_harness.c"
NODE_RUNNER = ROOT / "tests" / "deploy" / "run_wasm.mjs"
KEY = "deploy-benchmark-key"
# V8 runs new WebAssembly code in its baseline compiler first and optimizes hot functions
# in the background: the first runs are up to 20x slower, so they are not timed
WASM_WARMUP = 20
BOARDS = {"aarch64": ("cortex-a72", "aarch64-linux-gnu-", ["qemu-aarch64", "-L",
                                                           "/usr/aarch64-linux-gnu"]),
          "armv7": ("armv7", "arm-linux-gnueabihf-", ["qemu-arm", "-L",
                                                      "/usr/arm-linux-gnueabihf"])}


CODE_SECTIONS = (".text", ".ltext", ".init", ".fini", ".plt", ".plt.got", ".plt.sec")


def code_bytes(path: Path, prefix: str = "") -> int:
    """Bytes of executable code in an ELF file (its code sections, by binutils' size -A;
    the constants in .rodata are not code)."""
    lines = subprocess.run([f"{prefix}size", "-A", str(path)], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    return sum(int(parts[1]) for parts in (line.split() for line in lines)
               if len(parts) >= 2 and parts[0] in CODE_SECTIONS)


def median(samples: list[float]) -> float:
    return float(np.median(samples))


def run_onnxruntime(model, feeds, runs):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    session.run(None, feeds)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        out = session.run(None, feeds)
        samples.append(time.perf_counter() - start)
    return out[0], median(samples)


def row_library(model, feeds, runs, work):
    from ember.driver import export_library
    from ember.runtime.library import load_library

    path = export_library(model, work / "model.so")
    lib = load_library(path)
    lib.set_num_threads(1)
    out = lib.run(feeds)[0]
    return out, lib.time(feeds, repeat=runs), code_bytes(path), lib.metadata["plan"][
        "constant_bytes"]


def row_c(model, feeds, runs, work):
    import ember

    root = ember.export_c(model, work / "c", embed_constants=True)
    program = work / "c" / "run"
    subprocess.run(["cc", "-std=c99", "-O2", "-I", str(root), str(root / "model.c"),
                    str(root / "model_constants.c"), str(HARNESS), "-o", str(program), "-lm"],
                   check=True, capture_output=True)
    subprocess.run(["cc", "-std=c99", "-O2", "-c", str(root / "model.c"), "-o",
                    str(work / "c" / "model.o")], check=True, capture_output=True)
    inputs, outputs = work / "c" / "in", work / "c" / "out"
    inputs.mkdir()
    outputs.mkdir()
    for k, array in enumerate(feeds.values()):
        array.tofile(inputs / f"{k}.bin")
    done = subprocess.run([str(program), str(inputs), str(outputs), str(runs)],
                          capture_output=True, text=True, check=True)
    out = np.fromfile(outputs / "0.bin", np.float32)
    return out, float(done.stdout), code_bytes(work / "c" / "model.o"), (
        root / "model_weights.bin").stat().st_size


def row_board(board, model, feeds, runs, work):
    from ember.driver import export_library
    from ember.lowering.crt import build_rpc_server
    from ember.runtime import rpc

    target, prefix, emulator = BOARDS[board]
    path = export_library(model, work / f"{board}.so", target=target)
    server = build_rpc_server(target, work / f"rpc-{board}")
    process = subprocess.Popen([*emulator, str(server), "--port", "0"], stdout=subprocess.PIPE,
                               text=True, env=dict(os.environ, EMBER_RPC_KEY=KEY))
    try:
        port = int(process.stdout.readline().rsplit(":", 1)[1])
        with rpc.connect("127.0.0.1", port, KEY) as session:
            remote = session.upload(path)
            out = remote.run(feeds, threads=1)[0]
            seconds = remote.time(feeds, repeat=runs, threads=1)
        meta_bytes = remote.metadata["plan"]["constant_bytes"]
    finally:
        process.terminate()
        process.wait()
    return out, seconds, code_bytes(path, prefix), meta_bytes, code_bytes(server, prefix)


ORT_RUNNER = ROOT / "benchmarks" / "ort_timing.py"


def row_ort_aarch64(model, feeds, runs, work, root):
    """onnxruntime's own aarch64 wheel in an aarch64 Python under qemu-user: `root` holds
    `sysroot/` (Debian arm64 python3.11 unpacked with dpkg -x, plus the cross toolchain's
    libc) and `site-packages/` (the numpy and onnxruntime manylinux aarch64 wheels,
    unzipped); see docs/deploy.md."""
    root = Path(root)
    (work / "model.onnx").write_bytes(model.SerializeToString())
    (work / "in").mkdir()
    for name, array in feeds.items():
        array.tofile(work / "in" / f"{name}.bin")
    env = dict(os.environ, PYTHONHOME=str(root / "sysroot" / "usr"),
               PYTHONPATH=str(root / "site-packages"))
    done = subprocess.run(["qemu-aarch64", "-L", str(root / "sysroot"),
                           str(root / "sysroot" / "usr" / "bin" / "python3.11"),
                           str(ORT_RUNNER), str(work / "model.onnx"), str(work / "in"),
                           str(work / "out.bin"), str(runs)], capture_output=True, text=True,
                          check=True, env=env)
    seconds, version = done.stdout.split()
    return np.fromfile(work / "out.bin", np.float32), float(seconds), version


def row_wasm(model, feeds, runs, work):
    import json

    import ember

    script = ember.export_wasm(model, work / "web", name="model")
    inputs, outputs = work / "web-in", work / "web-out"
    inputs.mkdir()
    outputs.mkdir()
    for name, array in feeds.items():
        array.tofile(inputs / f"{name}.bin")
    done = subprocess.run(["node", str(NODE_RUNNER), str(script), str(inputs), str(outputs),
                           str(runs + WASM_WARMUP)], capture_output=True, text=True,
                          check=True)
    report = json.loads(done.stdout)
    out = np.fromfile(outputs / "0.bin", np.float32)
    return out, median(report["seconds"][WASM_WARMUP:]), _wasm_size(work / "web", report[
        "simd"]), (work / "web" / "model.weights").stat().st_size, report["simd"]


_BENCH_PAGE = """<!doctype html><script type="module">
import { load } from "./model.js";
const model = await load();
const feeds = {};
for (const spec of model.inputs) {
  const bytes = await (await fetch(`./in/${spec.name}.bin`)).arrayBuffer();
  feeds[spec.name] = new Float32Array(bytes);
}
// warm up: 3 s of runs (at least 20), so that V8 has optimized the hot functions
const begin = performance.now();
for (let r = 0; r < 20 || performance.now() - begin < 3000; r++) model.run(feeds);
const seconds = [];
let outputs;
for (let r = 0; r < RUNS; r++) {
  const start = performance.now();
  outputs = model.run(feeds);
  seconds.push((performance.now() - start) / 1000);
}
window.benchResult = { seconds, out: Array.from(Object.values(outputs)[0]),
                       simd: model.simd };
</script>"""


def row_chromium(model, feeds, runs, work):
    """The same module in headless Chromium (Debian's, driven by playwright)."""
    import ember
    from ember.serve_web import start_server
    from playwright.sync_api import sync_playwright

    site = work / "site"
    ember.export_wasm(model, site, name="model")
    (site / "in").mkdir()
    for name, array in feeds.items():
        array.tofile(site / "in" / f"{name}.bin")
    (site / "bench.html").write_text(_BENCH_PAGE.replace("RUNS", str(runs)))
    server = start_server(site, "127.0.0.1", 0)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                        args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/bench.html")
            page.wait_for_function("window.benchResult !== undefined", timeout=1800000)
            result = page.evaluate("window.benchResult")
            browser.close()
    finally:
        server.shutdown()
    return (np.array(result["out"], np.float32), median(result["seconds"]),
            _wasm_size(site, result["simd"]), (site / "model.weights").stat().st_size,
            result["simd"])


def _wasm_size(directory, simd):
    """Bytes of the module the engine loaded: relaxed SIMD or the simd128 fallback."""
    return (directory / ("model.wasm" if simd == "relaxed-simd" else "model.simd128.wasm")
            ).stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet18"])
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--targets", nargs="+",
                        default=["so", "c", "aarch64", "armv7", "wasm", "chromium"])
    parser.add_argument("--ort-aarch64", metavar="DIR", default=None,
                        help="with target ort-aarch64: an aarch64 Python with onnxruntime "
                             "(DIR/sysroot, DIR/site-packages) to run under qemu-aarch64")
    args = parser.parse_args()
    from ember.zoo import build_model, random_inputs

    print(f"CPU: {host_cpu_model()}; threads: 1; image {args.image_size}; medians of "
          f"{args.runs} runs\n")
    print("| model | target | code KB | constants MB | latency ms | vs ORT (x86) | max err |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models:
        model = build_model(name, image_size=args.image_size)
        feeds = random_inputs(model, 0)
        want, ort_s = run_onnxruntime(model, feeds, args.runs)
        print(f"| {name} | onnxruntime (x86-64, this CPU) | | | {ort_s * 1e3:.2f} | 1.00 | |",
              flush=True)
        for target in args.targets:
            with tempfile.TemporaryDirectory() as temp:
                work = Path(temp)
                extra = ""
                try:
                    if target == "so":
                        out, s, code, const = row_library(model, feeds, args.runs, work)
                        label = "x86-64 .so (host CPU)"
                    elif target == "c":
                        out, s, code, const = row_c(model, feeds, args.runs, work)
                        label = "C99 (cc -O2, portable)"
                    elif target == "chromium":
                        out, s, code, const, simd = row_chromium(model, feeds, args.runs,
                                                                 work)
                        label = f"wasm32+{simd} (headless Chromium)"
                    elif target == "ort-aarch64":
                        out, s, version = row_ort_aarch64(model, feeds, args.runs, work,
                                                          args.ort_aarch64)
                        code = const = 0
                        label = f"onnxruntime {version} aarch64 wheel, EMULATED (qemu-user)"
                    elif target == "wasm":
                        out, s, code, const, simd = row_wasm(model, feeds, args.runs, work)
                        label = f"wasm32+{simd} (Node.js " + subprocess.run(
                            ["node", "--version"], capture_output=True, text=True
                        ).stdout.strip() + ")"
                    else:
                        out, s, code, const, server = row_board(target, model, feeds,
                                                                 args.runs, work)
                        label = f"{target} .so, EMULATED (qemu-user)"
                        extra = f" (+ C RPC server {server / 1024:.0f} KB)"
                except (subprocess.CalledProcessError, OSError) as error:
                    print(f"| {name} | {target} | failed: {error} | | | | |", flush=True)
                    continue
                err = float(np.abs(np.asarray(out).ravel() - want.ravel()).max())
                sizes = (" | " if target == "ort-aarch64" else
                         f"{code / 1024:.0f}{extra} | {const / 2**20:.1f}")
                print(f"| {name} | {label} | {sizes} | "
                      f"{s * 1e3:.2f} | {s / ort_s:.2f} | {err:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    if shutil.which("cc") is None:
        sys.exit("needs a C compiler")
    sys.exit(main())
