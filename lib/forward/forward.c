/* The transformer forward pass (llama family: llama, mistral, qwen2, qwen3,
 * mixtral), read top to bottom like the math:
 *
 *   x = embed(tokens)
 *   x = embed(tokens) (* embd_scale)
 *   for each layer:
 *     h = rmsnorm(x) * attn_norm                  (olmo2: h = x)
 *     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
 *     q, k = rmsnorm per head (qwen3) or over all heads (olmo2)
 *     q, k = rope(q, pos), rope(k, pos)     (gemma3 sliding layers: the local base)
 *     cache[slot] = k, v
 *     o = attention(q, cache) Wo             (scores soft-capped: gemma2)
 *     o = rmsnorm(o) * post_attn_norm        (olmo2, gemma)
 *     x += o (* residual_scale)
 *     h = rmsnorm(x) * ffn_norm                   (olmo2: h = x)
 *     o = (silu(h Wgate) * (h Wup)) Wdown   (gelu: gemma) or the MoE sum over top-k experts
 *                                            (+ sigmoid(h Wsg) * shared expert: qwen2moe)
 *     x += o, normed and scaled as after attention
 *   logits = rmsnorm(x[out_rows]) * output_norm . Woutput (* logit_scale, soft-capped)
 *
 * deepseek2 replaces the attention by multi-head latent attention
 * (mla_block): the cache keeps one latent row per token, never per-head K/V.
 *
 * Every step is one backend operation; buffers carry shape comments. */
#include "forward/forward.h"
#include "forward/rowpar.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

/* Activations on one device, for up to max_tokens rows. */
typedef struct fwd_dev {
  brisk_backend *be;
  float *x;    /* [max_tokens][n_embd] residual stream */
  float *h;    /* [max_tokens][n_embd] normalized input of a sub-block */
  float *q;    /* [max_tokens][n_head * head_dim] */
  float *k;    /* [max_tokens][n_head_kv * head_dim] */
  float *v;    /* [max_tokens][n_head_kv * head_dim] */
  float *att;  /* [max_tokens][n_head * head_dim] attention output */
  float *proj; /* [max_tokens][n_embd] output of a projection back to n_embd */
  float *gate; /* [max_tokens][n_ff] */
  float *up;   /* [max_tokens][n_ff] */
  /* Mixture of experts only. */
  float *router;    /* [max_tokens][n_expert] router logits */
  float *expert_in; /* [max_tokens][n_embd] rows routed to one expert */
  /* Multi-head latent attention only. */
  float *lat;   /* [max_tokens][kv_lora_rank] compressed KV latent */
  float *krope; /* [max_tokens][rope_dim] decoupled RoPE key */
  float *qa;    /* [max_tokens][q_lora_rank] low-rank query */
  /* Act-order models only: a linear's input gathered by its weight's column
   * order (brisk_weight.perm), and which input and order it holds now. */
  float *xg; /* [max_tokens][widest linear input] */
  const float *xg_src;
  const int32_t *xg_perm;
  int32_t xg_n;
} fwd_dev;

/* Device 0 is the host CPU (embeddings, and layers the model keeps there);
 * device 1, when the model has one, runs layers [0, n_dev_layers) and, when
 * output_on_device, the output. `cur` is where the residual stream is now:
 * each step runs on cur->be over cur's buffers. */
struct brisk_forward {
  const brisk_model *model;
  fwd_dev dev[2];
  int n_dev;
  fwd_dev *cur;
  float *staging; /* host [max_tokens][n_embd]: x between two devices */
  int32_t max_tokens;
  brisk_rope_params rope;
  brisk_rope_params rope_local; /* sliding-window layers (gemma3's local base) */
  /* LongRoPE: the long factors' rotation, and per sequence of a batch the
   * length it reaches (host [max_tokens]); rope_long.freq_factors NULL: no
   * LongRoPE. */
  brisk_rope_params rope_long;
  int32_t *seq_end;
  brisk_glu_kind glu;
  uint64_t bytes;
  int32_t *route_ids;               /* host [max_tokens][n_expert_used] */
  float *route_w;                   /* host [max_tokens][n_expert_used] */
  int32_t *expert_rows;             /* host [max_tokens] token indices routed to one expert */
  float *expert_w;                  /* host [max_tokens] their routing weights */
  brisk_forward_observe_fn observe; /* NULL: none (see forward.h) */
  void *observe_user;
  /* A split model (model/shard.h): wo, ffn_down and the expert sum as
   * fixed slots, and the output by vocabulary rows (forward/rowpar.h). */
  bool split;
  brisk_rowpar rp;
  /* A pipeline stage's pass runs layers [layer_begin, layer_end): one that
   * begins after layer 0 takes the residual stream as left in dev[0].x by
   * the previous stage, one that ends before the last layer stops there. */
  int32_t layer_begin, layer_end;
  bool hidden_out; /* brisk_forward_set_hidden_output */
};

/* An absent bias: linear() then adds nothing. */
static const brisk_weight no_bias;

