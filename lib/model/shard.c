/* Tensor-parallel shards and the fixed slot split (model/shard.h).
 *
 * Column-parallel weights (wq, wk, wv and their biases, ffn_gate, ffn_up,
 * the output projection) are cut by rows, which are contiguous in the
 * stored layout: a rank's part is a view of the file. Row-parallel weights
 * (wo, ffn_down) are cut by columns into slot copies. Experts are whole: a
 * rank holds (views of) the experts of its slots. Everything else (token
 * embeddings, norms, the router) is replicated as views. */
#include "model/shard.h"
#include "model/load.h"

#include "backend/device.h"
#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>

/* First unit of slot s when `units` are cut into BRISK_SPLIT_SLOTS. */
static int64_t slot_begin(int32_t s, int64_t units) {
  return (int64_t)s * units / BRISK_SPLIT_SLOTS;
}

static uint32_t block_of(uint32_t type) {
  const brisk_dtype_info *info = brisk_dtype_get(brisk_dtype_base(type));
  return info ? info->block_size : 1;
}

static uint64_t wbytes(const brisk_weight *w) {
  return w->data ? w->row_bytes * (uint64_t)w->rows : 0;
}

int32_t brisk_split_model_slots(const brisk_model *m) {
  const brisk_hparams *hp = &m->hp;
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const brisk_weight *wo = &m->layers[l].wo;
    if (brisk_dtype_is_packed(wo->type)) return 1;
    uint32_t blk = block_of(wo->type);
    for (int32_t s = 1; s < BRISK_SPLIT_SLOTS; s++)
      if ((slot_begin(s, hp->n_head) * (hp->kv_lora_rank ? hp->mla_v_dim : hp->head_dim)) % blk)
        return 1;
    const brisk_weight *wd = &m->layers[l].ffn_down;
    if (wd->data && brisk_dtype_is_packed(wd->type)) return 1;
  }
  return BRISK_SPLIT_SLOTS;
}

static brisk_status own(brisk_split *sp, size_t bytes, void **out) {
  if (brisk_grow((void **)&sp->bufs, &sp->bufs_cap, sp->n_bufs + 1, sizeof *sp->bufs))
    return brisk_error_oom();
  void *p = brisk_aligned_alloc(64, bytes ? bytes : 1);
  if (!p) return brisk_error_oom();
  sp->bufs[sp->n_bufs++] = p;
  sp->owned_bytes += bytes;
  *out = p;
  return BRISK_OK;
}

/* Columns [c0, c1) of w (multiples of its block) into a new weight. */
static brisk_status copy_cols(brisk_split *sp, const brisk_weight *w, int64_t c0, int64_t c1,
                              brisk_weight *out) {
  *out = (brisk_weight){NULL, w->type, c1 - c0, w->rows, 0, w->name, NULL};
  if (c1 <= c0) return BRISK_OK;
  uint64_t off, rb;
  if (!brisk_dtype_row_bytes(w->type, (uint64_t)c0, &off) ||
      !brisk_dtype_row_bytes(w->type, (uint64_t)(c1 - c0), &rb))
    return brisk_error(BRISK_E_INTERNAL, "tensor '%s': columns %lld..%lld are not whole blocks",
                       w->name, (long long)c0, (long long)c1);
  void *p;
  brisk_status st = own(sp, (size_t)(rb * (uint64_t)w->rows), &p);
  if (st) return st;
  for (int64_t r = 0; r < w->rows; r++)
    memcpy((char *)p + (size_t)r * rb, (const char *)w->data + (size_t)r * w->row_bytes + off,
           (size_t)rb);
  out->data = p;
  out->row_bytes = rb;
  return BRISK_OK;
}

/* Rows [r0, r1) of a matrix as a view; a vector's elements [r0, r1). */
static brisk_weight view_rows(const brisk_weight *w, int64_t r0, int64_t r1) {
  brisk_weight v = *w;
  if (!w->data) return v;
  if (w->rows == 1 && w->cols > 1 && r1 <= w->cols && w->type == BRISK_DTYPE_F32) {
    v.data = (const float *)w->data + r0;
    v.cols = r1 - r0;
    v.row_bytes = (uint64_t)(r1 - r0) * sizeof(float);
    return v;
  }
  v.data = (const char *)w->data + (size_t)r0 * w->row_bytes;
  v.rows = r1 - r0;
  return v;
}

/* The slot split of one layer for slots [s0, s0 + n): columns relative to
 * the rank's first head and first FFN column. */
