#!/usr/bin/env bash
# The GPU check: one script, run on a machine with an NVIDIA GPU (in the
# repository root, with .gpu/ from tests/gpu/prepare.sh carried along).
#  1. builds brisk and libbrisk-cuda.so for this GPU with nvcc;
#  2. runs every CUDA backend operation against the CPU backend on the real
#     device (the same test the normal suite runs on the SIMT emulation),
#     including the cuBLASLt GEMM path against a float64 product and the
#     GEMV path;
#  3. full logits on the GPU against the CPU: the random-weight test models
#     of every architecture, the shared models and SmolLM2 when present, at
#     several n_gpu_layers splits, a prefill on the GEMM path; decode steps
#     as CUDA graphs against eager steps (bitwise);
#  4. the NCCL communicator at world size 1 (the plugin's NCCL table); with
#     2 or more GPUs, tensor parallelism over them (TP 2, and 4 with 4
#     GPUs): logits bit for bit those of TP 1 and within tolerance of the
#     CPU's, a rank failing mid-step, and `brisk logits --tp 2` against
#     `--tp 1` byte for byte;
#  5. an engine run on the GPU;
#  6. benchmarks on a model with 8B-llama layer shapes (2 layers, 32000
#     vocabulary; GPU_BENCH_TYPES, default q8_0): batch-1 decode tokens/s and
#     MBU, with and without graphs; prefill tokens/s and TFLOP/s, on the GEMM
#     path and on the GEMV kernels; a batch-size sweep through the engine;
#     the CPU beside the GPU where it is quick enough. Printed as a table
#     (also written to $OUT/gpu-results.txt when $OUT is set).
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
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)

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
# cuBLASLt and NCCL are opened with dlopen: the toolkit's directory.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done

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
  local run=(timeout 300)
  declare -F "$1" >/dev/null && run=() # a shell function: its commands have their own limits
  if "${run[@]}" "$@" >/tmp/gpu-step.log 2>&1; then
    log "ok    $name ($(( $(date +%s) - s )) s)"
  else
    log "FAIL  $name"; tail -40 /tmp/gpu-step.log | tee -a "$out"; fails=$((fails + 1))
  fi
}
step "operations vs CPU (every kernel family, the GEMM path)" "$dir/tests/cudabe/test_backend_cuda"
step "model logits vs CPU (test models, splits, GEMM prefill, graphs)" "$dir/tests/cudabe/test_model_cuda"
step "NCCL communicator, world size 1" "$dir/tests/cudabe/test_comm_nccl"
n_gpus=$(nvidia-smi -L | grep -c '^GPU')
tp_logits() { # model: --tp 2 on cuda:0 and cuda:1 against --tp 1, byte for byte
  local m=$1 toks
  toks=$(seq 11 30 | tr '\n' ' ')
  timeout 120 "$dir/tools/brisk" logits -m "$m" --device cuda:0 /tmp/brisk-tp1.f32 $toks >/dev/null &&
    timeout 120 "$dir/tools/brisk" logits -m "$m" --device cuda:0 --tp 2 /tmp/brisk-tp2.f32 $toks >/dev/null &&
    cmp /tmp/brisk-tp1.f32 /tmp/brisk-tp2.f32
}
if [ "$n_gpus" -ge 2 ]; then
  step "tensor parallelism on $n_gpus GPUs over NCCL (TP 2$([ "$n_gpus" -ge 4 ] && echo ', 4'))" \
    "$dir/tests/cudabe/test_tp_cuda"
  for m in "${BRISK_SHARED_DIR}/models/tiny-q8_0.gguf" "${BRISK_SHARED_DIR}/models/tiny-f16.gguf"; do
    [ -f "$m" ] && step "logits --tp 2 vs --tp 1 on GPUs: $(basename "$m")" tp_logits "$m"
  done
else
  log "skip  tensor parallelism over NCCL: $n_gpus GPU (needs 2)"
fi
step "device enumeration and errors" "$dir/tests/test_device"
step "every architecture vs transformers (small random models)" \
  python3 tests/model/test_hf_reference.py "$dir/tests/cudabe/hf_logits" tools/hf_reference.py

