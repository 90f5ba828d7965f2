#!/usr/bin/env bash
# System packages the tests need: a C compiler (the C back end), PoCL (OpenCL on the CPU,
# for the GPU back end's tests) and the OpenCL ICD loader headers pyopencl builds against.
set -euo pipefail
packages=()
command -v cc >/dev/null 2>&1 || packages+=(gcc libgomp1)
[ -e /etc/OpenCL/vendors/pocl.icd ] || packages+=(pocl-opencl-icd ocl-icd-opencl-dev)
if [ ${#packages[@]} -eq 0 ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${packages[@]}"