static brisk_status split_layer(brisk_split *sp, const brisk_model *m, const brisk_layer *ly,
                                int32_t s0, int32_t n, brisk_split_layer *out) {
  const brisk_hparams *hp = &m->hp;
  /* wo's columns per head: latent attention's heads give v_head_dim values. */
  int64_t hd = hp->kv_lora_rank ? hp->mla_v_dim : hp->head_dim, h0 = slot_begin(s0, hp->n_head);
  brisk_status st = BRISK_OK;
  for (int32_t j = 0; j <= n; j++) {
    out->att_col[j] = (int32_t)((slot_begin(s0 + j, hp->n_head) - h0) * hd);
    out->expert[j] = (int32_t)slot_begin(s0 + j, hp->n_expert);
  }
  for (int32_t j = 0; j < n && !st; j++)
    st = copy_cols(sp, &ly->wo, h0 * hd + out->att_col[j], h0 * hd + out->att_col[j + 1],
                   &out->wo[j]);
  if (st || !ly->ffn_down.data) return st;
  int64_t blk = block_of(ly->ffn_down.type), units = ly->ffn_down.cols / blk;
  int64_t f0 = slot_begin(s0, units) * blk;
  for (int32_t j = 0; j <= n; j++) out->ff_col[j] = (int32_t)(slot_begin(s0 + j, units) * blk - f0);
  for (int32_t j = 0; j < n && !st; j++)
    st = copy_cols(sp, &ly->ffn_down, f0 + out->ff_col[j], f0 + out->ff_col[j + 1], &out->down[j]);
  return st;
}

static void free_split(brisk_split *sp) {
  if (!sp) return;
  for (size_t i = 0; i < sp->n_bufs; i++) brisk_aligned_free(sp->bufs[i]);
  brisk_free(sp->bufs);
  brisk_free(sp->layers);
  brisk_free(sp);
}

/* The split of rank `rank` of tp, n_slots slots each, over the model's layers. */
static brisk_status make_split(const brisk_model *m, int32_t tp, int32_t rank, int32_t n_slots,
                               uint32_t first_layer, brisk_split **out) {
  brisk_split *sp = brisk_calloc(1, sizeof *sp);
  if (!sp || !(sp->layers = brisk_calloc(m->hp.n_layer, sizeof *sp->layers))) {
    brisk_free(sp);
    return brisk_error_oom();
  }
  sp->tp_size = tp;
  sp->tp_rank = rank;
  sp->n_slots = n_slots;
  sp->first_layer = (int32_t)first_layer;
  for (int32_t q = 0; q <= tp; q++) sp->vocab_begin[q] = (int32_t)((int64_t)q * m->hp.n_vocab / tp);
  for (int32_t q = 0; q < tp; q++)
    if (sp->vocab_begin[q + 1] - sp->vocab_begin[q] > sp->vocab_max)
      sp->vocab_max = sp->vocab_begin[q + 1] - sp->vocab_begin[q];
  brisk_status st = BRISK_OK;
  /* The slot copies of the layers this process runs (all but in an MPI
   * job's stage). */
  uint32_t l0 = first_layer > (uint32_t)m->local_begin ? first_layer : (uint32_t)m->local_begin;
  for (uint32_t l = l0; l < (uint32_t)brisk_model_local_end(m) && !st; l++)
    st = split_layer(sp, m, &m->layers[l], rank * n_slots, n_slots, &sp->layers[l]);
  if (st) {
    free_split(sp);
    return st;
  }
  *out = sp;
  return BRISK_OK;
}

brisk_status brisk_split_attach(brisk_model *m, uint32_t first_host_layer) {
  if (m->split || first_host_layer >= m->hp.n_layer) return BRISK_OK;
  int32_t slots = brisk_split_model_slots(m);
  if (slots == 1) return BRISK_OK;
  return make_split(m, 1, 0, slots, first_host_layer, &m->split);
}

/* Rows of the rank's KV heads for wk / wv (and bk / bv): a view when the
 * rank's query heads [h0, h1) map onto their KV heads uniformly (whole
 * groups, or part of one group), else one copied KV head per query head. */
