/* Matmul kernels over the regrouped weights of kernels/regroup.h.
 *
 *   y[r][c] = sum_i x[r][i] * W[c][i]      x [m][k] float, W [n][k], y [m][n]
 *
 * A row of W is cut into units of 16 quant bytes (one wide load each):
 *
 *   type   unit elements   quant bytes   scales read
 *   F32    4               16            -
 *   F16    8               16            -
 *   BF16   8               16            -
 *   Q8_0   16 (half block) 16            d of its block
 *   Q4_0   32 (a block)    16            d
 *   Q4_1   32              16            d, m
 *   Q5_0   32              16            qh, d
 *   Q5_1   32              16            qh, d, m
 *   Q4_K   32              16            the super-block's 16-byte record
 *   Q5_K   32              16 + 16 qh    the super-block's 16-byte record
 *   Q6_K   64              3 x 16        4 int8 scales + d
 *
 * GEMV: one warp per weight row, lane l takes units l, l + 32, ...: the
 * warp's 32 loads of a step are 512 contiguous bytes. Each lane accumulates
 * up to 8 activation rows in fp32 registers, then the warp sums its lanes by
 * an xor butterfly; a unit's values come in runs of consecutive elements,
 * each 4 of them multiplied against one 16-byte load of x. Dequantized values are computed exactly
 * as lib/quant (products rounded separately: no fused contraction there), so the only difference
 * from a float64 dot product is the fp32 summation.
 *
 * Tile dequantization writes the same values, rounded to F16/BF16, for the
 * tensor-core GEMM; the SIMT GEMM is a plain 64 x 64 shared-memory tiled
 * product with fp32 accumulation. */
#include "simt.h"

#include "matmul.h"
#include "regroup.h"

#include <string.h>

