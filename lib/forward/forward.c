/* The transformer forward pass (llama family: llama, mistral, qwen2, qwen3,
 * mixtral), read top to bottom like the math:
 *
 *   x = embed(tokens)
 *   for each layer:
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
 *     q, k = rmsnorm per head (qwen3)
 *     q, k = rope(q, pos), rope(k, pos)
 *     cache[slot] = k, v
 *     x += attention(q, cache) Wo
 *     h = rmsnorm(x) * ffn_norm
 *     x += (silu(h Wgate) * (h Wup)) Wdown        or the MoE sum over top-k experts
 *   logits = rmsnorm(x[out_rows]) * output_norm . Woutput
 *
 * Every step is one backend operation; buffers carry shape comments. */
#include "forward/forward.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

struct brisk_forward {
  const brisk_model *model;
  brisk_backend *be;
  int32_t max_tokens;
  brisk_rope_params rope;
  uint64_t bytes;
  /* Activations, backend memory, for up to max_tokens rows. */
  float *x;     /* [max_tokens][n_embd] residual stream */
  float *h;     /* [max_tokens][n_embd] normalized input of a sub-block */
  float *q;     /* [max_tokens][n_head * head_dim] */
  float *k;     /* [max_tokens][n_head_kv * head_dim] */
  float *v;     /* [max_tokens][n_head_kv * head_dim] */
  float *att;   /* [max_tokens][n_head * head_dim] attention output */
  float *proj;  /* [max_tokens][n_embd] output of a projection back to n_embd */
  float *gate;  /* [max_tokens][n_ff] */
  float *up;    /* [max_tokens][n_ff] */
  /* Mixture of experts only. */
  float *router;    /* [max_tokens][n_expert] router logits */
  float *expert_in; /* [max_tokens][n_embd] rows routed to one expert */
  int32_t *route_ids;   /* host [max_tokens][n_expert_used] */
  float *route_w;       /* host [max_tokens][n_expert_used] */
  int32_t *expert_rows; /* host [max_tokens] token indices routed to one expert */
  float *expert_w;      /* host [max_tokens] their routing weights */
};

/* An absent bias: linear() then adds nothing. */
static const brisk_weight no_bias;

static brisk_status alloc_buf(brisk_forward *f, size_t rows, size_t cols, float **out) {
  size_t bytes = rows * cols * sizeof(float);
  f->bytes += bytes;
  return f->be->buffer_alloc(f->be, bytes, (void **)out);
}

static void rope_from_model(const brisk_hparams *hp, const brisk_weight *freqs,
                            brisk_rope_params *r) {
  brisk_rope_params_init(r);
  r->layout = hp->rope_style == BRISK_HP_ROPE_NEOX ? BRISK_ROPE_NEOX : BRISK_ROPE_NORMAL;
  r->n_rot = (int32_t)hp->rope_dim;
  r->freq_base = hp->rope_base;
  r->freq_factors = freqs->data; /* F32 vector, checked at load */
  r->factor = hp->rope_factor;
  if (hp->rope_orig_ctx) r->orig_ctx = (int32_t)hp->rope_orig_ctx;
  switch (hp->rope_scaling) {
  case BRISK_HP_ROPE_SCALING_LINEAR: r->scaling = BRISK_ROPE_SCALING_LINEAR; break;
  case BRISK_HP_ROPE_SCALING_YARN:
    r->scaling = BRISK_ROPE_SCALING_YARN;
    r->beta_fast = hp->yarn_beta_fast;
    r->beta_slow = hp->yarn_beta_slow;
    r->attn_factor = hp->yarn_attn_factor;
    break;
  case BRISK_HP_ROPE_SCALING_LLAMA3:
    /* GGUF files carry llama3 scaling as per-pair factors (rope_freqs). */
    r->scaling = freqs->data ? BRISK_ROPE_SCALING_NONE : BRISK_ROPE_SCALING_LLAMA3;
    r->low_freq_factor = hp->rope_low_freq_factor;
    r->high_freq_factor = hp->rope_high_freq_factor;
    break;
  default: r->scaling = BRISK_ROPE_SCALING_NONE; break;
  }
}

