/* Packed embedding passes (embedder.h) and the pooling and defaults that
 * brisk_embed shares with them, so the two cannot drift apart. */
#include "context/embedder.h"

#include "backend/device.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "forward/encode.h"
#include "forward/forward.h"
#include "model/model.h"

#include <math.h>
#include <string.h>

/* Tokens per block of a decoder's scratch KV cache: brisk_embed's, since
 * the block size orders attention's sums. */
#define EMBED_KV_BLOCK 16

static bool mul3_overflow(size_t a, size_t b, size_t c, size_t *out) {
  size_t ab;
  return brisk_mul_overflow_size(a, b, &ab) || brisk_mul_overflow_size(ab, c, out);
}

brisk_status brisk_embed_choose(const brisk_model *m, int32_t pooling, int32_t normalize,
                                int32_t max_tokens, brisk_embed_choice *out) {
  const brisk_arch_info *ai = brisk_arch_get(m->hp.arch);
  bool encoder = ai && ai->encoder;
  if (pooling < BRISK_EMBED_POOLING_DEFAULT || pooling > BRISK_EMBED_POOLING_LAST)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: pooling %d is not a brisk_embed_pooling",
                       pooling);
  if (normalize < -1 || normalize > 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: normalize %d is not -1, 0 or 1",
                       normalize);
  if (max_tokens < 0 || max_tokens == 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: max_tokens %d must be 0 or >= 2",
                       max_tokens);
  if (pooling == BRISK_EMBED_POOLING_DEFAULT) {
    if (m->embed_pooling_unsupported)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "embed: the model's pooling (1_Pooling/config.json or GGUF "
                         "pooling_type) is one brisk does not compute (max, mean_sqrt_len, "
                         "weighted mean or rank); give one");
    pooling = m->embed_pooling ? m->embed_pooling
              : encoder        ? BRISK_EMBED_POOLING_MEAN
                               : BRISK_EMBED_POOLING_LAST;
  }
  uint32_t mt = max_tokens            ? (uint32_t)max_tokens
                : m->embed_max_tokens ? m->embed_max_tokens
                                      : m->hp.n_ctx_train;
  if (encoder && mt > m->pos_embd.rows) mt = (uint32_t)m->pos_embd.rows;
  if (mt > (1u << 20)) mt = 1u << 20;
  out->pooling = pooling;
  out->normalize = normalize < 0 ? m->embed_normalize : normalize == 1;
  out->max_tokens = mt;
  return BRISK_OK;
}

void brisk_embed_pool(int32_t pooling, bool normalize, const float *rows, size_t n, size_t d,
                      float *out) {
  double norm = 0;
  for (size_t i = 0; i < d; i++) {
    double v = 0;
    if (pooling == BRISK_EMBED_POOLING_MEAN) {
      for (size_t t = 0; t < n; t++) v += rows[t * d + i];
      v /= (double)n;
    } else {
      v = rows[(pooling == BRISK_EMBED_POOLING_LAST ? n - 1 : 0) * d + i];
    }
    out[i] = (float)v;
    norm += v * v;
  }
  if (!normalize) return;
  /* torch.nn.functional.normalize: v / max(||v||, 1e-12). */
  double s = 1.0 / fmax(sqrt(norm), 1e-12);
  for (size_t i = 0; i < d; i++) out[i] = (float)(out[i] * s);
}

brisk_status brisk_embed_check_model(const brisk_model *m) {
  if (m->n_dev_layers > 0 || m->tp_size > 1 || m->pp_size > 1)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "embeddings run on the CPU; load the model with n_gpu_layers 0 and "
                       "without tensor or pipeline parallelism");
  return BRISK_OK;
}

struct brisk_embedder {
  const brisk_model *m;
  bool encoder;
  int32_t max_tokens;
  brisk_threadpool *pool; /* own pool and backend when none was lent */
  brisk_backend *own_be;
  brisk_backend *be;
  float *hidden; /* [max_tokens][n_embd] */
  /* Decoders: the pass and its scratch KV of kv_blocks blocks per layer
   * (grown to the largest pass's need), plus the batch's metadata. */
  brisk_forward *f;
  brisk_forward_kv kv;
  int32_t kv_blocks;
  int32_t *tokens, *pos, *seq_row, *out_rows; /* [max_tokens] */
  int64_t *slot;                              /* [max_tokens] */
  int32_t *tables;                            /* [tables_cap] */
  size_t tables_cap;
};

static void kv_release(brisk_embedder *em) {
  for (uint32_t l = 0; l < em->m->hp.n_layer; l++) {
    if (em->kv.k) em->be->buffer_free(em->be, em->kv.k[l]);
    if (em->kv.v) em->be->buffer_free(em->be, em->kv.v[l]);
  }
  brisk_free(em->kv.k);
  brisk_free(em->kv.v);
  em->kv.k = em->kv.v = NULL;
  em->kv_blocks = 0;
}

