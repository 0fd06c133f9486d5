#!/usr/bin/env bash
# The CUDA plugin as CI builds it (the 'cuda_plugin' test, when nvcc was
# found): device code for sm_80, sm_86, sm_89 and sm_90 plus compute_90 PTX
# (for newer GPUs) in libbrisk-cuda.so; only the entry point exported;
# cuBLASLt and NCCL not linked (the plugin opens them with dlopen); the
# CUDA runtime linked statically; and
# libbrisk itself linking no CUDA library at all.
# Usage: check_plugin.sh LIBBRISK_CUDA.so LIBBRISK.so
set -euo pipefail
plugin=$1 core=$2
here=$(dirname "$0")
fail=0
archs=$(python3 "$here/fatbin_archs.py" "$plugin")
echo "device code in $(basename "$plugin"):" $archs
for want in "sm_80 elf" "sm_86 elf" "sm_89 elf" "sm_90 elf" "compute_90 ptx"; do
  grep -qx "$want" <<<"$archs" || { echo "missing: $want"; fail=1; }
done
exported=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
if [ "$exported" != "brisk_plugin_entry_v1" ]; then
  echo "the plugin exports more than its entry point:" $exported; fail=1
fi
# brisk's own calls inside the plugin go to the host table (host_shim.c):
# one left undefined would make dlopen fail on every machine.
undefined=$(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep '^brisk_' || true)
if [ -n "$undefined" ]; then
  echo "the plugin needs brisk symbols it cannot get (dlopen fails):" $undefined; fail=1
fi
needed=$(objdump -p "$plugin" | awk '$1 == "NEEDED" {print $2}')
if grep -Eq 'cublas|nccl' <<<"$needed"; then
  echo "the plugin links cuBLAS or NCCL (they are opened with dlopen):" $needed; fail=1
fi
# The CUDA runtime is linked statically: a machine with only the driver
# (libcuda.so, which the runtime opens itself) can load the plugin.
if grep -Eq 'cudart|libcuda\.' <<<"$needed"; then
  echo "the plugin needs the CUDA runtime or driver as a shared library:" $needed; fail=1
fi
undef_cuda=$(nm -D --undefined-only "$plugin" | awk '{print $2}' | grep -E '^(cuda|__cuda)' || true)
if [ -n "$undef_cuda" ]; then
  echo "the plugin leaves CUDA runtime symbols to the loader:" $undef_cuda; fail=1
fi
core_needed=$(objdump -p "$core" | awk '$1 == "NEEDED" {print $2}')
if grep -Eq 'cuda|cublas|nccl' <<<"$core_needed"; then
  echo "libbrisk links a CUDA library:" $core_needed; fail=1
fi
[ $fail -eq 0 ] && echo "ok"
exit $fail
