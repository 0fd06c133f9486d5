/* The draft-model drafter: a second context that mirrors each sequence's
 * tokens and drafts k tokens autoregressively from its own distribution q. */
#include "spec/spec_internal.h"

#include "core/alloc.h"
#include "core/error.h"
#include "sample/sampler.h"

#include <string.h>

/* q's sampler copies the target's shaping but not its penalties (which
 * would need the sequence's history) nor its log-probabilities: any q is
 * exact, a close one is fast. */
static brisk_sampler_params draft_key(const brisk_sampler *t) {
  brisk_sampler_params p;
  brisk_sampler_params_init(&p);
  p.seed = t->params.seed ^ 0x9e3779b97f4a7c15ull;
  p.temperature = t->params.temperature;
  p.top_k = t->params.top_k;
  p.top_p = t->params.top_p;
  p.min_p = t->params.min_p;
  p.typical_p = t->params.typical_p;
  p.penalty_last_n = 0;
  p.n_logit_bias = t->params.n_logit_bias;
  p.logit_bias = t->params.logit_bias;
  return p;
}

static int same_key(const brisk_sampler_params *a, const brisk_sampler_params *b) {
  return a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p &&
         a->min_p == b->min_p && a->typical_p == b->typical_p &&
         a->n_logit_bias == b->n_logit_bias &&
         (a->n_logit_bias == 0 ||
          memcmp(a->logit_bias, b->logit_bias, a->n_logit_bias * sizeof *a->logit_bias) == 0);
}

static brisk_status ensure_sampler(brisk_spec *sp, const brisk_sampler *t) {
  brisk_sampler_params key = draft_key(t);
  if (sp->dsampler && same_key(&sp->dkey, &key)) return BRISK_OK;
  brisk_sampler *s = NULL;
  brisk_status st = brisk_sample_create(sp->n_vocab, &key, &s);
  if (st) return st;
  brisk_sampler_free(sp->dsampler);
  sp->dsampler = s;
  sp->dkey = key;
  sp->dkey.logit_bias = s->bias; /* the sampler's own copy outlives the target's */
  return BRISK_OK;
}

/* Forgets the draft copy of seq entirely. */
static void drop(brisk_spec *sp, int32_t seq) {
  brisk_seq_free(sp->dctx, seq);
  sp->seqs[seq].n_held = 0;
}

/* Decodes tokens[0, n) into the draft's seq after what it holds, in chunks,
 * with logits for the last token only: entry *row of the last chunk. */
static brisk_status feed(brisk_spec *sp, int32_t seq, const int32_t *tokens, size_t n,
                         int32_t *row) {
  brisk_spec_seq *ss = &sp->seqs[seq];
  if (n > ss->cap && brisk_grow((void **)&ss->held, &ss->cap, n, sizeof *ss->held))
    return brisk_error_oom();
  size_t done = ss->n_held;
  while (done < n) {
    size_t chunk = n - done < (size_t)sp->d_max_batch ? n - done : (size_t)sp->d_max_batch;
    brisk_batch_clear(sp->dbatch);
    for (size_t j = 0; j < chunk; j++)
      brisk_batch_add(sp->dbatch, tokens[done + j], (int32_t)(done + j), seq, done + j + 1 == n);
    brisk_status st = brisk_decode(sp->dctx, sp->dbatch);
    sp->stats.n_draft_decodes += st == BRISK_OK;
    if (st) return st;
    memcpy(ss->held + done, tokens + done, chunk * sizeof *tokens);
    *row = (int32_t)chunk - 1;
    ss->n_held = done += chunk;
  }
  return BRISK_OK;
}

/* Brings the draft's copy of seq to tokens[0, n): keeps the longest prefix
 * it already holds, but at least `refeed` tokens are decoded again (the
 * pending token's logits are where drafting starts). *row is the entry of
 * the last token's logits when something was decoded. */
static brisk_status sync(brisk_spec *sp, int32_t seq, const int32_t *tokens, size_t n,
                         size_t refeed, size_t reserve, int32_t *row) {
  brisk_spec_seq *ss = &sp->seqs[seq];
  brisk_status st;
  if ((size_t)brisk_seq_len(sp->dctx, seq) != ss->n_held) drop(sp, seq);
  size_t common = 0;
  while (common < ss->n_held && common < n && ss->held[common] == tokens[common]) common++;
  if (common + refeed > n) common = n - refeed;
  if (common < ss->n_held) {
    if ((st = brisk_seq_truncate(sp->dctx, seq, (int32_t)common))) return st;
    ss->n_held = common;
  }
  if (n + reserve > ss->cap &&
      brisk_grow((void **)&ss->held, &ss->cap, n + reserve, sizeof *ss->held))
    return brisk_error_oom();
  st = feed(sp, seq, tokens, n, row);
  if (st == BRISK_E_KV_FULL) drop(sp, seq); /* no room to mirror the sequence */
  return st;
}

brisk_status brisk_spec_draft_prefill(brisk_spec *sp, int32_t seq, const int32_t *tokens,
                                      size_t n) {
  int32_t row;
  return sync(sp, seq, tokens, n, 0, 0, &row);
}

brisk_status brisk_spec_draft_model(brisk_spec *sp, int32_t seq, const brisk_sampler *t,
                                    const int32_t *tokens, size_t n, size_t k, size_t *m) {
  *m = 0;
  if (k == 0) return BRISK_OK;
  brisk_status st = ensure_sampler(sp, t);
  if (st) return st;
  brisk_spec_seq *ss = &sp->seqs[seq];
  int32_t row = 0;
  st = sync(sp, seq, tokens, n, 1, k, &row);
  if (st == BRISK_E_KV_FULL) return BRISK_OK; /* draft nothing */
  if (st) return st;
  size_t nv = (size_t)sp->n_vocab;
  brisk_sampler *ds = sp->dsampler;
  for (size_t i = 0; i < k; i++) {
    if (i > 0) {
      int32_t x = sp->draft[i - 1];
      brisk_batch_clear(sp->dbatch);
      brisk_batch_add(sp->dbatch, x, (int32_t)(n + i - 1), seq, 1);
      st = brisk_decode(sp->dctx, sp->dbatch);
      if (st == BRISK_E_KV_FULL) break; /* a shorter draft is still a draft */
      if (st) return st;
      sp->stats.n_draft_decodes++;
      ss->held[ss->n_held++] = x;
      row = 0;
    }
    double *q = sp->q + i * nv; // [n_vocab]
    if ((st = brisk_sample_distribution(ds, brisk_get_logits(sp->dctx, row), q))) return st;
    double u = ds->params.temperature == 0 ? 0 : brisk_sample_rng_uniform(&ds->rng);
    sp->draft[i] = brisk_spec_draw(q, nv, u);
    *m = i + 1;
  }
  return BRISK_OK;
}

void brisk_spec_draft_keep(brisk_spec *sp, int32_t seq, size_t n, size_t kept) {
  brisk_spec_seq *ss = &sp->seqs[seq];
  if (ss->n_held > n + kept) {
    if (brisk_seq_truncate(sp->dctx, seq, (int32_t)(n + kept)) == BRISK_OK)
      ss->n_held = n + kept;
    else
      drop(sp, seq);
  }
}
