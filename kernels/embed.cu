/* Embedding gather from a table in GGUF block layout, one thread per output
 * element (grid.x over the row, grid.y over tokens):
 *   out[t][e] = dequant(row tokens[t], element e)
 * with the formulas of lib/quant (blocks.h has the layouts), each product and
 * sum rounded separately so the device equals the CPU bit for bit:
 *   q8_0  q d                   q4_0  (q - 8) d         q5_0  (q - 16) d
 *   q4_1  q d + m               q5_1  q d + m
 *   q4_k  (d sc) q - (dmin mn)  q5_k  the same, 5-bit q
 *   q6_k  (d sc) (q - 32)
 * Blocks have even sizes and their f16 fields even offsets, so 16-bit loads
 * are aligned when the table is. */
#include "simt.h"

#include "embed.h"

enum {
  T_F32 = 0,
  T_F16 = 1,
  T_Q4_0 = 2,
  T_Q4_1 = 3,
  T_Q5_0 = 6,
  T_Q5_1 = 7,
  T_Q8_0 = 8,
  T_Q4_K = 12,
  T_Q5_K = 13,
  T_Q6_K = 14,
  T_BF16 = 30
};

static __device__ __forceinline__ float f16_at(const unsigned char *p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short *>(p)));
}

/* Sub-block j's 6-bit scale and min of a q4_k / q5_k super-block
 * (blocks.h brisk_k4_scale_min). */
static __device__ __forceinline__ void k4_scale_min(const unsigned char *s, int j, int *sc,
                                                    int *mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

template <int TYPE>
static __device__ __forceinline__ float element(const unsigned char *row, int64_t e) {
  switch (TYPE) {
  case T_F32: return reinterpret_cast<const float *>(row)[e];
  case T_F16: return f16_at(row + 2 * e);
  case T_BF16:
    return __bfloat162float(__ushort_as_bfloat16(reinterpret_cast<const unsigned short *>(row)[e]));
  case T_Q8_0: {
    const unsigned char *b = row + (e / 32) * 34;
    return __fmul_rn((float)(signed char)b[2 + e % 32], f16_at(b));
  }
  case T_Q4_0:
  case T_Q4_1: {
    const int bytes = TYPE == T_Q4_0 ? 18 : 20, j = (int)(e % 32);
    const unsigned char *b = row + (e / 32) * bytes, *qs = b + (TYPE == T_Q4_0 ? 2 : 4);
    const int q = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
    if (TYPE == T_Q4_0) return __fmul_rn((float)(q - 8), f16_at(b));
    return __fadd_rn(__fmul_rn((float)q, f16_at(b)), f16_at(b + 2));
  }
  case T_Q5_0:
  case T_Q5_1: {
    const int off = TYPE == T_Q5_0 ? 2 : 4, j = (int)(e % 32);
    const unsigned char *b = row + (e / 32) * (TYPE == T_Q5_0 ? 22 : 24);
    const unsigned char *qh = b + off, *qs = b + off + 4;
    const int hi = (qh[j / 8] >> (j % 8)) & 1; /* bit j of the little-endian qh */
    const int q = (j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4) | hi << 4;
    if (TYPE == T_Q5_0) return __fmul_rn((float)(q - 16), f16_at(b));
    return __fadd_rn(__fmul_rn((float)q, f16_at(b)), f16_at(b + 2));
  }
  case T_Q4_K:
  case T_Q5_K: {
    const unsigned char *b = row + (e / 256) * (TYPE == T_Q4_K ? 144 : 176);
    const int i = (int)(e % 256), j = i / 32, l = i % 32;
    int sc, mn;
    k4_scale_min(b + 4, j, &sc, &mn);
    const float dl = __fmul_rn(f16_at(b), (float)sc), ml = __fmul_rn(f16_at(b + 2), (float)mn);
    const unsigned char *qs = b + (TYPE == T_Q4_K ? 16 : 48) + 32 * (j / 2);
    int q = (qs[l] >> (4 * (j % 2))) & 0xf;
    if (TYPE == T_Q5_K) q |= ((b[16 + l] >> j) & 1) << 4;
    return __fsub_rn(__fmul_rn(dl, (float)q), ml);
  }
  default: { /* T_Q6_K: ql[128], qh[64], scales[16] (int8), d */
    const unsigned char *b = row + (e / 256) * 210;
    const int i = (int)(e % 256), half = i / 128, s = (i % 128) / 32, l = i % 32;
    const int lo = (b[half * 64 + l + 32 * (s % 2)] >> (4 * (s / 2))) & 0xf;
    const int hi = (b[128 + half * 32 + l] >> (2 * s)) & 3;
    const float dsc = __fmul_rn(f16_at(b + 208), (float)(signed char)b[192 + i / 16]);
    return __fmul_rn(dsc, (float)((lo | hi << 4) - 32));
  }
  }
}

template <int TYPE>
static __global__ void embed_kernel(const unsigned char *table /* [n_vocab][row_bytes] */,
                                    int64_t row_bytes, int64_t n_embd,
                                    const int32_t *tokens /* [n_tokens] */, int32_t n_tokens,
                                    float *out /* [n_tokens][n_embd] */) {
  for (int64_t t = blockIdx.y; t < n_tokens; t += gridDim.y) {
    const unsigned char *row = table + (int64_t)tokens[t] * row_bytes;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n_embd;
         e += (int64_t)gridDim.x * blockDim.x)
      out[t * n_embd + e] = element<TYPE>(row, e);
  }
}

