/* The encoder pass (BERT family), read top to bottom like the math:
 *
 *   x = layernorm(embed(tokens) + pos_embd[pos] + type_embd[0])
 *   for each layer:
 *     q, k, v = x Wq + bq, x Wk + bk, x Wv + bv
 *     o = attention(q, k, v) Wo + bo        (each token sees its whole sequence)
 *     x = layernorm(x + o) * attn_norm + attn_norm_b
 *     o = gelu(x Wup + bup) Wdown + bdown   (gelu: the exact erf form)
 *     x = layernorm(x + o) * ffn_norm + ffn_norm_b
 *
 * Bidirectional attention uses the paged attention operation unchanged:
 * every token's K/V is written to its sequence's blocks of a scratch F32
 * cache, and every query is given its sequence's last position, so it sees
 * keys 0..len-1, all of them. No RoPE: positions enter only through
 * pos_embd. Every step is one backend operation. */
#include "forward/encode.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

/* Tokens per block of the scratch cache. */
#define ENC_BLOCK 32

typedef struct enc {
  const brisk_model *m;
  brisk_backend *be;
  float *x, *h, *q, *k, *v, *att, *ff; /* [n][n_embd], ff: [n][n_ff] */
  void *kc, *vc;                       /* scratch caches, one layer at a time */
  float *xg; /* act-order models: [n][max(n_embd, n_ff)] a gathered input */
  brisk_kv_layout kv;
  /* Host metadata. */
  int32_t *pos;    /* [n] position in its sequence */
  int32_t *qpos;   /* [n] the query's position: its sequence's last */
  int32_t *zeros;  /* [n] token type 0 */
  int64_t *slots;  /* [n] */
  int32_t *seq_of; /* [n] */
  int32_t *tables; /* [n_seqs][max_blocks] */
  int32_t max_blocks;
} enc;

static void enc_free(enc *e) {
  brisk_backend *be = e->be;
  void *bufs[] = {e->x, e->h, e->q, e->k, e->v, e->att, e->ff, e->kc, e->vc, e->xg};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->buffer_free(be, bufs[i]);
  brisk_free(e->pos);
  brisk_free(e->qpos);
  brisk_free(e->zeros);
  brisk_free(e->slots);
  brisk_free(e->seq_of);
  brisk_free(e->tables);
}

static brisk_status alloc_f(enc *e, size_t rows, size_t cols, float **out) {
  size_t bytes;
  if (brisk_mul_overflow_size(rows, cols, &bytes) ||
      brisk_mul_overflow_size(bytes, sizeof(float), &bytes))
    return brisk_error(BRISK_E_OUT_OF_MEMORY, "encoder: buffer of %zu x %zu floats", rows, cols);
  return e->be->buffer_alloc(e->be, bytes ? bytes : sizeof(float), (void **)out);
}

/* Buffers and the block layout: sequence s owns blocks [b_s, b_s +
 * ceil(len / ENC_BLOCK)), its table row lists them. */