void brisk_embedder_free(brisk_embedder *em) {
  if (!em) return;
  kv_release(em);
  brisk_forward_free(em->f);
  brisk_free(em->hidden);
  brisk_free(em->tokens);
  brisk_free(em->pos);
  brisk_free(em->seq_row);
  brisk_free(em->out_rows);
  brisk_free(em->slot);
  brisk_free(em->tables);
  brisk_backend_free(em->own_be);
  brisk_threadpool_free(em->pool);
  brisk_free(em);
}

brisk_status brisk_embedder_create(const brisk_model *m, brisk_backend *be, int32_t n_threads,
                                   int32_t max_tokens, brisk_embedder **out) {
  brisk_status st = brisk_embed_check_model(m);
  if (st) return st;
  if (max_tokens < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embedder: max_tokens %d must be >= 1",
                       max_tokens);
  brisk_embedder *em = brisk_calloc(1, sizeof *em);
  if (!em) return brisk_error_oom();
  const brisk_arch_info *ai = brisk_arch_get(m->hp.arch);
  em->m = m;
  em->encoder = ai && ai->encoder;
  em->max_tokens = max_tokens;
  em->be = be;
  if (!be) {
    brisk_device_ref host = brisk_device_cpu();
    if ((st = brisk_threadpool_create(n_threads, &em->pool)) ||
        (st = brisk_device_backend_create(&host, em->pool, &em->own_be)))
      goto fail;
    em->be = em->own_be;
  }
  *out = em;
  return BRISK_OK;
fail:
  brisk_embedder_free(em);
  return st;
}

/* The buffers every pass needs, made at the first one. */
static brisk_status prepare(brisk_embedder *em) {
  if (em->hidden) return BRISK_OK;
  size_t n = (size_t)em->max_tokens, bytes;
  if (mul3_overflow(n, em->m->hp.n_embd, sizeof(float), &bytes))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embedder: %zu tokens overflow", n);
  float *hidden = brisk_malloc(bytes);
  if (!hidden) return brisk_error_oom();
  if (em->encoder) {
    em->hidden = hidden;
    return BRISK_OK;
  }
  em->tokens = brisk_malloc(n * sizeof *em->tokens);
  em->pos = brisk_malloc(n * sizeof *em->pos);
  em->seq_row = brisk_malloc(n * sizeof *em->seq_row);
  em->out_rows = brisk_malloc(n * sizeof *em->out_rows);
  em->slot = brisk_malloc(n * sizeof *em->slot);
  brisk_status st = BRISK_OK;
  if (!em->tokens || !em->pos || !em->seq_row || !em->out_rows || !em->slot) {
    st = brisk_error_oom();
  } else if (!(st = brisk_forward_create(em->m, em->be, NULL, em->max_tokens, &em->f))) {
    brisk_forward_set_hidden_output(em->f, true);
    em->hidden = hidden;
    return BRISK_OK;
  }
  brisk_free(hidden);
  return st;
}

/* Grows the scratch KV to `blocks` blocks per layer (kept for later
 * passes); the old contents need not survive. */
static brisk_status kv_reserve(brisk_embedder *em, int32_t blocks) {
  if (blocks <= em->kv_blocks) return BRISK_OK;
  kv_release(em);
  const brisk_hparams *hp = &em->m->hp;
  int32_t heads, dim;
  brisk_forward_kv_geometry(hp, &heads, &dim);
  size_t bytes;
  if (mul3_overflow((size_t)blocks * EMBED_KV_BLOCK, (size_t)heads * (size_t)dim, sizeof(float),
                    &bytes))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embedder: %d KV blocks overflow", blocks);
  em->kv.layout = (brisk_kv_layout){BRISK_DTYPE_F32, blocks, heads, EMBED_KV_BLOCK, dim};
  em->kv.k = brisk_calloc(hp->n_layer, sizeof *em->kv.k);
  em->kv.v = brisk_calloc(hp->n_layer, sizeof *em->kv.v);
  brisk_status st = BRISK_OK;
  if (!em->kv.k || !em->kv.v) st = brisk_error_oom();
  for (uint32_t l = 0; l < hp->n_layer && !st; l++)
    if (!(st = em->be->buffer_alloc(em->be, bytes, &em->kv.k[l])))
      st = em->be->buffer_alloc(em->be, bytes, &em->kv.v[l]);
  if (st) {
    kv_release(em);
    return st;
  }
  em->kv_blocks = blocks;
  return BRISK_OK;
}

