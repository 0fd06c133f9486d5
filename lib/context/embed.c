/* brisk_embed: texts -> pooled, optionally normalised vectors. Encoders run
 * the encoder pass (forward/encode.h) over many texts packed in one batch;
 * decoders run the ordinary forward pass one text at a time over a scratch
 * F32 KV cache, returning hidden states instead of logits. Everything is on
 * the CPU backend and allocated per call, so calls on one model may run
 * concurrently. */
#include "backend/device.h"
#include "core/abi.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "context/embedder.h"
#include "forward/encode.h"
#include "forward/forward.h"
#include "model/embed_tok.h"
#include "model/model.h"

#include <string.h>

/* Tokens an encoder batch holds at most (more when one text is longer). */
#define EMBED_BATCH_TOKENS 2048
/* Tokens per block of a decoder's scratch KV cache. */
#define EMBED_KV_BLOCK 16

BRISK_API void brisk_embed_params_init(brisk_embed_params *p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->normalize = -1;
}

static brisk_status copy_params(const brisk_embed_params *in, brisk_embed_params *out) {
  brisk_embed_params_init(out);
  if (!in) return BRISK_OK;
  brisk_status st = brisk_abi_read(&brisk_abi_embed_params, in, out);
  if (st) return st;
  if (out->n_threads < 0 || out->n_threads > 1024)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: n_threads %d is outside [0, 1024]",
                       out->n_threads);
  return BRISK_OK;
}

typedef struct embed_run {
  const brisk_model *m;
  brisk_backend *be;
  int32_t pooling;
  bool normalize;
  int32_t **ids; /* [n_texts] */
  size_t *n_ids; /* [n_texts] */
  float *hidden; /* host [rows][n_embd] of the current pass */
  float *out;
} embed_run;

/* Pools the hidden rows [0, n) of one text (all of its tokens, or only the
 * one LAST / CLS needs at row 0) into out: the engine's pooling too. */
static void pool_rows(const embed_run *r, const float *rows, size_t n, float *out) {
  brisk_embed_pool(r->pooling, r->normalize, rows, n, r->m->hp.n_embd, out);
}

/* Texts [t0, t1) packed into one encoder batch. */
static brisk_status encode_group(embed_run *r, int32_t t0, int32_t t1) {
  int32_t n_seqs = t1 - t0, n = 0;
  int32_t *start = brisk_malloc((size_t)n_seqs * sizeof *start);
  int32_t *len = brisk_malloc((size_t)n_seqs * sizeof *len);
  int32_t *tokens = NULL;
  brisk_status st = BRISK_OK;
  if (!start || !len) {
    st = brisk_error_oom();
    goto done;
  }
  for (int32_t s = 0; s < n_seqs; s++) {
    start[s] = n;
    len[s] = (int32_t)r->n_ids[t0 + s];
    n += len[s];
  }
  if (!(tokens = brisk_malloc((size_t)n * sizeof *tokens))) {
    st = brisk_error_oom();
    goto done;
  }
  for (int32_t s = 0; s < n_seqs; s++)
    memcpy(tokens + start[s], r->ids[t0 + s], (size_t)len[s] * sizeof *tokens);
  brisk_encode_batch b = {n, tokens, n_seqs, start, len};
  if ((st = brisk_encode_run(r->m, r->be, &b, r->hidden))) goto done;
  size_t d = r->m->hp.n_embd;
  for (int32_t s = 0; s < n_seqs; s++)
    pool_rows(r, r->hidden + (size_t)start[s] * d, (size_t)len[s], r->out + (size_t)(t0 + s) * d);
done:
  brisk_free(start);
  brisk_free(len);
  brisk_free(tokens);
  return st;
}

static brisk_status run_encoder(embed_run *r, int32_t n_texts, size_t longest) {
  size_t budget = longest > EMBED_BATCH_TOKENS ? longest : EMBED_BATCH_TOKENS;
  if (!(r->hidden = brisk_malloc(budget * r->m->hp.n_embd * sizeof(float))))
    return brisk_error_oom();
  brisk_status st = BRISK_OK;
  for (int32_t t0 = 0; t0 < n_texts && !st;) {
    int32_t t1 = t0;
    size_t n = 0;
    while (t1 < n_texts && n + r->n_ids[t1] <= budget) n += r->n_ids[t1++];
    st = encode_group(r, t0, t1);
    t0 = t1;
  }
  return st;
}

/* A decoder's scratch KV cache of `blocks` blocks, every layer. */
typedef struct dec_kv {
  brisk_forward_kv kv;
  brisk_backend *be;
  int32_t n_layer;
} dec_kv;

static void dec_kv_free(dec_kv *k) {
  for (int32_t l = 0; l < k->n_layer; l++) {
    if (k->kv.k) k->be->buffer_free(k->be, k->kv.k[l]);
    if (k->kv.v) k->be->buffer_free(k->be, k->kv.v[l]);
  }
  brisk_free(k->kv.k);
  brisk_free(k->kv.v);
}

static brisk_status dec_kv_alloc(dec_kv *k, const brisk_model *m, brisk_backend *be,
                                 int32_t blocks) {
  const brisk_hparams *hp = &m->hp;
  k->be = be;
  k->kv.layout = (brisk_kv_layout){BRISK_DTYPE_F32, blocks, (int32_t)hp->n_head_kv, EMBED_KV_BLOCK,
                                   (int32_t)hp->head_dim};
  size_t bytes = (size_t)blocks * EMBED_KV_BLOCK * hp->n_head_kv * hp->head_dim * sizeof(float);
  k->kv.k = brisk_calloc(hp->n_layer, sizeof *k->kv.k);
  k->kv.v = brisk_calloc(hp->n_layer, sizeof *k->kv.v);
  if (!k->kv.k || !k->kv.v) return brisk_error_oom();
  k->n_layer = (int32_t)hp->n_layer;
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    brisk_status st;
    if ((st = be->buffer_alloc(be, bytes, &k->kv.k[l])) ||
        (st = be->buffer_alloc(be, bytes, &k->kv.v[l])))
      return st;
  }
  return BRISK_OK;
}

