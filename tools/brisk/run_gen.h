/* The generation loop shared by `brisk run` (one prompt) and its --chat
 * mode: sequence 0 of one context, whose tokens the runner tracks so that a
 * new prompt prefills only what the cache does not already hold. Ctrl-C
 * (SIGINT, once run_catch_interrupt is called) stops a prefill between
 * layers and a generation between tokens, leaving the cache consistent. */
#ifndef BRISK_TOOLS_RUN_GEN_H
#define BRISK_TOOLS_RUN_GEN_H

#include "brisk.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct runner {
  brisk_model *m;
  brisk_context *ctx;
  brisk_batch *batch;
  brisk_sampler *sampler;
  int32_t max_batch;
  int32_t *kv_tokens; /* tokens held by sequence 0, in order */
  int32_t n_kv, cap_kv;
  double prefill_s, gen_s;
  double start_s, first_token_s; /* for TTFT: first token time since start */
  double first_at, last_at;      /* absolute times of the first and last token */
  const char *const *stops;      /* stop strings */
  size_t n_stops;
  int32_t n_prefilled, n_generated;
  brisk_stop_reason last_stop;  /* why the last generate ended */
  bool interrupted;             /* the last prefill or generation was stopped by Ctrl-C */
  bool show_progress;           /* a bar on stderr for prefills of several chunks */
  brisk_constraint *constraint; /* NULL: unconstrained (--grammar, --json-schema, ...) */
  bool blocked;                 /* the constraint allowed no token */
} runner;

/* Most tokens of a conversation `brisk run --chat --window` keeps track of
 * without -c (the window holds only its sinks and its last W). */
#define RUN_WINDOW_CHAT_TOKENS (1 << 22)

/* Set by the SIGINT handler, cleared by the code that acts on it. */
extern volatile sig_atomic_t run_interrupt;

/* Installs the SIGINT handler that sets run_interrupt (no SA_RESTART, so a
 * blocked read returns EINTR). */
void run_catch_interrupt(void);

/* The abort callback of the context: nonzero once Ctrl-C was pressed. */
int run_abort_cb(void *user);

double run_now_s(void);

/* Tokenizes text into *toks (malloc'ed) / *n. */
brisk_status run_tokenize(const brisk_model *m, const char *text, uint32_t flags, int32_t **toks,
                          int32_t *n);

/* Makes sequence 0 hold exactly toks (n >= 1): keeps the longest common
 * prefix with what the cache holds, prefills the rest in chunks, logits
 * for the last token; a windowed sequence that cannot go back to that
 * prefix (its window evicted part of it) starts over. BRISK_E_CANCELLED
 * after Ctrl-C (the cache then holds
 * the chunks done so far, and the runner knows it). */
brisk_status run_sync_prompt(runner *r, const int32_t *toks, int32_t n);

/* Generates after the synced prompt until an end-of-generation token, a
 * stop string, n_gen tokens, a full cache or Ctrl-C (then r->interrupted),
 * streaming the text to `out` (may be NULL) and appending it to *text
 * (malloc'ed, may start NULL). */
brisk_status run_generate(runner *r, int n_gen, FILE *out, char **text, size_t *text_len);

/* Frees everything the runner holds. */
void run_free(runner *r);

#endif
