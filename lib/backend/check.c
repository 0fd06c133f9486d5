/* The backend operations' argument checks (check.h). */
#include "backend/check.h"

#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "quant/kv_quant.h"

#include <math.h>

brisk_status brisk_check_matrix(const char *what, int64_t n_rows, int64_t n_cols) {
  size_t bytes;
  if (n_rows < 0 || n_cols < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: shape [%lld][%lld] needs rows >= 0, cols >= 1", what, (long long)n_rows,
                       (long long)n_cols);
  if ((uint64_t)n_rows > SIZE_MAX || (uint64_t)n_cols > SIZE_MAX ||
      brisk_mul_overflow_size((size_t)n_rows, (size_t)n_cols, &bytes) ||
      brisk_mul_overflow_size(bytes, sizeof(float), &bytes) || bytes > PTRDIFF_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: shape [%lld][%lld] is too large", what,
                       (long long)n_rows, (long long)n_cols);
  return BRISK_OK;
}

brisk_status brisk_check_kv(const char *what, const brisk_kv_layout *kv, size_t *cache_bytes) {
  if (!kv) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: kv layout is NULL", what);
  if (kv->dtype != BRISK_DTYPE_F16 && kv->dtype != BRISK_DTYPE_F32 &&
      !brisk_kvq_is_quantized(kv->dtype))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "%s: kv cache dtype %s (%u) is not f16, f32, q8_0 or fp8_e4m3", what,
                       brisk_dtype_name(kv->dtype), (unsigned)kv->dtype);
  if (kv->n_blocks < 1 || kv->n_kv_heads < 1 || kv->block_size < 1 || kv->head_dim < 1 ||
      kv->head_dim > BRISK_MAX_HEAD_DIM)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: kv layout [%d blocks][%d kv heads][%d block size][%d head dim] needs "
                       "all >= 1 and head dim <= %d",
                       what, (int)kv->n_blocks, (int)kv->n_kv_heads, (int)kv->block_size,
                       (int)kv->head_dim, BRISK_MAX_HEAD_DIM);
  size_t b = brisk_kvq_row_bytes(kv->dtype, kv->head_dim); /* head_dim <= BRISK_MAX_HEAD_DIM */
  if (brisk_mul_overflow_size(b, (size_t)kv->n_blocks, &b) ||
      brisk_mul_overflow_size(b, (size_t)kv->n_kv_heads, &b) ||
      brisk_mul_overflow_size(b, (size_t)kv->block_size, &b) || b > PTRDIFF_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: kv cache of %d blocks is too large", what,
                       (int)kv->n_blocks);
  if (cache_bytes) *cache_bytes = b;
  return BRISK_OK;
}

brisk_status brisk_check_embed(bool type_readable, uint32_t table_type, const void *table,
                               int64_t n_vocab, int64_t n_embd, const int32_t *tokens,
                               int32_t n_tokens, const float *out, uint64_t *row_bytes) {
  if (!type_readable)
    return brisk_error(BRISK_E_UNSUPPORTED, "embed: table type %s (%u) cannot be read",
                       brisk_dtype_name(table_type), (unsigned)table_type);
  uint64_t rb, table_bytes;
  if (n_vocab < 1 || n_embd < 1 || n_tokens < 0 ||
      !brisk_dtype_row_bytes(table_type, (uint64_t)n_embd, &rb) ||
      brisk_mul_overflow_u64(rb, (uint64_t)n_vocab, &table_bytes) || table_bytes > PTRDIFF_MAX) {
    const brisk_dtype_info *base = brisk_dtype_get(brisk_dtype_base(table_type));
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "embed: table [%lld][%lld] of %s with %d tokens (needs vocab, embd >= 1, "
                       "embd a multiple of the block size %u)",
                       (long long)n_vocab, (long long)n_embd, brisk_dtype_name(table_type),
                       (int)n_tokens, base ? base->block_size : 0);
  }
  if (row_bytes) *row_bytes = rb;
  if (n_tokens == 0) return BRISK_OK;
  brisk_status st = brisk_check_matrix("embed", n_tokens, n_embd);
  if (st != BRISK_OK) return st;
  if (!table || !tokens || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: table, tokens or out is NULL");
  for (int32_t t = 0; t < n_tokens; t++)
    if (tokens[t] < 0 || tokens[t] >= n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: token %d at %d is outside [0, %lld)",
                         (int)tokens[t], (int)t, (long long)n_vocab);
  return BRISK_OK;
}

