"""Per operator: ember's fused groups against onnxruntime's nodes, on one zoo model.

    python benchmarks/op_profile.py --model resnet50 --threads 1 --runs 20
    python benchmarks/op_profile.py --model bert-base --top 15 --json

Each system runs in its own process, one after the other, the model in model order (no
re-runs of one kernel): ember's `CompiledModel.profile` (median per fused group), and
onnxruntime with every graph optimization and `enable_profiling` (median of each node's
kernel time over the runs). They are matched through the ONNX graph's node order: ember
names a group by its anchor (first) node, onnxruntime a fused node by one of the nodes it
took in (often the last: a Conv fused with its batch norm and Relu is named after the
Relu), so each onnxruntime node is counted in the ember group with the latest anchor at or
before it. onnxruntime's nodes of its own (layout reorders) are listed apart. The table
lists the groups by ember's time minus onnxruntime's, largest first; then both sides' time
by op type (ember's by its groups' anchors), which still compares where onnxruntime's
fusions renamed the nodes (BERT's attention and layer norms).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _ember(model_path: str, feeds: dict[str, Any], threads: int, runs: int
           ) -> dict[str, Any]:
    import ember
    from ember.runtime import threadpool

    threadpool.set_num_threads(threads)
    table = ember.compile(model_path).profile(feeds, repeat=runs)  # it warms up first
    return {"model_seconds": table.model_seconds,
            "rows": [{"name": r.anchor, "op": r.pattern, "seconds": r.seconds}
                     for r in table.rows]}


def _onnxruntime(model_path: str, feeds: dict[str, Any], threads: int, runs: int
                 ) -> dict[str, Any]:
    import time

    from peers import ort_session

    prefix = os.path.join(tempfile.mkdtemp(prefix="ort-profile-"), "p")
    session = ort_session(model_path, threads, profile_prefix=prefix)
    session.run(None, feeds)
    totals = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        totals.append(time.perf_counter() - start)
    with open(session.end_profiling()) as f:
        events = json.load(f)
    per_node: dict[str, list[float]] = defaultdict(list)
    ops: dict[str, str] = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        node = name[: -len("_kernel_time")]
        per_node[node].append(event["dur"] * 1e-6)
        ops[node] = event.get("args", {}).get("op_name", "?")
    rows = [{"name": n, "op": ops[n], "seconds": statistics.median(t[-runs:])}
            for n, t in per_node.items()]
    return {"model_seconds": statistics.median(totals), "rows": rows}


def worker(system: str, model_path: str, feeds_path: str, threads: int, runs: int) -> None:
    import numpy as np

    with np.load(feeds_path) as data:
        feeds = {k: data[k] for k in data.files}
    run = _ember if system == "ember" else _onnxruntime
    print(json.dumps(run(model_path, feeds, threads, runs)))


def _in_worker(system: str, paths: tuple[str, str], threads: int, runs: int
                ) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", system, *paths,
         str(threads), str(runs)], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{system} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(order: dict[str, int], ember_rows: list[dict[str, Any]],
            ort_rows: list[dict[str, Any]]
            ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """ember's groups with the onnxruntime nodes counted in each (by `order`, the ONNX
    node names' positions), largest ember - onnxruntime first, and onnxruntime's time in
    nodes not in the graph, per op type."""
    anchors = sorted((order[r["name"]], r) for r in ember_rows if r["name"] in order)
    positions = [p for p, _ in anchors]
    pairs = {r["name"]: {"name": r["name"], "ember_ms": r["seconds"] * 1e3, "ort_ms": 0.0,
                         "ort_ops": []} for r in ember_rows}
    ort_only: dict[str, float] = defaultdict(float)
    for row in ort_rows:
        name = row["name"].removesuffix("_nchwc")
        k = bisect.bisect_right(positions, order.get(name, -1)) - 1
        if name not in order or k < 0:
            ort_only[row["op"]] += row["seconds"]
            continue
        pair = pairs[anchors[k][1]["name"]]
        pair["ort_ms"] += row["seconds"] * 1e3
        pair["ort_ops"].append(row["op"])
    ranked = sorted(pairs.values(), key=lambda p: p["ort_ms"] - p["ember_ms"])
    return ranked, dict(ort_only)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=25, help="matched pairs to list")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import numpy as np

    from ember import zoo

    workdir = tempfile.mkdtemp(prefix="op-profile-")
    model = zoo.build_model(args.model)
    model_path = zoo.save_model(args.model, os.path.join(workdir, f"{args.model}.onnx"))
    feeds_path = os.path.join(workdir, "inputs.npz")
    np.savez(feeds_path, **zoo.random_inputs(model))
    paths = (model_path, feeds_path)
    ember_side = _in_worker("ember", paths, args.threads, args.runs)
    ort_side = _in_worker("onnxruntime", paths, args.threads, args.runs)
    order = {n.name: k for k, n in enumerate(model.graph.node)}
    pairs, ort_only = compare(order, ember_side["rows"], ort_side["rows"])
    if args.json:
        print(json.dumps({"groups": pairs, "ort_only": ort_only,
                          "ember_model_ms": ember_side["model_seconds"] * 1e3,
                          "ort_model_ms": ort_side["model_seconds"] * 1e3}, indent=1))
        return
    from peers import host_cpu

    print(f"{args.model}, {args.threads} thread(s), {args.runs} runs, CPU {host_cpu()}")
    print(f"whole model: ember {ember_side['model_seconds'] * 1e3:.2f} ms, onnxruntime "
          f"{ort_side['model_seconds'] * 1e3:.2f} ms (profiling on)")
    ember_sum = sum(p["ember_ms"] for p in pairs)
    ort_sum = sum(p["ort_ms"] for p in pairs)
    print(f"{len(pairs)} groups: ember {ember_sum:.2f} ms, onnxruntime {ort_sum:.2f} ms")
    print(f"{'group anchor':36s} {'ember ms':>9s} {'ort ms':>9s} {'diff':>8s}  ort nodes")
    for p in pairs[: args.top]:
        print(f"{p['name'][:36]:36s} {p['ember_ms']:9.3f} {p['ort_ms']:9.3f} "
              f"{p['ember_ms'] - p['ort_ms']:+8.3f}  {' '.join(p['ort_ops'])[:40]}")
    items = ", ".join(f"{op} {s * 1e3:.2f}" for op, s in
                      sorted(ort_only.items(), key=lambda kv: -kv[1]))
    print(f"onnxruntime nodes outside the graph (ms): {items or 'none'}")
    # by op type: where onnxruntime's fusions renamed the nodes (BERT's Attention,
    # SkipLayerNormalization), the per-group table cannot pair them, these sums can
    ops = {n.name: n.op_type for n in model.graph.node}
    for label, rows in (("ember by anchor op", ember_side["rows"]),
                        ("onnxruntime by op", ort_side["rows"])):
        sums: dict[str, float] = defaultdict(float)
        for row in rows:
            sums[ops.get(row["name"], row["op"]) if label.startswith("ember") else
                 row["op"]] += row["seconds"] * 1e3
        print(f"{label} (ms): " + ", ".join(
            f"{op} {t:.2f}" for op, t in sorted(sums.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        system, model_path, feeds_path, threads, runs = sys.argv[2:7]
        worker(system, model_path, feeds_path, int(threads), int(runs))
    else:
        main()