static brisk_status alloc_buf(brisk_forward *f, fwd_dev *d, size_t rows, size_t cols, float **out) {
  size_t bytes = rows * cols * sizeof(float);
  f->bytes += bytes;
  return d->be->buffer_alloc(d->be, bytes, (void **)out);
}

static brisk_status alloc_dev(brisk_forward *f, fwd_dev *d) {
  const brisk_hparams *hp = &f->model->hp;
  size_t n = (size_t)f->max_tokens, e = hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim,
         kvd = (size_t)hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
  if (hp->n_ff_exp > ff) ff = hp->n_ff_exp;
  if (hp->n_ff_shexp > ff) ff = hp->n_ff_shexp;
  if ((size_t)hp->n_head * hp->mla_v_dim > qd) qd = (size_t)hp->n_head * hp->mla_v_dim;
  brisk_status st;
  if ((st = alloc_buf(f, d, n, e, &d->x)) || (st = alloc_buf(f, d, n, e, &d->h)) ||
      (st = alloc_buf(f, d, n, qd, &d->q)) || (st = alloc_buf(f, d, n, kvd, &d->k)) ||
      (st = alloc_buf(f, d, n, kvd, &d->v)) || (st = alloc_buf(f, d, n, qd, &d->att)) ||
      (st = alloc_buf(f, d, n, e, &d->proj)) || (st = alloc_buf(f, d, n, ff, &d->gate)) ||
      (st = alloc_buf(f, d, n, ff, &d->up)))
    return st;
  if (hp->n_expert && ((st = alloc_buf(f, d, n, hp->n_expert, &d->router)) ||
                       (st = alloc_buf(f, d, n, e, &d->expert_in))))
    return st;
  if (hp->kv_lora_rank && ((st = alloc_buf(f, d, n, hp->kv_lora_rank, &d->lat)) ||
                           (st = alloc_buf(f, d, n, hp->rope_dim, &d->krope)) ||
                           (hp->q_lora_rank && (st = alloc_buf(f, d, n, hp->q_lora_rank, &d->qa)))))
    return st;
  size_t widest = e > qd ? e : qd;
  if (ff > widest) widest = ff;
  if (hp->q_lora_rank > widest) widest = hp->q_lora_rank;
  if (f->model->act_order && (st = alloc_buf(f, d, n, widest, &d->xg))) return st;
  return BRISK_OK;
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
  case BRISK_HP_ROPE_SCALING_LONGROPE:
    r->scaling = BRISK_ROPE_SCALING_LONGROPE;
    r->attn_factor = hp->yarn_attn_factor;
    break;
  default: r->scaling = BRISK_ROPE_SCALING_NONE; break;
  }
}

brisk_status brisk_forward_create(const brisk_model *model, brisk_backend *host,
                                  brisk_backend *device, int32_t max_tokens, brisk_forward **out) {
  if (max_tokens < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "max batch tokens %d must be >= 1", max_tokens);
  if (!host || (model->n_dev_layers > 0) != (device != NULL))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "forward: a host backend, and a device backend exactly when the model "
                       "has layers on a device");
  brisk_forward *f = brisk_calloc(1, sizeof *f);
  if (!f) return brisk_error_oom();
  f->model = model;
  f->max_tokens = max_tokens;
  f->layer_end = (int32_t)model->hp.n_layer;
  f->dev[0].be = host;
  f->n_dev = 1;
  if (device) f->dev[f->n_dev++].be = device;
  const brisk_hparams *hp = &model->hp;
  rope_from_model(hp, &model->rope_freqs, &f->rope);
  f->rope_long = f->rope;
  f->rope_long.freq_factors = model->rope_long.data;
  f->glu = brisk_arch_get(hp->arch)->geglu ? BRISK_GLU_GEGLU : BRISK_GLU_SWIGLU;
  f->rope_local = f->rope;
  if (hp->rope_base_local != 0) { /* unscaled, own base */
    brisk_rope_params_init(&f->rope_local);
    f->rope_local.layout = f->rope.layout;
    f->rope_local.n_rot = f->rope.n_rot;
    f->rope_local.freq_base = hp->rope_base_local;
  }
  size_t n = (size_t)max_tokens;
  brisk_status st = BRISK_OK;
  for (int i = 0; i < f->n_dev && !st; i++) st = alloc_dev(f, &f->dev[i]);
  if (st) goto fail;
  if (f->n_dev > 1 && !(f->staging = brisk_malloc(n * hp->n_embd * sizeof(float)))) {
    st = brisk_error_oom();
    goto fail;
  }
  if (f->rope_long.freq_factors && !(f->seq_end = brisk_malloc(n * sizeof(int32_t)))) {
    st = brisk_error_oom();
    goto fail;
  }
  if (model->split) {
    /* The split's sums run where its layers do: on the device for a model
     * wholly there, else on the host. */
    brisk_backend *rp_dev = model->split->first_layer < model->n_dev_layers ? device : NULL;
    if ((st = brisk_rowpar_init(&f->rp, model, max_tokens, rp_dev))) goto fail;
    f->split = true;
    f->bytes += f->rp.bytes;
  }
  if (hp->n_expert) {
    size_t ku = hp->n_expert_used;
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
  for (int i = 0; i < f->n_dev; i++) {
    fwd_dev *d = &f->dev[i];
    float *bufs[] = {d->x,  d->h,      d->q,         d->k,   d->v,     d->att, d->proj, d->gate,
                     d->up, d->router, d->expert_in, d->lat, d->krope, d->qa,  d->xg};
    for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) d->be->buffer_free(d->be, bufs[j]);
  }
  if (f->split) brisk_rowpar_free(&f->rp);
  brisk_free(f->staging);
  brisk_free(f->seq_end);
  brisk_free(f->route_ids);
  brisk_free(f->route_w);
  brisk_free(f->expert_rows);
  brisk_free(f->expert_w);
  brisk_free(f);
}

