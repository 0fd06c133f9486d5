/* Paged KV cache writes.
 *   kv_write: cache[slot / bs][h][slot % bs][d] = round(k[t][h][d]) for every
 *             token t with slot = slots[t] >= 0 (and the same for v); one
 *             thread per element, grid.y over tokens.
 *   kv_copy_blocks: block dst_i = block src_i for each pair in order. Each
 *             thread owns the same 16-byte pieces of every block and walks
 *             the pairs in order, so a chain (a pair reading an earlier
 *             pair's destination) sees the earlier copy without any
 *             grid-wide synchronization: the dependency is within a thread.
 * Conversion to F16 is __float2half_rn (round to nearest even), as the CPU.
 * Quantized caches (kvq.cuh): one thread per (token, head, group of 64). */
#include "simt.h"

#include "kv.h"
#include "kvq.cuh"

#define KV_THREADS 256
#define MAX_GRID 65535u
#define DTYPE_F32 0u
#define DTYPE_F16 1u

template <typename T> static __device__ __forceinline__ T to_cache(float x);
template <> __device__ __forceinline__ float to_cache<float>(float x) { return x; }
template <> __device__ __forceinline__ __half to_cache<__half>(float x) {
  return __float2half_rn(x);
}

template <typename T>
static __global__ void kv_write_kernel(int32_t n_kv_heads, int32_t block_size, int32_t head_dim,
                                       T *k_cache, // [n_blocks][n_kv_heads][block_size][head_dim]
                                       T *v_cache, // [n_blocks][n_kv_heads][block_size][head_dim]
                                       const float *k,       // [n_tokens][n_kv_heads][head_dim]
                                       const float *v,       // [n_tokens][n_kv_heads][head_dim]
                                       const int64_t *slots, // [n_tokens]
                                       int32_t n_tokens) {
  const int64_t row = (int64_t)n_kv_heads * head_dim;
  for (int64_t t = blockIdx.y; t < n_tokens; t += gridDim.y) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    const int64_t block = slot / block_size, in_block = slot % block_size;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < row;
         e += (int64_t)gridDim.x * blockDim.x) {
      const int64_t h = e / head_dim, d = e % head_dim;
      const int64_t at = ((block * n_kv_heads + h) * block_size + in_block) * head_dim + d;
      k_cache[at] = to_cache<T>(k[t * row + e]);
      v_cache[at] = to_cache<T>(v[t * row + e]);
    }
  }
}

static __global__ void
kvq_write_kernel(uint32_t dtype, int32_t n_kv_heads, int32_t block_size, int32_t head_dim,
                 unsigned char *k_cache, // [n_blocks][n_kv_heads][block_size] rows
                 unsigned char *v_cache, // [n_blocks][n_kv_heads][block_size] rows
                 const float *k,         // [n_tokens][n_kv_heads][head_dim]
                 const float *v,         // [n_tokens][n_kv_heads][head_dim]
                 const int64_t *slots,   // [n_tokens]
                 int32_t n_tokens) {
  const int ng = kvq_n_groups(head_dim);
  const int64_t rb = kvq_row_bytes(head_dim), per_token = (int64_t)n_kv_heads * ng;
  for (int64_t t = blockIdx.y; t < n_tokens; t += gridDim.y) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    const int64_t block = slot / block_size, in_block = slot % block_size;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < per_token;
         e += (int64_t)gridDim.x * blockDim.x) {
      const int64_t h = e / ng;
      const int g = (int)(e % ng);
      const int64_t row = (block * n_kv_heads + h) * block_size + in_block;
      const size_t src = ((size_t)t * n_kv_heads + h) * head_dim;
      kvq_quantize_group(dtype, k + src, head_dim, g, k_cache + row * rb);
      kvq_quantize_group(dtype, v + src, head_dim, g, v_cache + row * rb);
    }
  }
}

static bool known_dtype(uint32_t d) {
  return d == DTYPE_F32 || d == DTYPE_F16 || d == KVQ_DTYPE_Q8 || d == KVQ_DTYPE_FP8;
}

