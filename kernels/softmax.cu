/* Row softmax with a logit scale, one block per row (grid-stride):
 *   m = max_i x[i] * scale
 *   e[i] = exp(x[i] * scale - m)     (written to out)
 *   out[i] = e[i] * (float)(1 / sum_i e[i])
 * The sum is float per thread, then the block tree; its reciprocal is taken
 * in double, one rounding, like the CPU backend. */
#include "simt.h"

#include "block_reduce.cuh"
#include "softmax.h"

static __global__ void softmax_kernel(const float *x /* [n_rows][n_cols], may equal out */,
                                      int64_t n_rows, int64_t n_cols, float scale,
                                      float *out /* [n_rows][n_cols] */) {
  BRISK_SHARED(float, red, 32);
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float *xr = x + r * n_cols;
    float *yr = out + r * n_cols;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) m = fmaxf(m, xr[i] * scale);
    m = brisk_block_reduce<true>(m, red);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      const float e = expf(__fsub_rn(__fmul_rn(xr[i], scale), m));
      yr[i] = e;
      sum += e;
    }
    sum = brisk_block_reduce<false>(sum, red);
    const float inv = (float)(1.0 / (double)sum);
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) yr[i] *= inv;
  }
}

extern "C" int brisk_ksoftmax(const float *x, int64_t n_rows, int64_t n_cols, float scale,
                              float *out, brisk_kstream stream) {
  if (n_rows <= 0 || n_cols <= 0) return 0;
  const unsigned threads = n_cols >= 8192 ? 1024 : n_cols >= 1024 ? 256 : n_cols >= 128 ? 64 : 32;
  const dim3 grid((unsigned)(n_rows < 65535 * 16 ? n_rows : 65535 * 16));
  return BRISK_LAUNCH(softmax_kernel, grid, dim3(threads), 0, stream, x, n_rows, n_cols, scale,
                      out);
}