namespace {

/* The status of a refused call: cudaErrorInvalidValue's code (1), which is
 * also the emulation's, so brisk_kerror_string names it on both. */
constexpr int kInvalid = 1;

constexpr int kF32 = BRISK_KR_F32, kF16 = BRISK_KR_F16, kBF16 = BRISK_KR_BF16;
constexpr int kQ8_0 = BRISK_KR_Q8_0, kQ4_0 = BRISK_KR_Q4_0, kQ4_1 = BRISK_KR_Q4_1,
              kQ5_0 = BRISK_KR_Q5_0, kQ5_1 = BRISK_KR_Q5_1, kQ4_K = BRISK_KR_Q4_K,
              kQ5_K = BRISK_KR_Q5_K, kQ6_K = BRISK_KR_Q6_K;

/* ---- scalar helpers ----------------------------------------------------- */

/* Separately rounded product and difference: never contracted into an fma,
 * so that dequantized weights equal lib/quant's bit for bit. */
__device__ __forceinline__ float mul_rn(float a, float b) {
#ifdef __CUDACC__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__device__ __forceinline__ float add_rn(float a, float b) {
#ifdef __CUDACC__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__device__ __forceinline__ float sub_rn(float a, float b) {
#ifdef __CUDACC__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

__device__ __forceinline__ float f16_bits_to_f32(uint16_t u) {
  __half h;
  memcpy(&h, &u, 2);
  return __half2float(h);
}
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t u) {
  const uint32_t w = (uint32_t)u << 16;
  float f;
  memcpy(&f, &w, 4);
  return f;
}
__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
  __half h = __float2half_rn(f);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  __nv_bfloat16 h = __float2bfloat16_rn(f);
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

/* 16 bytes, one vector load from a 16-byte aligned address. */
struct alignas(16) v16 {
  uint32_t w[4];
};
__device__ __forceinline__ v16 load16(const uint8_t *p) {
#ifdef __CUDACC__
  const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
  v16 v;
  v.w[0] = u.x, v.w[1] = u.y, v.w[2] = u.z, v.w[3] = u.w;
  return v;
#else
  v16 v;
  memcpy(&v, p, 16);
  return v;
#endif
}
/* 4 floats from a 16-byte aligned address. */
__device__ __forceinline__ void load_x4(const float *p, float *v) {
#ifdef __CUDACC__
  const float4 f = __ldg(reinterpret_cast<const float4 *>(p));
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
#else
  memcpy(v, p, 16);
#endif
}
__device__ __forceinline__ uint32_t byte_of(const v16 &v, int i) {
  return (v.w[i >> 2] >> (8 * (i & 3))) & 0xffu;
}
/* Byte i (not a constant) of v, without an indexed (local memory) array. */
__device__ __forceinline__ uint32_t byte_dyn(const v16 &v, int i) {
  const int wi = i >> 2;
  const uint32_t w = wi == 0 ? v.w[0] : wi == 1 ? v.w[1] : wi == 2 ? v.w[2] : v.w[3];
  return (w >> (8 * (i & 3))) & 0xffu;
}
__device__ __forceinline__ uint16_t load_u16(const uint8_t *p) {
  uint16_t u;
  memcpy(&u, p, 2);
  return u;
}

/* ---- units ---------------------------------------------------------------- */

/* A unit's elements come in runs of consecutive elements: `runs` runs of
 * `run` elements (a multiple of 4). */
template <int T> struct unit_info;
template <> struct unit_info<kF32> { static constexpr int elems = 4, run = 4; };
template <> struct unit_info<kF16> { static constexpr int elems = 8, run = 8; };
template <> struct unit_info<kBF16> { static constexpr int elems = 8, run = 8; };
template <> struct unit_info<kQ8_0> { static constexpr int elems = 16, run = 16; };
template <> struct unit_info<kQ4_0> { static constexpr int elems = 32, run = 16; };
template <> struct unit_info<kQ4_1> { static constexpr int elems = 32, run = 16; };
template <> struct unit_info<kQ5_0> { static constexpr int elems = 32, run = 16; };
template <> struct unit_info<kQ5_1> { static constexpr int elems = 32, run = 16; };
template <> struct unit_info<kQ4_K> { static constexpr int elems = 32, run = 16; };
template <> struct unit_info<kQ5_K> { static constexpr int elems = 32, run = 16; };
template <> struct unit_info<kQ6_K> { static constexpr int elems = 64, run = 16; };

/* Plain (unquantized) types: k may be any size, so x may lack alignment. */
template <int T> constexpr bool kPlain = T == kF32 || T == kF16 || T == kBF16;

template <int T> __device__ __forceinline__ int64_t units_per_row(int64_t k) {
  return (k + unit_info<T>::elems - 1) / unit_info<T>::elems;
}

/* The values of unit u of weight row `row`: v[run * j + i] is element
 * e0 + stride * j + i. Values past k (plain types' padding) are 0. */
template <int T>
__device__ __forceinline__ void dequant_unit(const uint8_t *w, const brisk_kregroup_layout &l,
                                             int64_t row, int64_t u, float *v, int64_t *e0,
                                             int *stride) {
  const uint8_t *q = w + (size_t)row * l.q_stride;
  if (T == kF32) {
    const v16 x = load16(q + 16 * u);
#pragma unroll
    for (int i = 0; i < 4; i++) memcpy(&v[i], &x.w[i], 4);
    *e0 = 4 * u, *stride = 0;
  } else if (T == kF16 || T == kBF16) {
    const v16 x = load16(q + 16 * u);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const uint16_t h = (uint16_t)(x.w[i >> 1] >> (16 * (i & 1)));
      v[i] = T == kF16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
    *e0 = 8 * u, *stride = 0;
  } else if (T == kQ8_0) {
    const v16 x = load16(q + 16 * u);
    const float d =
        f16_bits_to_f32(load_u16(w + l.d_offset + (size_t)row * l.d_stride + 2 * (u / 2)));
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = mul_rn((float)(int8_t)byte_of(x, i), d);
    *e0 = 16 * u, *stride = 0;
  } else if (T == kQ4_0 || T == kQ4_1 || T == kQ5_0 || T == kQ5_1) {
    /* Byte i: element i in the low nibble, i + 16 in the high one; Q5_x:
     * bit e of the block's 32-bit qh is element e's 5th bit. */
    constexpr bool has_m = T == kQ4_1 || T == kQ5_1, has_h = T == kQ5_0 || T == kQ5_1;
    constexpr int zero = T == kQ4_0 ? 8 : T == kQ5_0 ? 16 : 0;
    const v16 x = load16(q + 16 * u);
    const uint8_t *dp = w + l.d_offset + (size_t)row * l.d_stride + (has_m ? 4 : 2) * u;
    const float d = f16_bits_to_f32(load_u16(dp));
    const float mn = has_m ? f16_bits_to_f32(load_u16(dp + 2)) : 0.0f;
    uint32_t h = 0;
    if (has_h) memcpy(&h, w + l.s_offset + (size_t)row * l.s_stride + 4 * u, 4);
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const uint32_t b = byte_of(x, i);
      const int q0 = (int)((b & 15) | ((h >> i) & 1) << 4);
      const int q1 = (int)((b >> 4) | ((h >> (i + 16)) & 1) << 4);
      if (has_m) {
        v[i] = add_rn(mul_rn((float)q0, d), mn);
        v[16 + i] = add_rn(mul_rn((float)q1, d), mn);
      } else {
        v[i] = mul_rn((float)(q0 - zero), d);
        v[16 + i] = mul_rn((float)(q1 - zero), d);
      }
    }
    *e0 = 32 * u, *stride = 16;
  } else if (T == kQ4_K || T == kQ5_K) {
    /* Unit c of a super-block: bytes 16c.. of qs; low nibbles are sub-block
     * j = 2 (c / 2) at l = 16 (c % 2) + i, high nibbles sub-block j + 1.
     * Q5_K: bit j of qh[l] is the 5th bit of element l of sub-block j. */
    const int64_t sb = u / 8;
    const int c = (int)(u % 8), j = 2 * (c / 2), l0 = 16 * (c % 2);
    const uint8_t *qb = q + (T == kQ4_K ? 128 : 160) * sb;
    const v16 x = load16(qb + 16 * c);
    const v16 hv = T == kQ5_K ? load16(qb + 128 + l0) : x;
    const v16 rec = load16(w + l.s_offset + (size_t)row * l.s_stride + 16 * sb);
    const float d = f16_bits_to_f32((uint16_t)rec.w[0]);
    const float dmin = f16_bits_to_f32((uint16_t)(rec.w[0] >> 16));
    /* brisk_k4_scale_min for sub-blocks j (even) and j + 1; scales[i] is
     * byte 4 + i of the record. */
    uint32_t sc0, mn0, sc1, mn1;
    if (j < 4) {
      sc0 = byte_dyn(rec, 4 + j) & 63, mn0 = byte_dyn(rec, 8 + j) & 63;
      sc1 = byte_dyn(rec, 5 + j) & 63, mn1 = byte_dyn(rec, 9 + j) & 63;
    } else {
      sc0 = (byte_dyn(rec, 8 + j) & 0xf) | ((byte_dyn(rec, j) >> 6) << 4);
      mn0 = (byte_dyn(rec, 8 + j) >> 4) | ((byte_dyn(rec, 4 + j) >> 6) << 4);
      sc1 = (byte_dyn(rec, 9 + j) & 0xf) | ((byte_dyn(rec, 1 + j) >> 6) << 4);
      mn1 = (byte_dyn(rec, 9 + j) >> 4) | ((byte_dyn(rec, 5 + j) >> 6) << 4);
    }
    const float dl0 = mul_rn(d, (float)sc0), ml0 = mul_rn(dmin, (float)mn0);
    const float dl1 = mul_rn(d, (float)sc1), ml1 = mul_rn(dmin, (float)mn1);
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const uint32_t b = byte_of(x, i);
      uint32_t q0 = b & 15, q1 = b >> 4;
      if (T == kQ5_K) {
        const uint32_t hb = byte_of(hv, i);
        q0 |= ((hb >> j) & 1) << 4, q1 |= ((hb >> (j + 1)) & 1) << 4;
      }
      v[i] = sub_rn(mul_rn(dl0, (float)q0), ml0);
      v[16 + i] = sub_rn(mul_rn(dl1, (float)q1), ml1);
    }
    *e0 = 256 * sb + 32 * j + l0, *stride = 32;
  } else if (T == kQ6_K) {
    /* Unit c of a super-block: half h = c / 2, l = 16 (c % 2) + i; element
     * 128 h + 32 s + l takes ql[64 h + l + 32 (s % 2)] nibble s / 2 and
     * qh[32 h + l] bits 2s, with scale scales[8 h + 2 s + c % 2]. */
    const int64_t sb = u / 4;
    const int c = (int)(u % 4), h = c / 2, lb = c % 2;
    const uint8_t *qb = q + 192 * sb;
    const v16 qa = load16(qb + 64 * h + 16 * lb), qc = load16(qb + 64 * h + 32 + 16 * lb);
    const v16 qh = load16(qb + 128 + 32 * h + 16 * lb);
    const uint8_t *sp = w + l.s_offset + (size_t)row * l.s_stride + 16 * sb + 8 * h + lb;
    const float d = f16_bits_to_f32(load_u16(w + l.d_offset + (size_t)row * l.d_stride + 2 * sb));
    float ds[4];
#pragma unroll
    for (int s = 0; s < 4; s++) ds[s] = mul_rn(d, (float)(int8_t)sp[2 * s]);
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const uint32_t a = byte_of(qa, i), b = byte_of(qc, i), hi = byte_of(qh, i);
      v[i] = mul_rn(ds[0], (float)((int)((a & 15) | ((hi & 3) << 4)) - 32));
      v[16 + i] = mul_rn(ds[1], (float)((int)((b & 15) | (((hi >> 2) & 3) << 4)) - 32));
      v[32 + i] = mul_rn(ds[2], (float)((int)((a >> 4) | (((hi >> 4) & 3) << 4)) - 32));
      v[48 + i] = mul_rn(ds[3], (float)((int)((b >> 4) | (((hi >> 6) & 3) << 4)) - 32));
    }
    *e0 = 256 * sb + 128 * h + 16 * lb, *stride = 32;
  }
}

