/* chat: one turn of a conversation. Formats a system and a user message
 * with the model's chat template (recognized by brisk, never executed) and
 * prints the assistant's greedy reply.
 *
 *   chat MODEL.gguf ["What is the capital of France?"] [TEMPLATE]
 *
 * TEMPLATE ("chatml", "llama3", ...) is needed only for models whose
 * template brisk does not recognize, or that have none.
 */
#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "chat: %s: %s\n", what, brisk_last_error());
  return 1;
}

static int32_t argmax(const float *logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [MESSAGE] [TEMPLATE]\n", argv[0]);
    return 2;
  }
  const char *question = argc > 2 ? argv[2] : "What is the capital of France?";
  const char *template_name = argc > 3 ? argv[3] : NULL; /* NULL: the model's own */
  const int n_predict = 128;

  brisk_model *model = NULL;
  if (brisk_model_load(argv[1], NULL, &model) != BRISK_OK) return fail("load");

  /* The conversation as prompt text, ending with the assistant's turn
   * opened. Measure first, then format into a buffer of that size. */
  brisk_chat_message messages[] = {
      {"system", "You are a helpful assistant. Answer in one sentence."},
      {"user", question},
  };
  size_t len = 0;
  brisk_status st = brisk_chat_apply(model, template_name, messages, 2, 1, NULL, 0, &len);
  if (st != BRISK_E_BUFFER_TOO_SMALL) return fail("chat template");
  char *prompt = malloc(len + 1);
  if (!prompt || brisk_chat_apply(model, template_name, messages, 2, 1, prompt, len + 1, &len))
    return fail("chat template");
  fprintf(stderr, "chat: template %s\n",
          template_name ? template_name : brisk_chat_template_name(model));

  /* Control tokens such as <|im_start|> in the text are the model's own. */
  uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL;
  size_t n_prompt = 0;
  brisk_tokenize(model, prompt, len, NULL, 0, flags, &n_prompt);
  int32_t *tokens = malloc((n_prompt + 1) * sizeof *tokens); // [n_prompt]
  if (!tokens || n_prompt == 0 ||
      brisk_tokenize(model, prompt, len, tokens, n_prompt, flags, &n_prompt))
    return fail("tokenize");

  brisk_context_params cparams;
  brisk_context_params_init(&cparams);
  cparams.kv_tokens = (int32_t)n_prompt + n_predict;
  cparams.n_seq_max = 1;
  if (n_prompt > (size_t)cparams.max_batch_tokens) cparams.max_batch_tokens = (int32_t)n_prompt;
  brisk_context *ctx = NULL;
  brisk_batch *batch = NULL;
  brisk_detokenizer *detok = NULL;
  if (brisk_context_create(model, &cparams, &ctx) ||
      brisk_batch_create(cparams.max_batch_tokens, &batch) ||
      brisk_detokenizer_create(model, 0, &detok))
    return fail("setup");

  for (size_t i = 0; i < n_prompt; i++)
    brisk_batch_add(batch, tokens[i], (int32_t)i, 0, i + 1 == n_prompt);
  if (brisk_decode(ctx, batch) != BRISK_OK) return fail("decode");
  const float *logits = brisk_get_logits(ctx, (int32_t)n_prompt - 1);

  /* Generate until the model ends its turn (<|im_end|>, <|eot_id|>, ...). */
  int32_t pos = (int32_t)n_prompt, n_vocab = brisk_model_n_vocab(model);
  for (int i = 0; i < n_predict; i++) {
    int32_t next = argmax(logits, n_vocab);
    if (brisk_token_is_eog(model, next)) break;
    const char *text;
    size_t text_len;
    if (brisk_detokenizer_push(detok, next, &text, &text_len) == BRISK_OK)
      fwrite(text, 1, text_len, stdout);
    fflush(stdout);
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
  free(prompt);
  brisk_model_free(model);
  return 0;
}
