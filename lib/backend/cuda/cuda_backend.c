/* The CUDA backend's table (cuda_backend.h): buffers, transfers, weights,
 * and each operation as check (backend/check.c, the same as every backend),
 * mirror its host metadata, launch. */
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_priv.h"

#include "attention.h"
#include "backend/check.h"
#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "embed.h"
#include "eltwise.h"
#include "kerror.h"
#include "kv.h"
#include "layernorm.h"
#include "matmul.h"
#include "regroup.h"
#include "rmsnorm.h"
#include "rope.h"
#include "select.h"
#include "softmax.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Every entry makes the backend's device current: the runtime's current
 * device is per thread, and a backend made on one thread may be driven by
 * another (a tensor-parallel rank's thread), with other devices' backends
 * used in between. Selecting the current device again costs little. */
static cuda_backend *cb_of(brisk_backend *be) {
  cuda_backend *cb = (cuda_backend *)be;
  (void)cb->rt->set_device(cb->device);
  return cb;
}

brisk_status brisk_cuda_status(cuda_backend *cb, int e, const char *what) {
  if (e == 0) return BRISK_OK;
  if (cb->rt->is_oom(e))
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "%s: %s: out of device memory (%s)", cb->name, what,
                       cb->rt->error_string(e));
  return brisk_error(BRISK_E_INTERNAL, "%s: %s failed: %s (error %d)", cb->name, what,
                     e > 0 ? cb->rt->error_string(e) : "no kernel for these arguments", e);
}

static brisk_status scratch_reserve(cuda_backend *cb, scratch *s, size_t bytes) {
  if (bytes <= s->cap) return BRISK_OK;
  size_t want = bytes + bytes / 2 + 4096;
  brisk_status st;
  if (brisk_cuda_graph_capturing(cb)) {
    /* Nodes captured earlier in the step point into the old buffer: it
     * lives until the step has run. */
    void *p = NULL;
    if ((st = rt_status(cb, cb->rt->malloc(&p, want), "scratch allocation"))) return st;
    if (s->p && (st = brisk_cuda_graph_defer_free(cb, s->p))) {
      (void)cb->rt->free(p);
      return st;
    }
    s->p = p;
    s->cap = want;
    return BRISK_OK;
  }
  /* Work queued earlier may still read the old buffer. */
  if ((st = rt_status(cb, cb->rt->stream_sync(cb->stream), "stream synchronize"))) return st;
  void *p = NULL;
  if ((st = rt_status(cb, cb->rt->malloc(&p, want), "scratch allocation"))) return st;
  if (s->p) (void)cb->rt->free(s->p);
  s->p = p;
  s->cap = want;
  return BRISK_OK;
}

brisk_status brisk_cuda_scratch(cuda_backend *cb, scratch *s, size_t bytes, void **out) {
  brisk_status st = scratch_reserve(cb, s, bytes);
  if (!st) *out = s->p;
  return st;
}

/* Into the metadata scratch. */
brisk_status brisk_cuda_mirror(cuda_backend *cb, int n, const void *const *src, const size_t *bytes,
                               void **dev) {
  size_t off[8], total = 0;
  for (int i = 0; i < n; i++) {
    off[i] = total;
    total += (bytes[i] + 15) & ~(size_t)15;
  }
  void *base = NULL;
  brisk_status st = brisk_cuda_scratch(cb, &cb->meta, total ? total : 16, &base);
  for (int i = 0; i < n && !st; i++) {
    dev[i] = (char *)base + off[i];
    st = brisk_cuda_h2d(cb, dev[i], src[i], bytes[i], "metadata copy");
  }
  return st;
}

/* The kernels name their own errors (kernels/kerror.h: CUDA's message, or
 * the emulation's reason). */
brisk_status brisk_cuda_launched(cuda_backend *cb, int e, const char *kernel) {
  if (e == 0) return BRISK_OK;
  if (cb->rt->is_oom(e)) return rt_status(cb, e, kernel);
  return brisk_error(BRISK_E_INTERNAL, "%s: %s failed: %s (error %d)", cb->name, kernel,
                     brisk_kerror_string(e), e);
}

/* ---- memory ---------------------------------------------------------------- */

