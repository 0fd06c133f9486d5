/* The pre-paging baseline, on the context API (brisk_decode + samplers):
 * n_slots slots, each reserving slot_tokens of the KV budget (the longest
 * prompt + output the workload allows) up front. A batch starts when
 * n_slots requests have arrived (or every remaining one has), is prefilled
 * together, then decoded in lockstep; a slot whose request has finished
 * stays held until the longest one finishes. Held slots are left out of
 * the forward pass (which favours the baseline), or with c->pad keep
 * decoding as the rows of a padded batch tensor would. */
#include "serve_run.h"

#include "core/alloc.h"

#include <stdio.h>
#include <string.h>

static bool fail(const char *config, const char *what) {
  fprintf(stderr, "brisk serve-bench: %s: %s: %s\n", config, what, brisk_last_error());
  return false;
}

typedef struct slot {
  int32_t req;  /* workload index */
  int32_t fed;  /* prompt tokens decoded */
  int32_t got;  /* tokens sampled */
  int32_t last; /* the last sampled token */
  int32_t pad;  /* tokens decoded after the request finished (c->pad) */
  brisk_sampler *sampler;
} slot;

typedef struct static_run {
  const sb_config *c;
  const wl_workload *w;
  brisk_context *ctx;
  brisk_batch *batch;
  slot *slots;     /* [n_slots] */
  int32_t *entry;  /* [max_batch_tokens]: the slot of each batch entry */
  sb_request *req; /* [w->n] */
  sb_itl itl;
  double t0, cpu_s;
  uint64_t n_steps, n_computed;
} static_run;

/* Samples entry i's token for slot s. */
static bool take_token(static_run *st, int32_t i, int32_t s) {
  slot *sl = &st->slots[s];
  int32_t tok;
  if (brisk_sampler_sample(sl->sampler, st->ctx, i, &tok) != BRISK_OK ||
      brisk_sampler_accept(sl->sampler, tok) != BRISK_OK)
    return fail(st->c->name, "sample");
  sl->last = tok;
  sl->got++;
  sb_request *r = &st->req[sl->req];
  r->out_hash = sb_hash_token(r->out_hash, tok);
  return true;
}

/* Samples every entry of the step that has a slot, then stamps them all
 * with one time (the engine's tokens likewise all come with its step). */
static bool take_tokens(static_run *st, int32_t m) {
  for (int32_t i = 0; i < m; i++)
    if (st->entry[i] >= 0 && !take_token(st, i, st->entry[i])) return false;
  const double t = sb_now_s() - st->t0;
  for (int32_t i = 0; i < m; i++) {
    if (st->entry[i] < 0) continue;
    const slot *sl = &st->slots[st->entry[i]];
    sb_request *r = &st->req[sl->req];
    sb_itl_token(&st->itl, sl->req, t);
    if (sl->got == 1) r->ttft_s = t - r->arrival_s;
    if (sl->got == r->n_output) r->e2e_s = t - r->arrival_s;
  }
  return true;
}

static bool decode(static_run *st, int32_t m) {
  if (brisk_decode(st->ctx, st->batch) != BRISK_OK) return fail(st->c->name, "decode");
  st->n_steps++;
  st->n_computed += (uint64_t)m;
  return true;
}

/* Prefills slots [0, nb) in batches of up to the context's batch size. */
static bool prefill(static_run *st, int32_t nb, int32_t cap) {
  for (;;) {
    brisk_batch_clear(st->batch);
    int32_t m = 0;
    for (int32_t s = 0; s < nb && m < cap; s++) {
      slot *sl = &st->slots[s];
      const wl_request *r = &st->w->req[sl->req];
      for (; sl->fed < r->n_prompt && m < cap; sl->fed++, m++) {
        const int last = sl->fed == r->n_prompt - 1;
        if (brisk_batch_add(st->batch, r->prompt[sl->fed], sl->fed, s, last) != BRISK_OK)
          return fail(st->c->name, "batch");
        st->entry[m] = last ? s : -1;
      }
    }
    if (m == 0) return true;
    if (!decode(st, m)) return false;
    if (!take_tokens(st, m)) return false;
  }
}

/* Decodes slots [0, nb) in lockstep until every request has its tokens. A
 * finished slot idles, or with c->pad keeps decoding (its output ignored)
 * as a padded batch does; either way it stays within its reservation. */
static bool generate(static_run *st, int32_t nb) {
  for (;;) {
    brisk_batch_clear(st->batch);
    int32_t m = 0, m_live = 0;
    for (int32_t s = 0; s < nb; s++) {
      slot *sl = &st->slots[s];
      const wl_request *r = &st->w->req[sl->req];
      const bool live = sl->got < r->n_output;
      if (!live && !st->c->pad) continue;
      if (brisk_batch_add(st->batch, sl->last, r->n_prompt + sl->got - 1 + sl->pad, s, 1) !=
          BRISK_OK)
        return fail(st->c->name, "batch");
      if (!live) sl->pad++;
      st->entry[m++] = live ? s : -1;
      m_live += live;
    }
    if (m_live == 0) return true;
    if (!decode(st, m)) return false;
    if (!take_tokens(st, m)) return false;
  }
}

