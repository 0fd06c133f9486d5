/* One decode step's paged attention over a deep cache, per KV cache type and
 * CPU kernel level, timed with the calling thread's CPU clock (so that a
 * shared machine's load moves the figures less than wall time would):
 *
 *   bench_attention [N_HEADS N_KV_HEADS HEAD_DIM DEPTH [REPS]]
 *
 * (default 9 3 64 4080 15: SmolLM2-135M at 4k context, one layer). Every
 * rep runs each (level, type) pair once, interleaved, on this thread (no
 * pool), one query token attending over DEPTH keys in blocks of 16; prints
 * the median and fastest microseconds per step and the ratio of each type's
 * median to F16's at the same level. */
#include "backend/cpu/ops/cpu_backend.h"
#include "core/dtype.h"
#include "quant/kv_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BS 16
#define MAX_REPS 101

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float rng_normalish(void) { /* sum of 4 uniforms: mean 0, sd ~0.58 */
  float s = 0;
  for (int i = 0; i < 4; i++) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    s += (float)(rng_state >> 40) / (float)(1 << 24) - 0.5f;
  }
  return s;
}

static const uint32_t types[] = {BRISK_DTYPE_F16, BRISK_KVQ_DTYPE_Q8, BRISK_KVQ_DTYPE_FP8,
                                 BRISK_DTYPE_F32};
static const char *const type_names[] = {"f16", "q8_0", "fp8", "f32"};
static const brisk_cpu_isa isas[] = {BRISK_CPU_ISA_SCALAR, BRISK_CPU_ISA_AVX2,
                                     BRISK_CPU_ISA_AVXVNNI, BRISK_CPU_ISA_AVX512};
#define N_TYPES 4
#define N_ISAS 4

int main(int argc, char **argv) {
  int nh = 9, nkv = 3, hd = 64, depth = 4080, reps = 15;
  if (argc >= 5) nh = atoi(argv[1]), nkv = atoi(argv[2]), hd = atoi(argv[3]), depth = atoi(argv[4]);
  if (argc >= 6) reps = atoi(argv[5]);
  if (nh <= 0 || nkv <= 0 || nh % nkv || hd <= 0 || hd > 1024 || depth <= 0 || reps <= 0 ||
      reps > MAX_REPS) {
    fprintf(stderr, "usage: %s [N_HEADS N_KV_HEADS HEAD_DIM DEPTH [REPS <= %d]]\n", argv[0],
            MAX_REPS);
    return 2;
  }
  const int32_t n_blocks = (depth + BS - 1) / BS;
  brisk_backend *be[N_ISAS] = {0};
  void *kc[N_ISAS][N_TYPES] = {{0}}, *vc[N_ISAS][N_TYPES] = {{0}};
  int32_t *table = malloc((size_t)n_blocks * sizeof *table);
  float *k = malloc((size_t)depth * nkv * hd * sizeof *k),
        *v = malloc((size_t)depth * nkv * hd * 4);
  float *q = malloc((size_t)nh * hd * sizeof *q), *out = malloc((size_t)nh * hd * sizeof *out);
  int64_t *slots = malloc((size_t)depth * sizeof *slots);
  if (!table || !k || !v || !q || !out || !slots) return 1;
  for (int32_t b = 0; b < n_blocks; b++) table[b] = (b * 7919) % n_blocks; /* scattered */
  for (int32_t p = 0; p < depth; p++) slots[p] = (int64_t)table[p / BS] * BS + p % BS;
  for (size_t i = 0; i < (size_t)depth * nkv * hd; i++)
    k[i] = rng_normalish(), v[i] = rng_normalish();
  for (int i = 0; i < nh * hd; i++) q[i] = rng_normalish();
  for (int a = 0; a < N_ISAS; a++) {
    if (brisk_backend_cpu_create(NULL, isas[a], &be[a]) != BRISK_OK) {
      be[a] = NULL;
      continue;
    }
    for (int t = 0; t < N_TYPES; t++) {
      brisk_kv_layout kv = {types[t], n_blocks, nkv, BS, hd};
      size_t bytes = (size_t)n_blocks * nkv * BS * brisk_kvq_row_bytes(types[t], hd);
      if (be[a]->buffer_alloc(be[a], bytes, &kc[a][t]) ||
          be[a]->buffer_alloc(be[a], bytes, &vc[a][t]) ||
          be[a]->kv_write(be[a], &kv, kc[a][t], vc[a][t], k, v, slots, depth)) {
        fprintf(stderr, "setup failed: %s\n", brisk_last_error());
        return 1;
      }
    }
  }
  int32_t pos = depth - 1, seq = 0;
  brisk_attn_batch batch = {1, &pos, &seq, table, 1, n_blocks};
  brisk_attn_params ap = {nh, 0, 0, 0};
  static double us[N_ISAS][N_TYPES][MAX_REPS];
  for (int r = -1; r < reps; r++) /* rep -1: warm-up */
    for (int a = 0; a < N_ISAS; a++)
      for (int t = 0; be[a] && t < N_TYPES; t++) {
        brisk_kv_layout kv = {types[t], n_blocks, nkv, BS, hd};
        double t0 = cpu_s();
        if (be[a]->attention(be[a], &kv, kc[a][t], vc[a][t], q, &batch, &ap, out)) return 1;
        double dt = cpu_s() - t0;
        if (r >= 0) us[a][t][r] = dt * 1e6;
      }
  printf("attention, one decode token: %d heads, %d KV heads, head_dim %d, depth %d, %d reps "
         "(thread CPU time)\n",
         nh, nkv, hd, depth, reps);
  printf("%-12s %-5s %10s %10s %12s\n", "kernels", "kv", "median us", "min us", "f16 / this");
  for (int a = 0; a < N_ISAS; a++) {
    if (!be[a]) continue;
    double med[N_TYPES];
    for (int t = 0; t < N_TYPES; t++) {
      qsort(us[a][t], (size_t)reps, sizeof(double), cmp_double);
      med[t] = us[a][t][reps / 2];
    }
    for (int t = 0; t < N_TYPES; t++)
      printf("%-12s %-5s %10.1f %10.1f %11.2fx\n", be[a]->name, type_names[t], med[t], us[a][t][0],
             med[0] / med[t]);
    for (int t = 0; t < N_TYPES; t++) {
      be[a]->buffer_free(be[a], kc[a][t]);
      be[a]->buffer_free(be[a], vc[a][t]);
    }
    brisk_backend_free(be[a]);
  }
  free(table), free(k), free(v), free(q), free(out), free(slots);
  return 0;
}