static void cuda_destroy(brisk_backend *be) {
  cuda_backend *cb = cb_of(be);
  brisk_cuda_graph_fini(cb);
  if (cb->stream) (void)cb->rt->stream_sync(cb->stream);
  brisk_cuda_gemm_fini(cb);
  scratch *ss[] = {&cb->meta, &cb->work, &cb->tmp, &cb->gemm_buf};
  for (size_t i = 0; i < sizeof ss / sizeof *ss; i++)
    if (ss[i]->p) (void)cb->rt->free(ss[i]->p);
  if (cb->stream) (void)cb->rt->stream_destroy(cb->stream);
  brisk_free(cb);
}

static brisk_status cuda_buffer_alloc(brisk_backend *be, size_t bytes, void **out) {
  cuda_backend *cb = cb_of(be);
  if (!out || bytes == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "buffer_alloc: out is NULL or size is 0");
  void *p = NULL;
  brisk_status st = rt_status(cb, cb->rt->malloc(&p, bytes), "buffer allocation");
  if (!st) *out = p;
  return st;
}

static void cuda_buffer_free(brisk_backend *be, void *buf) {
  cuda_backend *cb = cb_of(be);
  if (!buf) return;
  if (brisk_cuda_graph_capturing(cb) && brisk_cuda_graph_defer_free(cb, buf) == BRISK_OK) return;
  /* Kernels queued earlier may still use it. */
  (void)cb->rt->stream_sync(cb->stream);
  (void)cb->rt->free(buf);
}

static brisk_status copy(brisk_backend *be, void *dst, const void *src, size_t bytes,
                         brisk_cuda_copy kind, const char *what) {
  cuda_backend *cb = cb_of(be);
  if (bytes == 0) return BRISK_OK;
  if (!dst || !src) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: NULL pointer", what);
  if (kind == BRISK_CUDA_D2H && brisk_cuda_graph_capturing(cb))
    return brisk_error(BRISK_E_INTERNAL,
                       "%s: %s inside a graph step (nothing is read back before step_end)",
                       cb->name, what);
  if (kind == BRISK_CUDA_H2D) return brisk_cuda_h2d(cb, dst, src, bytes, what);
  brisk_status st = rt_status(cb, cb->rt->memcpy_async(dst, src, bytes, kind, cb->stream), what);
  /* A download waits for its data; an upload from pageable memory has taken
   * its source when the runtime returns. */
  if (!st && kind == BRISK_CUDA_D2H) st = rt_status(cb, cb->rt->stream_sync(cb->stream), what);
  return st;
}

static brisk_status cuda_upload(brisk_backend *be, void *dst, const void *src, size_t bytes) {
  return copy(be, dst, src, bytes, BRISK_CUDA_H2D, "upload");
}

static brisk_status cuda_download(brisk_backend *be, void *dst, const void *src, size_t bytes) {
  return copy(be, dst, src, bytes, BRISK_CUDA_D2H, "download");
}

static brisk_status cuda_synchronize(brisk_backend *be) {
  cuda_backend *cb = cb_of(be);
  /* Inside a captured step nothing runs before step_end: nothing to wait for. */
  if (brisk_cuda_graph_capturing(cb)) return BRISK_OK;
  return rt_status(cb, cb->rt->stream_sync(cb->stream), "synchronize");
}

static size_t cuda_workspace_bytes(const brisk_backend *be) {
  const cuda_backend *cb = (const cuda_backend *)be;
  return cb->meta.cap + cb->work.cap + cb->tmp.cap + cb->gemm_buf.cap;
}

/* ---- weights ---------------------------------------------------------------- */