brisk_status brisk_check_gather_cols(const float *x, int64_t n_rows, int64_t n_cols,
                                     const int32_t *cols, int64_t n_out, const float *out) {
  brisk_status st;
  if ((st = brisk_check_matrix("gather_cols", n_rows, n_cols)) ||
      (st = brisk_check_matrix("gather_cols", n_rows, n_out)))
    return st;
  if (!cols) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gather_cols: cols is NULL");
  for (int64_t j = 0; j < n_out; j++)
    if (cols[j] < 0 || cols[j] >= n_cols)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "gather_cols: cols[%lld] = %d is outside [0, %lld)", (long long)j,
                         (int)cols[j], (long long)n_cols);
  if (n_rows == 0) return BRISK_OK;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gather_cols: x or out is NULL");
  /* Sizes fit in ptrdiff_t (checked above); compared as addresses. */
  uintptr_t x0 = (uintptr_t)x, x1 = x0 + (uintptr_t)n_rows * (uintptr_t)n_cols * sizeof(float);
  uintptr_t o0 = (uintptr_t)out, o1 = o0 + (uintptr_t)n_rows * (uintptr_t)n_out * sizeof(float);
  if (o0 < x1 && x0 < o1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "gather_cols: out overlaps x");
  return BRISK_OK;
}

brisk_status brisk_check_rmsnorm(const float *x, int64_t n_rows, int64_t n_cols, float eps,
                                 const float *out) {
  brisk_status st = brisk_check_matrix("rmsnorm", n_rows, n_cols);
  if (st != BRISK_OK) return st;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "rmsnorm: x or out is NULL");
  if (!isfinite(eps) || eps < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rmsnorm: eps %g must be finite and >= 0",
                       (double)eps);
  return BRISK_OK;
}

brisk_status brisk_check_rope(const float *x, int32_t n_tokens, int64_t token_stride,
                              int32_t n_heads, int32_t head_dim, const int32_t *positions,
                              const brisk_rope_params *p, double *inv_freq, double *mscale) {
  brisk_status st = brisk_rope_frequencies(p, head_dim, inv_freq, mscale);
  if (st != BRISK_OK) return st;
  if (n_tokens < 0 || n_heads < 1 || token_stride < (int64_t)n_heads * head_dim)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "rope: %d tokens, %d heads of %d, token stride %lld (needs tokens >= 0, "
                       "heads >= 1, stride >= heads * head_dim)",
                       (int)n_tokens, (int)n_heads, (int)head_dim, (long long)token_stride);
  if (n_tokens == 0) return BRISK_OK;
  st = brisk_check_matrix("rope", n_tokens, token_stride);
  if (st != BRISK_OK) return st;
  if (!x || !positions)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: x or positions is NULL");
  for (int32_t t = 0; t < n_tokens; t++)
    if (positions[t] < 0)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: token %d has negative position %d",
                         (int)t, (int)positions[t]);
  return BRISK_OK;
}

