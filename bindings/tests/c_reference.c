/* What the C API gives for one model and prompt, printed as lines that every
 * binding's tests compare with their own results:
 *   n_vocab N
 *   tokens T...            the prompt, tokenized with BOS
 *   logits L...            the last prompt token's logits (%.9g)
 *   greedy T...            16 tokens, temperature 0, by decode and sample
 *   sampled T...           16 tokens, temperature 0.8, top_p 0.9, seed 42
 *   engine T...            16 tokens of a greedy engine request
 *   text HEX               the greedy tokens detokenized, as hex bytes
 *   chat HEX               a system + user conversation in the chatml format
 * Usage: c_reference MODEL PROMPT */
#include "brisk.h"

#include <stdio.h>
#include <stdlib.h>

#define N_GEN 16

static int die(const char *what) {
  fprintf(stderr, "c_reference: %s: %s\n", what, brisk_last_error());
  return 1;
}

static void print_tokens(const char *name, const int32_t *t, size_t n) {
  printf("%s", name);
  for (size_t i = 0; i < n; i++) printf(" %d", t[i]);
  printf("\n");
}

/* Prefills the prompt in a fresh sequence 0 and generates N_GEN tokens. */
static int generate(brisk_context *ctx, const brisk_model *m, const int32_t *prompt, size_t n,
                    float temperature, float top_p, uint64_t seed, int32_t *out,
                    float *first_logits) {
  brisk_seq_free(ctx, 0);
  brisk_batch *b = NULL;
  brisk_sampler *s = NULL;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = temperature;
  sp.top_p = top_p;
  sp.seed = seed;
  if (brisk_batch_create((int32_t)n, &b) || brisk_sampler_create(m, &sp, &s)) return -1;
  for (size_t i = 0; i < n; i++) brisk_batch_add(b, prompt[i], (int32_t)i, 0, i + 1 == n);
  int rc = 0;
  if (brisk_decode(ctx, b)) rc = -1;
  if (!rc && first_logits) {
    const float *l = brisk_get_logits(ctx, (int32_t)n - 1);
    for (int32_t v = 0; v < brisk_model_n_vocab(m); v++) first_logits[v] = l[v];
  }
  int32_t i_logits = (int32_t)n - 1;
  for (int g = 0; !rc && g < N_GEN; g++) {
    if (brisk_sampler_sample(s, ctx, i_logits, &out[g]) || brisk_sampler_accept(s, out[g])) {
      rc = -1;
      break;
    }
    if (g + 1 == N_GEN) break;
    brisk_batch_clear(b);
    brisk_batch_add(b, out[g], (int32_t)(n + (size_t)g), 0, 1);
    if (brisk_decode(ctx, b)) rc = -1;
    i_logits = 0;
  }
  brisk_sampler_free(s);
  brisk_batch_free(b);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: c_reference MODEL PROMPT\n");
    return 2;
  }
  brisk_model *m = NULL;
  brisk_context *ctx = NULL;
  brisk_engine *e = NULL;
  if (brisk_model_load(argv[1], NULL, &m)) return die("load");
  int32_t prompt[256];
  size_t n = 0;
  const char *text = argv[2];
  size_t len = 0;
  while (text[len]) len++;
  if (brisk_tokenize(m, text, len, prompt, 256, BRISK_TOKENIZE_ADD_SPECIAL, &n))
    return die("tokenize");
  int32_t n_vocab = brisk_model_n_vocab(m);
  printf("n_vocab %d\n", n_vocab);
  print_tokens("tokens", prompt, n);
  if (brisk_context_create(m, NULL, &ctx)) return die("context");
  int32_t greedy[N_GEN], sampled[N_GEN], engine[N_GEN];
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  if (!logits) return 1;
  /* Copied right after the prompt's decode: later decodes overwrite them. */
  if (generate(ctx, m, prompt, n, 0.0f, 1.0f, 0, greedy, logits)) return die("greedy");
  printf("logits");
  for (int32_t i = 0; i < n_vocab; i++) printf(" %.9g", (double)logits[i]);
  printf("\n");
  free(logits);
  print_tokens("greedy", greedy, N_GEN);
  if (generate(ctx, m, prompt, n, 0.8f, 0.9f, 42, sampled, NULL)) return die("sampled");
  print_tokens("sampled", sampled, N_GEN);

  if (brisk_engine_create(m, NULL, &e)) return die("engine");
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_tokens = prompt;
  rp.n_prompt_tokens = n;
  rp.sampler = &sp;
  rp.max_tokens = N_GEN;
  rp.stop_at_eog = 0;
  uint64_t id;
  if (brisk_engine_submit(e, &rp, &id)) return die("submit");
  int n_out = 0, done = 0;
  while (!done) {
    if (brisk_engine_step(e, NULL)) return die("step");
    brisk_engine_event ev[8];
    size_t got;
    if (brisk_engine_poll(e, ev, 8, &got)) return die("poll");
    for (size_t i = 0; i < got; i++) {
      if (ev[i].token >= 0 && n_out < N_GEN) engine[n_out++] = ev[i].token;
      if (ev[i].finished) done = 1;
    }
  }
  print_tokens("engine", engine, (size_t)n_out);

  char buf[4096];
  size_t nb = 0;
  if (brisk_detokenize(m, greedy, N_GEN, 0, buf, sizeof buf, &nb)) return die("detokenize");
  printf("text ");
  for (size_t i = 0; i < nb; i++) printf("%02x", (unsigned char)buf[i]);
  printf("\n");
  const brisk_chat_message conv[] = {{"system", "Be brief."}, {"user", "Hi there!"}};
  if (brisk_chat_apply(m, "chatml", conv, 2, 1, buf, sizeof buf, &nb)) return die("chat");
  printf("chat ");
  for (size_t i = 0; i < nb; i++) printf("%02x", (unsigned char)buf[i]);
  printf("\n");
  brisk_engine_free(e);
  brisk_context_free(ctx);
  brisk_model_free(m);
  return 0;
}
