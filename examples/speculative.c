/* speculative: generation with speculative decoding. Each round drafts up
 * to k tokens (by looking the last few tokens up in the text so far, or
 * with a smaller draft model), checks them all with one forward pass of the
 * model, and keeps what the model agrees with: the same text as plain
 * decoding, in fewer passes.
 *
 *   speculative MODEL PROMPT [N_TOKENS] [DRAFT_MODEL]
 *
 * Without DRAFT_MODEL the draft is prompt lookup. Greedy decoding; the
 * statistics go to stderr.
 */
#include <brisk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "speculative: %s: %s\n", what, brisk_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [N_TOKENS] [DRAFT_MODEL]\n", argv[0]);
    return 2;
  }
  const char *prompt = argv[2];
  int n_predict = argc > 3 ? atoi(argv[3]) : 64;
  if (n_predict < 1) n_predict = 1;

  brisk_model *model = NULL, *draft = NULL;
  if (brisk_model_load(argv[1], NULL, &model) != BRISK_OK) return fail("load");
  if (argc > 4 && brisk_model_load(argv[4], NULL, &draft) != BRISK_OK) return fail("load draft");

  size_t n_prompt = 0;
  uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL;
  brisk_tokenize(model, prompt, strlen(prompt), NULL, 0, flags, &n_prompt);
  /* The whole sequence: the prompt, then every generated token. */
  int32_t *tokens = malloc((n_prompt + (size_t)n_predict + 1) * sizeof *tokens);
  if (!tokens || n_prompt == 0 ||
      brisk_tokenize(model, prompt, strlen(prompt), tokens, n_prompt, flags, &n_prompt))
    return fail("tokenize");

  brisk_context_params cparams;
  brisk_context_params_init(&cparams);
  cparams.kv_tokens = (int32_t)n_prompt + n_predict + 64; /* + room for a draft */
  cparams.n_seq_max = 1;
  if (n_prompt > (size_t)cparams.max_batch_tokens) cparams.max_batch_tokens = (int32_t)n_prompt;
  brisk_context *ctx = NULL;
  brisk_batch *batch = NULL;
  brisk_sampler *sampler = NULL;
  brisk_spec *spec = NULL;
  brisk_detokenizer *detok = NULL;
  if (brisk_context_create(model, &cparams, &ctx) != BRISK_OK) return fail("context");
  if (brisk_batch_create(cparams.max_batch_tokens, &batch) != BRISK_OK) return fail("batch");
  if (brisk_detokenizer_create(model, 0, &detok) != BRISK_OK) return fail("detokenizer");

  brisk_sampler_params sparams;
  brisk_sampler_params_init(&sparams);
  sparams.temperature = 0; /* greedy: speculation gives exactly the plain output */
  if (brisk_sampler_create(model, &sparams, &sampler) != BRISK_OK) return fail("sampler");

  brisk_spec_params xparams;
  brisk_spec_params_init(&xparams);
  xparams.n_draft = 8;
  xparams.adaptive = 1;
  if (draft) {
    xparams.drafter = BRISK_SPEC_DRAFT_MODEL; /* must share the model's vocabulary */
    xparams.draft_model = draft;
  }
  if (brisk_spec_create(ctx, &xparams, &spec) != BRISK_OK) return fail("spec");

  /* The prompt but its last token goes in as usual; the last token is the
   * "pending" one that each round starts from. */
  size_t n = n_prompt;
  if (n_prompt > 1) {
    for (size_t i = 0; i + 1 < n_prompt; i++) brisk_batch_add(batch, tokens[i], (int32_t)i, 0, 0);
    if (brisk_decode(ctx, batch) != BRISK_OK) return fail("decode");
  }

  printf("%s", prompt);
  int done = 0;
  size_t end = n_prompt + (size_t)n_predict;
  while (!done && n < end) {
    size_t n_new = 0;
    /* Appends 1 .. k+1 tokens after tokens[n - 1]; never more than asked. */
    if (brisk_spec_round(spec, 0, sampler, tokens, n, tokens + n, end - n, &n_new) != BRISK_OK)
      return fail("round");
    for (size_t j = 0; j < n_new && !done; j++) {
      int32_t t = tokens[n + j];
      if (brisk_token_is_eog(model, t)) {
        done = 1;
        break;
      }
      const char *text;
      size_t len;
      if (brisk_detokenizer_push(detok, t, &text, &len) == BRISK_OK) fwrite(text, 1, len, stdout);
    }
    fflush(stdout);
    n += n_new;
  }
  const char *rest;
  size_t rest_len;
  if (brisk_detokenizer_flush(detok, &rest, &rest_len) == BRISK_OK)
    fwrite(rest, 1, rest_len, stdout);
  printf("\n");

  brisk_spec_stats st = {.struct_size = sizeof st};
  brisk_spec_get_stats(spec, &st);
  fprintf(stderr,
          "speculative: %llu rounds, %llu tokens, %llu of %llu drafted tokens accepted "
          "(%.2f tokens per target pass)\n",
          (unsigned long long)st.n_rounds, (unsigned long long)st.n_produced,
          (unsigned long long)st.n_accepted, (unsigned long long)st.n_drafted,
          st.n_rounds ? (double)st.n_produced / (double)st.n_rounds : 0.0);

  brisk_spec_free(spec);
  brisk_sampler_free(sampler);
  brisk_detokenizer_free(detok);
  brisk_batch_free(batch);
  brisk_context_free(ctx);
  free(tokens);
  brisk_model_free(draft);
  brisk_model_free(model);
  return 0;
}
