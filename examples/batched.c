/* batched: several completions of one prompt at once. The prompt is
 * evaluated once on sequence 0 and its KV cache shared with sequences
 * 1..n-1 through brisk_seq_fork (copy-on-write); then every step decodes
 * one token of each sequence in a single batch. Completion i starts from
 * the prompt's i-th most likely next token, then continues greedily.
 *
 *   batched MODEL.gguf "Once upon a time" [N_PARALLEL] [N_TOKENS]
 */
#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "batched: %s: %s\n", what, brisk_last_error());
  return 1;
}

/* The token of rank `rank` (0 = most likely) among the logits. */
static int32_t nth_best(const float *logits, int32_t n, int rank) {
  int32_t best = -1;
  for (int r = 0; r <= rank; r++) {
    int32_t pick = -1;
    for (int32_t i = 0; i < n; i++) {
      if (best >= 0 && (logits[i] > logits[best] || (logits[i] == logits[best] && i <= best)))
        continue; /* already taken by a better rank */
      if (pick < 0 || logits[i] > logits[pick]) pick = i;
    }
    best = pick;
  }
  return best;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [N_PARALLEL] [N_TOKENS]\n", argv[0]);
    return 2;
  }
  const char *prompt = argv[2];
  int n_par = argc > 3 ? atoi(argv[3]) : 4, n_predict = argc > 4 ? atoi(argv[4]) : 32;
  if (n_par < 1 || n_par > 256 || n_predict < 1) {
    fprintf(stderr, "batched: N_PARALLEL must be 1..256 and N_TOKENS >= 1\n");
    return 2;
  }

  brisk_model *model = NULL;
  if (brisk_model_load(argv[1], NULL, &model) != BRISK_OK) return fail("load");
  size_t n_prompt = 0;
  brisk_tokenize(model, prompt, strlen(prompt), NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL, &n_prompt);
  int32_t *tokens = malloc((n_prompt + 1) * sizeof *tokens); // [n_prompt]
  if (!tokens || n_prompt == 0 ||
      brisk_tokenize(model, prompt, strlen(prompt), tokens, n_prompt, BRISK_TOKENIZE_ADD_SPECIAL,
                     &n_prompt))
    return fail("tokenize");

  /* The prompt once, every completion, and a block per sequence for the
   * copy of the shared, partly filled last block of the prompt. */
  brisk_context_params cparams;
  brisk_context_params_init(&cparams);
  cparams.n_seq_max = n_par;
  cparams.kv_tokens = (int32_t)n_prompt + n_par * (n_predict + cparams.block_size);
  if (n_prompt > (size_t)cparams.max_batch_tokens) cparams.max_batch_tokens = (int32_t)n_prompt;
  if (n_par > cparams.max_batch_tokens) cparams.max_batch_tokens = n_par;
  brisk_context *ctx = NULL;
  brisk_batch *batch = NULL;
  if (brisk_context_create(model, &cparams, &ctx) ||
      brisk_batch_create(cparams.max_batch_tokens, &batch))
    return fail("setup");

  /* Prefill once on sequence 0, then share it. */
  for (size_t i = 0; i < n_prompt; i++)
    brisk_batch_add(batch, tokens[i], (int32_t)i, 0, i + 1 == n_prompt);
  if (brisk_decode(ctx, batch) != BRISK_OK) return fail("prefill");
  for (int s = 1; s < n_par; s++)
    if (brisk_seq_fork(ctx, 0, s) != BRISK_OK) return fail("fork");

  int32_t n_vocab = brisk_model_n_vocab(model);
  const float *prompt_logits = brisk_get_logits(ctx, (int32_t)n_prompt - 1);
  int32_t *next = malloc((size_t)n_par * sizeof *next); // [n_par]
  int *done = calloc((size_t)n_par, sizeof *done);      // [n_par]
  char **text = calloc((size_t)n_par, sizeof *text);    // [n_par] growing strings
  size_t *text_len = calloc((size_t)n_par, sizeof *text_len);
  brisk_detokenizer **detok = calloc((size_t)n_par, sizeof *detok);
  int *row_seq = malloc((size_t)n_par * sizeof *row_seq); // [n_par] sequence of batch row r
  if (!next || !done || !text || !text_len || !detok || !row_seq) return 1;
  for (int s = 0; s < n_par; s++) {
    next[s] = nth_best(prompt_logits, n_vocab, s);
    if (brisk_detokenizer_create(model, 0, &detok[s]) != BRISK_OK) return fail("detokenizer");
  }

  for (int step = 0; step < n_predict; step++) {
    /* Record each live sequence's token and queue it: one batch, n rows. */
    brisk_batch_clear(batch);
    int n_rows = 0;
    for (int s = 0; s < n_par; s++) {
      if (done[s] || brisk_token_is_eog(model, next[s])) {
        done[s] = 1;
        continue;
      }
      const char *piece;
      size_t len;
      if (brisk_detokenizer_push(detok[s], next[s], &piece, &len) == BRISK_OK && len) {
        char *grown = realloc(text[s], text_len[s] + len + 1);
        if (!grown) return 1;
        memcpy(grown + text_len[s], piece, len);
        text_len[s] += len;
        grown[text_len[s]] = 0;
        text[s] = grown;
      }
      brisk_batch_add(batch, next[s], brisk_seq_len(ctx, s), s, 1);
      row_seq[n_rows++] = s;
    }
    if (n_rows == 0 || step + 1 == n_predict) break;
    if (brisk_decode(ctx, batch) != BRISK_OK) return fail("decode");
    for (int r = 0; r < n_rows; r++)
      next[row_seq[r]] = nth_best(brisk_get_logits(ctx, r), n_vocab, 0);
  }

  for (int s = 0; s < n_par; s++) {
    const char *rest = "";
    size_t rest_len = 0;
    brisk_detokenizer_flush(detok[s], &rest, &rest_len);
    printf("--- completion %d\n%s%s%.*s\n", s, prompt, text[s] ? text[s] : "", (int)rest_len, rest);
    brisk_detokenizer_free(detok[s]);
    free(text[s]);
  }
  free(row_seq);
  free(detok);
  free(text_len);
  free(text);
  free(done);
  free(next);
  brisk_batch_free(batch);
  brisk_context_free(ctx);
  free(tokens);
  brisk_model_free(model);
  return 0;
}
