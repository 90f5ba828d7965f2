#!/usr/bin/env bash
# One prepared run for a machine with an NVIDIA GPU (no network needed): the GPU tests, then
# ResNet-50 (batch 1 and 16), MobileNet-V2 (batch 1) and BERT-base (sequence 128, batch 1
# and 16), ember untuned against PyTorch CUDA eager and torch.compile in the same run, one
# JSON line each, collected in $OUT (default gpu-report.jsonl). Install ember first with
# `pip install --no-deps -e .`.
#
#   benchmarks/gpu.sh                      # cuda when torch sees a GPU
#   TARGET=opencl IMAGE=32 benchmarks/gpu.sh   # the CPU path (PoCL, PyTorch on the CPU;
#                                              # BERT-tiny at sequence 16 instead of BERT-base)
#
# CUDA's PTX comes from LLVM's NVPTX backend when nvcc is absent (the CUDA driver JIT-loads
# it); models without transcendental math (these CNNs) need no libdevice.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-report.jsonl}"
if [[ -z "${TARGET:-}" ]]; then
    if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
        TARGET=cuda
    else
        TARGET=opencl
    fi
fi
IMAGE="${IMAGE:-224}"
REPEAT="${REPEAT:-20}"
COMPILE=(--torch-compile)
BERT=(bert-base "${SEQ:-128}")
[[ "$TARGET" == opencl* ]] && COMPILE=() && BERT=(bert-tiny "${SEQ:-16}")
echo "== target: $TARGET, image ${IMAGE}px, report: $OUT"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || true
: > "$OUT"
echo "== GPU tests"
timeout 240 python3 -m pytest -q -x tests/gpu/test_llvm_gpu.py tests/gpu/test_codegen.py \
    tests/gpu/test_schedule.py || echo '{"tests": "failed"}' >> "$OUT"
echo "== ember vs PyTorch"
status=0
timeout 420 python3 benchmarks/gpu_vs_torch.py --target "$TARGET" --models resnet50 \
    --batch "${BATCHES:-1,16}" --image-size "$IMAGE" --repeat "$REPEAT" "${COMPILE[@]}" \
    --json "$OUT" || status=$?
timeout 240 python3 benchmarks/gpu_vs_torch.py --target "$TARGET" --models mobilenet_v2 \
    --batch 1 --image-size "$IMAGE" --repeat "$REPEAT" "${COMPILE[@]}" --json "$OUT" \
    || status=$?
timeout 300 python3 benchmarks/gpu_vs_torch.py --target "$TARGET" --models "${BERT[0]}" \
    --seq "${BERT[1]}" --batch "${BATCHES:-1,16}" --repeat "$REPEAT" "${COMPILE[@]}" \
    --json "$OUT" || status=$?
echo "== report: $OUT"
cat "$OUT"
exit $status
