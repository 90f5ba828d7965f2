"""The PyTorch frontend against the ONNX path: the same torch module (random weights),
imported by from_torch and by exporting it to ONNX first, compiled by ember, timed side by
side, and the module through torch.compile(backend="ember"); PyTorch eager and onnxruntime
on the same weights as peers.

    python benchmarks/torch_frontend.py --models resnet18 mobilenet_v2 bert-base --runs 30

Runs are interleaved in blocks (one block of each system per round, the order rotated,
a pause before each block), so a change in machine load hits every system alike; the table
reports medians in milliseconds and the from_torch / ONNX ratio. Both ember builds should
be the same kernels but for the classifier's tail, so the ratio should be 1 within noise;
the script also checks that both give PyTorch's outputs.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import ember  # noqa: E402
import ember.torch_compile  # noqa: E402,F401 - registers torch.compile(backend="ember")
from ember.frontend.torch import from_torch  # noqa: E402
from ember.target_facts import host_cpu_model  # noqa: E402
from ember.runtime import threadpool  # noqa: E402
from ember.zoo import torch_nets  # noqa: E402

def _image(size: int) -> dict[str, torch.Tensor]:
    return {"input": torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))}


def _tokens(seq: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, 30522, (1, seq), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, seq * 3 // 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


# name -> (module builder, inputs builder from --image / --seq)
MODELS: dict[str, tuple[Callable[[], Any], Callable[[argparse.Namespace], Any]]] = {
    "resnet18": (lambda: torch_nets.resnet18(), lambda a: _image(a.image)),
    "mobilenet_v2": (lambda: torch_nets.mobilenet_v2(), lambda a: _image(a.image)),
    "resnet50": (lambda: torch_nets.resnet50(), lambda a: _image(a.image)),
    "bert-base": (lambda: torch_nets.bert(), lambda a: _tokens(a.seq)),
}


def onnx_bytes(module: Any, inputs: dict[str, torch.Tensor]) -> bytes:
    buffer = io.BytesIO()
    torch.onnx.export(module, tuple(inputs.values()), buffer, dynamo=False, opset_version=17,
                      input_names=list(inputs), output_names=["output"])
    return buffer.getvalue()


def build(name: str, args: argparse.Namespace
          ) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """The systems' run functions for one model and facts about their builds; exits if an
    ember build does not give PyTorch's output."""
    import onnxruntime as ort

    from ember.frontend.onnx import from_onnx

    make_module, make_inputs = MODELS[name]
    module = make_module()
    inputs = make_inputs(args)
    tensors = tuple(inputs.values())
    feeds = {k: v.numpy() for k, v in inputs.items()}
    facts: dict[str, Any] = {}
    start = time.perf_counter()
    torch_graph = from_torch(module, tensors)
    facts["import from_torch"] = time.perf_counter() - start
    proto = onnx_bytes(module, inputs)
    start = time.perf_counter()
    onnx_graph = from_onnx(proto)
    facts["import ONNX"] = time.perf_counter() - start
    from_torch_model = ember.compile(torch_graph)
    onnx_model = ember.compile(onnx_graph)
    facts["kernels"] = (from_torch_model.stats["groups"], onnx_model.stats["groups"])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threadpool.num_threads()
    session = ort.InferenceSession(proto, options, providers=["CPUExecutionProvider"])
    compiled = torch.compile(module, backend="ember")
    with torch.inference_mode():
        expected = module(*tensors).numpy()
        start = time.perf_counter()
        compiled(*tensors)                     # capture and compile
        facts["torch.compile build"] = time.perf_counter() - start

    def eager() -> Any:
        with torch.inference_mode():
            return module(*tensors)

    def dynamo() -> Any:
        with torch.inference_mode():
            return compiled(*tensors)

    systems = {
        "ember from_torch": lambda: from_torch_model.run(list(feeds.values())),
        "ember ONNX": lambda: onnx_model.run(list(feeds.values())),
        "ember torch.compile": dynamo,
        "onnxruntime": lambda: session.run(None, feeds),
        "torch eager": eager,
    }
    for label in ("ember from_torch", "ember ONNX", "ember torch.compile"):
        got = np.asarray(systems[label]()[0])
        error = float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-12))
        if error > 1e-3:
            raise SystemExit(f"{name}: {label} differs from PyTorch (max rel error {error:.2e})")
        facts[f"error {label}"] = error
    return systems, facts


def measure(systems: dict[str, Callable[[], Any]], runs: int, warmup: int, rounds: int
            ) -> dict[str, float]:
    """Median milliseconds per system: `rounds` rounds, each one block of runs per system,
    the order rotated every round and a pause before each block (a peer's idle threads
    spin for a while after a call and would take a core from the next system)."""
    for run in systems.values():
        for _ in range(warmup):
            run()
    labels = list(systems)
    block = max(1, runs // rounds)
    times: dict[str, list[float]] = {k: [] for k in systems}
    for index in range(rounds):
        for label in labels[index % len(labels):] + labels[:index % len(labels)]:
            time.sleep(0.2)
            for _ in range(block):
                start = time.perf_counter()
                systems[label]()
                times[label].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v2", "bert-base"],
                        choices=sorted(MODELS))
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    threads = threadpool.num_threads()
    torch.set_num_threads(threads)
    print(f"CPU: {host_cpu_model()}, {threads} threads, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.1f}")
    header = ("| model | ember from_torch (ms) | ember ONNX (ms) | from_torch / ONNX | "
              "ember torch.compile (ms) | onnxruntime (ms) | torch eager (ms) | "
              "import from_torch / ONNX (s) | kernels from_torch / ONNX |")
    lines = [header, "|" + "---|" * 9]
    for name in args.models:
        systems, facts = build(name, args)
        ms = measure(systems, args.runs, args.warmup, args.rounds)
        ratio = ms["ember from_torch"] / ms["ember ONNX"]
        lines.append(f"| {name} | {ms['ember from_torch']:.2f} | {ms['ember ONNX']:.2f} | "
                     f"{ratio:.3f} | {ms['ember torch.compile']:.2f} | "
                     f"{ms['onnxruntime']:.2f} | {ms['torch eager']:.2f} | "
                     f"{facts['import from_torch']:.1f} / {facts['import ONNX']:.1f} | "
                     f"{facts['kernels'][0]} / {facts['kernels'][1]} |")
        print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
