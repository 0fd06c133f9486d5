/* Fuzz target: the constraint compilers. The first input byte picks the
 * kind of text the rest is (GBNF, JSON Schema, regular expression); it is
 * compiled, and when it compiles, masks are computed over a small
 * vocabulary along a walk that accepts allowed tokens chosen by the input's
 * bytes. Aborts on a status brisk.h does not promise (only OK,
 * INVALID_ARGUMENT and OUT_OF_MEMORY), an error without a message, a mask
 * whose count disagrees with its bits, or an allowed token that accept
 * refuses. */
#include "fuzz_target.h"
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_grammar: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static const char *const texts[] = {"{", "}", "\"",   "a", "ab",   "0",    "12", " ", ",",  ":",
                                    "[", "]", "true", "x", "\xc3", "\xa9", "\\", "-", "\n", ""};
#define N_TEXTS ((int32_t)(sizeof texts / sizeof texts[0]))

static void walk(const brisk_grammar *g, const uint8_t *data, size_t size) {
  uint32_t len[N_TEXTS];
  for (int32_t t = 0; t < N_TEXTS; t++) len[t] = (uint32_t)strlen(texts[t]);
  int32_t eog = N_TEXTS - 1;
  gr_vocab v;
  gr_masker k;
  if (gr_vocab_build_texts(N_TEXTS, texts, len, &eog, 1, &v)) return;
  if (gr_masker_init_vocab(&k, g, &v)) return;
  gr_state s;
  if (gr_state_init(&k, &s)) {
    gr_masker_release(&k);
    return;
  }
  for (size_t step = 0; step < 24; step++) {
    const uint32_t *mask;
    int32_t n;
    brisk_status st = gr_mask(&k, &s, &mask, &n);
    CHECK(st == BRISK_OK || st == BRISK_E_INVALID_ARGUMENT || st == BRISK_E_OUT_OF_MEMORY);
    if (st) break;
    int32_t count = 0;
    for (int32_t t = 0; t < N_TEXTS; t++) count += (int32_t)(mask[t / 32] >> (t % 32) & 1);
    CHECK(count == n);
    if (n == 0) break;
    int32_t pick = (int32_t)(data[step % size] % (uint32_t)n), t = 0;
    for (;; t++)
      if ((mask[t / 32] >> (t % 32) & 1) && pick-- == 0) break;
    st = gr_accept(&k, &s, t);
    CHECK(st == BRISK_OK || st == BRISK_E_INVALID_ARGUMENT || st == BRISK_E_OUT_OF_MEMORY);
    /* An allowed token is refused only at the matcher's size limits. */
    CHECK(st != BRISK_E_INVALID_ARGUMENT || strstr(brisk_last_error(), "parse stacks"));
    if (st || t == eog) break;
  }
  gr_state_release(&s);
  gr_masker_release(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 1 << 14) return 0;
  static const brisk_constraint_kind kinds[] = {BRISK_CONSTRAINT_GBNF, BRISK_CONSTRAINT_JSON_SCHEMA,
                                                BRISK_CONSTRAINT_REGEX};
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  brisk_constraint_params p;
  brisk_constraint_params_init(&p);
  p.kind = kinds[data[0] % 3];
  p.text = text;
  brisk_grammar *g = NULL;
  brisk_status st = brisk_grammar_compile(&p, &g);
  CHECK(st == BRISK_OK || st == BRISK_E_INVALID_ARGUMENT || st == BRISK_E_OUT_OF_MEMORY);
  if (st) {
    CHECK(!g && brisk_last_error()[0]);
  } else {
    CHECK(g && brisk_grammar_gbnf(g));
    walk(g, data, size);
    brisk_grammar_free(g);
  }
  free(text);
  return 0;
}
