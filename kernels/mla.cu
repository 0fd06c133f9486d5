/* Multi-head latent attention (DeepSeek-V2) over the latent cache.
 *
 *   mla_kv_write: one thread per value of a token's latent row, grid.y over
 *     tokens; value i < D/2 goes to the first pool, the rest to the second.
 *   mla_attention: one block per (query token, head). The block first
 *     absorbs kv_b into the query, a[c] = sum_d q_n[d] K_h[d][c] (thread c,
 *     d ascending), then walks the keys in tiles of kTile at fixed
 *     positions: each warp scores some of the tile's keys (lane-strided
 *     partials and an xor butterfly over a . c_j + q_r . k_rope_j), then
 *     every thread updates the online softmax the same way (m, l in the same
 *     order in every thread) and its own accumulator values acc[c] =
 *     acc[c] exp(m - m') + sum_j exp(s_j - m') c_j[c], j ascending. Last,
 *     out[v] = sum_c V_h[v][c] acc[c] / l (thread v, c ascending).
 * Fixed orders throughout: results are deterministic and do not depend on
 * the rest of the batch. Shared memory: a, acc and the tile's scores. */
#include "simt.h"

#include "mla.h"

#include <math.h>

namespace {

constexpr int kInvalid = 1;
constexpr int kThreads = 128;
constexpr int kTile = 32;
constexpr unsigned kMaxGrid = 65535;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <typename T> __device__ __forceinline__ T to_cache(float x);
template <> __device__ __forceinline__ float to_cache<float>(float x) { return x; }
template <> __device__ __forceinline__ __half to_cache<__half>(float x) {
  return __float2half_rn(x);
}
__device__ __forceinline__ float from_cache(float x) { return x; }
__device__ __forceinline__ float from_cache(__half x) { return __half2float(x); }

template <typename T>
__global__ void write_kernel(brisk_kmla_desc d, T *k_cache, T *v_cache,
                             const float *__restrict__ latent, // [n_tokens][rank]
                             const float *__restrict__ k_rope, // [n_tokens][rope_dim]
                             const int64_t *__restrict__ slots) {
  const int32_t D = d.rank + d.rope_dim, half = D / 2;
  for (int64_t t = blockIdx.y; t < d.n_tokens; t += gridDim.y) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    for (int32_t i = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); i < D;
         i += (int32_t)(gridDim.x * blockDim.x)) {
      const float x = i < d.rank ? latent[t * d.rank + i] : k_rope[t * d.rope_dim + i - d.rank];
      T *pool = i < half ? k_cache : v_cache;
      pool[slot * half + (i < half ? i : i - half)] = to_cache<T>(x);
    }
  }
}

/* Value i of the latent row at slot `slot`. */
template <typename T>
__device__ __forceinline__ float row_value(const T *kc, const T *vc, int64_t slot, int32_t half,
                                           int32_t i) {
  return i < half ? from_cache(kc[slot * half + i]) : from_cache(vc[slot * half + i - half]);
}