static brisk_status kv_rows(brisk_split *sp, const brisk_hparams *hp, int64_t h0, int64_t h1,
                            const brisk_weight *w, uint32_t *n_kv, brisk_weight *out) {
  int64_t g = hp->n_head / hp->n_head_kv, hd = hp->head_dim, kv0 = h0 / g, kv1 = (h1 - 1) / g + 1,
          nq = h1 - h0, nkv = kv1 - kv0;
  bool uniform = nq % nkv == 0;
  for (int64_t j = 0; j < nq && uniform; j++) uniform = (h0 + j) / g - kv0 == j / (nq / nkv);
  if (uniform) {
    *n_kv = (uint32_t)nkv;
    *out = view_rows(w, kv0 * hd, kv1 * hd);
    return BRISK_OK;
  }
  *n_kv = (uint32_t)nq;
  *out = *w;
  if (!w->data) return BRISK_OK;
  bool vec = w->rows == 1;
  size_t head_bytes = vec ? (size_t)hd * sizeof(float) : (size_t)(hd * (int64_t)w->row_bytes);
  void *p;
  brisk_status st = own(sp, head_bytes * (size_t)nq, &p);
  if (st) return st;
  for (int64_t j = 0; j < nq; j++)
    memcpy((char *)p + (size_t)j * head_bytes,
           (const char *)w->data + (size_t)((h0 + j) / g) * head_bytes, head_bytes);
  out->data = p;
  if (vec)
    out->cols = nq * hd, out->row_bytes = (uint64_t)head_bytes * (uint64_t)nq;
  else
    out->rows = nq * hd;
  return BRISK_OK;
}

static void free_rank(brisk_model *r) {
  if (!r) return;
  brisk_model_unplace(r); /* its device copies, when it was placed on a device */
  if (r->layers)
    for (uint32_t l = 0; l < r->hp.n_layer; l++) {
      brisk_free(r->layers[l].expert_gate);
      brisk_free(r->layers[l].expert_up);
      brisk_free(r->layers[l].expert_down);
    }
  brisk_free(r->layers);
  free_split(r->split);
  brisk_free(r);
}

static brisk_status make_rank(const brisk_model *m, int32_t tp, int32_t rank, brisk_model **out) {
  const brisk_hparams *hp = &m->hp;
  int32_t n = BRISK_SPLIT_SLOTS / tp, s0 = rank * n;
  int64_t hd = hp->head_dim, h0 = slot_begin(s0, hp->n_head), h1 = slot_begin(s0 + n, hp->n_head);
  brisk_model *r = brisk_calloc(1, sizeof *r);
  if (!r) return brisk_error_oom();
  *r = *m;
  r->layers = NULL;
  r->split = NULL;
  r->tp_ranks = NULL;
  r->tp_size = 0;
  r->is_shard = true;
  r->hp.n_head = (uint32_t)(h1 - h0);
  brisk_status st;
  if ((st = make_split(m, tp, rank, n, 0, &r->split)) ||
      !(r->layers = brisk_calloc(hp->n_layer, sizeof *r->layers))) {
    st = st ? st : brisk_error_oom();
    goto fail;
  }
  for (uint32_t l = 0; l < hp->n_layer && !st; l++) {
    const brisk_layer *a = &m->layers[l];
    brisk_layer *b = &r->layers[l];
    *b = *a;
    b->expert_gate = b->expert_up = b->expert_down = NULL;
    /* A layer another process runs (an MPI job's stage): left as the
     * whole layer's views, nothing copied, never read here. */
    if ((int32_t)l < m->local_begin || (int32_t)l >= brisk_model_local_end(m)) continue;
    b->wq = view_rows(&a->wq, h0 * hd, h1 * hd);
    b->bq = view_rows(&a->bq, h0 * hd, h1 * hd);
    uint32_t nkv = 0;
    if ((st = kv_rows(r->split, hp, h0, h1, &a->wk, &nkv, &b->wk)) ||
        (st = kv_rows(r->split, hp, h0, h1, &a->wv, &nkv, &b->wv)) ||
        (st = kv_rows(r->split, hp, h0, h1, &a->bk, &nkv, &b->bk)) ||
        (st = kv_rows(r->split, hp, h0, h1, &a->bv, &nkv, &b->bv)))
      break;
    r->hp.n_head_kv = nkv;
    if (a->ffn_down.data) {
      int64_t blk = block_of(a->ffn_down.type), units = a->ffn_down.cols / blk;
      int64_t f0 = slot_begin(s0, units) * blk, f1 = slot_begin(s0 + n, units) * blk;
      b->ffn_gate = view_rows(&a->ffn_gate, f0, f1);
      b->ffn_up = view_rows(&a->ffn_up, f0, f1);
      r->hp.n_ff = (uint32_t)(f1 - f0);
    }
    if (a->expert_gate) {
      size_t ne = hp->n_expert;
      b->expert_gate = brisk_calloc(ne, sizeof(brisk_weight));
      b->expert_up = brisk_calloc(ne, sizeof(brisk_weight));
      b->expert_down = brisk_calloc(ne, sizeof(brisk_weight));
      if (!b->expert_gate || !b->expert_up || !b->expert_down) {
        st = brisk_error_oom();
        break;
      }
      /* Only this rank's experts: the others stay absent (data NULL). */
      for (int32_t e = r->split->layers[l].expert[0]; e < r->split->layers[l].expert[n]; e++) {
        b->expert_gate[e] = a->expert_gate[e];
        b->expert_up[e] = a->expert_up[e];
        b->expert_down[e] = a->expert_down[e];
      }
    }
  }
  if (st) goto fail;
  r->output = view_rows(&m->output, r->split->vocab_begin[rank], r->split->vocab_begin[rank + 1]);
  *out = r;
  return BRISK_OK;
fail:
  free_rank(r);
  return st;
}