static brisk_status cuda_weight_plan(brisk_backend *be, uint32_t type, int64_t rows, int64_t cols,
                                     bool matrix, brisk_weight_plan *plan) {
  cuda_backend *cb = cb_of(be);
  if (!plan || rows < 1 || cols < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "weight_plan: plan is NULL or shape %lld x %lld",
                       (long long)rows, (long long)cols);
  uint64_t row_bytes;
  if (!matrix) {
    if (type != BRISK_DTYPE_F32 || !brisk_dtype_row_bytes(type, (uint64_t)cols, &row_bytes))
      return brisk_error(BRISK_E_UNSUPPORTED, "%s: vectors must be f32, not %s", cb->name,
                         brisk_dtype_name(type));
    *plan = (brisk_weight_plan){BRISK_WEIGHT_COPY, type, (size_t)row_bytes * (size_t)rows};
    return BRISK_OK;
  }
  if (!brisk_kmatmul_supported(type))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s: no matmul kernels for %s weights (f32, f16, bf16, q8_0, q4_0, q4_1, "
                       "q5_0, q5_1, q4_k, q5_k and q6_k run on the GPU; keep such layers on the "
                       "CPU with n_gpu_layers)",
                       cb->name, brisk_dtype_name(type));
  size_t bytes = brisk_kregroup_bytes(type, rows, cols);
  if (bytes == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: a %s matrix of %lld x %lld cannot be laid out", cb->name,
                       brisk_dtype_name(type), (long long)rows, (long long)cols);
  *plan = (brisk_weight_plan){BRISK_WEIGHT_COPY, type | CUDA_REGROUPED, bytes};
  return BRISK_OK;
}

static brisk_status cuda_weight_prepare(brisk_backend *be, const brisk_weight_plan *plan,
                                        uint32_t type, int64_t rows, int64_t cols, void *src,
                                        void **out) {
  cuda_backend *cb = cb_of(be);
  if (!plan || !src || !out || plan->mode != BRISK_WEIGHT_COPY || plan->bytes == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "weight_prepare: not a plan of this backend");
  const bool regroup = (plan->type & CUDA_REGROUPED) != 0;
  /* Regrouping happens on the host, into a staging copy. */
  void *host = regroup ? brisk_malloc(plan->bytes) : src;
  if (!host) return brisk_error_oom();
  brisk_status st = BRISK_OK;
  if (regroup && brisk_kregroup(type, src, rows, cols, host) != 0)
    st = brisk_error(BRISK_E_INTERNAL, "%s: regrouping a %s matrix failed", cb->name,
                     brisk_dtype_name(type));
  void *dev = NULL;
  if (!st) st = cuda_buffer_alloc(be, plan->bytes, &dev);
  if (!st) st = cuda_upload(be, dev, host, plan->bytes);
  /* The staging copy is freed below: wait until the device has it. */
  if (!st) st = cuda_synchronize(be);
  if (regroup) brisk_free(host);
  if (st) {
    cuda_buffer_free(be, dev);
    return st;
  }
  *out = dev;
  return BRISK_OK;
}

/* ---- operations ------------------------------------------------------------- */

static brisk_status cuda_matmul(brisk_backend *be, uint32_t w_type, const void *w, int64_t n,
                                int64_t k, const float *x, int64_t m, float *y) {
  cuda_backend *cb = cb_of(be);
  const uint32_t base = w_type & ~CUDA_REGROUPED;
  if (!(w_type & CUDA_REGROUPED) || !brisk_kmatmul_supported(base))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s: matmul weights must be prepared for this backend (type %s)", cb->name,
                       brisk_dtype_name(w_type));
  uint64_t row_bytes;
  if (n < 1 || k < 1 || m < 0 || !brisk_dtype_row_bytes(base, (uint64_t)k, &row_bytes))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "matmul: [%lld][%lld] . [%lld][%lld]^T of %s (needs n, k >= 1, m >= 0, k a "
                       "multiple of the block size)",
                       (long long)m, (long long)k, (long long)n, (long long)k,
                       brisk_dtype_name(base));
  brisk_status st;
  if ((st = brisk_check_matrix("matmul", m, k)) || (st = brisk_check_matrix("matmul", m, n)))
    return st;
  if (m == 0) return BRISK_OK;
  if (!w || !x || !y) return brisk_error(BRISK_E_INVALID_ARGUMENT, "matmul: w, x or y is NULL");
  /* Large calls (prefill chunks, big batches) on tensor cores; below the
   * threshold every row through the GEMV kernel, whose result for a row
   * depends on its own inputs only (docs/cuda.md: what holds across the
   * two paths). */
  if (brisk_cuda_gemm_wanted(cb, base, m))
    return brisk_cuda_gemm_matmul(cb, base, w, n, k, x, m, y);
  return launched(cb, brisk_kmatmul_gemv(base, w, n, k, x, m, y, cb->stream), "matmul");
}

