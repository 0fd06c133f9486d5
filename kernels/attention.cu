/* Paged causal attention: for query token t (position p, sequence s) and
 * head h with kv head g = h / (n_heads / n_kv_heads),
 *
 *   out[t][h] = sum_{j in [lo, p]} softmax_j(scale * q[t][h] . K[s][g][j]) V[s][g][j]
 *
 * lo = max(0, p - window + 1) with a sliding window, else 0. K/V row j of
 * sequence s lives in cache block table[s][j / block_size], slot
 * j % block_size: element ((block * n_kv_heads + g) * block_size + slot) *
 * head_dim + i (quantized caches: row ... * head_dim / head_dim of kvq.cuh
 * rows). Everything is float32 (F16 and quantized caches are widened
 * exactly as the CPU widens them).
 *
 * Decode (split-KV): chunk c holds keys [256 c, 256 c + 256) n [lo, p]. Its
 * block computes, per head, m_c = max score, l_c = sum exp(score - m_c) and
 * a_c = sum exp(score - m_c) V, staging K then V rows through shared memory
 * once for the whole GQA group. The combine kernel: M = max m_c,
 * out = sum_c exp(m_c - M) a_c / sum_c exp(m_c - M) l_c, c ascending.
 *
 * Prefill (flash-style): a block takes bq consecutive query tokens and hpb
 * heads of one kv head (rows r = token * hpb + head) and walks key tiles of
 * tk positions at fixed multiples of tk; per row it keeps the online
 * softmax (m, l) and the accumulator in shared memory:
 *   m' = max(m, max_j S[r][j]); a = a exp(m - m') + sum_j exp(S[r][j] - m') V[j]
 * Tiles where a row sees no key leave it untouched, so each row's result
 * depends on its own query and keys only, not on the rest of the call.
 *
 * 8-bit caches hold R k and R v (kvq.cuh): the scaled query is rotated
 * once, the scores are the same dot products, and the output is rotated
 * back, as the CPU does.
 *
 * Sums are in fixed orders (lane-strided partials and an xor butterfly for
 * dot products in decode; sequential in prefill and in P V), so results are
 * deterministic. Shared memory stays within 48 KiB (no opt-in needed). */
#include "simt.h"

#include "attention.h"
#include "kvq.cuh"

#include <math.h>
#include <string.h>

