"""ONNX node-suite conformance: how many of onnx's node tests ember and onnxruntime pass.

    python benchmarks/onnx_conformance.py                  # both backends, summary
    python benchmarks/onnx_conformance.py --backend ember -k conv --failures
    python benchmarks/onnx_conformance.py --json results.json

Every node test of the installed onnx package runs in a child process on the CPU; a test
passes when the backend's outputs match onnx's expected outputs (shapes, dtypes, values).
onnx's reference evaluator (onnx.reference), which wrote those expected outputs, is made to
raise in the child before any test runs, so a backend that computed a result with it would
fail instead of passing: the figures count what the backend computes itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import unittest
import warnings
from collections import Counter
from types import ModuleType
from typing import Any, Iterator

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _backend(name: str) -> ModuleType:
    if name == "ember":
        from ember import onnx_backend

        return onnx_backend
    import onnxruntime
    import onnxruntime.backend

    onnxruntime.set_default_logger_severity(3)
    return onnxruntime.backend


class ReferenceBlocked(RuntimeError):
    """Raised when code under test uses onnx's reference evaluator."""


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise ReferenceBlocked("onnx.reference is blocked: the backend under test must compute "
                           "its results itself")


class _BlockedEvaluator:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _refuse()


@contextlib.contextmanager
def onnx_reference_blocked() -> Iterator[None]:
    """Make onnx.reference raise ReferenceBlocked on use while the block runs.

    onnx's backend test runner imports onnx.reference itself, so the package cannot be kept
    out of sys.modules; instead its evaluator and the run methods of every op it implements
    are replaced by ones that raise."""
    import onnx.reference
    import onnx.reference.op_run
    import onnx.reference.reference_evaluator

    patches = [(onnx.reference, "ReferenceEvaluator", _BlockedEvaluator),
               (onnx.reference.reference_evaluator, "ReferenceEvaluator", _BlockedEvaluator),
               (onnx.reference.op_run.OpRun, "run", _refuse),
               (onnx.reference.op_run.OpRun, "eval", _refuse)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, replacement in patches:
            setattr(owner, name, replacement)
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _reason(err: str) -> str:
    """The exception line(s) at the end of a traceback, on one line, shortened."""
    lines = [line.strip() for line in err.strip().splitlines() if line.strip()]
    head = max((i for i, line in enumerate(lines)
                if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failure|Exit)\b", line)),
               default=len(lines) - 1)
    return " | ".join(lines[head:])[:400]


def _load(backend_name: str) -> tuple[type, list[str]]:
    import onnx.backend.test

    with warnings.catch_warnings():  # generating the node tests' data warns about casts
        warnings.simplefilter("ignore")
        tests = onnx.backend.test.BackendTest(_backend(backend_name), __name__)
    case = tests.test_cases["OnnxBackendNodeModelTest"]
    names = sorted(n for n in dir(case) if n.startswith("test_") and n.endswith("_cpu"))
    return case, names


def _run_one(case: type, name: str) -> dict[str, Any]:
    result = unittest.TestResult()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case(name).run(result)
    seconds = time.perf_counter() - start
    if result.errors:
        status, reason = "error", _reason(result.errors[0][1])
    elif result.failures:
        status, reason = "fail", _reason(result.failures[0][1])
    elif result.skipped:
        status, reason = "skip", result.skipped[0][1]
    else:
        status, reason = "pass", ""
    return {"status": status, "seconds": round(seconds, 4), "reason": reason}


def worker(backend_name: str, names_path: str, out_path: str) -> int:
    """Run the named tests, appending `start` and result records to out_path as JSON lines."""
    case, _ = _load(backend_name)
    with open(names_path) as f:
        names = json.load(f)
    with open(out_path, "a") as out, onnx_reference_blocked():
        for name in names:
            out.write(json.dumps({"start": name}) + "\n")
            out.flush()
            out.write(json.dumps({"name": name, **_run_one(case, name)}) + "\n")
            out.flush()
    return 0


def run_suite(backend_name: str, pattern: str | None = None, verbose: bool = False,
              timeout: float = 300.0) -> dict[str, dict[str, Any]]:
    """name -> {status: pass|fail|error|skip|crash|timeout, seconds, reason} per CPU node test.

    The tests run in a child process; when it crashes or hangs on a test, that test is
    recorded and a new child carries on with the rest."""
    import subprocess
    import tempfile

    _, names = _names_only()
    if pattern:
        names = [n for n in names if re.search(pattern, n)]
    results: dict[str, dict[str, Any]] = {}
    remaining = list(names)
    with tempfile.TemporaryDirectory(prefix="onnx_conformance_") as tmp:
        while remaining:
            names_path = os.path.join(tmp, "names.json")
            out_path = os.path.join(tmp, f"out{len(results)}.jsonl")
            with open(names_path, "w") as f:
                json.dump(remaining, f)
            child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                      backend_name, names_path, out_path])
            current, last_progress, seen = None, time.monotonic(), 0
            while child.poll() is None:
                time.sleep(0.2)
                records = _records(out_path)
                if len(records) != seen:
                    seen, last_progress = len(records), time.monotonic()
                    current = _collect(records, results, verbose)
                elif current is not None and time.monotonic() - last_progress > timeout:
                    child.kill()
                    child.wait()
            current = _collect(_records(out_path), results, verbose)
            if current is not None:
                status = "timeout" if child.returncode == -9 else "crash"
                results[current] = {"status": status, "seconds": 0.0,
                                    "reason": f"worker process ended with {child.returncode}"}
                if verbose:
                    print(f"{backend_name} {current}: {status}", file=sys.stderr, flush=True)
            elif child.returncode != 0 and not _records(out_path):
                raise RuntimeError(f"the test worker failed to start ({child.returncode})")
            remaining = [n for n in remaining if n not in results]
    return {n: results[n] for n in names}