static brisk_status enc_setup(enc *e, const brisk_encode_batch *b) {
  const brisk_hparams *hp = &e->m->hp;
  size_t n = (size_t)b->n_tokens, d = hp->n_embd;
  int32_t n_blocks = 0, max_blocks = 1;
  for (int32_t s = 0; s < b->n_seqs; s++) {
    int32_t nb = (b->len[s] + ENC_BLOCK - 1) / ENC_BLOCK;
    n_blocks += nb;
    if (nb > max_blocks) max_blocks = nb;
  }
  e->max_blocks = max_blocks;
  e->kv = (brisk_kv_layout){BRISK_DTYPE_F32, n_blocks, (int32_t)hp->n_head, ENC_BLOCK,
                            (int32_t)hp->head_dim};
  size_t cache = (size_t)n_blocks * ENC_BLOCK * d * sizeof(float);
  e->pos = brisk_malloc(n * sizeof *e->pos);
  e->qpos = brisk_malloc(n * sizeof *e->qpos);
  e->zeros = brisk_calloc(n, sizeof *e->zeros);
  e->slots = brisk_malloc(n * sizeof *e->slots);
  e->seq_of = brisk_malloc(n * sizeof *e->seq_of);
  e->tables = brisk_calloc((size_t)b->n_seqs * (size_t)max_blocks, sizeof *e->tables);
  if (!e->pos || !e->qpos || !e->zeros || !e->slots || !e->seq_of || !e->tables)
    return brisk_error_oom();
  int32_t block = 0;
  for (int32_t s = 0; s < b->n_seqs; s++) {
    int32_t nb = (b->len[s] + ENC_BLOCK - 1) / ENC_BLOCK;
    for (int32_t j = 0; j < nb; j++) e->tables[(size_t)s * max_blocks + j] = block + j;
    for (int32_t p = 0; p < b->len[s]; p++) {
      size_t t = (size_t)b->start[s] + (size_t)p;
      e->pos[t] = p;
      e->qpos[t] = b->len[s] - 1;
      e->seq_of[t] = s;
      e->slots[t] = (int64_t)(block + p / ENC_BLOCK) * ENC_BLOCK + p % ENC_BLOCK;
    }
    block += nb;
  }
  brisk_status st;
  if ((st = alloc_f(e, n, d, &e->x)) || (st = alloc_f(e, n, d, &e->h)) ||
      (st = alloc_f(e, n, d, &e->q)) || (st = alloc_f(e, n, d, &e->k)) ||
      (st = alloc_f(e, n, d, &e->v)) || (st = alloc_f(e, n, d, &e->att)) ||
      (st = alloc_f(e, n, hp->n_ff, &e->ff)) || (st = e->be->buffer_alloc(e->be, cache, &e->kc)) ||
      (st = e->be->buffer_alloc(e->be, cache, &e->vc)) ||
      (e->m->act_order && (st = alloc_f(e, n, d > hp->n_ff ? d : hp->n_ff, &e->xg))))
    return st;
  return BRISK_OK;
}

/* y = x W^T + bias for n rows; an act-order matrix (brisk_weight.perm)
 * multiplies x's columns gathered by its order. */
static brisk_status linear(enc *e, const brisk_weight *w, const brisk_weight *bias, const float *x,
                           int32_t n, float *y) {
  brisk_backend *be = e->be;
  brisk_status st;
  if (w->perm) {
    if (!be->gather_cols)
      return brisk_error(BRISK_E_UNSUPPORTED, "%s: act-order matrices need gather_cols", be->name);
    if ((st = be->gather_cols(be, x, n, w->cols, w->perm, w->cols, e->xg))) return st;
    x = e->xg;
  }
  st = be->matmul(be, w->type, w->data, w->rows, w->cols, x, n, y);
  if (st || !bias->data) return st;
  return be->add(be, y, bias->data, n, w->rows, true, y);
}

static brisk_status embed(enc *e, const brisk_encode_batch *b) {
  const brisk_model *m = e->m;
  const brisk_hparams *hp = &m->hp;
  brisk_backend *be = e->be;
  int32_t n = b->n_tokens;
  int64_t d = hp->n_embd;
  brisk_status st;
  if ((st = be->embed(be, m->token_embd.type, m->token_embd.data, hp->n_vocab, d, b->tokens, n,
                      e->x)) ||
      (st = be->embed(be, m->pos_embd.type, m->pos_embd.data, m->pos_embd.rows, d, e->pos, n,
                      e->h)) ||
      (st = be->add(be, e->x, e->h, n, d, false, e->x)))
    return st;
  if (m->type_embd.data && ((st = be->embed(be, m->type_embd.type, m->type_embd.data,
                                            m->type_embd.rows, d, e->zeros, n, e->h)) ||
                            (st = be->add(be, e->x, e->h, n, d, false, e->x))))
    return st;
  return be->layernorm(be, e->x, m->embd_norm.data, m->embd_norm_b.data, n, d, hp->rms_eps, e->x);
}