# Full logits of real models, GPU against CPU: 48 tokens as one batch (the
# GEMM path), each row's relative L2 difference within 3e-2 (BF16
# activations on the GEMM path; docs/cuda.md).
logits_vs_cpu() { # model
  local m=$1 toks
  toks=$(seq 11 58 | tr '\n' ' ')
  timeout 120 "$dir/tools/brisk" logits -m "$m" --device cpu /tmp/brisk-logits-cpu.f32 $toks >/dev/null &&
    timeout 120 "$dir/tools/brisk" logits -m "$m" --device cuda:0 /tmp/brisk-logits-gpu.f32 $toks >/dev/null &&
    python3 - /tmp/brisk-logits-cpu.f32 /tmp/brisk-logits-gpu.f32 48 <<'PY'
import array, math, sys
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
n = int(sys.argv[3]); v = len(a) // n
assert len(a) == len(b) and v * n == len(a), (len(a), len(b))
worst = 0.0
for r in range(n):
    num = sum((a[r*v+i] - b[r*v+i]) ** 2 for i in range(v)); den = sum(x * x for x in a[r*v:(r+1)*v])
    worst = max(worst, math.sqrt(num / (den or 1)))
print(f"worst row relative L2 {worst:.2e}")
sys.exit(0 if worst < 3e-2 else 1)
PY
}
for m in "${BRISK_SHARED_DIR}"/models/*.gguf ${GPU_LOGITS_MODELS:-}; do
  [ -f "$m" ] && step "logits vs CPU: $(basename "$m")" logits_vs_cpu "$m"
done

log "== benchmarks on $gpu_name (8B-llama layer shapes, 2 layers; the CPU beside it)"
# HBM bandwidth for MBU: GPU_PEAK_GBS, or the datasheet figure of known parts.
peak=${GPU_PEAK_GBS:-}
if [ -z "$peak" ]; then
  case "$gpu_name" in
    *H200*) peak=4800 ;; *H100*SXM* | *H100\ 80GB\ HBM3*) peak=3350 ;; *H100*) peak=2000 ;;
    *A100*80GB*) peak=2039 ;; *A100*) peak=1555 ;; *L40S* | *L40*) peak=864 ;;
    *4090*) peak=1008 ;; *) peak=0 ;;
  esac
fi
bench_json() { # device, model, extra env...
  local dev=$1 model=$2; shift 2
  env "$@" timeout 240 "$dir/tools/brisk" bench -m "$model" --device "$dev" -p 2048 -n 128 -r 2 \
    --json 2>/dev/null
}
row() { # label, json, peak
  python3 - "$1" "$2" "$3" <<'PY' | tee -a "$out"
import json, sys
label, js, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
try:
    d = json.loads(js)
except Exception:
    print(f"{label:34s}  (no result)")
    sys.exit(0)
pp, tg = d["pp"]["median_tps"], d["tg"]["median_tps"]
tflops = pp * 2 * d["n_params"] / 1e12  # matmul FLOPs; attention not counted
mbu = tg * d["decode_bytes_per_token"] / (peak * 1e9) if peak else float("nan")
print(f"{label:34s} {tg:10.1f} {mbu:7.1%} {pp:11.1f} {tflops:8.2f}")
PY
}
models=()
for t in ${GPU_BENCH_TYPES:-q8_0}; do
  m=/tmp/brisk-8b-shaped-$t.gguf
  [ -f "$m" ] || "$dir/tests/gpu/gpu_make_model" "$m" "$t" 2 || { log "FAIL  make $t model"; continue; }
  models+=("$t:$m")
done
log "$(printf '%-34s %10s %7s %11s %8s' 'model / device / mode' 'decode t/s' 'MBU' 'prefill t/s' 'TFLOP/s')"
for tm in "${models[@]}"; do
  t=${tm%%:*} m=${tm#*:}
  row "$t cuda:0 (GEMM, graphs)" "$(bench_json cuda:0 "$m")" "$peak"
  row "$t cuda:0 (GEMM, no graphs)" "$(bench_json cuda:0 "$m" BRISK_CUDA_GRAPHS=0)" "$peak"
  row "$t cuda:0 (GEMV only, graphs)" "$(bench_json cuda:0 "$m" BRISK_CUDA_GEMM_ROWS=0)" "$peak"
done
# The shared test models, GPU beside CPU.
for m in "${BRISK_SHARED_DIR}/models/tiny-q8_0.gguf" ${GPU_BENCH_MODELS:-}; do
  [ -f "$m" ] || continue
  for dev in cpu cuda:0; do row "$(basename "$m" .gguf) $dev" "$(bench_json "$dev" "$m")" 0; done
done

log "== batch sweep (engine, cuda:0: 64 prompt + 64 generated tokens per request, all at once)"
log "$(printf '%-8s %14s %14s' 'batch' 'output tok/s' 'p50 TPOT ms')"
for tm in "${models[@]:0:1}"; do
  m=${tm#*:}
  for b in 1 4 16 64; do
    timeout 120 "$dir/tools/brisk" serve-bench -m "$m" --device cuda:0 -n "$b" --rate 0 \
      --max-running "$b" --prompt-len 64 --output-len 64 --kv-tokens 16384 --json 2>/dev/null |
      python3 -c "
import json, sys
try:
    r = json.load(sys.stdin)['runs'][0]
    print(f'{$b:<8d} {r[\"output_tok_s\"]:14.1f} {r[\"tpot_ms\"][\"p50\"]:14.3f}')
except Exception:
    print(f'{$b:<8d} (no result)')" | tee -a "$out"
  done
done
log "== done in $(( $(date +%s) - t0 )) s, $fails failed"
[ "$fails" -eq 0 ]
