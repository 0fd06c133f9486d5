/* Helper of test_embed_reference.py: loads a model and prints, for every
 * text given, the token ids brisk_embed runs ("ids ...") and its vector
 * ("vec ...", %.9g) under the pooling and normalisation asked for.
 *
 * Usage: embed_vectors MODEL POOLING NORMALIZE TEXT...
 *        embed_vectors MODEL api-checks
 *        embed_vectors MODEL engine-checks TEXT...
 *        embed_vectors MODEL tokens TEXT...
 *   POOLING: default, mean, cls or last; NORMALIZE: -1 (the folder's), 0, 1. */
#include "brisk.h"
#include "core/alloc.h"
#include "model/embed_tok.h"
#include "model/model.h"
#include "tokenizer/wordpiece.h"

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: %s failed (%s)\n", __FILE__, __LINE__, #cond, brisk_last_error());   \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

typedef struct embed_job {
  const brisk_model *m;
  const char *const *texts;
  int n;
  float *out;
  brisk_status st;
} embed_job;

static void *embed_thread(void *p) {
  embed_job *j = p;
  size_t d = (size_t)brisk_model_n_embd(j->m);
  j->st = brisk_embed(j->m, NULL, j->texts, j->n, j->out, (size_t)j->n * d);
  return NULL;
}

/* The API's contract on an encoder model: argument checks, the buffer
 * size, truncation, a batch giving each text the vector it gets alone
 * (bit for bit), concurrent calls on one model, and no context. */
static int api_checks(const char *path) {
  brisk_model *m = NULL;
  EXPECT(brisk_model_load(path, NULL, &m) == BRISK_OK);
  const size_t d = (size_t)brisk_model_n_embd(m);
  const char *texts[] = {"Hello, world!", "", "The quick brown fox jumps over the lazy dog.",
                         "a b c d e f g h i j k l m n o p"};
  const int n = 4;
  float *all = calloc((size_t)n * d, sizeof *all), *one = calloc(d, sizeof *one);
  float *thr = calloc(2 * (size_t)n * d, sizeof *thr);
  EXPECT(all && one && thr);
  EXPECT(brisk_embed(NULL, NULL, texts, n, all, (size_t)n * d) == BRISK_E_INVALID_ARGUMENT);
  EXPECT(brisk_embed(m, NULL, NULL, n, all, (size_t)n * d) == BRISK_E_INVALID_ARGUMENT);
  EXPECT(brisk_embed(m, NULL, texts, -1, all, (size_t)n * d) == BRISK_E_INVALID_ARGUMENT);
  EXPECT(brisk_embed(m, NULL, texts, n, all, (size_t)n * d - 1) == BRISK_E_BUFFER_TOO_SMALL);
  EXPECT(brisk_embed(m, NULL, texts, 0, NULL, 0) == BRISK_OK);
  const char *with_null[] = {"x", NULL};
  EXPECT(brisk_embed(m, NULL, with_null, 2, all, 2 * d) == BRISK_E_INVALID_ARGUMENT);
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.pooling = 9;
  EXPECT(brisk_embed(m, &p, texts, 1, all, d) == BRISK_E_INVALID_ARGUMENT);
  brisk_embed_params_init(&p);
  p.normalize = 2;
  EXPECT(brisk_embed(m, &p, texts, 1, all, d) == BRISK_E_INVALID_ARGUMENT);
  brisk_embed_params_init(&p);
  p.max_tokens = 1;
  EXPECT(brisk_embed(m, &p, texts, 1, all, d) == BRISK_E_INVALID_ARGUMENT);
  /* A newer caller's struct: zero tail accepted, a non-zero one refused. */
  struct {
    brisk_embed_params p;
    int32_t extra;
  } big = {{0}, 0};
  brisk_embed_params_init(&big.p);
  big.p.struct_size = sizeof big;
  EXPECT(brisk_embed(m, &big.p, texts, 1, all, d) == BRISK_OK);
  big.extra = 1;
  EXPECT(brisk_embed(m, &big.p, texts, 1, all, d) == BRISK_E_INVALID_ARGUMENT);
  /* Each text of a batch gets the vector it gets alone. */
  EXPECT(brisk_embed(m, NULL, texts, n, all, (size_t)n * d) == BRISK_OK);
  for (int t = 0; t < n; t++) {
    EXPECT(brisk_embed(m, NULL, texts + t, 1, one, d) == BRISK_OK);
    EXPECT(memcmp(one, all + (size_t)t * d, d * sizeof *one) == 0);
  }
  /* Truncation keeps [SEP] last. */
  int32_t *ids = NULL;
  size_t n_ids = 0;
  EXPECT(brisk_model_embed_tokens(m, texts[3], strlen(texts[3]), 5, &ids, &n_ids) == BRISK_OK);
  EXPECT(n_ids == 5 && ids[n_ids - 1] == brisk_wordpiece_sep(m->wordpiece));
  brisk_free(ids);
  brisk_embed_params_init(&p);
  p.max_tokens = 5;
  EXPECT(brisk_embed(m, &p, texts + 3, 1, one, d) == BRISK_OK);
  /* Two threads on one model at once give the single-threaded vectors. */
  pthread_t th[2];
  embed_job jobs[2];
  for (int i = 0; i < 2; i++) {
    jobs[i] = (embed_job){m, texts, n, thr + (size_t)i * n * d, BRISK_E_INTERNAL};
    EXPECT(pthread_create(&th[i], NULL, embed_thread, &jobs[i]) == 0);
  }
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    EXPECT(jobs[i].st == BRISK_OK);
    EXPECT(memcmp(jobs[i].out, all, (size_t)n * d * sizeof *all) == 0);
  }
  /* An encoder gives no tokens: no context. */
  brisk_context *c = NULL;
  EXPECT(brisk_context_create(m, NULL, &c) == BRISK_E_UNSUPPORTED && c == NULL);
  free(all), free(one), free(thr);
  brisk_model_free(m);
  printf("api checks passed\n");
  return 0;
}

