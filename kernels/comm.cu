/* The tree sum of the communicators (kernels/comm.h), grid-stride over
 * elements; each element adds its `size` values in comm.h's tree: split at
 * the largest power of two below the count, recursively. Without
 * recursion: the count's binary digits, high to low, are the tree's
 * left-to-right blocks (each a perfect pairwise tree, summed with a binary
 * counter of partial sums), joined from the right: for 7 ranks,
 * ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + r6). */
#include "simt.h"

#include "comm.h"

#define COMM_THREADS 256
#define MAX_GRID 65535u

/* The perfect pairwise sum of 2^levels values, stride apart. */
static __device__ float perfect_sum(const float *v, int64_t stride, int levels) {
  float partial[9]; /* levels <= 8 */
  for (int i = 0; i < 1 << levels; i++) {
    float c = v[(int64_t)i * stride];
    int j = 0;
    for (int m = i; m & 1; m >>= 1) c = __fadd_rn(partial[j++], c);
    partial[j] = c;
  }
  return partial[levels];
}

static __global__ void tree_sum_kernel(const float *parts, int size, int64_t n, float *out) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float acc = 0.0f;
    bool have = false;
    int end = size;
    for (int bit = 0; bit < 9; bit++) {
      if (!(size >> bit & 1)) continue;
      const int start = end - (1 << bit);
      const float p = perfect_sum(parts + (int64_t)start * n + i, n, bit);
      acc = have ? __fadd_rn(p, acc) : p;
      have = true;
      end = start;
    }
    out[i] = acc;
  }
}

extern "C" int brisk_kcomm_tree_sum(const float *parts, int size, int64_t n, float *out,
                                    brisk_kstream stream) {
  if (size < 1 || size > BRISK_KCOMM_MAX_RANKS) return 1;
  if (n <= 0) return 0;
  int64_t blocks = (n + COMM_THREADS - 1) / COMM_THREADS;
  return BRISK_LAUNCH(tree_sum_kernel,
                      dim3((unsigned)(blocks < (int64_t)MAX_GRID ? blocks : MAX_GRID)),
                      dim3(COMM_THREADS), 0, stream, parts, size, n, out);
}