static bool serve(static_run *st, int32_t cap) {
  const wl_workload *w = st->w;
  const int32_t n_slots = st->c->n_slots;
  /* Warm-up outside the clock (weight pages, buffers). */
  brisk_batch_clear(st->batch);
  const int32_t n_vocab = brisk_model_n_vocab(brisk_context_model(st->ctx));
  for (int32_t i = 0; i < 8 && i < cap; i++) brisk_batch_add(st->batch, i % n_vocab, i, 0, i == 7);
  if (brisk_decode(st->ctx, st->batch) != BRISK_OK || brisk_seq_free(st->ctx, 0) != BRISK_OK)
    return fail(st->c->name, "warm-up");
  for (int32_t i = 0; i < w->n; i++) {
    st->req[i].n_prompt = w->req[i].n_prompt;
    st->req[i].n_output = w->req[i].n_output;
    st->req[i].arrival_s = (double)w->req[i].arrival_ns * 1e-9;
    st->req[i].out_hash = SB_HASH_INIT;
  }
  st->t0 = sb_now_s();
  const double cpu0 = sb_cpu_s();
  for (int32_t next = 0; next < w->n;) {
    const int32_t nb = w->n - next < n_slots ? w->n - next : n_slots;
    sb_sleep_until(st->t0 + st->req[next + nb - 1].arrival_s); /* a full batch */
    for (int32_t s = 0; s < nb; s++) {
      st->slots[s] = (slot){.req = next + s, .sampler = st->slots[s].sampler};
      brisk_sampler_reset(st->slots[s].sampler);
    }
    if (!prefill(st, nb, cap) || !generate(st, nb)) return false;
    for (int32_t s = 0; s < nb; s++)
      if (brisk_seq_free(st->ctx, s) != BRISK_OK) return fail(st->c->name, "seq free");
    next += nb;
  }
  st->cpu_s = sb_cpu_s() - cpu0;
  return true;
}

bool sb_run_static(const sb_common *common, const sb_config *c, const wl_workload *w,
                   sb_result *out) {
  if (c->n_slots < 1 || c->n_slots > common->max_batch_tokens) {
    fprintf(stderr, "brisk serve-bench: %s: %d slots (need 1..%d)\n", c->name, c->n_slots,
            common->max_batch_tokens);
    return false;
  }
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = common->n_threads;
  cp.kv_tokens = common->kv_tokens;
  cp.kv_type = common->kv_type;
  cp.block_size = common->block_size;
  cp.max_batch_tokens = common->max_batch_tokens;
  cp.n_seq_max = c->n_slots;
  cp.prefix_cache = 0; /* the pre-paging baseline keeps nothing */
  static_run st = {.c = c, .w = w};
  bool ok =
      brisk_context_create(common->model, &cp, &st.ctx) == BRISK_OK || fail(c->name, "context");
  ok = ok && (brisk_batch_create(common->max_batch_tokens, &st.batch) == BRISK_OK ||
              fail(c->name, "batch"));
  if (ok) {
    st.slots = brisk_calloc((size_t)c->n_slots, sizeof *st.slots);
    st.entry = brisk_calloc((size_t)common->max_batch_tokens, sizeof *st.entry);
    st.req = brisk_calloc((size_t)w->n, sizeof *st.req);
    ok = st.slots && st.entry && st.req && sb_itl_init(&st.itl, w);
    if (!ok) fprintf(stderr, "brisk serve-bench: out of memory\n");
  }
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0; /* greedy, as the engine runs */
  for (int32_t s = 0; ok && s < c->n_slots; s++)
    ok = brisk_sampler_create(common->model, &sp, &st.slots[s].sampler) == BRISK_OK ||
         fail(c->name, "sampler");
  ok = ok && serve(&st, common->max_batch_tokens);
  if (ok) {
    double end = 0;
    for (int32_t i = 0; i < w->n; i++)
      if (st.req[i].arrival_s + st.req[i].e2e_s > end) end = st.req[i].arrival_s + st.req[i].e2e_s;
    out->req = st.req;
    out->duration_s = end;
    out->cpu_s = st.cpu_s;
    sb_itl_finish(&st.itl, out);
    out->n_steps = st.n_steps;
    out->n_computed_tokens = st.n_computed;
    st.req = NULL;
  }
  for (int32_t s = 0; st.slots && s < c->n_slots; s++) brisk_sampler_free(st.slots[s].sampler);
  brisk_free(st.slots);
  brisk_free(st.entry);
  brisk_free(st.req);
  sb_itl_free(&st.itl);
  brisk_batch_free(st.batch);
  brisk_context_free(st.ctx);
  return ok;
}
