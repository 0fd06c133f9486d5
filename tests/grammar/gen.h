/* Random strings of a grammar, derived from its rules (not through the
 * matcher, so the matcher can be tested on them): a random alternative at
 * each rule, the shortest one once the string is past a length budget.
 * Characters of a set are drawn from its ranges, mostly ASCII when it has
 * any. */
#ifndef BRISK_TESTS_GRAMMAR_GEN_H
#define BRISK_TESTS_GRAMMAR_GEN_H

#include "grammar/grammar.h"

typedef struct gen_ctx {
  const brisk_grammar *g;
  uint64_t rng;
  uint32_t *minlen; /* [n_rules] shortest string of each rule */
  char *out;
  size_t n, cap;
  size_t budget;
} gen_ctx;

int gen_init(gen_ctx *G, const brisk_grammar *g, uint64_t seed);
void gen_release(gen_ctx *G);
/* A string of about `budget` bytes or fewer (NUL-terminated, valid until
 * the next call), its length in *n; NULL on OOM. */
const char *gen_string(gen_ctx *G, size_t budget, size_t *n);
uint64_t gen_rand(gen_ctx *G);

#endif