/* One text at a time through the decoder forward pass. */
static brisk_status run_decoder(embed_run *r, int32_t n_texts, size_t longest) {
  const brisk_model *m = r->m;
  int32_t blocks = (int32_t)((longest + EMBED_KV_BLOCK - 1) / EMBED_KV_BLOCK);
  brisk_forward *f = NULL;
  dec_kv kv = {0};
  int32_t *pos = brisk_malloc(longest * sizeof *pos), *seq = brisk_calloc(longest, sizeof *seq);
  int64_t *slot = brisk_malloc(longest * sizeof *slot);
  int32_t *table = brisk_malloc((size_t)blocks * sizeof *table);
  r->hidden = brisk_malloc(longest * m->hp.n_embd * sizeof(float));
  brisk_status st = BRISK_OK;
  if (!pos || !seq || !slot || !table || !r->hidden) {
    st = brisk_error_oom();
    goto done;
  }
  for (size_t i = 0; i < longest; i++) pos[i] = (int32_t)i, slot[i] = (int64_t)i;
  for (int32_t b = 0; b < blocks; b++) table[b] = b;
  if ((st = dec_kv_alloc(&kv, m, r->be, blocks)) ||
      (st = brisk_forward_create(m, r->be, NULL, (int32_t)longest, &f)))
    goto done;
  brisk_forward_set_hidden_output(f, true);
  for (int32_t t = 0; t < n_texts && !st; t++) {
    int32_t n = (int32_t)r->n_ids[t];
    /* MEAN reads every row; LAST and CLS one (out_rows reuses pos: 0..n-1). */
    int32_t n_out = r->pooling == BRISK_EMBED_POOLING_MEAN ? n : 1;
    const int32_t *rows = r->pooling == BRISK_EMBED_POOLING_LAST ? &pos[n - 1] : pos;
    brisk_forward_batch b = {n,     r->ids[t], pos,  seq, slot, table, 1,   blocks,
                             n_out, rows,      NULL, 0,   NULL, NULL,  NULL};
    if (!(st = brisk_forward_run(f, &kv.kv, &b, r->hidden, NULL, NULL)))
      pool_rows(r, r->hidden, (size_t)n_out, r->out + (size_t)t * m->hp.n_embd);
  }
done:
  brisk_forward_free(f);
  dec_kv_free(&kv);
  brisk_free(pos);
  brisk_free(seq);
  brisk_free(slot);
  brisk_free(table);
  return st;
}

BRISK_API brisk_status brisk_embed(const brisk_model *model, const brisk_embed_params *params,
                                   const char *const *texts, int32_t n_texts, float *out,
                                   size_t out_cap) {
  if (!model || n_texts < 0 || (n_texts > 0 && (!texts || !out)))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_embed: model, texts and out must be set, n_texts >= 0");
  brisk_embed_params p;
  brisk_status st = copy_params(params, &p);
  if (st) return st;
  brisk_embed_choice ch;
  if ((st = brisk_embed_choose(model, p.pooling, p.normalize, p.max_tokens, &ch))) return st;
  for (int32_t i = 0; i < n_texts; i++)
    if (!texts[i])
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_embed: texts[%d] is NULL", i);
  size_t d = model->hp.n_embd, need;
  if (brisk_mul_overflow_size((size_t)n_texts, d, &need))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_embed: %d texts overflow", n_texts);
  if (out_cap < need)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL,
                       "brisk_embed: out holds %zu floats; %d texts of %zu need %zu", out_cap,
                       n_texts, d, need);
  const brisk_arch_info *ai = brisk_arch_get(model->hp.arch);
  bool encoder = ai && ai->encoder;
  if ((st = brisk_embed_check_model(model))) return st;
  embed_run r = {.m = model, .out = out, .normalize = ch.normalize, .pooling = ch.pooling};
  if (n_texts == 0) return BRISK_OK;
  uint32_t max_tokens = ch.max_tokens;
  brisk_threadpool *pool = NULL;
  r.ids = brisk_calloc((size_t)n_texts, sizeof *r.ids);
  r.n_ids = brisk_calloc((size_t)n_texts, sizeof *r.n_ids);
  if (!r.ids || !r.n_ids) {
    st = brisk_error_oom();
    goto done;
  }
  size_t longest = 0;
  for (int32_t i = 0; i < n_texts && !st; i++) {
    st = brisk_model_embed_tokens(model, texts[i], strlen(texts[i]), max_tokens, &r.ids[i],
                                  &r.n_ids[i]);
    if (!st && r.n_ids[i] > longest) longest = r.n_ids[i];
  }
  if (st) goto done;
  brisk_device_ref host = brisk_device_cpu();
  if ((st = brisk_threadpool_create(p.n_threads, &pool)) ||
      (st = brisk_device_backend_create(&host, pool, &r.be)))
    goto done;
  st = encoder ? run_encoder(&r, n_texts, longest) : run_decoder(&r, n_texts, longest);
done:
  if (r.ids)
    for (int32_t i = 0; i < n_texts; i++) brisk_free(r.ids[i]);
  brisk_free(r.ids);
  brisk_free(r.n_ids);
  brisk_free(r.hidden);
  brisk_backend_free(r.be);
  brisk_threadpool_free(pool);
  return st;
}
