/* Selection over rows, one block per row (grid-stride over rows):
 *   argmax: each thread keeps its best (value, index), then a block
 *           reduction under the total order of select.h.
 *   top_k:  each thread keeps its own k best in a sorted list (most
 *           elements are rejected by one comparison with the list's last),
 *           then k rounds of a block reduction over the threads' list heads;
 *           the winner's owner advances. The order is total, so the result
 *           is unique and equals the CPU backend's heap selection.
 *   moe_route: top_k over the experts, then thread 0 computes the weights in
 *           float64 in the CPU backend's order:
 *           w_i = exp(x_i - x_max) / (renormalize ? sum_chosen : sum_all). */
#include "simt.h"

#include "select.h"

#define MAX_GRID (65535u * 16)

struct cand {
  float v;
  int32_t i; /* -1: none (ranks after everything) */
};

/* True when a ranks before b. */
static __device__ __forceinline__ bool before(cand a, cand b) {
  if (a.i < 0 || b.i < 0) return b.i < 0 && a.i >= 0;
  const bool an = isnan(a.v), bn = isnan(b.v);
  if (an || bn) return an && bn ? a.i < b.i : bn;
  if (a.v != b.v) return a.v > b.v;
  return a.i < b.i;
}

static __device__ __forceinline__ cand warp_best(cand c) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    /* One 64-bit shuffle moves both fields. */
    const unsigned long long packed =
        (unsigned long long)__float_as_uint(c.v) << 32 | (unsigned)c.i;
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, packed, o);
    cand d;
    d.v = __uint_as_float((unsigned)(other >> 32));
    d.i = (int32_t)(unsigned)other;
    if (before(d, c)) c = d;
  }
  return c;
}

/* The first-ranked candidate of a 1-D block (a multiple of 32 threads);
 * every thread gets it. red: [32] shared. */
static __device__ __forceinline__ cand block_best(cand c, cand *red) {
  c = warp_best(c);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = c;
  __syncthreads();
  cand none;
  none.v = 0.0f;
  none.i = -1;
  return warp_best(lane < (blockDim.x >> 5) ? red[lane] : none);
}

static unsigned threads_for(int64_t n_cols) {
  return n_cols >= 16384 ? 512 : n_cols >= 2048 ? 256 : n_cols >= 256 ? 64 : 32;
}

static __global__ void argmax_kernel(const float *x /* [n_rows][n_cols] */, int64_t n_rows,
                                     int64_t n_cols, int32_t *ids /* [n_rows] */) {
  BRISK_SHARED(cand, red, 32);
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float *xr = x + r * n_cols;
    cand best;
    best.v = 0.0f;
    best.i = -1;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      cand c;
      c.v = xr[i];
      c.i = (int32_t)i;
      if (before(c, best)) best = c;
    }
    best = block_best(best, red);
    if (threadIdx.x == 0) ids[r] = best.i;
  }
}

extern "C" int brisk_kargmax(const float *x, int64_t n_rows, int64_t n_cols, int32_t *ids,
                             brisk_kstream stream) {
  if (n_rows <= 0 || n_cols <= 0) return 0;
  const dim3 grid((unsigned)(n_rows < (int64_t)MAX_GRID ? n_rows : MAX_GRID));
  return BRISK_LAUNCH(argmax_kernel, grid, dim3(threads_for(n_cols)), 0, stream, x, n_rows, n_cols,
                      ids);
}

/* The k first-ranked elements of x[0..n) into sel[0..k), every thread
 * taking part; sel and red are shared. */