/* The table types of the gather kernel (kernels/embed.h): GGUF layouts. */
static bool embed_readable(uint32_t type) {
  switch (type) {
  case BRISK_DTYPE_F32:
  case BRISK_DTYPE_F16:
  case BRISK_DTYPE_BF16:
  case BRISK_DTYPE_Q8_0:
  case BRISK_DTYPE_Q4_0:
  case BRISK_DTYPE_Q4_1:
  case BRISK_DTYPE_Q5_0:
  case BRISK_DTYPE_Q5_1:
  case BRISK_DTYPE_Q4_K:
  case BRISK_DTYPE_Q5_K:
  case BRISK_DTYPE_Q6_K: return true;
  default: return false;
  }
}

static brisk_status cuda_embed(brisk_backend *be, uint32_t table_type, const void *table,
                               int64_t n_vocab, int64_t n_embd, const int32_t *tokens,
                               int32_t n_tokens, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_embed(embed_readable(table_type), table_type, table, n_vocab,
                                      n_embd, tokens, n_tokens, out, NULL);
  if (st || n_tokens == 0) return st;
  const void *src[] = {tokens};
  size_t bytes[] = {(size_t)n_tokens * sizeof *tokens};
  void *dev[1];
  if ((st = mirror(cb, 1, src, bytes, dev))) return st;
  return launched(
      cb, brisk_kembed(table_type, table, n_vocab, n_embd, dev[0], n_tokens, out, cb->stream),
      "embed");
}

/* The column indices are host memory (backend.h), mirrored per call as
 * the embed's token ids are: at most a linear's input width of int32s. */
static brisk_status cuda_gather_cols(brisk_backend *be, const float *x, int64_t n_rows,
                                     int64_t n_cols, const int32_t *cols, int64_t n_out,
                                     float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_gather_cols(x, n_rows, n_cols, cols, n_out, out);
  if (st || n_rows == 0) return st;
  const void *src[] = {cols};
  size_t bytes[] = {(size_t)n_out * sizeof *cols};
  void *dev[1];
  if ((st = mirror(cb, 1, src, bytes, dev))) return st;
  return launched(cb, brisk_kgather_cols(x, n_rows, n_cols, dev[0], n_out, out, cb->stream),
                  "gather_cols");
}

static brisk_status cuda_rmsnorm(brisk_backend *be, const float *x, const float *weight,
                                 int64_t n_rows, int64_t n_cols, float eps, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_rmsnorm(x, n_rows, n_cols, eps, out);
  if (st || n_rows == 0) return st;
  return launched(cb, brisk_krmsnorm(x, weight, n_rows, n_cols, eps, out, cb->stream), "rmsnorm");
}

static brisk_status cuda_layernorm(brisk_backend *be, const float *x, const float *weight,
                                   const float *bias, int64_t n_rows, int64_t n_cols, float eps,
                                   float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_layernorm(x, n_rows, n_cols, eps, out);
  if (st || n_rows == 0) return st;
  return launched(cb, brisk_klayernorm(x, weight, bias, n_rows, n_cols, eps, out, cb->stream),
                  "layernorm");
}

static brisk_status cuda_gelu(brisk_backend *be, const float *x, int64_t n, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_gelu(x, n, out);
  if (st || n == 0) return st;
  return launched(cb, brisk_kgelu(x, n, out, cb->stream), "gelu");
}

static brisk_status cuda_rope(brisk_backend *be, float *x, int32_t n_tokens, int64_t token_stride,
                              int32_t n_heads, int32_t head_dim, const int32_t *positions,
                              const brisk_rope_params *p) {
  cuda_backend *cb = cb_of(be);
  double inv_freq[BRISK_MAX_HEAD_DIM / 2], mscale;
  brisk_status st = brisk_check_rope(x, n_tokens, token_stride, n_heads, head_dim, positions, p,
                                     inv_freq, &mscale);
  if (st || n_tokens == 0) return st;
  /* The frequencies are computed once on the host in float64 (the rule
   * every backend shares) and go to the device as they are. */
  const void *src[] = {positions, inv_freq};
  size_t bytes[] = {(size_t)n_tokens * sizeof *positions,
                    (size_t)(p->n_rot / 2) * sizeof *inv_freq};
  void *dev[2];
  if ((st = mirror(cb, 2, src, bytes, dev))) return st;
  return launched(cb,
                  brisk_krope(x, n_tokens, token_stride, n_heads, head_dim, dev[0],
                              p->layout == BRISK_ROPE_NEOX ? BRISK_KROPE_NEOX : BRISK_KROPE_NORMAL,
                              p->n_rot, dev[1], mscale, cb->stream),
                  "rope");
}