/* Moves the residual stream (n rows) to device d; later steps run there. */
static brisk_status move_to(brisk_forward *f, int d, int32_t n) {
  fwd_dev *to = &f->dev[d];
  if (f->cur == to) return BRISK_OK;
  size_t bytes = (size_t)n * f->model->hp.n_embd * sizeof(float);
  brisk_status st = brisk_backend_transfer(to->be, to->x, f->cur->be, f->cur->x, bytes, f->staging);
  if (!st) f->cur = to;
  return st;
}

uint64_t brisk_forward_bytes(const brisk_forward *f) { return f->bytes; }

void brisk_forward_kv_geometry(const brisk_hparams *hp, int32_t *n_kv_heads, int32_t *head_dim) {
  *n_kv_heads = hp->kv_lora_rank ? 1 : (int32_t)hp->n_head_kv;
  *head_dim =
      hp->kv_lora_rank ? (int32_t)(hp->kv_lora_rank + hp->rope_dim) / 2 : (int32_t)hp->head_dim;
}

/* A sub-block begins: the buffers a gathered input came from are about to
 * be rewritten. */
static void fresh_inputs(brisk_forward *f) { f->cur->xg_src = NULL; }

/* The input of w's matmul over n rows of x: x itself, or for an act-order
 * matrix x's columns gathered by its order, x'[t][j] = x[t][perm[j]];
 * consecutive linears over the same x with one order (q/k/v, gate/up)
 * gather once. */
static brisk_status matmul_input(brisk_forward *f, const brisk_weight *w, const float *x, int32_t n,
                                 const float **in) {
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  *in = x;
  if (!w->perm) return BRISK_OK;
  if (a->xg_src != x || a->xg_perm != w->perm || a->xg_n != n) {
    if (!be->gather_cols)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "%s: act-order (desc_act) matrices need gather_cols, which this backend "
                         "does not offer",
                         be->name);
    brisk_status st = be->gather_cols(be, x, n, w->cols, w->perm, w->cols, a->xg);
    if (st) return st;
    a->xg_src = x;
    a->xg_perm = w->perm;
    a->xg_n = n;
  }
  *in = a->xg;
  return BRISK_OK;
}

/* y = x W^T for n rows, then + bias when the model has one. */
static brisk_status linear(brisk_forward *f, const brisk_weight *w, const brisk_weight *bias,
                           const float *x, int32_t n, float *y) {
  brisk_backend *be = f->cur->be;
  brisk_status st = matmul_input(f, w, x, n, &x);
  if (st) return st;
  if (f->observe && f->cur == &f->dev[0]) f->observe(f->observe_user, w, x, n);
  st = be->matmul(be, w->type, w->data, w->rows, w->cols, x, n, y);
  if (st || !bias->data) return st;
  return be->add(be, y, bias->data, n, w->rows, true, y);
}

/* One dense SwiGLU FFN on n rows of h into out: (silu(h Wg) * (h Wu)) Wd. */
static brisk_status ffn(brisk_forward *f, const brisk_weight *wg, const brisk_weight *wu,
                        const brisk_weight *wd, const float *h, int32_t n, float *out) {
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  brisk_status st;
  fresh_inputs(f); /* h: an expert's rows, rewritten for each */
  if ((st = linear(f, wg, &no_bias, h, n, a->gate)) ||
      (st = linear(f, wu, &no_bias, h, n, a->up)) ||
      (st = be->glu(be, f->glu, a->gate, a->up, (int64_t)n * wg->rows, a->gate)))
    return st;
  return linear(f, wd, &no_bias, a->gate, n, out);
}

/* into[expert_rows[j]] += expert_w[j] * proj[j] for the rows of one expert. */
static brisk_status scatter_add_scaled(brisk_forward *f, int32_t rows, float *into) {
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  int64_t d = f->model->hp.n_embd;
  for (int32_t j = 0; j < rows; j++) {
    float *y = a->proj + (size_t)j * (size_t)d, *x = into + (size_t)f->expert_rows[j] * (size_t)d;
    brisk_status st;
    if ((st = be->scale(be, y, d, f->expert_w[j], y)) || (st = be->add(be, x, y, 1, d, false, x)))
      return st;
  }
  return BRISK_OK;
}

/* The layer's slot split, when the model has one covering the layer
 * (every layer of a CPU model or of one wholly on a device; the host
 * layers of one split between them, whose device layers keep whole wo /
 * ffn_down). */
