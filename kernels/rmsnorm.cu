/* RMSNorm over rows, fused with the weight:
 *   ss = sum_i x[r][i]^2                 (float, per thread, then the block)
 *   s  = (float)(1 / sqrt(ss / n + eps)) (in double: one rounding, as the CPU)
 *   out[r][i] = x[r][i] * s * weight[i]
 * One block per row (grid-stride over rows); float4 loads when the row
 * length and every pointer allow them. The row is read twice; the second
 * read hits L1/L2 for model-sized rows. */
#include "simt.h"

#include "block_reduce.cuh"
#include "rmsnorm.h"

template <bool VEC4, bool WEIGHT>
static __global__ void rmsnorm_kernel(const float *x, /* [n_rows][n_cols], may equal out */
                                      const float *__restrict__ weight, // [n_cols] or NULL
                                      int64_t n_rows, int64_t n_cols, float eps,
                                      float *out /* [n_rows][n_cols] */) {
  BRISK_SHARED(float, red, 32);
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float *xr = x + r * n_cols;
    float *yr = out + r * n_cols;
    float ss = 0.0f;
    if (VEC4) {
      const float4 *x4 = reinterpret_cast<const float4 *>(xr);
      for (int64_t i = threadIdx.x; i < n_cols / 4; i += blockDim.x) {
        float4 v = x4[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
    } else {
      for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) ss += xr[i] * xr[i];
    }
    ss = brisk_block_reduce<false>(ss, red);
    const float s = (float)(1.0 / sqrt((double)ss / (double)n_cols + (double)eps));
    if (VEC4) {
      const float4 *x4 = reinterpret_cast<const float4 *>(xr);
      const float4 *w4 = reinterpret_cast<const float4 *>(weight);
      float4 *y4 = reinterpret_cast<float4 *>(yr);
      for (int64_t i = threadIdx.x; i < n_cols / 4; i += blockDim.x) {
        float4 v = x4[i];
        v.x *= s, v.y *= s, v.z *= s, v.w *= s;
        if (WEIGHT) {
          float4 w = w4[i];
          v.x *= w.x, v.y *= w.y, v.z *= w.z, v.w *= w.w;
        }
        y4[i] = v;
      }
    } else {
      for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x)
        yr[i] = WEIGHT ? xr[i] * s * weight[i] : xr[i] * s;
    }
  }
}

extern "C" int brisk_krmsnorm(const float *x, const float *weight, int64_t n_rows, int64_t n_cols,
                              float eps, float *out, brisk_kstream stream) {
  if (n_rows <= 0 || n_cols <= 0) return 0;
  const bool vec4 =
      n_cols % 4 == 0 && (((uintptr_t)x | (uintptr_t)weight | (uintptr_t)out) & 15) == 0;
  const int64_t per_thread = vec4 ? n_cols / 4 : n_cols;
  /* Enough threads for a few elements each, a multiple of 32, at most 1024. */
  const unsigned threads = per_thread >= 4096   ? 1024
                           : per_thread >= 1024 ? 256
                           : per_thread >= 256  ? 128
                                                : 32;
  const dim3 grid((unsigned)(n_rows < 65535 * 16 ? n_rows : 65535 * 16));
  if (vec4)
    return weight ? BRISK_LAUNCH(rmsnorm_kernel<true, true>, grid, dim3(threads), 0, stream, x,
                                 weight, n_rows, n_cols, eps, out)
                  : BRISK_LAUNCH(rmsnorm_kernel<true, false>, grid, dim3(threads), 0, stream, x,
                                 weight, n_rows, n_cols, eps, out);
  return weight ? BRISK_LAUNCH(rmsnorm_kernel<false, true>, grid, dim3(threads), 0, stream, x,
                               weight, n_rows, n_cols, eps, out)
                : BRISK_LAUNCH(rmsnorm_kernel<false, false>, grid, dim3(threads), 0, stream, x,
                               weight, n_rows, n_cols, eps, out);
}
