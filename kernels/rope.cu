/* RoPE, in place, one block per token (grid-stride over tokens):
 *   theta_i = p * inv_freq[i]                     (float64)
 *   c_i = (float)(cos(theta_i) * mscale), s_i = (float)(sin(theta_i) * mscale)
 *   (x_a, x_b) <- (x_a c_i - x_b s_i, x_b c_i + x_a s_i)
 * with (a, b) = (2i, 2i+1) (NORMAL) or (i, i + n_rot/2) (NEOX), for every
 * head. The token's table is built once in shared memory by the block and
 * applied to all heads; products and sums are rounded one by one (no FMA
 * contraction), as the CPU backend's scalar path. */
#include "simt.h"

#include "rope.h"

template <bool NEOX>
static __global__ void rope_kernel(float *x /* [n_tokens][token_stride] */, int32_t n_tokens,
                                   int64_t token_stride, int32_t n_heads, int32_t head_dim,
                                   const int32_t *positions /* [n_tokens] */, int32_t n_rot,
                                   const double *inv_freq /* [n_rot / 2] */, double mscale) {
  BRISK_DYN_SHARED(float, table); /* [2][n_rot / 2]: cos, then sin */
  const int32_t half = n_rot / 2;
  float *cs = table, *sn = table + half;
  for (int64_t t = blockIdx.x; t < n_tokens; t += gridDim.x) {
    const double pos = (double)positions[t];
    __syncthreads(); /* the previous token's table is no longer read */
    for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
      const double theta = pos * inv_freq[i];
      cs[i] = (float)(cos(theta) * mscale);
      sn[i] = (float)(sin(theta) * mscale);
    }
    __syncthreads();
    float *row = x + t * token_stride;
    for (int32_t e = threadIdx.x; e < n_heads * half; e += blockDim.x) {
      const int32_t h = e / half, i = e % half;
      float *hp = row + (int64_t)h * head_dim;
      const int32_t a = NEOX ? i : 2 * i, b = NEOX ? i + half : 2 * i + 1;
      const float x0 = hp[a], x1 = hp[b], c = cs[i], s = sn[i];
      hp[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
      hp[b] = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
    }
  }
}

extern "C" int brisk_krope(float *x, int32_t n_tokens, int64_t token_stride, int32_t n_heads,
                           int32_t head_dim, const int32_t *positions, int32_t layout,
                           int32_t n_rot, const double *inv_freq, double mscale,
                           brisk_kstream stream) {
  if (n_tokens <= 0 || n_heads <= 0 || n_rot < 2) return 0;
  const int64_t pairs = (int64_t)n_heads * (n_rot / 2);
  const unsigned threads = pairs >= 1024 ? 256 : pairs >= 256 ? 128 : 32;
  const dim3 grid((unsigned)(n_tokens < 65535 * 16 ? n_tokens : 65535 * 16));
  const size_t smem = (size_t)(n_rot / 2) * 2 * sizeof(float);
  return layout == BRISK_KROPE_NEOX
             ? BRISK_LAUNCH(rope_kernel<true>, grid, dim3(threads), smem, stream, x, n_tokens,
                            token_stride, n_heads, head_dim, positions, n_rot, inv_freq, mscale)
             : BRISK_LAUNCH(rope_kernel<false>, grid, dim3(threads), smem, stream, x, n_tokens,
                            token_stride, n_heads, head_dim, positions, n_rot, inv_freq, mscale);
}