static brisk_status layer(enc *e, const brisk_encode_batch *b, const brisk_layer *ly) {
  const brisk_hparams *hp = &e->m->hp;
  brisk_backend *be = e->be;
  int32_t n = b->n_tokens;
  int64_t d = hp->n_embd;
  brisk_attn_batch ab = {n, e->qpos, e->seq_of, e->tables, b->n_seqs, e->max_blocks};
  brisk_attn_params ap = {(int32_t)hp->n_head, 0, 0, 0};
  brisk_status st;
  if ((st = linear(e, &ly->wq, &ly->bq, e->x, n, e->q)) ||
      (st = linear(e, &ly->wk, &ly->bk, e->x, n, e->k)) ||
      (st = linear(e, &ly->wv, &ly->bv, e->x, n, e->v)) ||
      (st = be->kv_write(be, &e->kv, e->kc, e->vc, e->k, e->v, e->slots, n)) ||
      (st = be->attention(be, &e->kv, e->kc, e->vc, e->q, &ab, &ap, e->att)) ||
      (st = linear(e, &ly->wo, &ly->bo, e->att, n, e->h)) ||
      (st = be->add(be, e->x, e->h, n, d, false, e->x)) ||
      (st = be->layernorm(be, e->x, ly->attn_norm.data, ly->attn_norm_b.data, n, d, hp->rms_eps,
                          e->x)) ||
      (st = linear(e, &ly->ffn_up, &ly->ffn_up_b, e->x, n, e->ff)) ||
      (st = be->gelu(be, e->ff, (int64_t)n * ly->ffn_up.rows, e->ff)) ||
      (st = linear(e, &ly->ffn_down, &ly->ffn_down_b, e->ff, n, e->h)) ||
      (st = be->add(be, e->x, e->h, n, d, false, e->x)))
    return st;
  return be->layernorm(be, e->x, ly->ffn_norm.data, ly->ffn_norm_b.data, n, d, hp->rms_eps, e->x);
}

static brisk_status check_batch(const brisk_model *m, const brisk_encode_batch *b) {
  if (b->n_tokens < 1 || b->n_seqs < 1 || !b->tokens || !b->start || !b->len)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "encoder: an empty batch");
  int64_t next = 0;
  for (int32_t s = 0; s < b->n_seqs; s++) {
    if (b->start[s] != next || b->len[s] < 1 || (uint32_t)b->len[s] > m->pos_embd.rows)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "encoder: sequence %d of %d tokens at %d (the model takes 1..%lld, "
                         "packed in order)",
                         s, b->len[s], b->start[s], (long long)m->pos_embd.rows);
    next += b->len[s];
  }
  if (next != b->n_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "encoder: sequences cover %lld of %d tokens",
                       (long long)next, b->n_tokens);
  return BRISK_OK;
}

brisk_status brisk_encode_run(const brisk_model *m, brisk_backend *be, const brisk_encode_batch *b,
                              float *hidden) {
  const brisk_arch_info *ai = brisk_arch_get(m->hp.arch);
  if (!ai || !ai->encoder)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "encoder pass on a %s model",
                       ai ? ai->name : "unknown");
  if (!be->host_memory)
    return brisk_error(BRISK_E_UNSUPPORTED, "encoder pass: a host-memory backend is needed");
  brisk_status st = check_batch(m, b);
  if (st) return st;
  enc e = {.m = m, .be = be};
  if ((st = enc_setup(&e, b)) || (st = embed(&e, b))) goto done;
  for (uint32_t il = 0; il < m->hp.n_layer && !st; il++) st = layer(&e, b, &m->layers[il]);
  if (!st) memcpy(hidden, e.x, (size_t)b->n_tokens * m->hp.n_embd * sizeof(float));
done:
  enc_free(&e);
  return st;
}
