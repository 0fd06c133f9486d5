/* simple: the smallest complete program on brisk. Loads a model, feeds it a
 * prompt and prints a greedy continuation as it is generated.
 *
 *   simple MODEL.gguf "Once upon a time" [N_TOKENS]
 */
#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "simple: %s: %s\n", what, brisk_last_error());
  return 1;
}

/* Greedy decoding: the most likely next token. */
static int32_t argmax(const float *logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [N_TOKENS]\n", argv[0]);
    return 2;
  }
  const char *prompt = argv[2];
  int n_predict = argc > 3 ? atoi(argv[3]) : 32;

  brisk_model *model = NULL;
  if (brisk_model_load(argv[1], NULL, &model) != BRISK_OK) return fail("load");

  /* Tokenize: first ask for the count, then fill a buffer of that size. */
  size_t n_prompt = 0;
  uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL;
  brisk_tokenize(model, prompt, strlen(prompt), NULL, 0, flags, &n_prompt);
  int32_t *tokens = malloc((n_prompt + 1) * sizeof *tokens); // [n_prompt]
  if (!tokens || n_prompt == 0 ||
      brisk_tokenize(model, prompt, strlen(prompt), tokens, n_prompt, flags, &n_prompt))
    return fail("tokenize");

  /* A context with room for the prompt and the reply, one sequence. */
  brisk_context_params cparams;
  brisk_context_params_init(&cparams);
  cparams.kv_tokens = (int32_t)n_prompt + n_predict;
  cparams.n_seq_max = 1;
  if (n_prompt > (size_t)cparams.max_batch_tokens) cparams.max_batch_tokens = (int32_t)n_prompt;
  brisk_context *ctx = NULL;
  brisk_batch *batch = NULL;
  brisk_detokenizer *detok = NULL;
  if (brisk_context_create(model, &cparams, &ctx) != BRISK_OK) return fail("context");
  if (brisk_batch_create(cparams.max_batch_tokens, &batch) != BRISK_OK) return fail("batch");
  if (brisk_detokenizer_create(model, 0, &detok) != BRISK_OK) return fail("detokenizer");

  /* The whole prompt in one batch on sequence 0; logits for its last token. */
  for (size_t i = 0; i < n_prompt; i++)
    brisk_batch_add(batch, tokens[i], (int32_t)i, 0, i + 1 == n_prompt);
  if (brisk_decode(ctx, batch) != BRISK_OK) return fail("decode");
  const float *logits = brisk_get_logits(ctx, (int32_t)n_prompt - 1);

  printf("%s", prompt);
  int32_t pos = (int32_t)n_prompt, n_vocab = brisk_model_n_vocab(model);
  for (int i = 0; i < n_predict; i++) {
    int32_t next = argmax(logits, n_vocab);
    if (brisk_token_is_eog(model, next)) break;
    /* The detokenizer holds back bytes of a character split across tokens. */
    const char *text;
    size_t len;
    if (brisk_detokenizer_push(detok, next, &text, &len) == BRISK_OK) fwrite(text, 1, len, stdout);
    fflush(stdout);
    /* Feed the token back: one entry, the next position, logits wanted. */
    brisk_batch_clear(batch);
    brisk_batch_add(batch, next, pos++, 0, 1);
    if (brisk_decode(ctx, batch) != BRISK_OK) return fail("decode");
    logits = brisk_get_logits(ctx, 0);
  }
  const char *rest;
  size_t rest_len;
  if (brisk_detokenizer_flush(detok, &rest, &rest_len) == BRISK_OK)
    fwrite(rest, 1, rest_len, stdout);
  printf("\n");

  brisk_detokenizer_free(detok);
  brisk_batch_free(batch);
  brisk_context_free(ctx);
  free(tokens);
  brisk_model_free(model);
  return 0;
}