static const brisk_split_layer *split_of(const brisk_forward *f, int32_t il) {
  if (!f->split || il < f->model->split->first_layer) return NULL;
  return &f->model->split->layers[il];
}

/* Experts [e0, e1) on the rows routed to them, each output weighted by
 * the token's routing weight and added into `into` ([n][n_embd]). */
static brisk_status run_experts(brisk_forward *f, const brisk_layer *ly, int32_t n, int32_t e0,
                                int32_t e1, float *into) {
  const brisk_hparams *hp = &f->model->hp;
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  int32_t ku = (int32_t)hp->n_expert_used;
  for (int32_t e = e0; e < e1; e++) {
    int32_t rows = 0;
    for (int32_t t = 0; t < n; t++)
      for (int32_t j = 0; j < ku; j++)
        if (f->route_ids[t * ku + j] == e) {
          f->expert_rows[rows] = t;
          /* deepseek2's routed_scaling_factor, on the host's copy. */
          f->expert_w[rows++] = f->route_w[t * ku + j] * (hp->moe_scale != 0 ? hp->moe_scale : 1);
        }
    if (rows == 0) continue;
    brisk_status st;
    if ((st = be->embed(be, BRISK_DTYPE_F32, a->h, n, hp->n_embd, f->expert_rows, rows,
                        a->expert_in)) ||
        (st = ffn(f, &ly->expert_gate[e], &ly->expert_up[e], &ly->expert_down[e], a->expert_in,
                  rows, a->proj)) ||
        (st = scatter_add_scaled(f, rows, into)))
      return st;
  }
  return BRISK_OK;
}

static brisk_status shared_expert(brisk_forward *f, const brisk_layer *ly, int32_t n);

/* Mixture of experts: each token goes to its top-k experts; their outputs,
 * weighted by the router probabilities (renormalized over the k when the
 * model says so), are added to x, then the shared expert's when it has one.
 * Experts run in id order on the rows routed to them, so a token's sum is
 * taken in an order that depends on that token alone. A split model sums
 * each slot's experts (this rank's slots; the others are absent here) into
 * a zeroed partial sum, and the slots in the fixed tree. */
static brisk_status moe(brisk_forward *f, const brisk_layer *ly, int32_t il, int32_t n) {
  const brisk_hparams *hp = &f->model->hp;
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  int32_t ku = (int32_t)hp->n_expert_used;
  brisk_status st;
  if ((st = linear(f, &ly->moe_router, &no_bias, a->h, n, a->router))) return st;
  if (hp->moe_n_group) {
    if (!be->moe_route_group)
      return brisk_error(BRISK_E_UNSUPPORTED, "%s: group-limited expert routing is not offered",
                         be->name);
    st = be->moe_route_group(be, a->router, n, (int32_t)hp->n_expert, ku, (int32_t)hp->moe_n_group,
                             (int32_t)hp->moe_topk_group, hp->moe_renorm, f->route_ids, f->route_w);
  } else {
    st = be->moe_route(be, a->router, n, (int32_t)hp->n_expert, ku, hp->moe_renorm, f->route_ids,
                       f->route_w);
  }
  if (st) return st;
  const brisk_split_layer *sl = split_of(f, il);
  if (!sl) {
    if ((st = run_experts(f, ly, n, 0, (int32_t)hp->n_expert, a->x))) return st;
    return shared_expert(f, ly, n);
  }
  for (int32_t j = 0; j < f->model->split->n_slots; j++) {
    float *part = brisk_rowpar_slot(&f->rp);
    if ((st = brisk_rowpar_zero_slot(&f->rp, be, n)) ||
        (st = run_experts(f, ly, n, sl->expert[j], sl->expert[j + 1], part)) ||
        (st = brisk_rowpar_push(&f->rp, be, n)))
      return st;
  }
  if ((st = brisk_rowpar_finish(&f->rp, be, n, a->proj)) ||
      (st = be->add(be, a->x, a->proj, n, hp->n_embd, false, a->x)))
    return st;
  return shared_expert(f, ly, n);
}

/* The shared expert (qwen2moe): it sees every token, scaled by its own
 * sigmoid gate; replicated on every rank of a split model. */
static brisk_status shared_expert(brisk_forward *f, const brisk_layer *ly, int32_t n) {
  const brisk_hparams *hp = &f->model->hp;
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  brisk_status st;
  if (!ly->shexp_gate.data) return BRISK_OK;
  if ((st = ffn(f, &ly->shexp_gate, &ly->shexp_up, &ly->shexp_down, a->h, n, a->proj)) ||
      (ly->shexp_gate_inp.data &&
       ((st = linear(f, &ly->shexp_gate_inp, &no_bias, a->h, n, a->router)) ||
        (st = be->sigmoid_gate(be, a->proj, a->router, n, hp->n_embd, a->proj)))))
    return st;
  return be->add(be, a->x, a->proj, n, hp->n_embd, false, a->x);
}