/* Calls f(e, v) for each group of 4 consecutive elements e .. e + 3 of unit
 * u with e < k (v: their values; only plain types can have e + 3 >= k). */
template <int T, class F>
__device__ __forceinline__ void for_unit(const uint8_t *w, const brisk_kregroup_layout &l,
                                         int64_t row, int64_t u, int64_t k, F &&f) {
  constexpr int n = unit_info<T>::elems, run = unit_info<T>::run;
  float v[n];
  int64_t e0;
  int stride;
  dequant_unit<T>(w, l, row, u, v, &e0, &stride);
#pragma unroll
  for (int j = 0; j < n / run; j++)
#pragma unroll
    for (int g = 0; g < run; g += 4) {
      const int64_t e = e0 + (int64_t)stride * j + g;
      if (e < k) f(e, v + run * j + g);
    }
}

/* ---- GEMV --------------------------------------------------------------- */

constexpr int kGemvWarps = 4;             /* weight rows (warps) per block */
constexpr int64_t kMaxGridX = 0x7fffffff; /* CUDA's limit for grid x */

template <int T>
__global__ void gemv_kernel(const uint8_t *__restrict__ w, // regrouped [n][k]
                            brisk_kregroup_layout l, int64_t n, int64_t k,
                            const float *__restrict__ x, // [m][k]
                            int m, bool vec_x,           /* x rows 16-byte aligned, k % 4 == 0 */
                            float *__restrict__ y,       // [m][ldy]
                            int64_t ldy) {
  const int lane = threadIdx.x;
  const int64_t row = (int64_t)blockIdx.x * kGemvWarps + threadIdx.y;
  if (row >= n) return; /* whole warps leave together */
  float acc[BRISK_KMATMUL_GEMV_ROWS];
#pragma unroll
  for (int r = 0; r < BRISK_KMATMUL_GEMV_ROWS; r++) acc[r] = 0.0f;
  const int64_t units = units_per_row<T>(k);
  for (int64_t u = lane; u < units; u += 32)
    for_unit<T>(w, l, row, u, k, [&](int64_t e, const float *v) {
#pragma unroll
      for (int r = 0; r < BRISK_KMATMUL_GEMV_ROWS; r++) {
        if (r >= m) break;
        const float *xr = x + (size_t)r * (size_t)k + e;
        float xv[4];
        if constexpr (!kPlain<T>) {
          load_x4(xr, xv);
        } else if (vec_x) {
          load_x4(xr, xv);
        } else {
#pragma unroll
          for (int i = 0; i < 4; i++) xv[i] = e + i < k ? __ldg(xr + i) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) acc[r] = fmaf(v[i], xv[i], acc[r]);
      }
    });
#pragma unroll
  for (int r = 0; r < BRISK_KMATMUL_GEMV_ROWS; r++) {
    if (r >= m) break;
    float s = acc[r];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) y[(size_t)r * (size_t)ldy + row] = s;
  }
}