brisk_status brisk_check_glu(brisk_glu_kind kind, const float *gate, const float *up, int64_t n,
                             const float *out) {
  if (kind != BRISK_GLU_SWIGLU && kind != BRISK_GLU_GEGLU)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "glu: unknown kind %d", (int)kind);
  if (n == 0) return BRISK_OK;
  brisk_status st = brisk_check_matrix("glu", 1, n);
  if (st != BRISK_OK) return st;
  if (!gate || !up || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "glu: gate, up or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_add(const float *a, const float *b, int64_t n_rows, int64_t n_cols,
                             const float *out) {
  brisk_status st = brisk_check_matrix("add", n_rows, n_cols);
  if (st != BRISK_OK) return st;
  if (!a || !b || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "add: a, b or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_scale(const float *x, int64_t n, const float *out) {
  if (n == 0) return BRISK_OK;
  brisk_status st = brisk_check_matrix("scale", 1, n);
  if (st != BRISK_OK) return st;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "scale: x or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_softcap(const float *x, int64_t n, float cap, const float *out) {
  if (!(isfinite(cap) && cap > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "softcap: cap %g must be finite and > 0",
                       (double)cap);
  if (n == 0) return BRISK_OK;
  brisk_status st = brisk_check_matrix("softcap", 1, n);
  if (st != BRISK_OK) return st;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "softcap: x or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_sigmoid_gate(const float *x, const float *g, int64_t n_rows,
                                      int64_t n_cols, const float *out) {
  brisk_status st = brisk_check_matrix("sigmoid_gate", n_rows, n_cols);
  if (st != BRISK_OK || n_rows == 0) return st;
  if (!x || !g || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "sigmoid_gate: x, g or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_layernorm(const float *x, int64_t n_rows, int64_t n_cols, float eps,
                                   const float *out) {
  brisk_status st = brisk_check_matrix("layernorm", n_rows, n_cols);
  if (st != BRISK_OK) return st;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "layernorm: x or out is NULL");
  if (!isfinite(eps) || eps < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "layernorm: eps %g must be finite and >= 0",
                       (double)eps);
  return BRISK_OK;
}

brisk_status brisk_check_gelu(const float *x, int64_t n, const float *out) {
  if (n == 0) return BRISK_OK;
  brisk_status st = brisk_check_matrix("gelu", 1, n);
  if (st != BRISK_OK) return st;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "gelu: x or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_softmax(const float *x, int64_t n_rows, int64_t n_cols, float scale,
                                 const float *out) {
  brisk_status st = brisk_check_matrix("softmax", n_rows, n_cols);
  if (st != BRISK_OK) return st;
  if (!x || !out) return brisk_error(BRISK_E_INVALID_ARGUMENT, "softmax: x or out is NULL");
  if (!isfinite(scale))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "softmax: scale %g is not finite", (double)scale);
  return BRISK_OK;
}

brisk_status brisk_check_kv_write(const brisk_kv_layout *kv, const void *k_cache,
                                  const void *v_cache, const float *k, const float *v,
                                  const int64_t *slots, int32_t n_tokens) {
  brisk_status st = brisk_check_kv("kv_write", kv, NULL);
  if (st != BRISK_OK) return st;
  if (n_tokens < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "kv_write: n_tokens %d is negative",
                       (int)n_tokens);
  if (n_tokens == 0) return BRISK_OK;
  if (!k_cache || !v_cache || !k || !v || !slots)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "kv_write: a cache, k, v or slots is NULL");
  st = brisk_check_matrix("kv_write", n_tokens, (int64_t)kv->n_kv_heads * kv->head_dim);
  if (st != BRISK_OK) return st;
  const int64_t n_slots = (int64_t)kv->n_blocks * kv->block_size;
  for (int32_t t = 0; t < n_tokens; t++)
    if (slots[t] >= n_slots)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "kv_write: token %d's slot %lld is beyond the cache's %lld slots", (int)t,
                         (long long)slots[t], (long long)n_slots);
  return BRISK_OK;
}

brisk_status brisk_check_kv_copy_blocks(const brisk_kv_layout *kv, const void *cache,
                                        const int32_t *pairs, int32_t n_pairs,
                                        size_t *block_bytes) {
  size_t cache_bytes;
  brisk_status st = brisk_check_kv("kv_copy_blocks", kv, &cache_bytes);
  if (st != BRISK_OK) return st;
  if (n_pairs < 0 || (n_pairs > 0 && (!cache || !pairs)))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "kv_copy_blocks: %d pairs, cache or pairs NULL",
                       (int)n_pairs);
  for (int32_t i = 0; i < n_pairs; i++) {
    int32_t src = pairs[2 * i], dst = pairs[2 * i + 1];
    if (src < 0 || src >= kv->n_blocks || dst < 0 || dst >= kv->n_blocks || src == dst)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "kv_copy_blocks: pair %d copies block %d to %d (needs distinct blocks in "
                         "[0, %d))",
                         (int)i, (int)src, (int)dst, (int)kv->n_blocks);
  }
  if (block_bytes) *block_bytes = cache_bytes / (size_t)kv->n_blocks;
  return BRISK_OK;
}