/* h = rmsnorm(x) * norm, when the block has a pre-norm (olmo2 has none). */
static brisk_status pre_norm(brisk_forward *f, const brisk_weight *norm, int32_t n) {
  const brisk_hparams *hp = &f->model->hp;
  brisk_backend *be = f->cur->be;
  if (!norm->data) return BRISK_OK;
  return be->rmsnorm(be, f->cur->x, norm->data, n, hp->n_embd, hp->rms_eps, f->cur->h);
}

/* x += proj, after a post-norm (olmo2) and the residual multiplier
 * (granite) when the model has them. */
static brisk_status residual_add(brisk_forward *f, const brisk_weight *post_norm, int32_t n) {
  const brisk_hparams *hp = &f->model->hp;
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  int64_t d = hp->n_embd;
  brisk_status st;
  if (post_norm->data &&
      (st = be->rmsnorm(be, a->proj, post_norm->data, n, d, hp->rms_eps, a->proj)))
    return st;
  if (hp->residual_scale != 0 && (st = be->scale(be, a->proj, n * d, hp->residual_scale, a->proj)))
    return st;
  return be->add(be, a->x, a->proj, n, d, false, a->x);
}

/* proj = the slots of a row-parallel weight over in ([n][in_cols]),
 * summed over every rank. */
static brisk_status rowpar(brisk_forward *f, const brisk_weight *whole, const brisk_weight *w,
                           const int32_t *col, const float *in, int64_t in_cols, int32_t n) {
  brisk_backend *be = f->cur->be;
  /* An act-order weight runs on one rank only (model/shard.c): its slots
   * cut the gathered input. */
  brisk_status st = matmul_input(f, whole, in, n, &in);
  if (st) return st;
  /* The observer sees the whole weight's input; a rank of a larger group
   * holds only some of its columns and reports none. */
  if (f->observe && in_cols == whole->cols && f->cur == &f->dev[0])
    f->observe(f->observe_user, whole, in, n);
  for (int32_t j = 0; j < f->model->split->n_slots; j++)
    if ((st = brisk_rowpar_matmul(&f->rp, be, &w[j], in, in_cols, col[j], col[j + 1], n)))
      return st;
  return brisk_rowpar_finish(&f->rp, be, n, f->cur->proj);
}

/* Copies the batch's keep_rows of K (before RoPE) and V of layer il to the
 * host (attention sinks). */
static brisk_status keep_kv(brisk_forward *f, int32_t il, const brisk_forward_batch *b) {
  const brisk_hparams *hp = &f->model->hp;
  fwd_dev *a = f->cur;
  size_t kvd = (size_t)hp->n_head_kv * hp->head_dim, bytes = kvd * sizeof(float);
  for (int32_t j = 0; j < b->n_keep; j++) {
    size_t at = ((size_t)il * (size_t)b->n_keep + (size_t)j) * kvd;
    size_t row = (size_t)b->keep_rows[j] * kvd;
    brisk_status st;
    if ((st = a->be->download(a->be, b->keep_k + at, a->k + row, bytes)) ||
        (st = a->be->download(a->be, b->keep_v + at, a->v + row, bytes)))
      return st;
  }
  return BRISK_OK;
}

/* Multi-head latent attention (DeepSeek-V2), read like the math:
 *   q = h Wq, or rmsnorm(h Wq_a) * q_a_norm . Wq_b   [n][n_head][nope | rope]
 *   c = rmsnorm(h Wkv_a[latent rows]) * kv_a_norm    [n][kv_lora_rank]
 *   k_r = h Wkv_a[rope rows]                         [n][rope_dim], one for all heads
 *   q[rope part], k_r = rope(., pos)
 *   cache[slot] = [c | k_r]          the latent row: no per-head K or V
 *   o = mla_attention(q, cache, kv_b) Wo    (kv_b absorbed into q and the output)
 * The latent norms use eps 1e-6 (transformers' and DeepSeek's code build
 * them without the config's rms_norm_eps). */