template <typename T>
__global__ void
attention_kernel(brisk_kmla_desc d, const T *__restrict__ kc, const T *__restrict__ vc,
                 const float *__restrict__ q,    // [n_tokens][n_heads][dq]
                 const float *__restrict__ kv_b, // [n_heads][nope + v][rank]
                 const int32_t *__restrict__ positions, const int32_t *__restrict__ seq_of_token,
                 const int32_t *__restrict__ block_tables,
                 float *__restrict__ out) { // [n_tokens][n_heads][v_dim]
  BRISK_DYN_SHARED(float, sm);
  BRISK_SHARED(int64_t, slot_of, kTile); /* slots of the tile's keys */
  const int32_t r = d.rank, dr = d.rope_dim, dq = d.nope_dim + dr, dkb = d.nope_dim + d.v_dim;
  const int32_t half = (r + dr) / 2;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, nwarps = blockDim.x / 32;
  const int32_t h = (int32_t)blockIdx.x, t = (int32_t)blockIdx.y;
  float *a = sm;           // [rank + rope]: absorbed query, then q_r
  float *acc = a + r + dr; // [rank]
  float *sc = acc + r;     // [kTile] scores
  const float *qt = q + ((size_t)t * d.n_heads + h) * dq;
  const float *kb = kv_b + (size_t)h * dkb * r;
  for (int32_t c = tid; c < r; c += blockDim.x) {
    float s = 0.0f;
    for (int32_t dd = 0; dd < d.nope_dim; dd++) s = fmaf(qt[dd], kb[(size_t)dd * r + c], s);
    a[c] = s;
    acc[c] = 0.0f;
  }
  for (int32_t c = tid; c < dr; c += blockDim.x) a[r + c] = qt[d.nope_dim + c];
  const int32_t p = positions[t];
  const int32_t *table = block_tables + (size_t)seq_of_token[t] * (size_t)d.max_blocks;
  float m = -INFINITY, l = 0.0f;
  for (int32_t k0 = 0; k0 <= p; k0 += kTile) {
    const int n = p + 1 - k0 < kTile ? p + 1 - k0 : kTile;
    __syncthreads(); /* a written; the previous tile's weights consumed */
    for (int c = warp; c < n; c += nwarps) {
      const int32_t pos = k0 + c;
      const int64_t slot = (int64_t)table[pos / d.block_size] * d.block_size + pos % d.block_size;
      float s = 0.0f;
      for (int32_t i = lane; i < r + dr; i += 32)
        s = fmaf(a[i], row_value(kc, vc, slot, half, i), s);
      s = warp_sum(s);
      if (lane == 0) {
        sc[c] = s * d.scale;
        slot_of[c] = slot;
      }
    }
    __syncthreads();
    float mt = m;
    for (int c = 0; c < n; c++) mt = fmaxf(mt, sc[c]);
    const float f = expf(m - mt); /* 0 for the first tile */
    float lt = l * f;
    float w[kTile];
    for (int c = 0; c < n; c++) {
      w[c] = expf(sc[c] - mt);
      lt += w[c];
    }
    for (int32_t cc = tid; cc < r; cc += blockDim.x) {
      float s = acc[cc] * f;
      for (int c = 0; c < n; c++) s = fmaf(w[c], row_value(kc, vc, slot_of[c], half, cc), s);
      acc[cc] = s;
    }
    m = mt;
    l = lt;
  }
  __syncthreads();
  const float inv = 1.0f / l;
  for (int32_t v = tid; v < d.v_dim; v += blockDim.x) {
    const float *vb = kb + (size_t)(d.nope_dim + v) * r;
    float s = 0.0f;
    for (int32_t c = 0; c < r; c++) s = fmaf(vb[c], acc[c], s);
    out[((size_t)t * d.n_heads + h) * d.v_dim + v] = s * inv;
  }
}

} // namespace

extern "C" int brisk_kmla_kv_write(const brisk_kmla_desc *d, void *k_cache, void *v_cache,
                                   const float *latent, const float *k_rope, const int64_t *slots,
                                   brisk_kstream stream) {
  if (d->cache_dtype > 1) return kInvalid;
  if (d->n_tokens <= 0) return 0;
  const int32_t D = d->rank + d->rope_dim;
  const dim3 grid((unsigned)((D + kThreads - 1) / kThreads),
                  (unsigned)(d->n_tokens < (int32_t)kMaxGrid ? d->n_tokens : (int32_t)kMaxGrid));
  if (d->cache_dtype == 0)
    return BRISK_LAUNCH(write_kernel<float>, grid, dim3(kThreads), 0, stream, *d,
                        static_cast<float *>(k_cache), static_cast<float *>(v_cache), latent,
                        k_rope, slots);
  return BRISK_LAUNCH(write_kernel<__half>, grid, dim3(kThreads), 0, stream, *d,
                      static_cast<__half *>(k_cache), static_cast<__half *>(v_cache), latent,
                      k_rope, slots);
}

extern "C" int brisk_kmla_attention(const brisk_kmla_desc *d, const void *k_cache,
                                    const void *v_cache, const float *q, const float *kv_b,
                                    const int32_t *positions, const int32_t *seq_of_token,
                                    const int32_t *block_tables, float *out, brisk_kstream stream) {
  if (d->cache_dtype > 1) return kInvalid;
  if (d->n_tokens <= 0) return 0;
  const size_t smem = (size_t)(2 * d->rank + d->rope_dim + kTile) * sizeof(float);
  int st = 0;
  for (int32_t t0 = 0; t0 < d->n_tokens && !st; t0 += (int32_t)kMaxGrid) {
    brisk_kmla_desc part = *d;
    part.n_tokens = d->n_tokens - t0 < (int32_t)kMaxGrid ? d->n_tokens - t0 : (int32_t)kMaxGrid;
    const size_t qo = (size_t)t0 * d->n_heads;
    const dim3 grid((unsigned)d->n_heads, (unsigned)part.n_tokens);
    if (d->cache_dtype == 0)
      st = BRISK_LAUNCH(attention_kernel<float>, grid, dim3(kThreads), smem, stream, part,
                        static_cast<const float *>(k_cache), static_cast<const float *>(v_cache),
                        q + qo * (d->nope_dim + d->rope_dim), kv_b, positions + t0,
                        seq_of_token + t0, block_tables, out + qo * d->v_dim);
    else
      st = BRISK_LAUNCH(attention_kernel<__half>, grid, dim3(kThreads), smem, stream, part,
                        static_cast<const __half *>(k_cache), static_cast<const __half *>(v_cache),
                        q + qo * (d->nope_dim + d->rope_dim), kv_b, positions + t0,
                        seq_of_token + t0, block_tables, out + qo * d->v_dim);
  }
  return st;
}