/* The ids of each text, a line each ("ids ..."), nothing run. */
static int tokens_only(const char *path, int n, char **texts) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.vocab_only = 1;
  brisk_model *m = NULL;
  if (brisk_model_load(path, &mp, &m)) {
    fprintf(stderr, "load: %s\n", brisk_last_error());
    return 1;
  }
  for (int t = 0; t < n; t++) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (brisk_model_embed_tokens(m, texts[t], strlen(texts[t]), 1u << 20, &ids, &n_ids)) {
      fprintf(stderr, "tokens: %s\n", brisk_last_error());
      brisk_model_free(m);
      return 1;
    }
    printf("ids");
    for (size_t i = 0; i < n_ids; i++) printf(" %d", ids[i]);
    printf("\n");
    brisk_free(ids);
  }
  brisk_model_free(m);
  return 0;
}

/* An engine on an encoder model: it refuses generation requests, has no KV
 * pool, packs every text's embedding request into one step, and each
 * vector (mean normalised, CLS raw, and the folder's default in turn) is
 * bitwise brisk_embed's for the same text and params. A cancelled request
 * gets no vector. */
static int engine_checks(const char *path, int n, char **texts) {
  brisk_model *m = NULL;
  EXPECT(n >= 2);
  EXPECT(brisk_model_load(path, NULL, &m) == BRISK_OK);
  const size_t d = (size_t)brisk_model_n_embd(m);
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.n_threads = 2;
  ep.max_batch_tokens = 2048;
  brisk_engine *e = NULL;
  EXPECT(brisk_engine_create(m, &ep, &e) == BRISK_OK);
  brisk_engine_counters c = {.struct_size = sizeof c};
  EXPECT(brisk_engine_stats(e, &c) == BRISK_OK && c.n_kv_blocks == 0);
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  int32_t tok = 1;
  rp.prompt_tokens = &tok;
  rp.n_prompt_tokens = 1;
  uint64_t id = 0;
  EXPECT(brisk_engine_submit(e, &rp, &id) == BRISK_E_UNSUPPORTED);
  EXPECT(strstr(brisk_last_error(), "encoder") != NULL);
  const int modes[3][2] = {{BRISK_EMBED_POOLING_MEAN, 1},
                           {BRISK_EMBED_POOLING_CLS, 0},
                           {BRISK_EMBED_POOLING_DEFAULT, -1}};
  float *want = calloc(d, sizeof *want), *got = calloc(d, sizeof *got);
  uint64_t *ids = calloc((size_t)n * 3, sizeof *ids);
  EXPECT(want && got && ids);
  for (int t = 0; t < n; t++)
    for (int k = 0; k < 3; k++) {
      brisk_embed_request_params p;
      brisk_embed_request_params_init(&p);
      p.text = texts[t];
      p.pooling = modes[k][0];
      p.normalize = modes[k][1];
      EXPECT(brisk_engine_submit_embed(e, &p, &ids[t * 3 + k]) == BRISK_OK);
    }
  uint64_t cancelled = 0;
  {
    brisk_embed_request_params p;
    brisk_embed_request_params_init(&p);
    p.text = texts[0];
    EXPECT(brisk_engine_submit_embed(e, &p, &cancelled) == BRISK_OK);
    EXPECT(brisk_engine_cancel(e, cancelled) == BRISK_OK);
  }
  brisk_engine_step_info si = {.struct_size = sizeof si};
  EXPECT(brisk_engine_step(e, &si) == BRISK_OK);
  EXPECT(si.n_finished == 3 * n + 1 && si.n_waiting == 0);
  brisk_engine_event ev[64];
  size_t n_ev = 0, got_n = 0;
  EXPECT(brisk_engine_poll(e, ev, 64, &n_ev) == BRISK_OK && n_ev == (size_t)(3 * n + 1));
  for (size_t i = 0; i < n_ev; i++) {
    EXPECT(ev[i].finished && ev[i].token == -1);
    if (ev[i].id == cancelled) {
      EXPECT(ev[i].reason == BRISK_FINISH_CANCELLED);
      EXPECT(brisk_engine_embedding(e, cancelled, got, d, &got_n) == BRISK_E_INVALID_STATE);
      continue;
    }
    EXPECT(ev[i].reason == BRISK_FINISH_LENGTH);
    int at = 0;
    while (at < 3 * n && ids[at] != ev[i].id) at++;
    EXPECT(at < 3 * n);
    EXPECT(brisk_engine_embedding(e, ev[i].id, got, d, &got_n) == BRISK_OK && got_n == d);
    brisk_embed_params p;
    brisk_embed_params_init(&p);
    p.pooling = modes[at % 3][0];
    p.normalize = modes[at % 3][1];
    const char *text = texts[at / 3];
    EXPECT(brisk_embed(m, &p, &text, 1, want, d) == BRISK_OK);
    for (size_t j = 0; j < d; j++)
      if (memcmp(&got[j], &want[j], sizeof *got)) {
        fprintf(stderr, "text %d mode %d element %zu: engine %.9g, brisk_embed %.9g\n", at / 3,
                at % 3, j, (double)got[j], (double)want[j]);
        return 1;
      }
  }
  printf("ok   engine on an encoder: %d requests in one step of %d tokens, bitwise brisk_embed\n",
         3 * n, (int)si.n_tokens);
  free(want);
  free(got);
  free(ids);
  brisk_engine_free(e);
  brisk_model_free(m);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[2], "api-checks")) return api_checks(argv[1]);
  if (argc >= 3 && !strcmp(argv[2], "engine-checks"))
    return engine_checks(argv[1], argc - 3, argv + 3);
  if (argc >= 3 && !strcmp(argv[2], "tokens")) return tokens_only(argv[1], argc - 3, argv + 3);
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL POOLING NORMALIZE TEXT...\n", argv[0]);
    return 2;
  }
  const char *names[] = {"default", "mean", "cls", "last"};
  int pooling = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(argv[2], names[i])) pooling = i;
  if (pooling < 0) {
    fprintf(stderr, "unknown pooling '%s'\n", argv[2]);
    return 2;
  }
  brisk_model *m = NULL;
  if (brisk_model_load(argv[1], NULL, &m)) {
    fprintf(stderr, "load: %s\n", brisk_last_error());
    return 1;
  }
  int n = argc - 4, d = brisk_model_n_embd(m);
  float *out = malloc((size_t)(n ? n : 1) * (size_t)d * sizeof *out);
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.pooling = pooling;
  p.normalize = atoi(argv[3]);
  int rc = 0;
  if (brisk_embed(m, &p, (const char *const *)argv + 4, n, out, (size_t)n * (size_t)d)) {
    fprintf(stderr, "embed: %s\n", brisk_last_error());
    rc = 1;
  }
  for (int t = 0; t < n && !rc; t++) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (brisk_model_embed_tokens(m, argv[4 + t], strlen(argv[4 + t]), 1u << 20, &ids, &n_ids)) {
      fprintf(stderr, "tokens: %s\n", brisk_last_error());
      rc = 1;
      break;
    }
    printf("ids");
    for (size_t i = 0; i < n_ids; i++) printf(" %d", ids[i]);
    printf("\nvec");
    for (int i = 0; i < d; i++) printf(" %.9g", (double)out[(size_t)t * d + i]);
    printf("\n");
    brisk_free(ids);
  }
  free(out);
  brisk_model_free(m);
  return rc;
}