static brisk_status mla_block(brisk_forward *f, const brisk_forward_kv *kv, int32_t il,
                              const brisk_forward_batch *b) {
  const brisk_hparams *hp = &f->model->hp;
  const brisk_layer *ly = &f->model->layers[il];
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  const int32_t n = b->n_tokens, hd = (int32_t)hp->head_dim, nh = (int32_t)hp->n_head;
  const int32_t r = (int32_t)hp->kv_lora_rank, dr = (int32_t)hp->rope_dim;
  const int64_t qd = (int64_t)nh * hd;
  const float latent_eps = 1e-6f;
  if (!be->mla_attention || !be->mla_kv_write)
    return brisk_error(BRISK_E_UNSUPPORTED, "%s: multi-head latent attention is not offered",
                       be->name);
  brisk_status st = pre_norm(f, &ly->attn_norm, n);
  if (st) return st;
  if (ly->wq_a.data) {
    if ((st = linear(f, &ly->wq_a, &no_bias, a->h, n, a->qa)) ||
        (st = be->rmsnorm(be, a->qa, ly->q_a_norm.data, n, ly->wq_a.rows, latent_eps, a->qa)) ||
        (st = linear(f, &ly->wq_b, &no_bias, a->qa, n, a->q)))
      return st;
  } else if ((st = linear(f, &ly->wq, &no_bias, a->h, n, a->q))) {
    return st;
  }
  brisk_mla_params mp = {
      nh, r, (int32_t)hp->mla_nope_dim, dr, (int32_t)hp->mla_v_dim, hp->attn_scale};
  /* RoPE on dims [nope, nope + rope) of each query head: a view whose
   * heads start nope values in. */
  if ((st = linear(f, &ly->wkv_a_lat, &no_bias, a->h, n, a->lat)) ||
      (st = be->rmsnorm(be, a->lat, ly->kv_a_norm.data, n, r, latent_eps, a->lat)) ||
      (st = linear(f, &ly->wkv_a_rope, &no_bias, a->h, n, a->krope)) ||
      (st = be->rope(be, a->q + mp.nope_dim, n, qd, nh, hd, b->pos, &f->rope)) ||
      (st = be->rope(be, a->krope, n, dr, 1, dr, b->pos, &f->rope)) ||
      (st = be->mla_kv_write(be, &kv->layout, kv->k[il], kv->v[il], a->lat, a->krope, b->slot, n,
                             &mp)))
    return st;
  brisk_attn_batch ab = {n, b->pos, b->seq_row, b->block_tables, b->n_seqs, b->max_blocks};
  if ((st = be->mla_attention(be, &kv->layout, kv->k[il], kv->v[il], a->q, ly->wkv_b.data, &ab, &mp,
                              a->att)))
    return st;
  const int64_t od = (int64_t)nh * mp.v_dim;
  const brisk_split_layer *sl = split_of(f, il);
  if ((st = sl ? rowpar(f, &ly->wo, sl->wo, sl->att_col, a->att, od, n)
               : linear(f, &ly->wo, &no_bias, a->att, n, a->proj)))
    return st;
  return residual_add(f, &ly->post_attn_norm, n);
}

/* RoPE on the batch's rows of x ([n_tokens][stride], heads of hd). LongRoPE
 * rotates a sequence by its long factors once it is longer than the
 * original context after this batch (its rows' largest position + 1), as
 * transformers switches per forward call, else by the short ones; the rows
 * go to the backend in runs of one choice. */
static brisk_status rope_rows(brisk_forward *f, brisk_backend *be, float *x, int64_t stride,
                              int32_t n_heads, const brisk_forward_batch *b, const int32_t *pos,
                              const brisk_rope_params *rope) {
  const int32_t n = b->n_tokens, hd = (int32_t)f->model->hp.head_dim;
  if (rope->scaling != BRISK_ROPE_SCALING_LONGROPE || !f->rope_long.freq_factors)
    return be->rope(be, x, n, stride, n_heads, hd, pos, rope);
  if (b->n_seqs > f->max_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "forward: %d sequences in a batch of at most %d",
                       b->n_seqs, f->max_tokens);
  int32_t *end = f->seq_end; /* [n_seqs] */
  for (int32_t s = 0; s < b->n_seqs; s++) end[s] = 0;
  for (int32_t i = 0; i < n; i++)
    if (b->pos[i] + 1 > end[b->seq_row[i]]) end[b->seq_row[i]] = b->pos[i] + 1;
  for (int32_t i = 0; i < n;) {
    const bool is_long = end[b->seq_row[i]] > rope->orig_ctx;
    int32_t j = i + 1;
    while (j < n && (end[b->seq_row[j]] > rope->orig_ctx) == is_long) j++;
    brisk_status st = be->rope(be, x + (size_t)i * (size_t)stride, j - i, stride, n_heads, hd,
                               pos + i, is_long ? &f->rope_long : rope);
    if (st) return st;
    i = j;
  }
  return BRISK_OK;
}

