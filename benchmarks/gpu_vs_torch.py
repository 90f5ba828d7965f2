"""ember on a GPU against PyTorch on the same GPU, in one run: the zoo's torch.nn.Modules
(seeded weights) imported by ember's PyTorch frontend, so both run the same weights; one
JSON line per (model, batch) with both outputs' max difference and the median latencies of
ember untuned, PyTorch eager and (with --torch-compile) torch.compile.

    python benchmarks/gpu_vs_torch.py --target cuda --models resnet50 --batch 1,16
    python benchmarks/gpu_vs_torch.py --target cuda --models bert-base --batch 1,16 --seq 128
    python benchmarks/gpu_vs_torch.py --target opencl --image-size 32 --repeat 3  # CPU path

Latency: ember's `DeviceModel.time` (input copied in, the kernels, output copied back;
median of --repeat runs after a warm-up); PyTorch with the input already on the device and
the output copied back to the host (`.cpu()`, which synchronizes), the same work. Where
torch has no CUDA device (the CPU path) PyTorch runs on the CPU, which says only that the
script works end to end, not how the GPU compares.
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

IMAGE_MODELS = ("resnet18", "resnet50", "mobilenet_v2", "squeezenet")
# BERT encoders: (layers, hidden, heads, intermediate); inputs (input_ids, attention_mask)
BERT_MODELS = {"bert-base": (12, 768, 12, 3072), "bert-tiny": (2, 128, 2, 512)}


def torch_latency(fn, inputs: tuple, repeat: int) -> tuple[np.ndarray, float]:
    """(output, median seconds) of `fn(*inputs)` with the result copied to the host."""
    import torch

    with torch.no_grad():
        out = fn(*inputs).cpu().numpy()
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn(*inputs).cpu()
            samples.append(time.perf_counter() - start)
    return out, statistics.median(samples)


def model_and_inputs(name: str, batch: int, image_size: int, seq: int) -> tuple:
    """The zoo's torch module (seeded weights) and seeded inputs for one batch."""
    import torch

    from ember.zoo import torch_nets

    generator = torch.Generator().manual_seed(0)
    if name in BERT_MODELS:
        layers, hidden, heads, intermediate = BERT_MODELS[name]
        net = torch_nets.bert(layers, hidden, heads, intermediate)
        ids = torch.randint(0, 30522, (batch, seq), generator=generator)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[:, seq - seq // 4:] = 0  # padded tail
        return net, (ids, mask)
    if name not in IMAGE_MODELS:
        raise SystemExit(f"--models: {name} is not one of "
                         f"{', '.join(IMAGE_MODELS + tuple(BERT_MODELS))}")
    net = getattr(torch_nets, name)().eval()
    return net, (torch.randn(batch, 3, image_size, image_size, generator=generator),)


def run(name: str, batch: int, image_size: int, target: str, repeat: int,
        torch_compile: bool, seq: int = 128) -> dict:
    import torch

    import ember
    from ember.frontend.torch import from_torch

    net, inputs = model_and_inputs(name, batch, image_size, seq)
    start = time.perf_counter()
    compiled = ember.compile(from_torch(net, inputs), target=target)
    compile_s = time.perf_counter() - start
    feeds = [t.numpy() for t in inputs]
    (got,) = compiled.run(feeds)
    ember_s = compiled.time(feeds, repeat=repeat)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    net_d, inputs_d = net.to(device), tuple(t.to(device) for t in inputs)
    ref, eager_s = torch_latency(net_d, inputs_d, repeat)
    row = {"model": name, "batch": batch, "target": target,
           **({"seq": seq} if name in BERT_MODELS else {"image_size": image_size}),
           "torch_device": torch.cuda.get_device_name(0) if device == "cuda" else device,
           "max_abs_error": float(np.max(np.abs(got.astype(np.float64) - ref))),
           "ember_ms": round(ember_s * 1e3, 3), "torch_eager_ms": round(eager_s * 1e3, 3),
           "ratio_vs_eager": round(ember_s / eager_s, 3), "compile_s": round(compile_s, 1),
           "kernels": compiled.stats.get("kernels"), "cpu": host_cpu_model(),
           "torch": torch.__version__, "python": platform.python_version()}
    if torch_compile:
        fast = torch.compile(net_d)
        _, compiled_s = torch_latency(fast, inputs_d, repeat)
        row["torch_compile_ms"] = round(compiled_s * 1e3, 3)
        row["ratio_vs_compile"] = round(ember_s / compiled_s, 3)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--batch", default="1", help="comma-separated batch sizes")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--seq", type=int, default=128, help="sequence length (BERT)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--json", help="also append the rows to this file")
    args = parser.parse_args(argv)
    failed = 0
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batch.split(",")):
            row = run(name, batch, args.image_size, args.target, args.repeat,
                      args.torch_compile, args.seq)
            row["ok"] = row["max_abs_error"] <= args.tolerance
            failed += not row["ok"]
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