static brisk_status cuda_glu(brisk_backend *be, brisk_glu_kind kind, const float *gate,
                             const float *up, int64_t n, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_glu(kind, gate, up, n, out);
  if (st || n == 0) return st;
  return launched(cb,
                  brisk_kglu(kind == BRISK_GLU_GEGLU ? BRISK_KGLU_GEGLU : BRISK_KGLU_SWIGLU, gate,
                             up, n, out, cb->stream),
                  "glu");
}

static brisk_status cuda_add(brisk_backend *be, const float *a, const float *b, int64_t n_rows,
                             int64_t n_cols, bool broadcast_b, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_add(a, b, n_rows, n_cols, out);
  if (st || n_rows == 0) return st;
  return launched(cb, brisk_kadd(a, b, n_rows, n_cols, broadcast_b, out, cb->stream), "add");
}

static brisk_status cuda_scale(brisk_backend *be, const float *x, int64_t n, float s, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_scale(x, n, out);
  if (st || n == 0) return st;
  return launched(cb, brisk_kscale(x, n, s, out, cb->stream), "scale");
}

static brisk_status cuda_softcap(brisk_backend *be, const float *x, int64_t n, float cap,
                                 float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_softcap(x, n, cap, out);
  if (st || n == 0) return st;
  return launched(cb, brisk_ksoftcap(x, n, cap, out, cb->stream), "softcap");
}

static brisk_status cuda_sigmoid_gate(brisk_backend *be, const float *x, const float *g,
                                      int64_t n_rows, int64_t n_cols, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_sigmoid_gate(x, g, n_rows, n_cols, out);
  if (st || n_rows == 0) return st;
  return launched(cb, brisk_ksigmoid_gate(x, g, n_rows, n_cols, out, cb->stream), "sigmoid_gate");
}

static brisk_status cuda_softmax(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                                 float scale, float *out) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_softmax(x, n_rows, n_cols, scale, out);
  if (st || n_rows == 0) return st;
  return launched(cb, brisk_ksoftmax(x, n_rows, n_cols, scale, out, cb->stream), "softmax");
}

static brisk_status cuda_kv_write(brisk_backend *be, const brisk_kv_layout *kv, void *k_cache,
                                  void *v_cache, const float *k, const float *v,
                                  const int64_t *slots, int32_t n_tokens) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_kv_write(kv, k_cache, v_cache, k, v, slots, n_tokens);
  if (st || n_tokens == 0) return st;
  /* Distinct slots are the caller's promise (backend.h); the CPU does not
   * check it either. */
  const void *src[] = {slots};
  size_t bytes[] = {(size_t)n_tokens * sizeof *slots};
  void *dev[1];
  if ((st = mirror(cb, 1, src, bytes, dev))) return st;
  return launched(cb,
                  brisk_kkv_write(kv->dtype, kv->n_kv_heads, kv->block_size, kv->head_dim, k_cache,
                                  v_cache, k, v, dev[0], n_tokens, cb->stream),
                  "kv_write");
}

static brisk_status cuda_kv_copy_blocks(brisk_backend *be, const brisk_kv_layout *kv, void *cache,
                                        const int32_t *pairs, int32_t n_pairs) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_kv_copy_blocks(kv, cache, pairs, n_pairs, NULL);
  if (st || n_pairs == 0) return st;
  const void *src[] = {pairs};
  size_t bytes[] = {(size_t)n_pairs * 2 * sizeof *pairs};
  void *dev[1];
  if ((st = mirror(cb, 1, src, bytes, dev))) return st;
  return launched(cb,
                  brisk_kkv_copy_blocks(kv->dtype, kv->n_kv_heads, kv->block_size, kv->head_dim,
                                        cache, dev[0], n_pairs, cb->stream),
                  "kv_copy_blocks");
}

/* Decode (split-KV) when every query is the last of its sequence in this
 * call and there are few of them; flash-style prefill otherwise. Both give
 * each query a result that depends on its own keys only. */