static brisk_status attention_block(brisk_forward *f, const brisk_forward_kv *kv, int32_t il,
                                    const brisk_forward_batch *b) {
  const brisk_hparams *hp = &f->model->hp;
  const brisk_layer *ly = &f->model->layers[il];
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  fresh_inputs(f);
  if (hp->kv_lora_rank) return mla_block(f, kv, il, b);
  int32_t n = b->n_tokens, hd = (int32_t)hp->head_dim;
  int64_t qd = (int64_t)hp->n_head * hd, kvd = (int64_t)hp->n_head_kv * hd;
  /* A layer sharing an earlier layer's K/V (model/kv_share.h) computes
   * none: its queries attend to the source layer's pools, already written
   * for this batch's tokens. */
  const int32_t src = ly->kv_source;
  const bool own_kv = src == il;
  brisk_status st = pre_norm(f, &ly->attn_norm, n);
  const float *h = ly->attn_norm.data ? a->h : a->x;
  if (st || (st = linear(f, &ly->wq, &ly->bq, h, n, a->q)) ||
      (own_kv && ((st = linear(f, &ly->wk, &ly->bk, h, n, a->k)) ||
                  (st = linear(f, &ly->wv, &ly->bv, h, n, a->v)))))
    return st;
  /* Per head ([head_dim] weights), or over all heads of a token. */
  int64_t qn = ly->q_norm.cols, kn = ly->k_norm.cols;
  if (ly->q_norm.data &&
      ((st = be->rmsnorm(be, a->q, ly->q_norm.data, n * qd / qn, qn, hp->rms_eps, a->q)) ||
       (own_kv &&
        (st = be->rmsnorm(be, a->k, ly->k_norm.data, n * kvd / kn, kn, hp->rms_eps, a->k)))))
    return st;
  if (own_kv && b->n_keep > 0 && (st = keep_kv(f, il, b))) return st;
  const brisk_rope_params *rope = ly->sliding_window ? &f->rope_local : &f->rope;
  const int32_t *rpos = b->rope_pos ? b->rope_pos : b->pos;
  if ((st = rope_rows(f, be, a->q, qd, (int32_t)hp->n_head, b, rpos, rope)) ||
      (own_kv &&
       ((st = rope_rows(f, be, a->k, kvd, (int32_t)hp->n_head_kv, b, rpos, rope)) ||
        (st = be->kv_write(be, &kv->layout, kv->k[il], kv->v[il], a->k, a->v, b->slot, n)))))
    return st;
  brisk_attn_batch ab = {n, b->pos, b->seq_row, b->block_tables, b->n_seqs, b->max_blocks};
  brisk_attn_params ap = {(int32_t)hp->n_head, hp->attn_scale, (int32_t)ly->sliding_window,
                          hp->attn_softcap};
  if ((st = be->attention(be, &kv->layout, kv->k[src], kv->v[src], a->q, &ab, &ap, a->att)))
    return st;
  const brisk_split_layer *sl = split_of(f, il);
  if ((st = sl ? rowpar(f, &ly->wo, sl->wo, sl->att_col, a->att, qd, n)
               : linear(f, &ly->wo, &no_bias, a->att, n, a->proj)))
    return st;
  return residual_add(f, &ly->post_attn_norm, n);
}

static brisk_status ffn_block(brisk_forward *f, int32_t il, int32_t n) {
  const brisk_layer *ly = &f->model->layers[il];
  fwd_dev *a = f->cur;
  brisk_backend *be = a->be;
  fresh_inputs(f);
  brisk_status st = pre_norm(f, &ly->ffn_norm, n);
  if (st) return st;
  if (ly->moe_router.data) return moe(f, ly, il, n);
  const float *h = ly->ffn_norm.data ? a->h : a->x;
  const brisk_split_layer *sl = split_of(f, il);
  if (sl) {
    if ((st = linear(f, &ly->ffn_gate, &no_bias, h, n, a->gate)) ||
        (st = linear(f, &ly->ffn_up, &no_bias, h, n, a->up)) ||
        (st = be->glu(be, f->glu, a->gate, a->up, (int64_t)n * ly->ffn_gate.rows, a->gate)) ||
        (st = rowpar(f, &ly->ffn_down, sl->down, sl->ff_col, a->gate, ly->ffn_gate.rows, n)))
      return st;
  } else if ((st = ffn(f, &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, h, n, a->proj))) {
    return st;
  }
  return residual_add(f, &ly->post_ffn_norm, n);
}

static brisk_status forward_pass(brisk_forward *f, const brisk_forward_kv *kv,
                                 const brisk_forward_batch *b, float *logits,
                                 brisk_forward_abort_fn abort_fn, void *abort_user_data) {
  const brisk_model *m = f->model;
  const brisk_hparams *hp = &m->hp;
  if (b->n_tokens < 1 || b->n_tokens > f->max_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "batch of %d tokens; this context takes 1..%d",
                       b->n_tokens, f->max_tokens);
  /* Embeddings are gathered on the host, whatever runs the layers. */
  f->cur = &f->dev[0];
  f->rp.top = 0; /* a failed pass may have left partial sums */
  brisk_backend *be = f->cur->be;
  brisk_status st = BRISK_OK;
  if (f->layer_begin == 0)
    st = be->embed(be, m->token_embd.type, m->token_embd.data, hp->n_vocab, hp->n_embd, b->tokens,
                   b->n_tokens, f->cur->x);
  if (!st && f->layer_begin == 0 && hp->embd_scale != 0)
    st = be->scale(be, f->cur->x, (int64_t)b->n_tokens * hp->n_embd, hp->embd_scale, f->cur->x);
  if (st) return st;
  for (int32_t il = f->layer_begin; il < f->layer_end; il++) {
    if (abort_fn && abort_fn(abort_user_data))
      return brisk_error(BRISK_E_CANCELLED, "decode aborted by the host before layer %d", il);
    if ((st = move_to(f, brisk_forward_layer_device(m, il), b->n_tokens)) ||
        (st = attention_block(f, kv, il, b)) || (st = ffn_block(f, il, b->n_tokens)))
      return st;
  }
  if (b->n_out == 0 || f->layer_end < (int32_t)hp->n_layer) return BRISK_OK;
  if ((st = move_to(f, m->output_on_device ? 1 : 0, b->n_tokens))) return st;
  fwd_dev *a = f->cur;
  be = a->be;
  /* Only the rows asked for reach the (large) output projection. */
  if ((st = be->embed(be, BRISK_DTYPE_F32, a->x, b->n_tokens, hp->n_embd, b->out_rows, b->n_out,
                      a->h)) ||
      (st = be->rmsnorm(be, a->h, m->output_norm.data, b->n_out, hp->n_embd, hp->rms_eps, a->h)))
    return st;
  if (f->hidden_out) /* embeddings: the normed hidden states instead of logits */
    return brisk_backend_transfer(f->dev[0].be, logits, be, a->h,
                                  (size_t)b->n_out * hp->n_embd * sizeof(float), f->staging);
  const float *h = a->h;
  fresh_inputs(f);
  if ((st = matmul_input(f, &m->output, a->h, b->n_out, &h))) return st;
  if (f->observe && a == &f->dev[0]) f->observe(f->observe_user, &m->output, h, b->n_out);
  if ((st = f->split && m->split->tp_size > 1
                ? brisk_rowpar_output(&f->rp, be, m, h, b->n_out, logits)
                : be->matmul(be, m->output.type, m->output.data, m->output.rows, m->output.cols, h,
                             b->n_out, logits)))
    return st;
  int64_t n_logits = (int64_t)b->n_out * m->output.rows;
  if (hp->logit_scale != 0 && (st = be->scale(be, logits, n_logits, hp->logit_scale, logits)))
    return st;
  if (hp->final_softcap != 0) st = be->softcap(be, logits, n_logits, hp->final_softcap, logits);
  return st;
}

