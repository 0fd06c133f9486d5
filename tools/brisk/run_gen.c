#include "run_gen.h"

#include "load_progress.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile sig_atomic_t run_interrupt;

static void on_sigint(int sig) {
  (void)sig;
  run_interrupt = 1;
}

void run_catch_interrupt(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a read at the prompt returns EINTR */
  sigaction(SIGINT, &sa, NULL);
}

int run_abort_cb(void *user) {
  (void)user;
  return run_interrupt != 0;
}

double run_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

brisk_status run_tokenize(const brisk_model *m, const char *text, uint32_t flags, int32_t **toks,
                          int32_t *n) {
  size_t need = 0;
  brisk_status st = brisk_tokenize(m, text, strlen(text), NULL, 0, flags, &need);
  if (st && st != BRISK_E_BUFFER_TOO_SMALL) return st;
  if (need > INT32_MAX - 1) return brisk_error(BRISK_E_INVALID_ARGUMENT, "the text is too long");
  *toks = malloc((need + 1) * sizeof **toks);
  if (!*toks) return BRISK_E_OUT_OF_MEMORY;
  st = brisk_tokenize(m, text, strlen(text), *toks, need, flags, &need);
  *n = (int32_t)need;
  return st;
}

brisk_status run_sync_prompt(runner *r, const int32_t *toks, int32_t n) {
  int32_t keep = 0;
  while (keep < r->n_kv && keep < n - 1 && r->kv_tokens[keep] == toks[keep]) keep++;
  brisk_status st = brisk_seq_truncate(r->ctx, 0, keep);
  /* A windowed sequence cannot go back past what its window evicted (the
   * conversation changed before the window): it starts over. */
  if (st == BRISK_E_INVALID_ARGUMENT && keep > 0) {
    keep = 0;
    st = brisk_seq_truncate(r->ctx, 0, 0);
  }
  if (st) return st;
  r->n_kv = keep;
  double t0 = run_now_s();
  /* A long prompt takes seconds: on a terminal a bar shows it advance. */
  cli_bar bar = {.label = "prompt"};
  const bool bar_on = r->show_progress && n - keep > r->max_batch;
  for (int32_t i = keep; i < n && !st;) {
    if (bar_on) {
      char extra[64];
      snprintf(extra, sizeof extra, "%d / %d tokens", i, n);
      cli_bar_draw(&bar, (double)(i - keep) / (double)(n - keep), extra);
    }
    int32_t from = i;
    brisk_batch_clear(r->batch);
    for (; i < n && brisk_batch_size(r->batch) < r->max_batch; i++)
      brisk_batch_add(r->batch, toks[i], i, 0, i + 1 == n);
    /* A cancelled decode leaves the cache as before it: the chunks done
     * so far stay, and the runner records exactly those. */
    if (!(st = brisk_decode(r->ctx, r->batch))) {
      memcpy(r->kv_tokens + from, toks + from, (size_t)(i - from) * sizeof *toks);
      r->n_kv = i;
    }
  }
  cli_bar_clear(&bar);
  r->prefill_s += run_now_s() - t0;
  r->n_prefilled += r->n_kv - keep;
  if (st == BRISK_E_CANCELLED) r->interrupted = true;
  return st;
}

brisk_status run_generate(runner *r, int n_gen, FILE *out, char **text, size_t *text_len) {
  brisk_stopper_params sp;
  brisk_stopper_params_init(&sp);
  sp.max_tokens = n_gen;
  sp.stop_strings = r->stops;
  sp.n_stop_strings = r->n_stops;
  brisk_stopper *stopper = NULL;
  brisk_status st = brisk_stopper_create(r->m, &sp, &stopper);
  if (st) return st;
  double t0 = run_now_s();
  int32_t entry = brisk_batch_size(r->batch) - 1;
  brisk_stop_reason why = n_gen > 0 ? BRISK_STOP_NONE : BRISK_STOP_MAX_TOKENS;
  r->interrupted = false;
  r->blocked = false;
  brisk_constraint_reset(r->constraint);
  while (why == BRISK_STOP_NONE && r->n_kv < r->cap_kv) {
    if (run_interrupt) {
      r->interrupted = true;
      break;
    }
    int32_t next;
    if (r->constraint) { /* a constraint that allows nothing ends the output */
      const uint32_t *mask;
      int32_t n_allowed;
      if ((st = brisk_constraint_mask(r->constraint, &mask, &n_allowed))) break;
      if (n_allowed == 0) {
        r->blocked = true;
        break;
      }
    }
    if ((st = brisk_sampler_sample(r->sampler, r->ctx, entry, &next))) break;
    r->last_at = run_now_s();
    if (r->n_generated == 0) {
      r->first_at = r->last_at;
      r->first_token_s = r->first_at - r->start_s;
    }
    brisk_sampler_accept(r->sampler, next);
    if (r->constraint && (st = brisk_constraint_accept(r->constraint, next))) break;
    const char *piece;
    size_t len;
    if ((st = brisk_stopper_push(stopper, next, &piece, &len, &why))) break;
    if (len) {
      if (out) {
        fwrite(piece, 1, len, out);
        fflush(out);
      }
      char *grown = realloc(*text, *text_len + len + 1);
      if (grown) {
        memcpy(grown + *text_len, piece, len);
        *text_len += len;
        grown[*text_len] = 0;
        *text = grown;
      }
    }
    r->n_generated++;
    if (why != BRISK_STOP_NONE) break;
    brisk_batch_clear(r->batch);
    brisk_batch_add(r->batch, next, r->n_kv, 0, 1);
    if ((st = brisk_decode(r->ctx, r->batch))) {
      /* Ctrl-C during the decode: the token is shown but not in the cache. */
      if (st == BRISK_E_CANCELLED) r->interrupted = true, st = BRISK_OK;
      break;
    }
    r->kv_tokens[r->n_kv++] = next;
    entry = 0;
  }
  if (!st && why == BRISK_STOP_NONE) {
    const char *rest;
    size_t rest_len;
    brisk_stopper_flush(stopper, &rest, &rest_len);
    if (out && rest_len) fwrite(rest, 1, rest_len, out);
  }
  r->last_stop = why;
  brisk_stopper_free(stopper);
  r->gen_s += run_now_s() - t0;
  return st;
}

void run_free(runner *r) {
  free(r->kv_tokens);
  brisk_sampler_free(r->sampler);
  brisk_constraint_free(r->constraint); /* after the sampler that uses it */
  brisk_batch_free(r->batch);
  brisk_context_free(r->ctx);
  brisk_model_free(r->m);
  memset(r, 0, sizeof *r);
}
