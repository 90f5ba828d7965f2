"""Conv2d on ResNet-50's layer shapes: ember against onnxruntime, one Conv per model, batch 1.

    python benchmarks/conv2d.py                          # every layer, 2 and 1 threads
    python benchmarks/conv2d.py --quick                  # five layers, few repeats
    python benchmarks/conv2d.py --layers conv1 res4.3x3 --threads 1 --json
    python benchmarks/conv2d.py --shape 64 64 3 1 56     # any conv: cin cout kernel stride size

Each layer is a one-node ONNX Conv (seeded He-normal weights and a bias, the shape of a
convolution with its BatchNorm folded in) compiled by ember at opt level 3 and run by
onnxruntime with every graph optimization, at the same thread count in the same process.
ember's output must match onnxruntime's within --rtol (relative to the largest output) or
the script stops. The two take turns in blocks, each after a pause (onnxruntime's idle
threads spin for a while after a call and would steal a core from the next one); times are
medians. ember's model time includes the layout transforms to and from NCHW[16]c at the
graph edges; inside a network those happen once, not per conv, so the conv kernel's own
time is reported too: its fused group (anchored at the Conv node) called alone, as
`CompiledModel.profile` times it, in the same turns (the transforms' profile time is the
JSON's edges_ms). GFLOP/s count 2 flops per
multiply-add of a direct convolution (bias excluded); % peak is against --peak-gflops per
thread (Zen 4: 2 FMA units x 16 fp32 lanes x 2 flops x clock, about 115 at 3.6 GHz). The
totals weight each layer by how often ResNet-50 uses it: ResNet-50's conv time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("ember") is None:  # run from a checkout, not installed
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ort_session  # noqa: E402

BLOCK = 5  # timed calls per turn
GAP_SECONDS = 0.3  # pause before each turn: longer than onnxruntime's threads spin
PEAK_PER_THREAD = 115.0  # GFLOP/s fp32, one Zen 4 core


@dataclass(frozen=True)
class Layer:
    """A convolution with 'same'-style padding kernel // 2, square input and kernel."""

    name: str
    cin: int
    cout: int
    kernel: int
    stride: int
    size: int  # input height = width
    uses: int  # how many convolutions of ResNet-50 have this shape

    @property
    def out_size(self) -> int:
        return (self.size + 2 * (self.kernel // 2) - self.kernel) // self.stride + 1

    @property
    def flops(self) -> int:
        return 2 * self.cout * self.out_size ** 2 * self.cin * self.kernel ** 2

    def describe(self) -> str:
        stride = f"/{self.stride}" if self.stride != 1 else ""
        return f"{self.cin}->{self.cout} {self.kernel}x{self.kernel}{stride} @{self.size}"


# ResNet-50 v1.5 (torchvision; the stride of a stage's first block sits on its 3x3 conv),
# batch 1, 224x224: 53 convolutions in 23 distinct shapes. resN.expand also counts the
# stride-1 projection shortcut of res2a (64->256 1x1 at 56, the same shape).
LAYERS = [
    Layer("conv1", 3, 64, 7, 2, 224, 1),
    Layer("res2a.reduce", 64, 64, 1, 1, 56, 1),
    Layer("res2.reduce", 256, 64, 1, 1, 56, 2),
    Layer("res2.3x3", 64, 64, 3, 1, 56, 3),
    Layer("res2.expand", 64, 256, 1, 1, 56, 4),
    Layer("res3a.reduce", 256, 128, 1, 1, 56, 1),
    Layer("res3a.3x3s2", 128, 128, 3, 2, 56, 1),
    Layer("res3a.proj", 256, 512, 1, 2, 56, 1),
    Layer("res3.reduce", 512, 128, 1, 1, 28, 3),
    Layer("res3.3x3", 128, 128, 3, 1, 28, 3),
    Layer("res3.expand", 128, 512, 1, 1, 28, 4),
    Layer("res4a.reduce", 512, 256, 1, 1, 28, 1),
    Layer("res4a.3x3s2", 256, 256, 3, 2, 28, 1),
    Layer("res4a.proj", 512, 1024, 1, 2, 28, 1),
    Layer("res4.reduce", 1024, 256, 1, 1, 14, 5),
    Layer("res4.3x3", 256, 256, 3, 1, 14, 5),
    Layer("res4.expand", 256, 1024, 1, 1, 14, 6),
    Layer("res5a.reduce", 1024, 512, 1, 1, 14, 1),
    Layer("res5a.3x3s2", 512, 512, 3, 2, 14, 1),
    Layer("res5a.proj", 1024, 2048, 1, 2, 14, 1),
    Layer("res5.reduce", 2048, 512, 1, 1, 7, 2),
    Layer("res5.3x3", 512, 512, 3, 1, 7, 2),
    Layer("res5.expand", 512, 2048, 1, 1, 7, 3),
]
QUICK = ["conv1", "res2.3x3", "res3a.proj", "res4.3x3", "res5.expand"]


class MismatchError(RuntimeError):
    """ember's output differs from onnxruntime's beyond the tolerance."""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def conv_node_name(layer: Layer) -> str:
    return layer.name.replace(".", "_")


def conv_model(layer: Layer, seed: int = 0) -> Any:
    """A one-node ONNX model y = Conv(x, w, b) with seeded random weights and bias."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    k, pad = layer.kernel, layer.kernel // 2
    fan_in = layer.cin * k * k
    w = (rng.standard_normal((layer.cout, layer.cin, k, k)) * math.sqrt(2.0 / fan_in))
    b = rng.standard_normal(layer.cout) * 0.1
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name=conv_node_name(layer),
                            kernel_shape=[k, k], strides=[layer.stride] * 2, pads=[pad] * 4)
    o = layer.out_size
    graph = helper.make_graph(
        [node], f"conv_{layer.name}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, layer.cin, layer.size,
                                                                 layer.size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, layer.cout, o, o])],
        [numpy_helper.from_array(w.astype(np.float32), "w"),
         numpy_helper.from_array(b.astype(np.float32), "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def busy_cpu_seconds() -> float:
    """CPU seconds all processes have run so far (/proc/stat; NaN where there is none)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return float("nan")
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


class OtherLoad:
    """Cores kept busy by other processes while measuring: all busy CPU time less this
    process's (its threads, onnxruntime's and ember's pool included), per wall second."""

    def __enter__(self) -> OtherLoad:
        self._start = (busy_cpu_seconds(), time.process_time(), time.perf_counter())
        self.cores = float("nan")
        return self

    def __exit__(self, *_: Any) -> None:
        busy, own, wall = self._start
        others = busy_cpu_seconds() - busy - (time.process_time() - own)
        cores = others / max(time.perf_counter() - wall, 1e-9)
        self.cores = min(max(0.0, cores), float(os.cpu_count() or 1))  # ticks are 10 ms


def wait_quiet(limit: float, below: float = 0.15) -> float:
    """Wait (at most `limit` seconds) until other processes use fewer than `below` cores
    over half a second; the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        with OtherLoad() as load:
            time.sleep(0.5)
        if not load.cores >= below:
            break
    return time.perf_counter() - start


def alternate(runs: dict[str, Callable[[], Any]], repeat: int, block: int = BLOCK,
              gap: float = GAP_SECONDS) -> dict[str, list[float]]:
    """Seconds of `repeat` timed calls of each function, taken in turns of `block` calls;
    each turn starts after a pause and one untimed call, and the order rotates per round."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(max(1, math.ceil(repeat / block))):
        for name in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(gap)
            fn = runs[name]
            fn()
            for _ in range(min(block, repeat - len(times[name])) or 1):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return times


def conv_group(compiled: Any, anchor: str) -> int:
    """Index of the fused group anchored at the Conv node among the model's kernel calls
    (the others are the layout transforms NCHW <-> NCHW[16]c at the graph edges)."""
    found = [i for i, call in enumerate(compiled.plan.calls) if call.anchor == anchor]
    if len(found) != 1:
        raise RuntimeError(f"expected one fused group anchored at '{anchor}', got groups "
                           f"{[(c.group, c.anchor) for c in compiled.plan.calls]}")
    return found[0]


def kernel_runner(compiled: Any, feeds: list[np.ndarray], anchor: str
                  ) -> tuple[Callable[[], None], Any]:
    """A call of the conv group's kernel alone, the way `CompiledModel.profile` times it,
    after one run of every group so its input is in place; and the arrays to keep alive."""
    calls, keep = compiled.kernel_calls(feeds)
    for fn, args in calls:
        fn(*args)
    fn, args = calls[conv_group(compiled, anchor)]
    return lambda: fn(*args), keep


def edges_seconds(compiled: Any, feeds: list[np.ndarray], anchor: str, repeat: int) -> float:
    """Median seconds of the groups other than the conv (the layout transforms), summed."""
    group = compiled.plan.calls[conv_group(compiled, anchor)].group
    return sum(r.seconds for r in compiled.profile(feeds, repeat=repeat) if r.group != group)


def measure(layer: Layer, threads: Sequence[int], repeat: int, peak: float, rtol: float,
            gap: float = GAP_SECONDS, quiet: float = 0.0) -> list[dict[str, Any]]:
    """One layer at each thread count: verified, then timed against onnxruntime (after
    waiting up to `quiet` seconds for other processes to leave the CPUs alone)."""
    import ember
    from ember.runtime import threadpool
    from ember.compare import errors

    model = conv_model(layer)
    start = time.perf_counter()
    compiled = ember.compile(model, opt_level=3, cache=False)
    compile_s = time.perf_counter() - start
    x = np.random.default_rng(1).standard_normal(
        (1, layer.cin, layer.size, layer.size)).astype(np.float32)
    rows = []
    for count in threads:
        threadpool.set_num_threads(count)
        session = ort_session(model.SerializeToString(), count)
        want = session.run(["y"], {"x": x})[0]
        got = compiled.run([x])[0]
        max_rel = errors(got, want)[1]
        if not max_rel <= rtol:
            raise MismatchError(f"layer {layer.name} ({layer.describe()}), {count} threads: "
                                f"ember differs from onnxruntime by {max_rel:.2e} relative to "
                                f"the largest output, more than rtol {rtol:g}")
        waited = wait_quiet(quiet) if quiet > 0 else 0.0
        kernel, keep = kernel_runner(compiled, [x], conv_node_name(layer))
        with OtherLoad() as load:
            times = alternate({"ember": lambda: compiled.run([x]),
                               "onnxruntime": lambda: session.run(["y"], {"x": x}),
                               "kernel": kernel}, repeat, gap=gap)
        del keep
        time.sleep(gap)
        edges_s = edges_seconds(compiled, [x], conv_node_name(layer), max(5, repeat // 2))
        ember_s, ort_s, kernel_s = (float(np.median(times[k]))
                                    for k in ("ember", "onnxruntime", "kernel"))
        top = peak * count
        rows.append({
            "layer": layer.name, "shape": layer.describe(), "cin": layer.cin,
            "cout": layer.cout, "kernel": layer.kernel, "stride": layer.stride,
            "size": layer.size, "uses": layer.uses, "threads": count,
            "gflop": layer.flops / 1e9,
            "ember_ms": round(ember_s * 1e3, 4), "onnxruntime_ms": round(ort_s * 1e3, 4),
            "ratio": round(ember_s / ort_s, 3),
            "ember_gflops": round(layer.flops / ember_s / 1e9, 2),
            "onnxruntime_gflops": round(layer.flops / ort_s / 1e9, 2),
            "peak_gflops": top, "ember_peak_fraction": round(layer.flops / ember_s / 1e9 / top, 3),
            "kernel_ms": round(kernel_s * 1e3, 4), "edges_ms": round(edges_s * 1e3, 4),
            "kernel_gflops": round(layer.flops / kernel_s / 1e9, 2),
            "kernel_peak_fraction": round(layer.flops / kernel_s / 1e9 / top, 3),
            "max_rel_error": float(f"{max_rel:.3g}"), "compile_s": round(compile_s, 3),
            "runs": len(times["ember"]), "other_load": round(load.cores, 2),
            "waited_s": round(waited, 1)})
    return rows


def totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per thread count: the sum over layers of time x uses (ResNet-50's conv time)."""
    result = []
    for count in dict.fromkeys(r["threads"] for r in rows):
        mine = [r for r in rows if r["threads"] == count]
        total = {key: sum(r[key] * r["uses"] for r in mine)
                 for key in ("ember_ms", "onnxruntime_ms", "kernel_ms", "gflop")}
        total.update(threads=count, convs=sum(r["uses"] for r in mine),
                     ratio=total["ember_ms"] / total["onnxruntime_ms"],
                     kernel_ratio=total["kernel_ms"] / total["onnxruntime_ms"],
                     ember_gflops=total["gflop"] / total["ember_ms"] * 1e3,
                     kernel_gflops=total["gflop"] / total["kernel_ms"] * 1e3,
                     peak_gflops=mine[0]["peak_gflops"])
        result.append(total)
    return result


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table, then the weighted totals."""
    head = ["layer", "shape", "uses", "threads", "ember ms", "ort ms", "ember/ort",
            "ember GFLOP/s", "% peak", "kernel ms", "kernel GFLOP/s", "kernel % peak",
            "other load"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["layer"], r["shape"], str(r["uses"]), str(r["threads"]),
                 f"{r['ember_ms']:.3f}", f"{r['onnxruntime_ms']:.3f}", f"{r['ratio']:.2f}",
                 f"{r['ember_gflops']:.1f}", f"{100 * r['ember_peak_fraction']:.0f}",
                 f"{r['kernel_ms']:.3f}", f"{r['kernel_gflops']:.1f}",
                 f"{100 * r['kernel_peak_fraction']:.0f}", f"{r['other_load']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| weighted total (time x uses) | threads | convs | ember ms | ort ms | "
                 "ember/ort | ember GFLOP/s | kernel ms | kernel/ort | kernel GFLOP/s |")
    lines.append("|" + "---|" * 10)
    for t in totals(rows):
        lines.append(f"| sum | {t['threads']} | {t['convs']} | {t['ember_ms']:.2f} | "
                     f"{t['onnxruntime_ms']:.2f} | {t['ratio']:.2f} | "
                     f"{t['ember_gflops']:.1f} | {t['kernel_ms']:.2f} | "
                     f"{t['kernel_ratio']:.2f} | {t['kernel_gflops']:.1f} |")
    return "\n".join(lines)


def select(names: Sequence[str] | None, quick: bool, shape: Sequence[int] | None
           ) -> list[Layer]:
    if shape:
        cin, cout, kernel, stride, size = shape
        return [Layer(f"custom{kernel}x{kernel}s{stride}", cin, cout, kernel, stride, size, 1)]
    wanted = names or (QUICK if quick else [layer.name for layer in LAYERS])
    by_name = {layer.name: layer for layer in LAYERS}
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown layer(s) {', '.join(unknown)}; known: "
                         f"{', '.join(by_name)}")
    return [by_name[n] for n in wanted]


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="*", default=[2, 1])
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per system (default 30, 10 with --quick)")
    parser.add_argument("--layers", nargs="*", help="layer names (default: all)")
    parser.add_argument("--shape", type=int, nargs=5, metavar=("CIN", "COUT", "K", "S", "H"),
                        help="one custom conv instead of ResNet-50's layers")
    parser.add_argument("--quick", action="store_true", help=f"layers {' '.join(QUICK)}")
    parser.add_argument("--peak-gflops", type=float, default=PEAK_PER_THREAD,
                        help="fp32 peak GFLOP/s of ONE thread (default %(default)s)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--gap", type=float, default=GAP_SECONDS,
                        help="seconds of pause before each turn")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="before each row, wait up to SECONDS for other processes to "
                        "go idle (on a shared machine)")
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    layers = select(args.layers, args.quick, args.shape)
    repeat = args.repeat or (10 if args.quick else 30)
    peaks = ", ".join(f"{args.peak_gflops * t:g} at {t} thread{'s' * (t > 1)}"
                      for t in args.threads)
    log(f"peak fp32: {args.peak_gflops:g} GFLOP/s per thread ({peaks}); {repeat} runs each")
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    for layer in layers:
        batch = measure(layer, args.threads, repeat, args.peak_gflops, args.rtol, args.gap,
                        args.wait_quiet)
        for r in batch:
            log(f"{r['layer']:>13} {r['shape']:<22} threads={r['threads']} ember "
                f"{r['ember_ms']:8.3f} ms  ort {r['onnxruntime_ms']:8.3f} ms  ratio "
                f"{r['ratio']:5.2f}  kernel {r['kernel_ms']:8.3f} ms "
                f"({100 * r['kernel_peak_fraction']:.0f}% peak)  err {r['max_rel_error']:.1e}  "
                f"other load {r['other_load']:.2f}")
        rows += batch
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(table(rows))
        print(f"\npeak fp32 used: {args.peak_gflops:g} GFLOP/s per thread ({peaks}); "
              f"{len(rows)} rows in {time.perf_counter() - start:.0f} s; command: python "
              f"benchmarks/conv2d.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    return rows


__all__ = ["LAYERS", "Layer", "MismatchError", "conv_model", "main", "measure", "totals"]

if __name__ == "__main__":
    main()