/* Every query's position, sequence and the blocks it will read. */
static brisk_status check_attn_batch(const brisk_kv_layout *kv, const brisk_attn_batch *b,
                                     int32_t window, double *n_keys) {
  if (b->n_tokens < 0 || b->n_seqs < 1 || b->max_blocks < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: batch of %d tokens, %d sequences, %d blocks per table (needs "
                       "tokens >= 0, sequences and blocks >= 1)",
                       (int)b->n_tokens, (int)b->n_seqs, (int)b->max_blocks);
  if (b->n_tokens > 0 && (!b->positions || !b->seq_of_token || !b->block_tables))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: positions, seq_of_token or block_tables is NULL");
  *n_keys = 0;
  for (int32_t t = 0; t < b->n_tokens; t++) {
    int32_t p = b->positions[t], s = b->seq_of_token[t];
    if (s < 0 || s >= b->n_seqs)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "attention: token %d's sequence %d is outside [0, %d)", (int)t, (int)s,
                         (int)b->n_seqs);
    if (p < 0 || p / kv->block_size >= b->max_blocks)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "attention: token %d's position %d needs block %d of a %d-block table",
                         (int)t, (int)p, p < 0 ? -1 : (int)(p / kv->block_size),
                         (int)b->max_blocks);
    const int32_t *table = b->block_tables + (int64_t)s * b->max_blocks;
    int32_t lo = brisk_attn_first_key(p, window);
    for (int32_t i = lo / kv->block_size; i <= p / kv->block_size; i++)
      if (table[i] < 0 || table[i] >= kv->n_blocks)
        return brisk_error(BRISK_E_INVALID_ARGUMENT,
                           "attention: sequence %d's block table entry %d is block %d, outside "
                           "[0, %d)",
                           (int)s, (int)i, (int)table[i], (int)kv->n_blocks);
    *n_keys += (double)(p - lo + 1);
  }
  return BRISK_OK;
}

brisk_status brisk_check_attention(const brisk_kv_layout *kv, const void *k_cache,
                                   const void *v_cache, const float *q,
                                   const brisk_attn_batch *batch, const brisk_attn_params *params,
                                   const float *out, double *n_keys) {
  brisk_status st = brisk_check_kv("attention", kv, NULL);
  if (st != BRISK_OK) return st;
  if (!batch || !params)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "attention: batch or params is NULL");
  if (params->n_heads < 1 || params->n_heads % kv->n_kv_heads)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: %d query heads is not a positive multiple of %d kv heads",
                       (int)params->n_heads, (int)kv->n_kv_heads);
  if (params->sliding_window < 0 || !isfinite(params->scale))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "attention: sliding window %d must be >= 0 and scale %g finite",
                       (int)params->sliding_window, (double)params->scale);
  if (!(isfinite(params->softcap) && params->softcap >= 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "attention: softcap %g must be finite and >= 0",
                       (double)params->softcap);
  if ((st = check_attn_batch(kv, batch, params->sliding_window, n_keys))) return st;
  if (batch->n_tokens == 0) return BRISK_OK;
  st = brisk_check_matrix("attention", batch->n_tokens, (int64_t)params->n_heads * kv->head_dim);
  if (st != BRISK_OK) return st;
  if (!k_cache || !v_cache || !q || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "attention: a cache, q or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_select(const char *what, const float *x, int64_t n_rows, int64_t n_cols,
                                int32_t k, const void *ids, bool need_vals, const float *vals) {
  brisk_status st = brisk_check_matrix(what, n_rows, n_cols);
  if (st != BRISK_OK) return st;
  if (n_cols > INT32_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: %lld columns do not fit int32 ids", what,
                       (long long)n_cols);
  if (k < 1 || k > n_cols)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: k %d is outside [1, %lld]", what, (int)k,
                       (long long)n_cols);
  if (!x || !ids || (need_vals && !vals))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: an input or output is NULL", what);
  return BRISK_OK;
}

brisk_status brisk_check_mla(const char *what, const brisk_kv_layout *kv,
                             const brisk_mla_params *p) {
  brisk_status st = brisk_check_kv(what, kv, NULL);
  if (st != BRISK_OK) return st;
  if (!p) return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: params is NULL", what);
  if (kv->dtype != BRISK_DTYPE_F16 && kv->dtype != BRISK_DTYPE_F32)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s: latent cache dtype %s (%u) is not f16 or f32",
                       what, brisk_dtype_name(kv->dtype), (unsigned)kv->dtype);
  if (p->n_heads < 1 || p->rank < 1 || p->nope_dim < 1 || p->rope_dim < 1 || p->v_dim < 1 ||
      p->rank > BRISK_MAX_HEAD_DIM || p->nope_dim > BRISK_MAX_HEAD_DIM ||
      p->rope_dim > BRISK_MAX_HEAD_DIM || p->v_dim > BRISK_MAX_HEAD_DIM ||
      !(isfinite(p->scale) && p->scale > 0))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: %d heads, rank %d, nope %d, rope %d, v %d dims (each 1..%d) and scale "
                       "%g (finite, > 0)",
                       what, (int)p->n_heads, (int)p->rank, (int)p->nope_dim, (int)p->rope_dim,
                       (int)p->v_dim, BRISK_MAX_HEAD_DIM, (double)p->scale);
  if (kv->n_kv_heads != 1 || 2 * (int64_t)kv->head_dim != (int64_t)p->rank + p->rope_dim)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: latent pools need 1 kv head of (rank + rope) / 2 = (%d + %d) / 2 "
                       "values, not %d of %d",
                       what, (int)p->rank, (int)p->rope_dim, (int)kv->n_kv_heads,
                       (int)kv->head_dim);
  return BRISK_OK;
}

