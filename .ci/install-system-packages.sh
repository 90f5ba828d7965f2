#!/usr/bin/env bash
# System packages the tests need: a C compiler (the C back end), PoCL (OpenCL on the CPU,
# for the GPU back end's tests) and the OpenCL ICD loader headers pyopencl builds against;
# the ARM cross toolchains (libraries and the C runtime for aarch64 / armv7), qemu-user
# (running them here), lld (wasm-ld, linking WebAssembly; ld.lld, linking AMDGPU code
# objects) and chromium (the browser tests).
set -euo pipefail
packages=()
command -v cc >/dev/null 2>&1 || packages+=(gcc libgomp1)
[ -e /etc/OpenCL/vendors/pocl.icd ] || packages+=(pocl-opencl-icd ocl-icd-opencl-dev)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || packages+=(gcc-aarch64-linux-gnu)
command -v arm-linux-gnueabihf-gcc >/dev/null 2>&1 || packages+=(gcc-arm-linux-gnueabihf)
command -v qemu-aarch64 >/dev/null 2>&1 || packages+=(qemu-user)
{ command -v wasm-ld && command -v ld.lld; } >/dev/null 2>&1 || packages+=(lld)
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
if [ ${#packages[@]} -eq 0 ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${packages[@]}"