brisk_status brisk_split_make_ranks(brisk_model *m, int32_t tp) {
  const brisk_hparams *hp = &m->hp;
  if (tp < 2 || tp > BRISK_TP_MAX || BRISK_SPLIT_SLOTS % tp)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "tensor-parallel size %d: brisk splits into 1, 2, 4 or 8 ranks", tp);
  if (hp->kv_lora_rank)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tensor parallelism: %s (multi-head latent attention) is not split across "
                       "ranks yet; load it with tp_size 1",
                       brisk_arch_get(hp->arch)->name);
  if (brisk_split_model_slots(m) != BRISK_SPLIT_SLOTS)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "tensor parallelism: the attention output weights (%s, heads of %u) "
                       "cannot be cut at head boundaries into whole blocks",
                       brisk_dtype_name(m->layers[0].wo.type), hp->head_dim);
  if (hp->n_head < (uint32_t)tp)
    return brisk_error(BRISK_E_UNSUPPORTED, "tensor parallelism: %u query heads for %d ranks",
                       hp->n_head, tp);
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const brisk_layer *ly = &m->layers[l];
    /* What the rank shards do not cut yet: a norm over all query heads
     * (olmo2) needs every head's values; shared experts and dense layers
     * among MoE layers would size a rank's buffers from the wrong FFN. */
    if (ly->q_norm.data && ly->q_norm.cols != (int64_t)hp->head_dim)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tensor parallelism: layer %u normalizes q over all heads (%s), which "
                         "a rank holding some heads cannot do",
                         l, ly->q_norm.name ? ly->q_norm.name : "q_norm");
    if (ly->shexp_gate.data || (hp->n_expert && !ly->moe_router.data))
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tensor parallelism: layer %u has a shared expert or a dense FFN among "
                         "MoE layers; this build splits uniform MoE or dense models only",
                         l);
  }
  for (uint32_t l = 0; l < hp->n_layer; l++) {
    const brisk_weight *wd = &m->layers[l].ffn_down;
    if (wd->data && wd->cols / block_of(wd->type) < tp)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tensor parallelism: tensor '%s' has %lld columns, too few for %d ranks",
                         wd->name, (long long)wd->cols, tp);
  }
  m->tp_ranks = brisk_calloc((size_t)tp, sizeof *m->tp_ranks);
  if (!m->tp_ranks) return brisk_error_oom();
  m->tp_size = tp;
  brisk_status st = BRISK_OK;
  /* One rank of an MPI job makes its own shard only (the others are NULL). */
  for (int32_t q = 0; q < tp && !st; q++)
    if (brisk_model_local_shard(m, q)) st = make_rank(m, tp, q, &m->tp_ranks[q]);
  if (st) brisk_split_free(m);
  return st;
}

/* Row-parallel weights are cut by input columns; an act-order matrix's
 * columns were sorted over the whole input (brisk_weight.perm), so a
 * rank's slice would need activations other ranks hold. One rank still
 * runs the fixed slots over the gathered input (forward/forward.c). */
static brisk_status check_act_order(const brisk_model *m, int32_t tp_size) {
  for (uint32_t l = 0; tp_size > 1 && l < m->hp.n_layer; l++) {
    const brisk_layer *ly = &m->layers[l];
    const brisk_weight *w = ly->wo.perm ? &ly->wo : ly->ffn_down.perm ? &ly->ffn_down : NULL;
    if (w)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tensor '%s': an act-order (desc_act) GPTQ matrix cannot be split by "
                         "input columns: tp_size %d is not supported for this checkpoint (tp_size "
                         "1 and pipeline stages are)",
                         w->name, (int)tp_size);
  }
  return BRISK_OK;
}