#define EMBED_THREADS 256

extern "C" int brisk_kembed(uint32_t table_type, const void *table, int64_t n_vocab, int64_t n_embd,
                            const int32_t *tokens, int32_t n_tokens, float *out,
                            brisk_kstream stream) {
  (void)n_vocab;
  int64_t block = 1, bytes;
  switch (table_type) {
  case T_F32: bytes = 4; break;
  case T_F16:
  case T_BF16: bytes = 2; break;
  case T_Q8_0: block = 32, bytes = 34; break;
  case T_Q4_0: block = 32, bytes = 18; break;
  case T_Q4_1: block = 32, bytes = 20; break;
  case T_Q5_0: block = 32, bytes = 22; break;
  case T_Q5_1: block = 32, bytes = 24; break;
  case T_Q4_K: block = 256, bytes = 144; break;
  case T_Q5_K: block = 256, bytes = 176; break;
  case T_Q6_K: block = 256, bytes = 210; break;
  default: return 1;
  }
  if (n_tokens <= 0 || n_embd <= 0) return 0;
  const int64_t row_bytes = n_embd / block * bytes;
  const int64_t bx = (n_embd + EMBED_THREADS - 1) / EMBED_THREADS;
  const dim3 grid((unsigned)(bx < 65535 ? bx : 65535),
                  (unsigned)(n_tokens < 65535 ? n_tokens : 65535));
  const unsigned char *t = static_cast<const unsigned char *>(table);
#define EMBED_CASE(T)                                                                              \
  case T:                                                                                          \
    return BRISK_LAUNCH(embed_kernel<T>, grid, dim3(EMBED_THREADS), 0, stream, t, row_bytes,       \
                        n_embd, tokens, n_tokens, out);
  switch (table_type) {
    EMBED_CASE(T_F32)
    EMBED_CASE(T_F16)
    EMBED_CASE(T_BF16)
    EMBED_CASE(T_Q8_0)
    EMBED_CASE(T_Q4_0)
    EMBED_CASE(T_Q4_1)
    EMBED_CASE(T_Q5_0)
    EMBED_CASE(T_Q5_1)
    EMBED_CASE(T_Q4_K)
    EMBED_CASE(T_Q5_K)
  default: EMBED_CASE(T_Q6_K)
  }
#undef EMBED_CASE
}

/* Activation column gather, one thread per output element as embed_kernel:
 * consecutive threads write consecutive outputs of a row (the reads follow
 * the permutation and scatter over the row, which stays in L1/L2 at the
 * widths of a linear's input). */
static __global__ void gather_cols_kernel(const float *x /* [n_rows][n_cols] */, int64_t n_rows,
                                          int64_t n_cols, const int32_t *cols /* [n_out] */,
                                          int64_t n_out, float *out /* [n_rows][n_out] */) {
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y)
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n_out;
         j += (int64_t)gridDim.x * blockDim.x)
      out[r * n_out + j] = x[r * n_cols + cols[j]];
}

extern "C" int brisk_kgather_cols(const float *x, int64_t n_rows, int64_t n_cols,
                                  const int32_t *cols, int64_t n_out, float *out,
                                  brisk_kstream stream) {
  if (n_rows <= 0 || n_out <= 0) return 0;
  const int64_t bx = (n_out + EMBED_THREADS - 1) / EMBED_THREADS;
  const dim3 grid((unsigned)(bx < 65535 ? bx : 65535), (unsigned)(n_rows < 65535 ? n_rows : 65535));
  return BRISK_LAUNCH(gather_cols_kernel, grid, dim3(EMBED_THREADS), 0, stream, x, n_rows, n_cols,
                      cols, n_out, out);
}