void brisk_forward_set_observer(brisk_forward *f, brisk_forward_observe_fn fn, void *user) {
  f->observe = fn;
  f->observe_user = user;
}

void brisk_forward_set_comm(brisk_forward *f, brisk_comm *comm) { f->rp.comm = comm; }

void brisk_forward_set_layers(brisk_forward *f, int32_t begin, int32_t end) {
  f->layer_begin = begin;
  f->layer_end = end;
}

float *brisk_forward_residual(brisk_forward *f) { return f->dev[0].x; }
void brisk_forward_set_hidden_output(brisk_forward *f, bool on) { f->hidden_out = on; }

int brisk_forward_layer_device(const brisk_model *m, int32_t layer) {
  return layer < m->n_dev_layers ? 1 : 0;
}

int brisk_forward_output_device(const brisk_model *m) { return m->output_on_device ? 1 : 0; }

/* A pass whose work stays on the device after the host's embedding (every
 * layer and the output there, no MoE routing read back, no collectives of
 * a tensor-parallel group, which wait on the host mid-pass) is bracketed
 * as one step, which the device may record and replay (CUDA graphs). */
brisk_status brisk_forward_run(brisk_forward *f, const brisk_forward_kv *kv,
                               const brisk_forward_batch *b, float *logits,
                               brisk_forward_abort_fn abort_fn, void *abort_user_data) {
  const brisk_model *m = f->model;
  brisk_backend *dev = f->n_dev > 1 ? f->dev[1].be : NULL;
  if (!dev || !dev->step_begin || m->n_dev_layers < (int32_t)m->hp.n_layer ||
      !m->output_on_device || m->hp.n_expert || b->n_tokens < 1 || b->n_tokens > f->max_tokens ||
      b->n_keep > 0 || /* reads K/V back to the host mid-pass */
      (f->split && m->split->tp_size > 1))
    return forward_pass(f, kv, b, logits, abort_fn, abort_user_data);
  brisk_status st = dev->step_begin(dev, b->n_tokens);
  if (st) return st;
  st = forward_pass(f, kv, b, logits, abort_fn, abort_user_data);
  brisk_status end = dev->step_end(dev, st == BRISK_OK);
  return st ? st : end;
}

brisk_status brisk_forward_rewrite_kv(brisk_forward *f, const brisk_forward_kv *kv, int32_t n,
                                      const float *k, const float *v, const int32_t *rope_pos,
                                      const int64_t *slot) {
  const brisk_model *m = f->model;
  const brisk_hparams *hp = &m->hp;
  if (n < 1 || n > f->max_tokens)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rewrite of %d tokens' K/V; this pass takes 1..%d",
                       n, f->max_tokens);
  int32_t hd = (int32_t)hp->head_dim;
  int64_t kvd = (int64_t)hp->n_head_kv * hd;
  size_t bytes = (size_t)n * (size_t)kvd * sizeof(float);
  for (int32_t il = 0; il < (int32_t)hp->n_layer; il++) {
    if (m->layers[il].kv_source != il) continue; /* holds no K/V of its own */
    fwd_dev *d = &f->dev[brisk_forward_layer_device(m, il)];
    brisk_backend *be = d->be;
    const brisk_rope_params *rope = m->layers[il].sliding_window ? &f->rope_local : &f->rope;
    size_t at = (size_t)il * (size_t)n * (size_t)kvd;
    brisk_status st;
    if ((st = be->upload(be, d->k, k + at, bytes)) || (st = be->upload(be, d->v, v + at, bytes)) ||
        (st = be->rope(be, d->k, n, kvd, (int32_t)hp->n_head_kv, hd, rope_pos, rope)) ||
        (st = be->kv_write(be, &kv->layout, kv->k[il], kv->v[il], d->k, d->v, slot, n)))
      return st;
  }
  return BRISK_OK;
}