template <int T>
int gemv_launch(const void *w, const brisk_kregroup_layout &l, int64_t n, int64_t k, const float *x,
                int64_t m, float *y, brisk_kstream stream) {
  if ((n + kGemvWarps - 1) / kGemvWarps > kMaxGridX) return kInvalid;
  const dim3 grid((unsigned)((n + kGemvWarps - 1) / kGemvWarps)), block(32, kGemvWarps);
  const bool vec_x = k % 4 == 0 && (uintptr_t)x % 16 == 0;
  if (!kPlain<T> && !vec_x) return kInvalid; /* quantized types need 16-byte aligned x */
  for (int64_t r0 = 0; r0 < m; r0 += BRISK_KMATMUL_GEMV_ROWS) {
    const int mm = (int)(m - r0 < BRISK_KMATMUL_GEMV_ROWS ? m - r0 : BRISK_KMATMUL_GEMV_ROWS);
    int st = BRISK_LAUNCH(gemv_kernel<T>, grid, block, 0, stream, (const uint8_t *)w, l, n, k,
                          x + (size_t)r0 * (size_t)k, mm, vec_x, y + (size_t)r0 * (size_t)n, n);
    if (st) return st;
  }
  return 0;
}

/* ---- tile dequantization ------------------------------------------------ */

