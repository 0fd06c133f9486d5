/* Forward-pass cost model (see cost.h). Doubles throughout: the totals are
 * summed over many steps, and exactness past 2^53 does not matter here. */
#include "model/cost.h"

static double w_bytes(const brisk_weight *w) {
  return w->data ? (double)w->rows * (double)w->row_bytes : 0.0;
}

static double w_elems(const brisk_weight *w) {
  return w->data ? (double)w->rows * (double)w->cols : 0.0;
}

/* Adds a matrix or vector every token goes through. */
static void dense(const brisk_weight *w, double n_tokens, brisk_model_cost *c) {
  c->bytes += w_bytes(w);
  if (w->rows > 1) c->flops += 2.0 * n_tokens * w_elems(w);
}

static void moe(const brisk_model *m, const brisk_layer *ly, double n, brisk_model_cost *c) {
  const brisk_hparams *hp = &m->hp;
  dense(&ly->moe_router, n, c);
  double per_token = 0, all_bytes = 0;
  for (uint32_t x = 0; x < hp->n_expert; x++) {
    all_bytes +=
        w_bytes(&ly->expert_gate[x]) + w_bytes(&ly->expert_up[x]) + w_bytes(&ly->expert_down[x]);
    per_token +=
        w_elems(&ly->expert_gate[x]) + w_elems(&ly->expert_up[x]) + w_elems(&ly->expert_down[x]);
  }
  if (hp->n_expert == 0) return;
  /* Experts are alike in shape, so averages are exact. */
  double touched = n * hp->n_expert_used;
  if (touched > hp->n_expert) touched = hp->n_expert;
  c->bytes += all_bytes / hp->n_expert * touched;
  c->flops += 2.0 * n * hp->n_expert_used * (per_token / hp->n_expert);
}

void brisk_model_cost_weights(const brisk_model *m, int64_t n_tokens, int64_t n_out,
                              brisk_model_cost *c) {
  if (n_tokens <= 0) return;
  double n = (double)n_tokens;
  c->bytes += n * (double)m->token_embd.row_bytes;
  for (uint32_t il = 0; il < m->hp.n_layer; il++) {
    const brisk_layer *ly = &m->layers[il];
    /* A layer reading another's K/V (cross-layer sharing) projects none. */
    static const brisk_weight unused = {0};
    const bool own = ly->kv_source == (int32_t)il;
    const brisk_weight *per_layer[] = {&ly->attn_norm,
                                       &ly->wq,
                                       own ? &ly->wk : &unused,
                                       own ? &ly->wv : &unused,
                                       &ly->wo,
                                       &ly->bq,
                                       own ? &ly->bk : &unused,
                                       own ? &ly->bv : &unused,
                                       &ly->q_norm,
                                       own ? &ly->k_norm : &unused,
                                       &ly->ffn_norm,
                                       &ly->ffn_gate,
                                       &ly->ffn_up,
                                       &ly->ffn_down};
    /* Post-norms (olmo2, gemma), the shared expert (qwen2moe), latent
     * attention's projections (deepseek2: kv_b's absorbed products cost
     * what a matmul by it does). */
    const brisk_weight *variants[] = {
        &ly->post_attn_norm, &ly->post_ffn_norm, &ly->shexp_gate, &ly->shexp_up, &ly->shexp_down,
        &ly->shexp_gate_inp, &ly->wq_a,          &ly->q_a_norm,   &ly->wq_b,     &ly->wkv_a_lat,
        &ly->wkv_a_rope,     &ly->kv_a_norm,     &ly->wkv_b};
    for (size_t i = 0; i < sizeof per_layer / sizeof *per_layer; i++) dense(per_layer[i], n, c);
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) dense(variants[i], n, c);
    if (m->hp.n_expert > 0 && ly->expert_gate) moe(m, ly, n, c);
  }
  if (n_out > 0) {
    c->bytes += w_bytes(&m->output_norm) + w_bytes(&m->output);
    c->flops += 2.0 * (double)n_out * w_elems(&m->output);
  }
}

void brisk_model_cost_attention(const brisk_model *m, uint32_t kv_elem_bytes, int64_t n_past,
                                int64_t n_new, brisk_model_cost *c) {
  if (n_new <= 0 || n_past < 0) return;
  const brisk_hparams *hp = &m->hp;
  double kv_pos_bytes = 2.0 * hp->n_head_kv * hp->head_dim * kv_elem_bytes; /* K and V */
  double score_flops = 4.0 * hp->n_head * hp->head_dim;
  if (hp->kv_lora_rank) { /* one latent row per position; each head scores and sums it */
    kv_pos_bytes = (double)(hp->kv_lora_rank + hp->rope_dim) * kv_elem_bytes;
    score_flops = 2.0 * hp->n_head * (2.0 * hp->kv_lora_rank + hp->rope_dim);
  }
  int64_t end = n_past + n_new; /* positions [0, end) after the pass */
  for (uint32_t il = 0; il < hp->n_layer; il++) {
    int64_t w = m->layers[il].sliding_window;
    /* Sum over p in [n_past, end) of min(p + 1, w): full rows up to w, then w each. */
    double attended;
    int64_t first_read;
    if (w <= 0) {
      attended = (double)n_new * (double)n_past + (double)n_new * (double)(n_new + 1) / 2.0;
      first_read = 0;
    } else {
      int64_t lo = n_past + 1, hi = end; /* attended counts p + 1 for p in [n_past, end) */
      int64_t cut = hi < w ? hi : w;     /* values <= w: lo .. cut */
      attended = 0;
      if (lo <= cut) attended += (double)(lo + cut) * (double)(cut - lo + 1) / 2.0;
      int64_t capped = hi - (cut > lo - 1 ? cut : lo - 1);
      attended += (double)capped * (double)w;
      first_read = n_past + 1 - w > 0 ? n_past + 1 - w : 0;
    }
    c->flops += score_flops * attended;
    /* Reads, and the new rows' writes in a layer that keeps its own. */
    const bool own = m->layers[il].kv_source == (int32_t)il;
    c->bytes += kv_pos_bytes * (double)(end - first_read + (own ? n_new : 0));
  }
}

BRISK_API uint64_t brisk_model_step_weight_bytes(const brisk_model *m, int64_t n_tokens,
                                                 int64_t n_out) {
  if (!m || n_tokens <= 0) return 0;
  brisk_model_cost c = {0, 0};
  brisk_model_cost_weights(m, n_tokens, n_out, &c);
  return (uint64_t)c.bytes;
}