static bool is_decode(const brisk_attn_batch *b, int32_t *max_ctx) {
  int32_t mx = 0;
  for (int32_t t = 0; t < b->n_tokens; t++) {
    if (b->positions[t] + 1 > mx) mx = b->positions[t] + 1;
    for (int32_t u = t + 1; u < b->n_tokens; u++)
      if (b->seq_of_token[u] == b->seq_of_token[t]) return false;
  }
  *max_ctx = mx;
  return true;
}

static brisk_status cuda_attention(brisk_backend *be, const brisk_kv_layout *kv,
                                   const void *k_cache, const void *v_cache, const float *q,
                                   const brisk_attn_batch *b, const brisk_attn_params *params,
                                   float *out) {
  cuda_backend *cb = cb_of(be);
  double n_keys = 0;
  brisk_status st = brisk_check_attention(kv, k_cache, v_cache, q, b, params, out, &n_keys);
  if (st || b->n_tokens == 0) return st;
  brisk_kattn_desc d = {
      .kv_dtype = kv->dtype,
      .n_kv_heads = kv->n_kv_heads,
      .block_size = kv->block_size,
      .head_dim = kv->head_dim,
      .n_heads = params->n_heads,
      .scale = params->scale != 0 ? params->scale : (float)(1.0 / sqrt((double)kv->head_dim)),
      .sliding_window = params->sliding_window,
      .n_tokens = b->n_tokens,
      .max_blocks = b->max_blocks,
      .softcap = params->softcap,
  };
  const void *src[] = {b->positions, b->seq_of_token, b->block_tables};
  size_t bytes[] = {(size_t)b->n_tokens * sizeof(int32_t), (size_t)b->n_tokens * sizeof(int32_t),
                    (size_t)b->n_seqs * (size_t)b->max_blocks * sizeof(int32_t)};
  void *dev[3];
  if ((st = mirror(cb, 3, src, bytes, dev))) return st;
  int32_t max_ctx = 0;
  if (!is_decode(b, &max_ctx))
    return launched(
        cb, brisk_kattn_prefill(&d, k_cache, v_cache, q, dev[0], dev[1], dev[2], out, cb->stream),
        "attention (prefill)");
  size_t ws =
      brisk_kattn_decode_workspace_bytes(b->n_tokens, params->n_heads, kv->head_dim, max_ctx);
  if (ws == 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "attention: a decode of %d queries is too large",
                       (int)b->n_tokens);
  void *work = NULL;
  if ((st = brisk_cuda_scratch(cb, &cb->work, ws, &work))) return st;
  return launched(cb,
                  brisk_kattn_decode(&d, k_cache, v_cache, q, dev[0], dev[1], dev[2], max_ctx, work,
                                     out, cb->stream),
                  "attention (decode)");
}

static brisk_status cuda_moe_route(brisk_backend *be, const float *logits, int32_t n_tokens,
                                   int32_t n_experts, int32_t k, bool renormalize, int32_t *ids,
                                   float *weights) {
  cuda_backend *cb = cb_of(be);
  brisk_status st =
      brisk_check_select("moe_route", logits, n_tokens, n_experts, k, ids, true, weights);
  if (st || n_tokens == 0) return st;
  /* Routed on the device, the few (id, weight) pairs copied back: the
   * forward pass groups rows by expert on the host. */
  size_t n = (size_t)n_tokens * (size_t)k;
  void *tmp = NULL;
  if ((st = brisk_cuda_scratch(cb, &cb->tmp, n * (sizeof *ids + sizeof *weights), &tmp))) return st;
  int32_t *d_ids = tmp;
  float *d_w = (float *)(void *)(d_ids + n);
  if ((st = launched(
           cb,
           brisk_kmoe_route(logits, n_tokens, n_experts, k, renormalize, d_ids, d_w, cb->stream),
           "moe_route")) ||
      (st = copy(be, ids, d_ids, n * sizeof *ids, BRISK_CUDA_D2H, "moe_route ids")))
    return st;
  return copy(be, weights, d_w, n * sizeof *weights, BRISK_CUDA_D2H, "moe_route weights");
}

