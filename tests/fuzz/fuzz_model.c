/* Fuzz target for the GGUF-to-model layer: bytes -> brisk_model_load_from_memory
 * (full, or vocabulary only when the last byte is odd). brisk.h promises a
 * file is validated completely before use, so every model that loads must
 * decode a short prompt (BRISK_OK, or only BRISK_E_OUT_OF_MEMORY), and its
 * vocabulary calls must keep their contracts: every token id below n_vocab
 * has a piece, and tokenizing gives ids below n_vocab. An encoder (bert)
 * must embed a text instead. */
#include "fuzz_target.h"

#include "model/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_model: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,     \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* An encoder gives vectors, not logits: one text through brisk_embed. */
static void embed(const brisk_model *m) {
  static const char *const texts[] = {"Hello, world! \xc3\xa9 hellos [SEP]x\xff"};
  size_t d = (size_t)brisk_model_n_embd(m);
  float *out = malloc(d * sizeof *out);
  if (!out) return;
  brisk_status st = brisk_embed(m, NULL, texts, 1, out, d);
  /* UNSUPPORTED: no tokenizer, or a pooling brisk does not compute. */
  CHECK(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY || st == BRISK_E_UNSUPPORTED);
  free(out);
}

static void decode(const brisk_model *m) {
  if (brisk_arch_get(m->hp.arch)->encoder) {
    embed(m);
    return;
  }
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = 16;
  cp.block_size = 4;
  cp.n_threads = 1;
  cp.max_batch_tokens = 4;
  cp.n_seq_max = 1;
  brisk_context *ctx = NULL;
  brisk_batch *b = NULL;
  brisk_status st = brisk_context_create(m, &cp, &ctx);
  if (st == BRISK_E_OUT_OF_MEMORY) return;
  CHECK(st == BRISK_OK);
  CHECK(brisk_batch_create(4, &b) == BRISK_OK);
  int32_t nv = brisk_model_n_vocab(m);
  for (int32_t i = 0; i < 3; i++) CHECK(brisk_batch_add(b, (7 * i) % nv, i, 0, i == 2) == 0);
  st = brisk_decode(ctx, b);
  CHECK(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY);
  if (st == BRISK_OK) CHECK(brisk_get_logits(ctx, 2) != NULL);
  brisk_batch_free(b);
  brisk_context_free(ctx);
}

static void vocabulary(const brisk_model *m) {
  if (!brisk_model_tokenizer(m)[0]) return;
  int32_t nv = brisk_model_n_vocab(m);
  char piece[256];
  size_t n;
  for (int32_t t = 0; t < nv && t < 512; t++) {
    brisk_status st =
        brisk_token_to_piece(m, t, BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece, &n);
    CHECK(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL);
  }
  static const char text[] = "Hello, world! \xc3\xa9\xe2\x96\x81 12345 <s></s>\n\t\xff";
  int32_t toks[256];
  brisk_status st =
      brisk_tokenize(m, text, sizeof text - 1, toks, 256, BRISK_TOKENIZE_ADD_SPECIAL, &n);
  CHECK(st == BRISK_OK || st == BRISK_E_UNSUPPORTED || st == BRISK_E_BUFFER_TOO_SMALL);
  if (st != BRISK_OK) return;
  for (size_t i = 0; i < n; i++) CHECK(toks[i] >= 0 && toks[i] < nv);
  char back[4096];
  size_t dn;
  st = brisk_detokenize(m, toks, n, 0, back, sizeof back, &dn);
  CHECK(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.vocab_only = size > 0 && (data[size - 1] & 1);
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load_from_memory(data, size, &mp, &m);
  if (st) {
    CHECK(m == NULL && brisk_last_error()[0]);
    return 0;
  }
  CHECK(brisk_model_n_vocab(m) > 0 || mp.vocab_only);
  if (!mp.vocab_only) decode(m);
  vocabulary(m);
  brisk_model_free(m);
  return 0;
}