template <int T>
__global__ void dequant_kernel(const uint8_t *__restrict__ w, // regrouped [n][k]
                               brisk_kregroup_layout l, int64_t k, int64_t r0, int64_t nr,
                               uint32_t out_type,
                               void *__restrict__ out) { // [nr][k]
  const int64_t units = units_per_row<T>(k), total = nr * units;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < total; g += step) {
    const int64_t r = g / units, u = g % units;
    const size_t base = (size_t)r * (size_t)k;
    for_unit<T>(w, l, r0 + r, u, k, [&](int64_t e, const float *v) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        if (e + i >= k) break;
        if (out_type == kF32)
          ((float *)out)[base + e + i] = v[i];
        else if (out_type == kF16)
          ((uint16_t *)out)[base + e + i] = f32_to_f16_bits(v[i]);
        else
          ((uint16_t *)out)[base + e + i] = f32_to_bf16_bits(v[i]);
      }
    });
  }
}

constexpr int kFlatThreads = 256;
constexpr int64_t kMaxFlatBlocks = 65535;

unsigned flat_blocks(int64_t work) {
  int64_t b = (work + kFlatThreads - 1) / kFlatThreads;
  return (unsigned)(b < kMaxFlatBlocks ? b : kMaxFlatBlocks);
}

template <int T>
int dequant_launch(const void *w, const brisk_kregroup_layout &l, int64_t k, int64_t r0, int64_t nr,
                   uint32_t out_type, void *out, brisk_kstream stream) {
  return BRISK_LAUNCH(dequant_kernel<T>, dim3(flat_blocks(nr * units_per_row<T>(k))),
                      dim3(kFlatThreads), 0, stream, (const uint8_t *)w, l, k, r0, nr, out_type,
                      out);
}

__global__ void cast_kernel(uint32_t out_type, const float *__restrict__ x, // [count]
                            int64_t count, uint16_t *__restrict__ out) {    // [count]
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
    out[i] = out_type == kF16 ? f32_to_f16_bits(x[i]) : f32_to_bf16_bits(x[i]);
}

/* ---- SIMT GEMM ------------------------------------------------------------ */

constexpr int kBM = 64, kBN = 64, kBK = 16, kTM = 4, kTN = 4;
constexpr int kGemmThreads = (kBM / kTM) * (kBN / kTN); /* 256 */

template <int T> __device__ __forceinline__ float load_elem(const void *p, size_t i) {
  if (T == kF32) return __ldg((const float *)p + i);
  const uint16_t u = ((const uint16_t *)p)[i];
  return T == kF16 ? f16_bits_to_f32(u) : bf16_bits_to_f32(u);
}