brisk_status brisk_model_split(brisk_model *m, int32_t tp_size, int32_t n_gpu_layers) {
  brisk_status st = check_act_order(m, tp_size);
  if (st) return st;
  if (!brisk_device_is_cpu(&m->device)) {
    uint32_t n = m->hp.n_layer;
    const bool all = n_gpu_layers < 0 || (uint32_t)n_gpu_layers >= n;
    if (tp_size > 1 && !all)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "tensor parallelism on GPU devices: every layer on the devices "
                         "(n_gpu_layers -1 or >= %u, not %d); a model split between the devices "
                         "and the host runs with tp_size 1",
                         n, (int)n_gpu_layers);
    if (tp_size > 1) return brisk_split_make_ranks(m, tp_size);
    /* Wholly on the device: the slot split of every layer, which the
     * device ranks of tp_size > 1 run too, so that tp_size 1 gives their
     * bits. Split with the host: the host layers run a CPU model's split
     * (as model/place.c counts them), so that they give its bits. */
    return brisk_split_attach(m, all ? 0 : (uint32_t)n_gpu_layers);
  }
  return tp_size > 1 ? brisk_split_make_ranks(m, tp_size) : brisk_split_attach(m, 0);
}

void brisk_split_drop_host_copies(brisk_split *sp) {
  if (!sp) return;
  for (size_t i = 0; i < sp->n_bufs; i++) brisk_aligned_free(sp->bufs[i]);
  sp->n_bufs = 0;
  sp->owned_bytes = 0;
}

void brisk_split_free(brisk_model *m) {
  for (int32_t q = 0; m->tp_ranks && q < m->tp_size; q++) free_rank(m->tp_ranks[q]);
  brisk_free(m->tp_ranks);
  m->tp_ranks = NULL;
  m->tp_size = 0;
  free_split(m->split);
  m->split = NULL;
}

static uint64_t layer_bytes(const brisk_model *m, const brisk_layer *ly, const brisk_split *sp,
                            uint32_t l) {
  const brisk_weight *ws[] = {&ly->attn_norm, &ly->wq,       &ly->wk,       &ly->wv,
                              &ly->bq,        &ly->bk,       &ly->bv,       &ly->q_norm,
                              &ly->k_norm,    &ly->ffn_norm, &ly->ffn_gate, &ly->ffn_up,
                              &ly->moe_router};
  uint64_t b = 0;
  for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) b += wbytes(ws[i]);
  for (uint32_t e = 0; ly->expert_gate && e < m->hp.n_expert; e++)
    b += wbytes(&ly->expert_gate[e]) + wbytes(&ly->expert_up[e]) + wbytes(&ly->expert_down[e]);
  if (!sp) return b + wbytes(&ly->wo) + wbytes(&ly->ffn_down);
  for (int32_t j = 0; j < sp->n_slots; j++)
    b += wbytes(&sp->layers[l].wo[j]) + wbytes(&sp->layers[l].down[j]);
  return b;
}

uint64_t brisk_split_rank_bytes(const brisk_model *m, int32_t rank) {
  const brisk_model *r = m->tp_ranks && rank >= 0 && rank < m->tp_size ? m->tp_ranks[rank] : m;
  if (!r) return 0; /* a shard this process does not hold */
  uint64_t b = wbytes(&r->token_embd) + wbytes(&r->output_norm) + wbytes(&r->rope_freqs);
  /* Tied: the output rows are part of the embeddings every rank keeps. */
  if (brisk_model_local_output(m) && m->output.data != m->token_embd.data) b += wbytes(&r->output);
  for (int32_t l = m->local_begin; l < brisk_model_local_end(m); l++)
    b += layer_bytes(r, &r->layers[l], r->split, (uint32_t)l);
  return b;
}

void brisk_model_set_local(brisk_model *m, int32_t tp_size, int32_t pp_size, int32_t rank,
                           int32_t size) {
  const int32_t tp = tp_size > 1 ? tp_size : 1, pp = pp_size > 1 ? pp_size : 1,
                n = (int32_t)m->hp.n_layer;
  m->local = false;
  if (size < 2 || size != tp * pp || rank < 0 || rank >= size || pp > n) return;
  /* Rank p of the job is TP rank p % tp of stage p / tp. */
  const int32_t s = rank / tp;
  m->local = true;
  m->local_begin = (int32_t)((int64_t)s * n / pp);
  m->local_end = (int32_t)((int64_t)(s + 1) * n / pp);
  m->local_tp_rank = tp > 1 ? rank % tp : -1;
  m->local_output = s == pp - 1;
}