namespace {

/* The status of a refused call: cudaErrorInvalidValue's code (1), which is
 * also the emulation's, so brisk_kerror_string names it on both. */
constexpr int kInvalid = 1;

constexpr int kThreads = 128;
constexpr int kChunk = BRISK_KATTN_CHUNK;
constexpr int kSmemFloats = 12288;     /* 48 KiB */
constexpr int kTileFloats = 4096;      /* K/V staging tile */
constexpr unsigned kMaxGridYZ = 65535; /* CUDA's limit for grid y and z */

struct kparams {
  int32_t n_kv_heads, block_size, head_dim, n_heads, group, window, max_blocks, n_tokens;
  float scale;
  float softcap;     /* > 0: score -> softcap * tanh(score / softcap) */
  int32_t hpb;       /* heads of a group per block */
  int32_t n_hgroups; /* blocks per kv head: ceil(group / hpb) */
  int32_t tk;        /* keys per staged tile */
  int32_t bq;        /* prefill: query tokens per block */
  int32_t n_chunks;  /* decode: chunks per query in the workspace */
  int32_t rotated;   /* 8-bit cache: rows hold R k, R v (kvq_rotate) */
};

/* Gemma 2's soft-capping of a score, rounded as the CPU backend's. */
__device__ __forceinline__ float capped(float s, float cap) {
  return __fmul_rn(cap, tanhf(__fdiv_rn(s, cap)));
}

__device__ __forceinline__ float f16_bits_to_f32(uint16_t u) {
  __half h;
  memcpy(&h, &u, 2);
  return __half2float(h);
}

__device__ __forceinline__ int32_t first_key(int32_t p, int32_t window) {
  return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

__device__ __forceinline__ size_t kv_index(const kparams &P, const int32_t *table, int kvh,
                                           int32_t pos, int i) {
  const int64_t blk = table[pos / P.block_size];
  return ((size_t)(blk * P.n_kv_heads + kvh) * (size_t)P.block_size +
          (size_t)(pos % P.block_size)) *
             (size_t)P.head_dim +
         (size_t)i;
}

/* Cache element i of key row `pos`: KT is the cache type (0 F32, 1 F16, 2
 * INT8, 3 FP8 E4M3; quantized rows as kvq.cuh). */
template <int KT>
__device__ __forceinline__ float kv_load(const kparams &P, const void *cache, const int32_t *table,
                                         int kvh, int32_t pos, int i) {
  if (KT == 0) return ((const float *)cache)[kv_index(P, table, kvh, pos, i)];
  if (KT == 1) return f16_bits_to_f32(((const uint16_t *)cache)[kv_index(P, table, kvh, pos, i)]);
  const size_t row = kv_index(P, table, kvh, pos, 0) / (size_t)P.head_dim;
  return kvq_value(KT == 2 ? KVQ_DTYPE_Q8 : KVQ_DTYPE_FP8,
                   (const unsigned char *)cache + row * (size_t)kvq_row_bytes(P.head_dim),
                   P.head_dim, i);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/* ---- decode: split-KV partials ------------------------------------------ */

template <int KT>
__global__ void
decode_kernel(kparams P, int32_t t_base,
              const void *__restrict__ kc,           // [n_blocks][n_kv_heads][block_size][head_dim]
              const void *__restrict__ vc,           // [n_blocks][n_kv_heads][block_size][head_dim]
              const float *__restrict__ q,           // [n_tokens][n_heads][head_dim]
              const int32_t *__restrict__ positions, // [n_tokens]
              const int32_t *__restrict__ seq_of_token, // [n_tokens]
              const int32_t *__restrict__ block_tables, // [n_seqs][max_blocks]
              float *__restrict__ ws_ml,                // [n_tokens][n_heads][n_chunks][2]
              float *__restrict__ ws_acc) {             // [n_tokens][n_heads][n_chunks][head_dim]
  BRISK_DYN_SHARED(float, sm);
  const int hd = P.head_dim, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int nwarps = blockDim.x / 32;
  const int chunk = blockIdx.x, kvh = blockIdx.y / P.n_hgroups, hg = blockIdx.y % P.n_hgroups;
  const int32_t t = t_base + (int32_t)blockIdx.z;
  const int first = hg * P.hpb, nh = P.group - first < P.hpb ? P.group - first : P.hpb;
  const int h0 = kvh * P.group + first;
  const int32_t p = positions[t], lo = first_key(p, P.window);
  const int32_t k_begin = lo > chunk * kChunk ? lo : chunk * kChunk;
  const int32_t k_end = p + 1 < (chunk + 1) * kChunk ? p + 1 : (chunk + 1) * kChunk;
  if (k_begin >= k_end) return; /* the whole block: outside this query's keys */
  const int len = k_end - k_begin;
  float *sq = sm;                     // [hpb][hd] scaled queries
  float *sacc = sq + P.hpb * hd;      // [hpb][hd] unnormalized outputs
  float *ssc = sacc + P.hpb * hd;     // [hpb][kChunk] scores, then probabilities
  float *tile = ssc + P.hpb * kChunk; // [tk][hd] K or V rows
  const int32_t *table = block_tables + (size_t)seq_of_token[t] * (size_t)P.max_blocks;
  for (int idx = tid; idx < nh * hd; idx += blockDim.x) {
    sq[idx] = q[((size_t)t * P.n_heads + h0) * hd + idx] * P.scale;
    sacc[idx] = 0.0f;
  }
  if (KT >= 2) {
    __syncthreads();
    for (int g = tid; g < nh; g += blockDim.x) kvq_rotate(sq + g * hd, hd);
  }
  for (int kt = 0; kt < len; kt += P.tk) {
    const int n = len - kt < P.tk ? len - kt : P.tk;
    __syncthreads(); /* the previous tile is consumed */
    for (int idx = tid; idx < n * hd; idx += blockDim.x)
      tile[idx] = kv_load<KT>(P, kc, table, kvh, k_begin + kt + idx / hd, idx % hd);
    __syncthreads();
    for (int pr = warp; pr < nh * n; pr += nwarps) {
      const int g = pr / n, c = pr % n;
      float s = 0.0f;
      for (int i = lane; i < hd; i += 32) s = fmaf(sq[g * hd + i], tile[c * hd + i], s);
      s = warp_sum(s);
      if (P.softcap > 0) s = capped(s, P.softcap);
      if (lane == 0) ssc[g * kChunk + kt + c] = s;
    }
  }
  __syncthreads();
  for (int g = warp; g < nh; g += nwarps) {
    float mx = -INFINITY;
    for (int c = lane; c < len; c += 32) mx = fmaxf(mx, ssc[g * kChunk + c]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int c = lane; c < len; c += 32) {
      const float e = expf(ssc[g * kChunk + c] - mx);
      ssc[g * kChunk + c] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      float *ml = ws_ml + (((size_t)t * P.n_heads + h0 + g) * P.n_chunks + chunk) * 2;
      ml[0] = mx, ml[1] = sum;
    }
  }
  for (int kt = 0; kt < len; kt += P.tk) {
    const int n = len - kt < P.tk ? len - kt : P.tk;
    __syncthreads(); /* probabilities written, previous V tile consumed */
    for (int idx = tid; idx < n * hd; idx += blockDim.x)
      tile[idx] = kv_load<KT>(P, vc, table, kvh, k_begin + kt + idx / hd, idx % hd);
    __syncthreads();
    for (int o = tid; o < nh * hd; o += blockDim.x) {
      const int g = o / hd, i = o % hd;
      float a = sacc[o];
      for (int c = 0; c < n; c++) a = fmaf(ssc[g * kChunk + kt + c], tile[c * hd + i], a);
      sacc[o] = a;
    }
  }
  for (int o = tid; o < nh * hd; o += blockDim.x) {
    const int g = o / hd, i = o % hd;
    ws_acc[(((size_t)t * P.n_heads + h0 + g) * P.n_chunks + chunk) * hd + i] = sacc[o];
  }
}

/* ---- decode: combine ----------------------------------------------------- */

__global__ void
combine_kernel(kparams P, int32_t t_base,
               const int32_t *__restrict__ positions, // [n_tokens]
               const float *__restrict__ ws_ml,       // [n_tokens][n_heads][n_chunks][2]
               const float *__restrict__ ws_acc,      // [n_tokens][n_heads][n_chunks][head_dim]
               float *__restrict__ out) {             // [n_tokens][n_heads][head_dim]
  const int32_t t = t_base + (int32_t)blockIdx.y;
  const int h = blockIdx.x, hd = P.head_dim;
  const int32_t p = positions[t], c0 = first_key(p, P.window) / kChunk, c1 = p / kChunk;
  const size_t base = ((size_t)t * P.n_heads + h) * P.n_chunks;
  float mx = -INFINITY;
  for (int32_t c = c0; c <= c1; c++) mx = fmaxf(mx, ws_ml[(base + c) * 2]);
  float l = 0.0f;
  for (int32_t c = c0; c <= c1; c++)
    l = fmaf(expf(ws_ml[(base + c) * 2] - mx), ws_ml[(base + c) * 2 + 1], l);
  const float inv = 1.0f / l;
  BRISK_SHARED(float, so, BRISK_KATTN_MAX_HEAD_DIM); /* the rotated output, to rotate back */
  float *o = out + ((size_t)t * P.n_heads + h) * hd;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    float a = 0.0f;
    for (int32_t c = c0; c <= c1; c++)
      a = fmaf(expf(ws_ml[(base + c) * 2] - mx), ws_acc[(base + c) * hd + i], a);
    if (P.rotated)
      so[i] = a * inv;
    else
      o[i] = a * inv;
  }
  if (!P.rotated) return;
  __syncthreads();
  if (threadIdx.x == 0) kvq_rotate(so, hd);
  __syncthreads();
  for (int i = threadIdx.x; i < hd; i += blockDim.x) o[i] = so[i];
}

/* ---- prefill --------------------------------------------------------------- */

template <int KT>
__global__ void
prefill_kernel(kparams P,
               const void *__restrict__ kc, // [n_blocks][n_kv_heads][block_size][head_dim]
               const void *__restrict__ vc, // [n_blocks][n_kv_heads][block_size][head_dim]
               const float *__restrict__ q, // [n_tokens][n_heads][head_dim]
               const int32_t *__restrict__ positions,    // [n_tokens]
               const int32_t *__restrict__ seq_of_token, // [n_tokens]
               const int32_t *__restrict__ block_tables, // [n_seqs][max_blocks]
               float *__restrict__ out) {                // [n_tokens][n_heads][head_dim]
  BRISK_DYN_SHARED(float, sm);
  const int hd = P.head_dim, tk = P.tk, bq = P.bq, hpb = P.hpb, R = bq * hpb, tid = threadIdx.x;
  const int32_t t0 = (int32_t)blockIdx.x * bq;
  const int kvh = blockIdx.y / P.n_hgroups, hg = blockIdx.y % P.n_hgroups;
  const int first = hg * hpb, nh = P.group - first < hpb ? P.group - first : hpb;
  const int h0 = kvh * P.group + first;
  /* Query and K/V rows are ld = hd + 1 floats apart, so that threads taking
   * different rows at the same i read different shared-memory banks. */
  const int ld = hd + 1;
  float *sq = sm;                          // [R][ld] scaled queries
  float *sacc = sq + R * ld;               // [R][hd] accumulators
  float *tile = sacc + R * hd;             // [tk][ld] K or V rows
  float *ss = tile + tk * ld;              // [R][tk] scores, then probabilities
  float *rm = ss + R * tk;                 // [R] running max
  float *rl = rm + R;                      // [R] running sum
  float *ralpha = rl + R;                  // [R] this tile's rescale factor
  int32_t *ract = (int32_t *)(ralpha + R); // [R] row takes part in this tile
  int32_t *tp = ract + R;                  // [bq] positions
  int32_t *tlo = tp + bq;                  // [bq] first keys
  int32_t *tseq = tlo + bq;                // [bq] sequences (-1: past n_tokens)
  int32_t *need = tseq + bq;               // [tk] tile column is someone's key

  for (int j = tid; j < bq; j += blockDim.x) {
    const bool ok = t0 + j < P.n_tokens;
    tp[j] = ok ? positions[t0 + j] : 0;
    tlo[j] = ok ? first_key(tp[j], P.window) : 0;
    tseq[j] = ok ? seq_of_token[t0 + j] : -1;
  }
  for (int idx = tid; idx < R * hd; idx += blockDim.x) {
    const int r = idx / hd, j = r / hpb, g = r % hpb;
    sq[r * ld + idx % hd] =
        t0 + j < P.n_tokens && g < nh
            ? q[((size_t)(t0 + j) * P.n_heads + h0 + g) * hd + idx % hd] * P.scale
            : 0.0f;
    sacc[idx] = 0.0f;
  }
  for (int r = tid; r < R; r += blockDim.x) rm[r] = -INFINITY, rl[r] = 0.0f;
  __syncthreads();
  if (KT >= 2) {
    for (int r = tid; r < R; r += blockDim.x) kvq_rotate(sq + r * ld, hd);
    __syncthreads();
  }

  /* The tile's sequences one after another, in order of first appearance. */
  for (int j = 0; j < bq; j++) {
    const int32_t s = tseq[j];
    bool seen = s < 0;
    for (int j2 = 0; j2 < j && !seen; j2++) seen = tseq[j2] == s;
    if (seen) continue;
    int32_t kmin = tlo[j], kmax = tp[j];
    for (int j2 = j + 1; j2 < bq; j2++)
      if (tseq[j2] == s) {
        kmin = tlo[j2] < kmin ? tlo[j2] : kmin;
        kmax = tp[j2] > kmax ? tp[j2] : kmax;
      }
    const int32_t *table = block_tables + (size_t)s * (size_t)P.max_blocks;
    for (int32_t kt = kmin / tk * tk; kt <= kmax; kt += tk) {
      __syncthreads(); /* the previous tile is consumed */
      for (int c = tid; c < tk; c += blockDim.x) {
        const int32_t pos = kt + c;
        int32_t nd = 0;
        for (int j2 = 0; j2 < bq; j2++)
          if (tseq[j2] == s && tlo[j2] <= pos && pos <= tp[j2]) nd = 1;
        need[c] = nd;
      }
      __syncthreads();
      int32_t any = 0;
      for (int c = 0; c < tk; c++) any |= need[c];
      if (!any) continue; /* the same answer in every thread */
      for (int idx = tid; idx < tk * hd; idx += blockDim.x) {
        const int c = idx / hd;
        tile[c * ld + idx % hd] = need[c] ? kv_load<KT>(P, kc, table, kvh, kt + c, idx % hd) : 0.0f;
      }
      __syncthreads();
      for (int pr = tid; pr < R * tk; pr += blockDim.x) {
        const int r = pr / tk, c = pr % tk, jr = r / hpb;
        const int32_t pos = kt + c;
        float sc = -INFINITY;
        if (tseq[jr] == s && r % hpb < nh && tlo[jr] <= pos && pos <= tp[jr]) {
          sc = 0.0f;
          for (int i = 0; i < hd; i++) sc = fmaf(sq[r * ld + i], tile[c * ld + i], sc);
          if (P.softcap > 0) sc = capped(sc, P.softcap);
        }
        ss[pr] = sc;
      }
      __syncthreads();
      for (int r = tid; r < R; r += blockDim.x) {
        float mt = -INFINITY;
        for (int c = 0; c < tk; c++) mt = fmaxf(mt, ss[r * tk + c]);
        if (mt == -INFINITY) { /* no key of this row in the tile */
          ract[r] = 0, ralpha[r] = 1.0f;
          continue;
        }
        const float mn = fmaxf(rm[r], mt), alpha = expf(rm[r] - mn);
        float sum = 0.0f;
        for (int c = 0; c < tk; c++) {
          const float e = expf(ss[r * tk + c] - mn);
          ss[r * tk + c] = e;
          sum += e;
        }
        rl[r] = rl[r] * alpha + sum;
        rm[r] = mn, ralpha[r] = alpha, ract[r] = 1;
      }
      __syncthreads();
      for (int idx = tid; idx < tk * hd; idx += blockDim.x) {
        const int c = idx / hd;
        tile[c * ld + idx % hd] = need[c] ? kv_load<KT>(P, vc, table, kvh, kt + c, idx % hd) : 0.0f;
      }
      __syncthreads();
      for (int o = tid; o < R * hd; o += blockDim.x) {
        const int r = o / hd, i = o % hd;
        if (!ract[r]) continue;
        float a = sacc[o] * ralpha[r];
        for (int c = 0; c < tk; c++) a = fmaf(ss[r * tk + c], tile[c * ld + i], a);
        sacc[o] = a;
      }
    }
  }
  __syncthreads();
  if (KT >= 2) { /* normalized and rotated back in place, then written */
    for (int o = tid; o < R * hd; o += blockDim.x) sacc[o] *= 1.0f / rl[o / hd];
    __syncthreads();
    for (int r = tid; r < R; r += blockDim.x) kvq_rotate(sacc + r * hd, hd);
    __syncthreads();
  }
  for (int o = tid; o < R * hd; o += blockDim.x) {
    const int r = o / hd, j = r / hpb, g = r % hpb;
    if (t0 + j >= P.n_tokens || g >= nh) continue;
    out[((size_t)(t0 + j) * P.n_heads + h0 + g) * hd + o % hd] =
        KT >= 2 ? sacc[o] : sacc[o] * (1.0f / rl[r]);
  }
}

/* ---- configuration ------------------------------------------------------ */

kparams params_of(const brisk_kattn_desc *d) {
  kparams P;
  P.n_kv_heads = d->n_kv_heads, P.block_size = d->block_size, P.head_dim = d->head_dim;
  P.n_heads = d->n_heads, P.group = d->n_heads / d->n_kv_heads, P.window = d->sliding_window;
  P.max_blocks = d->max_blocks, P.n_tokens = d->n_tokens, P.scale = d->scale;
  P.softcap = d->softcap;
  P.rotated = d->kv_dtype == KVQ_DTYPE_Q8 || d->kv_dtype == KVQ_DTYPE_FP8;
  P.hpb = P.n_hgroups = P.tk = P.bq = P.n_chunks = 1;
  return P;
}

/* The kernels' KT for a cache dtype; -1 for one they do not read. */
int kv_kind(uint32_t dtype) {
  return dtype == 0               ? 0
         : dtype == 1             ? 1
         : dtype == KVQ_DTYPE_Q8  ? 2
         : dtype == KVQ_DTYPE_FP8 ? 3
                                  : -1;
}

int32_t n_chunks_of(int32_t max_ctx) { return (max_ctx + kChunk - 1) / kChunk; }

/* Decode: a tile of up to 32 keys; heads in what remains of the budget. */
size_t decode_config(kparams &P) {
  const int hd = P.head_dim;
  P.tk = kTileFloats / hd < 1 ? 1 : kTileFloats / hd > 32 ? 32 : kTileFloats / hd;
  int hpb = (kSmemFloats - P.tk * hd) / (2 * hd + kChunk);
  hpb = hpb < 1 ? 1 : hpb;
  P.hpb = hpb < P.group ? hpb : P.group;
  P.n_hgroups = (P.group + P.hpb - 1) / P.hpb;
  return (size_t)(P.hpb * (2 * hd + kChunk) + P.tk * hd) * sizeof(float);
}

/* Prefill: key tiles of 32 (fewer for wide heads), then as many rows
 * (tokens x heads) as fit. The tile width depends on head_dim alone, so a
 * row's arithmetic does not depend on the rest of the call. */
size_t prefill_config(kparams &P) {
  const int hd = P.head_dim;
  P.tk = hd <= 128 ? 32 : kTileFloats / hd < 4 ? 4 : kTileFloats / hd;
  const int per_row = 2 * hd + 1 + P.tk + 4 + 3; /* floats and ints of a row and its token */
  int rows = (kSmemFloats - P.tk * (hd + 1) - P.tk) / per_row;
  rows = rows < 1 ? 1 : rows;
  P.hpb = rows < P.group ? rows : P.group;
  P.n_hgroups = (P.group + P.hpb - 1) / P.hpb;
  P.bq = rows / P.hpb;
  const int R = P.bq * P.hpb;
  return (size_t)(R * (2 * hd + 1) + P.tk * (hd + 1) + R * P.tk + 4 * R) * sizeof(float) +
         (size_t)(3 * P.bq + P.tk) * sizeof(int32_t);
}

} // namespace

extern "C" {

size_t brisk_kattn_decode_workspace_bytes(int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                                          int32_t max_ctx) {
  if (n_tokens < 1 || n_heads < 1 || head_dim < 1 || max_ctx < 1) return 0;
  size_t rows = 0, bytes = 0;
  if (__builtin_mul_overflow((size_t)n_tokens, (size_t)n_heads, &rows) ||
      __builtin_mul_overflow(rows, (size_t)n_chunks_of(max_ctx), &rows) ||
      __builtin_mul_overflow(rows, ((size_t)head_dim + 2) * sizeof(float), &bytes) ||
      __builtin_add_overflow(bytes, (size_t)16, &bytes))
    return 0;
  return bytes;
}

int brisk_kattn_decode(const brisk_kattn_desc *d, const void *k_cache, const void *v_cache,
                       const float *q, const int32_t *positions, const int32_t *seq_of_token,
                       const int32_t *block_tables, int32_t max_ctx, void *workspace, float *out,
                       brisk_kstream stream) {
  const int kt = kv_kind(d->kv_dtype);
  if (kt < 0) return kInvalid;
  if (d->n_tokens == 0) return 0;
  if (brisk_kattn_decode_workspace_bytes(d->n_tokens, d->n_heads, d->head_dim, max_ctx) == 0)
    return kInvalid;
  kparams P = params_of(d);
  P.n_chunks = n_chunks_of(max_ctx);
  const size_t smem = decode_config(P);
  /* Partials: [n_tokens][n_heads][n_chunks] (m, l) pairs, then the outputs,
   * 16-byte aligned. */
  const size_t pairs = (size_t)d->n_tokens * d->n_heads * P.n_chunks;
  float *ws_ml = (float *)workspace;
  float *ws_acc = ws_ml + ((2 * pairs + 3) & ~(size_t)3);
  for (int32_t t0 = 0; t0 < d->n_tokens; t0 += (int32_t)kMaxGridYZ) {
    const unsigned nt =
        (unsigned)(d->n_tokens - t0 < (int32_t)kMaxGridYZ ? d->n_tokens - t0 : kMaxGridYZ);
    const dim3 grid((unsigned)P.n_chunks, (unsigned)(P.n_kv_heads * P.n_hgroups), nt);
#define DECODE(K)                                                                                  \
  BRISK_LAUNCH(decode_kernel<K>, grid, dim3(kThreads), smem, stream, P, t0, k_cache, v_cache, q,   \
               positions, seq_of_token, block_tables, ws_ml, ws_acc)
    int st = kt == 0 ? DECODE(0) : kt == 1 ? DECODE(1) : kt == 2 ? DECODE(2) : DECODE(3);
#undef DECODE
    if (st) return st;
    st = BRISK_LAUNCH(combine_kernel, dim3((unsigned)P.n_heads, nt), dim3(kThreads), 0, stream, P,
                      t0, positions, (const float *)ws_ml, (const float *)ws_acc, out);
    if (st) return st;
  }
  return 0;
}

int brisk_kattn_prefill(const brisk_kattn_desc *d, const void *k_cache, const void *v_cache,
                        const float *q, const int32_t *positions, const int32_t *seq_of_token,
                        const int32_t *block_tables, float *out, brisk_kstream stream) {
  const int kt = kv_kind(d->kv_dtype);
  if (kt < 0) return kInvalid;
  if (d->n_tokens == 0) return 0;
  kparams P = params_of(d);
  const size_t smem = prefill_config(P);
  const dim3 grid((unsigned)((d->n_tokens + P.bq - 1) / P.bq),
                  (unsigned)(P.n_kv_heads * P.n_hgroups));
#define PREFILL(K)                                                                                 \
  BRISK_LAUNCH(prefill_kernel<K>, grid, dim3(kThreads), smem, stream, P, k_cache, v_cache, q,      \
               positions, seq_of_token, block_tables, out)
  const int st = kt == 0 ? PREFILL(0) : kt == 1 ? PREFILL(1) : kt == 2 ? PREFILL(2) : PREFILL(3);
#undef PREFILL
  return st;
}

} // extern "C"