/* Block (bx, by) computes c[64 by .. +64][64 bx .. +64]; thread (tx, ty) its
 * 4 x 4 outputs at rows ty + 16 i, columns tx + 16 j (conflict-free shared
 * reads). k advances in steps of 16 through shared tiles, transposed so that
 * both operands are read along m / n. */
template <int TA, int TB>
__global__ void gemm_kernel(const void *__restrict__ a, // [m][k]
                            const void *__restrict__ b, // [n][k]
                            int64_t m, int64_t n, int64_t k,
                            float *__restrict__ c, // [m][ldc]
                            int64_t ldc) {
  BRISK_SHARED(float, as, kBK *(kBM + 1)); // [kBK][kBM + 1]
  BRISK_SHARED(float, bs, kBK *(kBN + 1)); // [kBK][kBN + 1]
  const int tid = threadIdx.x, tx = tid % (kBN / kTN), ty = tid / (kBN / kTN);
  const int64_t m0 = (int64_t)blockIdx.y * kBM, n0 = (int64_t)blockIdx.x * kBN;
  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; i++)
#pragma unroll
    for (int j = 0; j < kTN; j++) acc[i][j] = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += kBK) {
    /* 1024 elements of each operand: thread tid loads 4, k fastest. */
#pragma unroll
    for (int t = 0; t < kBM * kBK / kGemmThreads; t++) {
      const int idx = tid + t * kGemmThreads, rr = idx / kBK, kk = idx % kBK;
      const int64_t ar = m0 + rr, br = n0 + rr, kc = k0 + kk;
      as[kk * (kBM + 1) + rr] =
          ar < m && kc < k ? load_elem<TA>(a, (size_t)ar * (size_t)k + (size_t)kc) : 0.0f;
      bs[kk * (kBN + 1) + rr] =
          br < n && kc < k ? load_elem<TB>(b, (size_t)br * (size_t)k + (size_t)kc) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk++) {
      float av[kTM], bv[kTN];
#pragma unroll
      for (int i = 0; i < kTM; i++) av[i] = as[kk * (kBM + 1) + ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kTN; j++) bv[j] = bs[kk * (kBN + 1) + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kTM; i++)
#pragma unroll
        for (int j = 0; j < kTN; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM; i++)
#pragma unroll
    for (int j = 0; j < kTN; j++) {
      const int64_t r = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
      if (r < m && col < n) c[(size_t)r * (size_t)ldc + (size_t)col] = acc[i][j];
    }
}

template <int TA, int TB>
int gemm_launch(const void *a, const void *b, int64_t m, int64_t n, int64_t k, float *c,
                int64_t ldc, brisk_kstream stream) {
  /* grid.y is limited to 65535 blocks: taller products go in slices. */
  if ((n + kBN - 1) / kBN > kMaxGridX) return kInvalid;
  const int64_t slice = (int64_t)65535 * kBM;
  const size_t a_elem = TA == kF32 ? 4 : 2;
  for (int64_t r0 = 0; r0 < m; r0 += slice) {
    const int64_t mm = m - r0 < slice ? m - r0 : slice;
    const dim3 grid((unsigned)((n + kBN - 1) / kBN), (unsigned)((mm + kBM - 1) / kBM));
    int st = BRISK_LAUNCH((gemm_kernel<TA, TB>), grid, dim3(kGemmThreads), 0, stream,
                          (const void *)((const char *)a + (size_t)r0 * (size_t)k * a_elem), b, mm,
                          n, k, c + (size_t)r0 * (size_t)ldc, ldc);
    if (st) return st;
  }
  return 0;
}

} // namespace