static __device__ void block_top_k(const float *x /* [n] */, int64_t n, int32_t k,
                                   cand *sel /* [k] shared */, cand *red /* [32] shared */) {
  float lv[BRISK_KTOP_K_MAX];
  int32_t li[BRISK_KTOP_K_MAX];
  int32_t len = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    cand c;
    c.v = x[i];
    c.i = (int32_t)i;
    if (len == k) {
      cand last;
      last.v = lv[k - 1];
      last.i = li[k - 1];
      if (!before(c, last)) continue;
      len--;
    }
    /* Insertion into the sorted list. */
    int32_t at = len;
    while (at > 0) {
      cand p;
      p.v = lv[at - 1];
      p.i = li[at - 1];
      if (!before(c, p)) break;
      lv[at] = lv[at - 1];
      li[at] = li[at - 1];
      at--;
    }
    lv[at] = c.v;
    li[at] = c.i;
    len++;
  }
  int32_t head = 0;
  for (int32_t round = 0; round < k; round++) {
    cand c;
    c.v = head < len ? lv[head] : 0.0f;
    c.i = head < len ? li[head] : -1;
    const cand best = block_best(c, red);
    if (c.i >= 0 && c.i == best.i) head++;
    if (threadIdx.x == 0) sel[round] = best;
  }
  __syncthreads();
}

static __global__ void top_k_kernel(const float *x /* [n_rows][n_cols] */, int64_t n_rows,
                                    int64_t n_cols, int32_t k, int32_t *ids /* [n_rows][k] */,
                                    float *vals /* [n_rows][k] or NULL */) {
  BRISK_SHARED(cand, red, 32);
  BRISK_SHARED(cand, sel, BRISK_KTOP_K_MAX);
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    block_top_k(x + r * n_cols, n_cols, k, sel, red);
    for (int32_t i = threadIdx.x; i < k; i += blockDim.x) {
      ids[r * k + i] = sel[i].i;
      if (vals) vals[r * k + i] = sel[i].v;
    }
    __syncthreads();
  }
}

extern "C" int brisk_ktop_k(const float *x, int64_t n_rows, int64_t n_cols, int32_t k, int32_t *ids,
                            float *vals, brisk_kstream stream) {
  if (k > BRISK_KTOP_K_MAX || k < 0) return 1;
  if (n_rows <= 0 || n_cols <= 0 || k == 0) return 0;
  const dim3 grid((unsigned)(n_rows < (int64_t)MAX_GRID ? n_rows : MAX_GRID));
  return BRISK_LAUNCH(top_k_kernel, grid, dim3(threads_for(n_cols)), 0, stream, x, n_rows, n_cols,
                      k, ids, vals);
}

static __global__ void moe_route_kernel(const float *logits /* [n_tokens][n_experts] */,
                                        int32_t n_tokens, int32_t n_experts, int32_t k,
                                        bool renormalize, int32_t *ids /* [n_tokens][k] */,
                                        float *weights /* [n_tokens][k] */) {
  BRISK_SHARED(cand, red, 32);
  BRISK_SHARED(cand, sel, BRISK_KTOP_K_MAX);
  for (int64_t t = blockIdx.x; t < n_tokens; t += gridDim.x) {
    const float *x = logits + t * n_experts;
    block_top_k(x, n_experts, k, sel, red);
    if (threadIdx.x == 0) {
      const double m = sel[0].v;
      double total = 0, chosen = 0;
      for (int32_t e = 0; e < n_experts; e++) total += exp((double)x[e] - m);
      for (int32_t i = 0; i < k; i++) chosen += exp((double)sel[i].v - m);
      const double denom = renormalize ? chosen : total;
      for (int32_t i = 0; i < k; i++) {
        ids[t * k + i] = sel[i].i;
        weights[t * k + i] = (float)(exp((double)sel[i].v - m) / denom);
      }
    }
    __syncthreads();
  }
}

