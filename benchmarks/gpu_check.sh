#!/usr/bin/env bash
# GPU check in one run: the GPU tests, then zoo models against onnxruntime (max error and
# median latencies, one JSON line each).
#
#   benchmarks/gpu_check.sh            # cuda when nvidia-smi sees a GPU, else opencl (PoCL)
#   TARGET=opencl benchmarks/gpu_check.sh
#
# On an NVIDIA machine it runs target "cuda" (PTX from nvcc, or from LLVM with
# TARGET="cuda -codegen=llvm") at full model sizes; on the CPU path (OpenCL on PoCL) it
# uses small inputs so that it finishes in a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${TARGET:-}" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        TARGET=cuda
    else
        TARGET=opencl
    fi
fi
SIZE=()
if [[ "$TARGET" == opencl* ]]; then SIZE=(--small --repeat 5); fi
echo "== target: $TARGET"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || true
echo "== GPU tests"
python -m pytest -q tests/gpu
echo "== zoo models vs onnxruntime"
python benchmarks/gpu_check.py --target "$TARGET" --models "${MODELS:-resnet18,mobilenet_v2,bert-tiny}" "${SIZE[@]}"