static brisk_status cuda_moe_route_group(brisk_backend *be, const float *logits, int32_t n_tokens,
                                         int32_t n_experts, int32_t k, int32_t n_group,
                                         int32_t topk_group, bool renormalize, int32_t *ids,
                                         float *weights) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_moe_route_group(logits, n_tokens, n_experts, k, n_group, topk_group,
                                                ids, weights);
  if (st || n_tokens == 0) return st;
  size_t n = (size_t)n_tokens * (size_t)k;
  void *tmp = NULL;
  if ((st = brisk_cuda_scratch(cb, &cb->tmp, n * (sizeof *ids + sizeof *weights), &tmp))) return st;
  int32_t *d_ids = tmp;
  float *d_w = (float *)(void *)(d_ids + n);
  if ((st = launched(cb,
                     brisk_kmoe_route_group(logits, n_tokens, n_experts, k, n_group, topk_group,
                                            renormalize, d_ids, d_w, cb->stream),
                     "moe_route_group")) ||
      (st = copy(be, ids, d_ids, n * sizeof *ids, BRISK_CUDA_D2H, "moe_route_group ids")))
    return st;
  return copy(be, weights, d_w, n * sizeof *weights, BRISK_CUDA_D2H, "moe_route_group weights");
}

static brisk_status cuda_argmax(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                                int32_t *ids) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_select("argmax", x, n_rows, n_cols, 1, ids, false, NULL);
  if (st || n_rows == 0) return st;
  return launched(cb, brisk_kargmax(x, n_rows, n_cols, ids, cb->stream), "argmax");
}

static brisk_status cuda_top_k(brisk_backend *be, const float *x, int64_t n_rows, int64_t n_cols,
                               int32_t k, int32_t *ids, float *vals) {
  cuda_backend *cb = cb_of(be);
  brisk_status st = brisk_check_select("top_k", x, n_rows, n_cols, k, ids, false, NULL);
  if (st || n_rows == 0) return st;
  if (k > BRISK_KTOP_K_MAX)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s: top_k of %d (the device selects up to %d)",
                       cb->name, (int)k, BRISK_KTOP_K_MAX);
  return launched(cb, brisk_ktop_k(x, n_rows, n_cols, k, ids, vals, cb->stream), "top_k");
}

brisk_status brisk_backend_cuda_create(const brisk_cuda_rt *rt, int device, const char *name,
                                       brisk_backend **out) {
  if (!rt || !out || device < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "cuda backend: rt and out must be set");
  cuda_backend *cb = brisk_calloc(1, sizeof *cb);
  if (!cb) return brisk_error_oom();
  cb->rt = rt;
  cb->device = device;
  snprintf(cb->name, sizeof cb->name, "%s", name ? name : "cuda");
  brisk_status st;
  if ((st = rt_status(cb, rt->set_device(device), "select device")) ||
      (st = rt_status(cb, rt->stream_create(&cb->stream), "stream creation"))) {
    brisk_free(cb);
    return st;
  }
  brisk_cuda_gemm_init(cb);
  cb->base = (brisk_backend){
      .name = cb->name,
      .ctx = cb,
      .host_memory = false,
      .destroy = cuda_destroy,
      .buffer_alloc = cuda_buffer_alloc,
      .buffer_free = cuda_buffer_free,
      .upload = cuda_upload,
      .download = cuda_download,
      .synchronize = cuda_synchronize,
      .workspace_bytes = cuda_workspace_bytes,
      .weight_plan = cuda_weight_plan,
      .weight_prepare = cuda_weight_prepare,
      .matmul = cuda_matmul,
      .embed = cuda_embed,
      .gather_cols = cuda_gather_cols,
      .rmsnorm = cuda_rmsnorm,
      .rope = cuda_rope,
      .glu = cuda_glu,
      .add = cuda_add,
      .scale = cuda_scale,
      .softmax = cuda_softmax,
      .softcap = cuda_softcap,
      .sigmoid_gate = cuda_sigmoid_gate,
      .layernorm = cuda_layernorm,
      .gelu = cuda_gelu,
      .kv_write = cuda_kv_write,
      .kv_copy_blocks = cuda_kv_copy_blocks,
      .attention = cuda_attention,
      .moe_route = cuda_moe_route,
      .moe_route_group = cuda_moe_route_group,
      .mla_kv_write = brisk_cuda_mla_kv_write,
      .mla_attention = brisk_cuda_mla_attention,
      .argmax = cuda_argmax,
      .top_k = cuda_top_k,
  };
  brisk_cuda_graph_init(cb);
  *out = &cb->base;
  return BRISK_OK;
}
