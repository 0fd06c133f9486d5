/* LayerNorm over rows and the exact GELU (encoder models):
 *   mean = sum_i x[r][i] / n, var = sum_i (x[r][i] - mean)^2 / n  (float,
 *          per thread, then the block: two passes, no cancellation)
 *   s    = (float)(1 / sqrt(var + eps))  (in double: one rounding)
 *   out[r][i] = (x[r][i] - mean) * s * weight[i] + bias[i]
 *   gelu: out[i] = x[i] / 2 * erfc(-x[i] / sqrt 2)
 * One block per row (grid-stride over rows); the row is read three times,
 * the later reads hit L1/L2 for model-sized rows. */
#include "simt.h"

#include "block_reduce.cuh"
#include "layernorm.h"

#define GELU_THREADS 256
#define MAX_GRID 65535u

static __global__ void layernorm_kernel(const float *x, /* [n_rows][n_cols], may equal out */
                                        const float *__restrict__ weight, // [n_cols] or NULL
                                        const float *__restrict__ bias,   // [n_cols] or NULL
                                        int64_t n_rows, int64_t n_cols, float eps,
                                        float *out /* [n_rows][n_cols] */) {
  BRISK_SHARED(float, red, 32);
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float *xr = x + r * n_cols;
    float *yr = out + r * n_cols;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) sum += xr[i];
    const float mean = brisk_block_reduce<false>(sum, red) / (float)n_cols;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      const float d = xr[i] - mean;
      ss += d * d;
    }
    ss = brisk_block_reduce<false>(ss, red);
    const float s = (float)(1.0 / sqrt((double)ss / (double)n_cols + (double)eps));
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      float v = __fmul_rn(xr[i] - mean, s);
      if (weight) v = __fmul_rn(v, weight[i]);
      if (bias) v = __fadd_rn(v, bias[i]);
      yr[i] = v;
    }
  }
}

extern "C" int brisk_klayernorm(const float *x, const float *weight, const float *bias,
                                int64_t n_rows, int64_t n_cols, float eps, float *out,
                                brisk_kstream stream) {
  if (n_rows <= 0 || n_cols <= 0) return 0;
  /* Enough threads for a few elements each, a multiple of 32, at most 1024. */
  const unsigned threads = n_cols >= 4096 ? 1024 : n_cols >= 1024 ? 256 : n_cols >= 256 ? 128 : 32;
  const dim3 grid((unsigned)(n_rows < 65535 * 16 ? n_rows : 65535 * 16));
  return BRISK_LAUNCH(layernorm_kernel, grid, dim3(threads), 0, stream, x, weight, bias, n_rows,
                      n_cols, eps, out);
}

static __global__ void gelu_kernel(const float *x, int64_t n, float *out /* [n] */) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    /* erfc of -x / sqrt 2: no cancellation for negative x (1 + erf would). */
    out[i] = __fmul_rn(__fmul_rn(0.5f, v), erfcf(__fmul_rn(-v, 0.70710678118654752f)));
  }
}

extern "C" int brisk_kgelu(const float *x, int64_t n, float *out, brisk_kstream stream) {
  if (n <= 0) return 0;
  int64_t blocks = (n + GELU_THREADS - 1) / GELU_THREADS;
  const dim3 grid((unsigned)(blocks < (int64_t)MAX_GRID ? blocks : MAX_GRID));
  return BRISK_LAUNCH(gelu_kernel, grid, dim3(GELU_THREADS), 0, stream, x, n, out);
}