extern "C" {

bool brisk_kmatmul_supported(uint32_t w_type) {
  brisk_kregroup_layout l;
  return brisk_kregroup_layout_of(w_type, 1, 256, &l);
}

int brisk_kmatmul_gemv(uint32_t w_type, const void *w, int64_t n, int64_t k, const float *x,
                       int64_t m, float *y, brisk_kstream stream) {
  brisk_kregroup_layout l;
  if (!brisk_kregroup_layout_of(w_type, n, k, &l)) return kInvalid;
  if (n == 0 || m == 0) return 0;
  switch (w_type) {
  case kF32: return gemv_launch<kF32>(w, l, n, k, x, m, y, stream);
  case kF16: return gemv_launch<kF16>(w, l, n, k, x, m, y, stream);
  case kBF16: return gemv_launch<kBF16>(w, l, n, k, x, m, y, stream);
  case kQ8_0: return gemv_launch<kQ8_0>(w, l, n, k, x, m, y, stream);
  case kQ4_0: return gemv_launch<kQ4_0>(w, l, n, k, x, m, y, stream);
  case kQ4_1: return gemv_launch<kQ4_1>(w, l, n, k, x, m, y, stream);
  case kQ5_0: return gemv_launch<kQ5_0>(w, l, n, k, x, m, y, stream);
  case kQ5_1: return gemv_launch<kQ5_1>(w, l, n, k, x, m, y, stream);
  case kQ4_K: return gemv_launch<kQ4_K>(w, l, n, k, x, m, y, stream);
  case kQ5_K: return gemv_launch<kQ5_K>(w, l, n, k, x, m, y, stream);
  case kQ6_K: return gemv_launch<kQ6_K>(w, l, n, k, x, m, y, stream);
  default: return kInvalid;
  }
}

int brisk_kdequant_tile(uint32_t w_type, const void *w, int64_t n, int64_t k, int64_t r0,
                        int64_t nr, uint32_t out_type, void *out, brisk_kstream stream) {
  brisk_kregroup_layout l;
  if (!brisk_kregroup_layout_of(w_type, n, k, &l)) return kInvalid;
  if (out_type != kF32 && out_type != kF16 && out_type != kBF16) return kInvalid;
  if (nr == 0) return 0;
  switch (w_type) {
  case kF32: return dequant_launch<kF32>(w, l, k, r0, nr, out_type, out, stream);
  case kF16: return dequant_launch<kF16>(w, l, k, r0, nr, out_type, out, stream);
  case kBF16: return dequant_launch<kBF16>(w, l, k, r0, nr, out_type, out, stream);
  case kQ8_0: return dequant_launch<kQ8_0>(w, l, k, r0, nr, out_type, out, stream);
  case kQ4_0: return dequant_launch<kQ4_0>(w, l, k, r0, nr, out_type, out, stream);
  case kQ4_1: return dequant_launch<kQ4_1>(w, l, k, r0, nr, out_type, out, stream);
  case kQ5_0: return dequant_launch<kQ5_0>(w, l, k, r0, nr, out_type, out, stream);
  case kQ5_1: return dequant_launch<kQ5_1>(w, l, k, r0, nr, out_type, out, stream);
  case kQ4_K: return dequant_launch<kQ4_K>(w, l, k, r0, nr, out_type, out, stream);
  case kQ5_K: return dequant_launch<kQ5_K>(w, l, k, r0, nr, out_type, out, stream);
  case kQ6_K: return dequant_launch<kQ6_K>(w, l, k, r0, nr, out_type, out, stream);
  default: return kInvalid;
  }
}

int brisk_kcast_f32(uint32_t out_type, const float *x, int64_t count, void *out,
                    brisk_kstream stream) {
  if (out_type != kF16 && out_type != kBF16) return kInvalid;
  if (count == 0) return 0;
  return BRISK_LAUNCH(cast_kernel, dim3(flat_blocks(count)), dim3(kFlatThreads), 0, stream,
                      out_type, x, count, (uint16_t *)out);
}

int brisk_kgemm(uint32_t a_type, const void *a, uint32_t b_type, const void *b, int64_t m,
                int64_t n, int64_t k, float *c, int64_t ldc, brisk_kstream stream) {
  if (m == 0 || n == 0) return 0;
  if (a_type == kF32 && b_type == kF32)
    return gemm_launch<kF32, kF32>(a, b, m, n, k, c, ldc, stream);
  if (a_type == kF32 && b_type == kF16)
    return gemm_launch<kF32, kF16>(a, b, m, n, k, c, ldc, stream);
  if (a_type == kF32 && b_type == kBF16)
    return gemm_launch<kF32, kBF16>(a, b, m, n, k, c, ldc, stream);
  if (a_type == kF16 && b_type == kF16)
    return gemm_launch<kF16, kF16>(a, b, m, n, k, c, ldc, stream);
  if (a_type == kBF16 && b_type == kBF16)
    return gemm_launch<kBF16, kBF16>(a, b, m, n, k, c, ldc, stream);
  return kInvalid;
}

} // extern "C"