extern "C" int brisk_kmoe_route(const float *logits, int32_t n_tokens, int32_t n_experts, int32_t k,
                                bool renormalize, int32_t *ids, float *weights,
                                brisk_kstream stream) {
  if (k > BRISK_KTOP_K_MAX || k < 0) return 1;
  if (n_tokens <= 0 || n_experts <= 0 || k == 0) return 0;
  const dim3 grid((unsigned)(n_tokens < (int32_t)MAX_GRID ? n_tokens : (int32_t)MAX_GRID));
  return BRISK_LAUNCH(moe_route_kernel, grid, dim3(32), 0, stream, logits, n_tokens, n_experts, k,
                      renormalize, ids, weights);
}

/* Group-limited routing (moe_route_group): one thread per token, scans in
 * id order with the order of the header, float64 softmax as moe_route. */
static __device__ __forceinline__ bool ranks_first(float a, int32_t ia, float b, int32_t ib) {
  if (isnan(a) != isnan(b)) return !isnan(a);
  if (!isnan(a) && a != b) return a > b;
  return ia < ib;
}

static __global__ void moe_route_group_kernel(const float *logits, int32_t n_tokens,
                                              int32_t n_experts, int32_t k, int32_t n_group,
                                              int32_t topk_group, bool renormalize, int32_t *ids,
                                              float *weights) {
  const int32_t per = n_experts / n_group;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n_tokens;
       t += (int64_t)gridDim.x * blockDim.x) {
    const float *x = logits + t * n_experts;
    uint32_t kept[BRISK_KMOE_MAX_EXPERTS / 32] = {0}, used[BRISK_KMOE_MAX_EXPERTS / 32] = {0};
    for (int32_t i = 0; i < topk_group; i++) {
      int32_t best = -1;
      float bv = 0;
      for (int32_t g = 0; g < n_group; g++) {
        if (kept[g / 32] >> (g % 32) & 1u) continue;
        int32_t am = g * per;
        for (int32_t e = g * per + 1; e < (g + 1) * per; e++)
          if (ranks_first(x[e], e, x[am], am)) am = e;
        if (best < 0 || ranks_first(x[am], g, bv, best)) best = g, bv = x[am];
      }
      kept[best / 32] |= 1u << (best % 32);
    }
    int32_t top = 0;
    for (int32_t e = 1; e < n_experts; e++)
      if (ranks_first(x[e], e, x[top], top)) top = e;
    const double m = x[top];
    double total = 0, chosen = 0;
    for (int32_t e = 0; e < n_experts; e++) total += exp((double)x[e] - m);
    for (int32_t i = 0; i < k; i++) {
      int32_t best = -1;
      for (int32_t e = 0; e < n_experts; e++) {
        const int32_t g = e / per;
        if (!(kept[g / 32] >> (g % 32) & 1u) || (used[e / 32] >> (e % 32) & 1u)) continue;
        if (best < 0 || ranks_first(x[e], e, x[best], best)) best = e;
      }
      used[best / 32] |= 1u << (best % 32);
      ids[t * k + i] = best;
      chosen += exp((double)x[best] - m);
    }
    const double denom = renormalize ? chosen : total;
    for (int32_t i = 0; i < k; i++)
      weights[t * k + i] = (float)(exp((double)x[ids[t * k + i]] - m) / denom);
  }
}

extern "C" int brisk_kmoe_route_group(const float *logits, int32_t n_tokens, int32_t n_experts,
                                      int32_t k, int32_t n_group, int32_t topk_group,
                                      bool renormalize, int32_t *ids, float *weights,
                                      brisk_kstream stream) {
  if (n_experts > BRISK_KMOE_MAX_EXPERTS || n_group < 1 || n_experts % n_group) return 1;
  if (n_tokens <= 0 || n_experts <= 0 || k <= 0) return 0;
  const int64_t bx = ((int64_t)n_tokens + 63) / 64;
  const dim3 grid((unsigned)(bx < (int64_t)MAX_GRID ? bx : MAX_GRID));
  return BRISK_LAUNCH(moe_route_group_kernel, grid, dim3(64), 0, stream, logits, n_tokens,
                      n_experts, k, n_group, topk_group, renormalize, ids, weights);
}
