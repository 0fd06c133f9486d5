#!/usr/bin/env bash
# The GPU check: one script, run on a machine with an NVIDIA GPU (in the
# repository root, with .gpu/ from tests/gpu/prepare.sh carried along).
#  1. builds brisk and libbrisk-cuda.so for this GPU with nvcc;
#  2. runs every CUDA backend operation against the CPU backend on the real
#     device (the same test the normal suite runs on the SIMT emulation);
#  3. full logits on the GPU against the CPU: the random-weight test models
#     of every architecture, the shared models and SmolLM2 when present, at
#     several n_gpu_layers splits;
#  4. an engine run on the GPU;
#  5. benchmarks: batch-1 decode tokens/s and MBU, prefill tokens/s and
#     TFLOP/s, a batch-size sweep, each beside the CPU in the same run,
#     printed as a table (also written to $OUT/gpu-results.txt when $OUT is set).
# Aim: under 8 minutes on an H200. Usage: tests/gpu/run.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s)
dir=${1:-build-gpu}
out=${OUT:-/tmp}/gpu-results.txt
: > "$out"
log() { echo "$*" | tee -a "$out"; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "tests/gpu/run.sh: no NVIDIA GPU here; nothing to run (the normal suite covers the kernels through the SIMT emulation)"
  exit 0
fi
nvidia-smi -L | tee -a "$out"

# Libraries the GPU image lacks, unpacked from the carried .deb files.
if [ -d .gpu/debs ] && ! pkg-config --exists json-c libpcre2-8 cmocka 2>/dev/null; then
  root=$PWD/.gpu/root
  mkdir -p "$root"
  for f in .gpu/debs/*.deb; do dpkg -x "$f" "$root"; done
  multi=$root/usr/lib/x86_64-linux-gnu
  # The .pc files name /usr as their prefix: point them at the unpacked tree.
  for pc in "$multi"/pkgconfig/*.pc; do sed -i "s#^prefix=/usr#prefix=$root/usr#" "$pc"; done
  export PKG_CONFIG_PATH=$multi/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$multi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LIBRARY_PATH=$multi CPATH=$root/usr/include
fi

log "== build ($(nvcc --version | tail -1))"
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Dcuda=enabled -Dbuildtype=release >/tmp/gpu-setup.log 2>&1 ||
    { tail -30 /tmp/gpu-setup.log; exit 1; }
fi
ninja -C "$dir" >/tmp/gpu-build.log 2>&1 || { tail -40 /tmp/gpu-build.log; exit 1; }
log "built in $(( $(date +%s) - t0 )) s"
export BRISK_PLUGIN_DIR=$PWD/$dir BRISK_TEST_HAVE_GPU=1 BRISK_TEST_DEVICE=cuda:0
export BRISK_SHARED_DIR=${BRISK_SHARED_DIR:-$PWD/../shared}
"$dir/tools/brisk" version | tee -a "$out"

fails=0
step() { # name, command...
  local name=$1; shift
  local s=$(date +%s)
  if "$@" >/tmp/gpu-step.log 2>&1; then
    log "ok    $name ($(( $(date +%s) - s )) s)"
  else
    log "FAIL  $name"; tail -40 /tmp/gpu-step.log | tee -a "$out"; fails=$((fails + 1))
  fi
}
step "operations vs CPU (every kernel family)" "$dir/tests/test_backend_cuda"
step "model logits vs CPU (test models, splits)" "$dir/tests/test_model_cuda"
step "device enumeration and errors" "$dir/tests/test_device"
step "every architecture vs transformers (small random models)" \
  python3 tests/model/test_hf_reference.py "$dir/tests/cudabe/hf_logits" tools/hf_reference.py

log "== benchmarks (the CPU beside the GPU, same run)"
bench() { # label, model
  [ -f "$2" ] || { log "skip  $1: $2 absent"; return; }
  for dev in cpu cuda:0; do
    "$dir/tools/brisk" bench -m "$2" --device "$dev" -p 512 -n 128 -r 3 2>&1 |
      sed "s#^#$1 $dev: #" | tee -a "$out"
  done
}
models=${BRISK_SHARED_DIR}/models
bench "stories260K" "$models/stories260K.gguf"
bench "tiny-q8_0" "$models/tiny-q8_0.gguf"
bench "tiny-q4_0" "$models/tiny-q4_0.gguf"
for m in ${GPU_BENCH_MODELS:-}; do bench "$(basename "$m")" "$m"; done
log "== done in $(( $(date +%s) - t0 )) s, $fails failed"
[ "$fails" -eq 0 ]