brisk_status brisk_forward_create(const brisk_model *model, brisk_backend *be, int32_t max_tokens,
                                  brisk_forward **out) {
  if (max_tokens < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "max batch tokens %d must be >= 1", max_tokens);
  brisk_forward *f = brisk_calloc(1, sizeof *f);
  if (!f) return brisk_error_oom();
  f->model = model;
  f->be = be;
  f->max_tokens = max_tokens;
  const brisk_hparams *hp = &model->hp;
  rope_from_model(hp, &model->rope_freqs, &f->rope);
  size_t n = (size_t)max_tokens, d = hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim,
         kvd = (size_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
  brisk_status st;
  if ((st = alloc_buf(f, n, d, &f->x)) || (st = alloc_buf(f, n, d, &f->h)) ||
      (st = alloc_buf(f, n, qd, &f->q)) || (st = alloc_buf(f, n, kvd, &f->k)) ||
      (st = alloc_buf(f, n, kvd, &f->v)) || (st = alloc_buf(f, n, qd, &f->att)) ||
      (st = alloc_buf(f, n, d, &f->proj)) || (st = alloc_buf(f, n, ff, &f->gate)) ||
      (st = alloc_buf(f, n, ff, &f->up)))
    goto fail;
  if (hp->n_expert) {
    size_t ku = hp->n_expert_used;
    if ((st = alloc_buf(f, n, hp->n_expert, &f->router)) ||
        (st = alloc_buf(f, n, d, &f->expert_in)))
      goto fail;
    f->route_ids = brisk_malloc(n * ku * sizeof(int32_t));
    f->route_w = brisk_malloc(n * ku * sizeof(float));
    f->expert_rows = brisk_malloc(n * sizeof(int32_t));
    f->expert_w = brisk_malloc(n * sizeof(float));
    if (!f->route_ids || !f->route_w || !f->expert_rows || !f->expert_w) {
      st = brisk_error_oom();
      goto fail;
    }
  }
  *out = f;
  return BRISK_OK;
fail:
  brisk_forward_free(f);
  return st;
}

void brisk_forward_free(brisk_forward *f) {
  if (!f) return;
  float *bufs[] = {f->x,   f->h,    f->q,      f->k,        f->v, f->att,
                   f->proj, f->gate, f->up, f->router, f->expert_in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) f->be->buffer_free(f->be, bufs[i]);
  brisk_free(f->route_ids);
  brisk_free(f->route_w);
  brisk_free(f->expert_rows);
  brisk_free(f->expert_w);
  brisk_free(f);
}

uint64_t brisk_forward_bytes(const brisk_forward *f) { return f->bytes; }

/* y = x W^T for n rows, then + bias when the model has one. */
static brisk_status linear(brisk_forward *f, const brisk_weight *w, const brisk_weight *bias,
                           const float *x, int32_t n, float *y) {
  brisk_status st = f->be->matmul(f->be, w->type, w->data, w->rows, w->cols, x, n, y);
  if (st || !bias->data) return st;
  return f->be->add(f->be, y, bias->data, n, w->rows, true, y);
}

/* One dense SwiGLU FFN on n rows of h into out: (silu(h Wg) * (h Wu)) Wd. */
static brisk_status ffn(brisk_forward *f, const brisk_weight *wg, const brisk_weight *wu,
                        const brisk_weight *wd, const float *h, int32_t n, float *out) {
  brisk_backend *be = f->be;
  brisk_status st;
  if ((st = linear(f, wg, &no_bias, h, n, f->gate)) || (st = linear(f, wu, &no_bias, h, n, f->up)) ||
      (st = be->glu(be, BRISK_GLU_SWIGLU, f->gate, f->up, (int64_t)n * wg->rows, f->gate)))
    return st;
  return linear(f, wd, &no_bias, f->gate, n, out);
}

/* x[expert_rows[j]] += expert_w[j] * proj[j] for the rows of one expert. */
static brisk_status scatter_add_scaled(brisk_forward *f, int32_t rows) {
  brisk_backend *be = f->be;
  int64_t d = f->model->hp.n_embd;
  for (int32_t j = 0; j < rows; j++) {
    float *y = f->proj + (size_t)j * (size_t)d, *x = f->x + (size_t)f->expert_rows[j] * (size_t)d;
    brisk_status st;
    if ((st = be->scale(be, y, d, f->expert_w[j], y)) || (st = be->add(be, x, y, 1, d, false, x)))
      return st;
  }
  return BRISK_OK;
}

/* Mixture of experts: each token goes to its top-k experts; their outputs,
 * weighted by the renormalized router probabilities, are added to x.
 * Experts run in id order on the rows routed to them, so a token's sum is
 * taken in an order that depends on that token alone. */
static brisk_status moe(brisk_forward *f, const brisk_layer *ly, int32_t n) {
  const brisk_hparams *hp = &f->model->hp;
  brisk_backend *be = f->be;
  int32_t ku = (int32_t)hp->n_expert_used;
  brisk_status st;
  if ((st = linear(f, &ly->moe_router, &no_bias, f->h, n, f->router)) ||
      (st = be->moe_route(be, f->router, n, (int32_t)hp->n_expert, ku, true, f->route_ids,
                          f->route_w)))
    return st;
  for (int32_t e = 0; e < (int32_t)hp->n_expert; e++) {
    int32_t rows = 0;
    for (int32_t t = 0; t < n; t++)
      for (int32_t j = 0; j < ku; j++)
        if (f->route_ids[t * ku + j] == e) {
          f->expert_rows[rows] = t;
          f->expert_w[rows++] = f->route_w[t * ku + j];
        }
    if (rows == 0) continue;
    if ((st = be->embed(be, BRISK_DTYPE_F32, f->h, n, hp->n_embd, f->expert_rows, rows,
                        f->expert_in)) ||
        (st = ffn(f, &ly->expert_gate[e], &ly->expert_up[e], &ly->expert_down[e], f->expert_in,
                  rows, f->proj)) ||
        (st = scatter_add_scaled(f, rows)))
      return st;
  }
  return BRISK_OK;
}

static brisk_status attention_block(brisk_forward *f, const brisk_forward_kv *kv, int32_t il,
                                    const brisk_forward_batch *b) {
  const brisk_hparams *hp = &f->model->hp;
  const brisk_layer *ly = &f->model->layers[il];
  brisk_backend *be = f->be;
  int32_t n = b->n_tokens, hd = (int32_t)hp->head_dim;
  int64_t qd = (int64_t)hp->n_head * hd, kvd = (int64_t)hp->n_head_kv * hd;
  brisk_status st;
  if ((st = be->rmsnorm(be, f->x, ly->attn_norm.data, n, hp->n_embd, hp->rms_eps, f->h)) ||
      (st = linear(f, &ly->wq, &ly->bq, f->h, n, f->q)) ||
      (st = linear(f, &ly->wk, &ly->bk, f->h, n, f->k)) ||
      (st = linear(f, &ly->wv, &ly->bv, f->h, n, f->v)))
    return st;
  if (ly->q_norm.data &&
      ((st = be->rmsnorm(be, f->q, ly->q_norm.data, (int64_t)n * hp->n_head, hd, hp->rms_eps, f->q)) ||
       (st = be->rmsnorm(be, f->k, ly->k_norm.data, (int64_t)n * hp->n_head_kv, hd, hp->rms_eps,
                         f->k))))
    return st;
  if ((st = be->rope(be, f->q, n, qd, (int32_t)hp->n_head, hd, b->pos, &f->rope)) ||
      (st = be->rope(be, f->k, n, kvd, (int32_t)hp->n_head_kv, hd, b->pos, &f->rope)) ||
      (st = be->kv_write(be, &kv->layout, kv->k[il], kv->v[il], f->k, f->v, b->slot, n)))
    return st;
  brisk_attn_batch ab = {n, b->pos, b->seq_row, b->block_tables, b->n_seqs, b->max_blocks};
  brisk_attn_params ap = {(int32_t)hp->n_head, 0.0f, (int32_t)ly->sliding_window};
  if ((st = be->attention(be, &kv->layout, kv->k[il], kv->v[il], f->q, &ab, &ap, f->att)))
    return st;
  if ((st = linear(f, &ly->wo, &no_bias, f->att, n, f->proj))) return st;
  return be->add(be, f->x, f->proj, n, hp->n_embd, false, f->x);
}

static brisk_status ffn_block(brisk_forward *f, int32_t il, int32_t n) {
  const brisk_hparams *hp = &f->model->hp;
  const brisk_layer *ly = &f->model->layers[il];
  brisk_backend *be = f->be;
  brisk_status st = be->rmsnorm(be, f->x, ly->ffn_norm.data, n, hp->n_embd, hp->rms_eps, f->h);
  if (st) return st;
  if (hp->n_expert) return moe(f, ly, n);
  if ((st = ffn(f, &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, f->h, n, f->proj))) return st;
  return be->add(be, f->x, f->proj, n, hp->n_embd, false, f->x);
}

brisk_status brisk_forward_run(brisk_forward *f, const brisk_forward_kv *kv,
                               const brisk_forward_batch *b, float *logits,
                               brisk_forward_abort_fn abort_fn, void *abort_user_data) {
  const brisk_model *m = f->model;
  const brisk_hparams *hp = &m->hp;
  brisk_backend *be = f->be;
  if (b->n_tokens < 1 || b->n_tokens > f->max_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "batch of %d tokens; this context takes 1..%d",
                       b->n_tokens, f->max_tokens);
  brisk_status st = be->embed(be, m->token_embd.type, m->token_embd.data, hp->n_vocab,
                              hp->n_embd, b->tokens, b->n_tokens, f->x);
  if (st) return st;
  for (int32_t il = 0; il < (int32_t)hp->n_layer; il++) {
    if (abort_fn && abort_fn(abort_user_data))
      return brisk_error(BRISK_E_CANCELLED, "decode aborted by the host before layer %d", il);
    if ((st = attention_block(f, kv, il, b)) || (st = ffn_block(f, il, b->n_tokens))) return st;
  }
  if (b->n_out == 0) return BRISK_OK;
  /* Only the rows asked for reach the (large) output projection. */
  if ((st = be->embed(be, BRISK_DTYPE_F32, f->x, b->n_tokens, hp->n_embd, b->out_rows, b->n_out,
                      f->h)) ||
      (st = be->rmsnorm(be, f->h, m->output_norm.data, b->n_out, hp->n_embd, hp->rms_eps, f->h)))
    return st;
  return be->matmul(be, m->output.type, m->output.data, m->output.rows, m->output.cols, f->h,
                    b->n_out, logits);
}