brisk_status brisk_check_mla_kv_write(const brisk_kv_layout *kv, const void *k_cache,
                                      const void *v_cache, const float *latent, const float *k_rope,
                                      const int64_t *slots, int32_t n_tokens,
                                      const brisk_mla_params *params) {
  brisk_status st = brisk_check_mla("mla_kv_write", kv, params);
  if (st != BRISK_OK) return st;
  if (n_tokens < 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "mla_kv_write: n_tokens %d is negative",
                       (int)n_tokens);
  if (n_tokens == 0) return BRISK_OK;
  if (!k_cache || !v_cache || !latent || !k_rope || !slots)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "mla_kv_write: a cache, latent, k_rope or slots is NULL");
  if ((st = brisk_check_matrix("mla_kv_write", n_tokens, params->rank))) return st;
  const int64_t n_slots = (int64_t)kv->n_blocks * kv->block_size;
  for (int32_t t = 0; t < n_tokens; t++)
    if (slots[t] >= n_slots)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "mla_kv_write: token %d's slot %lld is beyond the cache's %lld slots",
                         (int)t, (long long)slots[t], (long long)n_slots);
  return BRISK_OK;
}

brisk_status brisk_check_mla_attention(const brisk_kv_layout *kv, const void *k_cache,
                                       const void *v_cache, const float *q, const float *kv_b,
                                       const brisk_attn_batch *batch,
                                       const brisk_mla_params *params, const float *out,
                                       double *n_keys) {
  brisk_status st = brisk_check_mla("mla_attention", kv, params);
  if (st != BRISK_OK) return st;
  if (!batch) return brisk_error(BRISK_E_INVALID_ARGUMENT, "mla_attention: batch is NULL");
  if ((st = check_attn_batch(kv, batch, 0, n_keys))) return st;
  if (batch->n_tokens == 0) return BRISK_OK;
  const brisk_mla_params *p = params;
  if ((st = brisk_check_matrix("mla_attention", batch->n_tokens,
                               (int64_t)p->n_heads * (p->nope_dim + p->rope_dim))) ||
      (st = brisk_check_matrix("mla_attention", (int64_t)p->n_heads * (p->nope_dim + p->v_dim),
                               p->rank)) ||
      (st = brisk_check_matrix("mla_attention", batch->n_tokens, (int64_t)p->n_heads * p->v_dim)))
    return st;
  if (!k_cache || !v_cache || !q || !kv_b || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "mla_attention: a cache, q, kv_b or out is NULL");
  return BRISK_OK;
}

brisk_status brisk_check_moe_route_group(const float *logits, int32_t n_tokens, int32_t n_experts,
                                         int32_t k, int32_t n_group, int32_t topk_group,
                                         const int32_t *ids, const float *weights) {
  brisk_status st =
      brisk_check_select("moe_route_group", logits, n_tokens, n_experts, k, ids, true, weights);
  if (st != BRISK_OK) return st;
  if (n_experts > BRISK_MAX_EXPERTS)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "moe_route_group: %d experts; at most %d",
                       (int)n_experts, BRISK_MAX_EXPERTS);
  if (n_group < 1 || n_experts % n_group || topk_group < 1 || topk_group > n_group ||
      (int64_t)k > (int64_t)topk_group * (n_experts / n_group))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "moe_route_group: %d experts in %d groups, %d groups kept, k %d (groups "
                       "must divide the experts, 1 <= kept <= groups, k <= the kept experts)",
                       (int)n_experts, (int)n_group, (int)topk_group, (int)k);
  return BRISK_OK;
}