def _names_only() -> tuple[None, list[str]]:
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return None, sorted(f"{t.name}_cpu" for t in load_node_model_tests())


def _records(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def _collect(records: list[dict[str, Any]], results: dict[str, dict[str, Any]],
             verbose: bool) -> str | None:
    """Store finished results; the test started but not finished (None if none)."""
    current = None
    for r in records:
        if "start" in r:
            current = r["start"]
        else:
            name = r.pop("name")
            if verbose and name not in results:
                print(f"{name}: {r['status']} {r['seconds']:.2f}s", file=sys.stderr, flush=True)
            results[name] = r
            current = None
    return current


def summarize(backend_name: str, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(r["status"] for r in results.values())
    total = len(results)
    passed = counts.get("pass", 0)
    seconds = sum(r["seconds"] for r in results.values())
    return {"backend": backend_name, "total": total, "passed": passed,
            "failed": counts.get("fail", 0), "errors": counts.get("error", 0),
            "skipped": counts.get("skip", 0),
            "crashed": counts.get("crash", 0) + counts.get("timeout", 0),
            "pass_rate": round(100.0 * passed / total, 2) if total else 0.0,
            "seconds": round(seconds, 1),
            "seconds_per_test": round(seconds / total, 4) if total else 0.0}


def category(reason: str) -> str:
    """A short reason shared by every test failing the same way (for expected_failures.py)."""
    m = re.search(r"data type (\w+) is not supported", reason)
    if m:
        name = m.group(1)
        if name.isdigit():
            import onnx

            name = onnx.TensorProto.DataType.Name(int(name))
        if name in ("STRING", "BFLOAT16") or name.startswith("COMPLEX"):
            return f"data type {name.lower()} is not supported"
        return "8-bit float and sub-byte data types (float8, float4, int4, int2) are not supported"
    rules = [
        (r"the model uses ONNX opset", "opset below 11 (ember imports opsets 11 and newer)"),
        (r"only tensor, sequence and optional inputs are supported",
         "map types are not supported"),
        (r"operator '[\w]+' of domain '([\w.]+)'", "operators of domain {0} are not supported"),
        (r"operator '(\w+)' is not supported", "op {0} not supported"),
        (r"condition computed at run time", "If with a run-time condition is not supported"),
        (r"must be a constant", "dynamic shape: a shape-deciding input computed at run time"),
        (r"training", "training mode is not supported (inference only)"),
        (r"^AssertionError", "wrong results (differ from onnx's expected outputs)"),
        (r"node '[^']*' \([\w.:]+, opset \d+\): (?:\w+: )?(.{0,72})", "{0}"),
        ((r"^(?:[\w.]+\.)?(\w+): .*?(?:node '[^']*' \(|fused group '[^']*' \()?"
          r"([\w, >-]*\)?:?)\s*(.{0,70})"), "{0}: {2}"),
    ]
    for pattern, text in rules:
        m = re.search(pattern, reason)
        if m:
            return text.format(*m.groups()).strip()
    return reason[:80]


def write_expected(path: str, results: dict[str, dict[str, Any]]) -> None:
    """Write expected_failures.py: every failing test grouped under the reason it fails."""
    groups: dict[str, list[str]] = {}
    for name, r in sorted(results.items()):
        if r["status"] not in ("pass", "skip"):
            reason = category(r["reason"]) if r["status"] in ("fail", "error") else \
                f"the process {'hangs' if r['status'] == 'timeout' else 'crashes'}"
            groups.setdefault(reason, []).append(name.removesuffix("_cpu"))
    lines = ['"""Node tests of ONNX\'s backend suite that ember is expected to fail, by reason.',
             "",
             "The suite runs them as strict expected failures: one that passes fails the run.",
             "A test giving wrong results is a bug to fix, not an entry here.",
             "Regenerate after ops land (and review the diff):",
             "    python benchmarks/onnx_conformance.py --backend ember \\",
             "        --write-expected tests/frontend/expected_failures.py",
             '"""', "", "EXPECTED_FAILURES: dict[str, tuple[str, ...]] = {"]
    for reason in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        lines.append(f"    {reason!r}: (")
        lines.extend(f"        {n!r}," for n in groups[reason])
        lines.append("    ),")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(*argv[1:4])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["ember", "onnxruntime", "both"], default="both")
    parser.add_argument("-k", dest="pattern", help="only tests whose name matches this regex")
    parser.add_argument("--failures", action="store_true", help="list failing tests and why")
    parser.add_argument("--slowest", type=int, default=0, help="list the N slowest tests")
    parser.add_argument("-v", "--verbose", action="store_true", help="name each test first")
    parser.add_argument("--json", dest="json_path", help="write per-test results here")
    parser.add_argument("--write-expected", dest="expected_path",
                        help="write ember's failures as an expected_failures.py here")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one test may take before it counts as hung")
    args = parser.parse_args(argv)

    names = ["onnxruntime", "ember"] if args.backend == "both" else [args.backend]
    summaries: dict[str, dict[str, Any]] = {}
    everything: dict[str, Any] = {}
    for name in names:
        results = run_suite(name, args.pattern, args.verbose, args.timeout)
        summaries[name] = summarize(name, results)
        everything[name] = results
        if args.failures:
            for test, r in results.items():
                if r["status"] in ("fail", "error"):
                    print(f"{name} {r['status']:5} {test}: {r['reason']}")
        if args.slowest:
            slow = sorted(results.items(), key=lambda kv: -kv[1]["seconds"])[:args.slowest]
            for test, r in slow:
                print(f"{name} {r['seconds']:8.3f}s {test} ({r['status']})")
    print(f"{'backend':12} {'passed':>7} {'total':>6} {'rate':>7} {'fail':>5} {'error':>6} "
          f"{'skip':>5} {'crash':>6} {'time':>8}")
    for s in summaries.values():
        print(f"{s['backend']:12} {s['passed']:7d} {s['total']:6d} {s['pass_rate']:6.2f}% "
              f"{s['failed']:5d} {s['errors']:6d} {s['skipped']:5d} {s['crashed']:6d} "
              f"{s['seconds']:7.1f}s")
    if "ember" in summaries and "onnxruntime" in summaries:
        ort = summaries["onnxruntime"]["passed"]
        ratio = 100.0 * summaries["ember"]["passed"] / ort if ort else 0.0
        both = sum(1 for t, r in everything["ember"].items()
                   if r["status"] == "pass" and everything["onnxruntime"][t]["status"] == "pass")
        print(f"ember passes {ratio:.1f}% as many node tests as onnxruntime "
              f"({both} tests pass on both)")
    if args.expected_path and "ember" in everything:
        write_expected(args.expected_path, everything["ember"])
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"summary": summaries, "tests": everything}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