extern "C" int brisk_kkv_write(uint32_t cache_dtype, int32_t n_kv_heads, int32_t block_size,
                               int32_t head_dim, void *k_cache, void *v_cache, const float *k,
                               const float *v, const int64_t *slots, int32_t n_tokens,
                               brisk_kstream stream) {
  if (!known_dtype(cache_dtype)) return 1;
  if (n_tokens <= 0) return 0;
  if (cache_dtype == KVQ_DTYPE_Q8 || cache_dtype == KVQ_DTYPE_FP8) {
    const int64_t units = (int64_t)n_kv_heads * ((head_dim + KVQ_GROUP - 1) / KVQ_GROUP);
    const int64_t bx = (units + KV_THREADS - 1) / KV_THREADS;
    const dim3 grid((unsigned)(bx < (int64_t)MAX_GRID ? bx : MAX_GRID),
                    (unsigned)(n_tokens < (int32_t)MAX_GRID ? n_tokens : (int32_t)MAX_GRID));
    return BRISK_LAUNCH(kvq_write_kernel, grid, dim3(KV_THREADS), 0, stream, cache_dtype,
                        n_kv_heads, block_size, head_dim, static_cast<unsigned char *>(k_cache),
                        static_cast<unsigned char *>(v_cache), k, v, slots, n_tokens);
  }
  const int64_t row = (int64_t)n_kv_heads * head_dim;
  const int64_t bx = (row + KV_THREADS - 1) / KV_THREADS;
  const dim3 grid((unsigned)(bx < (int64_t)MAX_GRID ? bx : MAX_GRID),
                  (unsigned)(n_tokens < (int32_t)MAX_GRID ? n_tokens : (int32_t)MAX_GRID));
  if (cache_dtype == DTYPE_F32)
    return BRISK_LAUNCH(kv_write_kernel<float>, grid, dim3(KV_THREADS), 0, stream, n_kv_heads,
                        block_size, head_dim, static_cast<float *>(k_cache),
                        static_cast<float *>(v_cache), k, v, slots, n_tokens);
  return BRISK_LAUNCH(kv_write_kernel<__half>, grid, dim3(KV_THREADS), 0, stream, n_kv_heads,
                      block_size, head_dim, static_cast<__half *>(k_cache),
                      static_cast<__half *>(v_cache), k, v, slots, n_tokens);
}

/* W: the copy unit, uint4 when a block's bytes are a multiple of 16 (cache
 * blocks are; buffers are 64-byte aligned), else bytes. */
template <typename W>
static __global__ void kv_copy_kernel(unsigned char *cache /* [n_blocks][block_bytes] */,
                                      int64_t block_bytes, const int32_t *pairs /* [n_pairs][2] */,
                                      int32_t n_pairs) {
  const int64_t n = block_bytes / (int64_t)sizeof(W);
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x)
    for (int32_t p = 0; p < n_pairs; p++) {
      const W *src = reinterpret_cast<const W *>(cache + (int64_t)pairs[2 * p] * block_bytes);
      W *dst = reinterpret_cast<W *>(cache + (int64_t)pairs[2 * p + 1] * block_bytes);
      dst[e] = src[e];
    }
}

extern "C" int brisk_kkv_copy_blocks(uint32_t cache_dtype, int32_t n_kv_heads, int32_t block_size,
                                     int32_t head_dim, void *cache, const int32_t *pairs,
                                     int32_t n_pairs, brisk_kstream stream) {
  if (!known_dtype(cache_dtype)) return 1;
  if (n_pairs <= 0) return 0;
  const int64_t row_bytes = cache_dtype == DTYPE_F32 ? (int64_t)head_dim * 4
                            : cache_dtype == DTYPE_F16
                                ? (int64_t)head_dim * 2
                                : (int64_t)head_dim + 2 * ((head_dim + KVQ_GROUP - 1) / KVQ_GROUP);
  const int64_t block_bytes = (int64_t)n_kv_heads * block_size * row_bytes;
  const bool wide = block_bytes % 16 == 0 && ((uintptr_t)cache & 15) == 0;
  const int64_t units = wide ? block_bytes / 16 : block_bytes;
  const int64_t bx = (units + KV_THREADS - 1) / KV_THREADS;
  const dim3 grid((unsigned)(bx < (int64_t)MAX_GRID ? bx : MAX_GRID));
  unsigned char *c = static_cast<unsigned char *>(cache);
  return wide ? BRISK_LAUNCH(kv_copy_kernel<uint4>, grid, dim3(KV_THREADS), 0, stream, c,
                             block_bytes, pairs, n_pairs)
              : BRISK_LAUNCH(kv_copy_kernel<unsigned char>, grid, dim3(KV_THREADS), 0, stream, c,
                             block_bytes, pairs, n_pairs);
}