static brisk_status run_encoder(brisk_embedder *em, const brisk_embed_item *it, int32_t n,
                                int32_t total) {
  int32_t *start = brisk_malloc((size_t)n * sizeof *start);
  int32_t *len = brisk_malloc((size_t)n * sizeof *len);
  int32_t *tokens = brisk_malloc((size_t)total * sizeof *tokens);
  brisk_status st = BRISK_OK;
  if (!start || !len || !tokens) {
    st = brisk_error_oom();
    goto done;
  }
  for (int32_t s = 0, at = 0; s < n; s++) {
    start[s] = at;
    len[s] = it[s].n_ids;
    memcpy(tokens + at, it[s].ids, (size_t)it[s].n_ids * sizeof *tokens);
    at += it[s].n_ids;
  }
  brisk_encode_batch b = {total, tokens, n, start, len};
  if ((st = brisk_encode_run(em->m, em->be, &b, em->hidden))) goto done;
  size_t d = em->m->hp.n_embd;
  for (int32_t s = 0; s < n; s++)
    brisk_embed_pool(it[s].pooling, it[s].normalize, em->hidden + (size_t)start[s] * d,
                     (size_t)len[s], d, it[s].out);
done:
  brisk_free(start);
  brisk_free(len);
  brisk_free(tokens);
  return st;
}

/* Item s takes blocks [first_block[s], + its count) of the scratch KV, its
 * table row s; MEAN reads every row of it, LAST and CLS one. */
static brisk_status run_decoder(brisk_embedder *em, const brisk_embed_item *it, int32_t n,
                                int32_t total) {
  int32_t blocks = 0, widest = 0;
  for (int32_t s = 0; s < n; s++) {
    int32_t b = (it[s].n_ids + EMBED_KV_BLOCK - 1) / EMBED_KV_BLOCK;
    blocks += b;
    if (b > widest) widest = b;
  }
  size_t cells = (size_t)n * (size_t)widest; /* n, widest <= max_tokens */
  brisk_status st = kv_reserve(em, blocks);
  if (st) return st;
  if (cells > em->tables_cap) {
    int32_t *t = brisk_malloc(cells * sizeof *t);
    if (!t) return brisk_error_oom();
    brisk_free(em->tables);
    em->tables = t;
    em->tables_cap = cells;
  }
  memset(em->tables, 0, cells * sizeof *em->tables);
  int32_t at = 0, n_out = 0, block = 0;
  for (int32_t s = 0; s < n; s++) {
    int32_t len = it[s].n_ids;
    for (int32_t b = 0; b * EMBED_KV_BLOCK < len; b++)
      em->tables[(size_t)s * (size_t)widest + (size_t)b] = block + b;
    for (int32_t i = 0; i < len; i++, at++) {
      em->tokens[at] = it[s].ids[i];
      em->pos[at] = i;
      em->seq_row[at] = s;
      em->slot[at] = (int64_t)(block + i / EMBED_KV_BLOCK) * EMBED_KV_BLOCK + i % EMBED_KV_BLOCK;
      bool out = it[s].pooling == BRISK_EMBED_POOLING_MEAN ||
                 (it[s].pooling == BRISK_EMBED_POOLING_LAST ? i == len - 1 : i == 0);
      if (out) em->out_rows[n_out++] = at;
    }
    block += (len + EMBED_KV_BLOCK - 1) / EMBED_KV_BLOCK;
  }
  brisk_forward_batch b = {total,      em->tokens, em->pos, em->seq_row, em->slot,
                           em->tables, n,          widest,  n_out,       em->out_rows,
                           NULL,       0,          NULL,    NULL,        NULL};
  if ((st = brisk_forward_run(em->f, &em->kv, &b, em->hidden, NULL, NULL))) return st;
  size_t d = em->m->hp.n_embd, row = 0;
  for (int32_t s = 0; s < n; s++) {
    size_t rows = it[s].pooling == BRISK_EMBED_POOLING_MEAN ? (size_t)it[s].n_ids : 1;
    brisk_embed_pool(it[s].pooling, it[s].normalize, em->hidden + row * d, rows, d, it[s].out);
    row += rows;
  }
  return BRISK_OK;
}

brisk_status brisk_embedder_run(brisk_embedder *em, const brisk_embed_item *items, int32_t n) {
  int64_t total = 0;
  for (int32_t s = 0; s < n; s++) {
    if (items[s].n_ids < 1)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "embedder: input %d has no tokens", s);
    total += items[s].n_ids;
  }
  if (n < 1 || total > em->max_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "embedder: %d inputs of %lld tokens; a pass takes 1 or more inputs of at "
                       "most %d tokens",
                       n, (long long)total, em->max_tokens);
  brisk_status st = prepare(em);
  if (st) return st;
  return em->encoder ? run_encoder(em, items, n, (int32_t)total)
                     : run_decoder(em, items, n, (int32_t)total);
}
