/* Helpers shared by the tokenizer tests: small vocabularies built in code. */
#ifndef BRISK_TESTS_TOK_TEST_UTIL_H
#define BRISK_TESTS_TOK_TEST_UTIL_H

#include "test_support.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

/* A growable list of token strings with attributes and scores. */
typedef struct tvocab {
  char **text;
  uint16_t *attr;
  float *score;
  size_t n, cap;
} tvocab;

static inline int32_t tv_add(tvocab *t, const char *s, size_t len, uint16_t attr, float score) {
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 64;
    t->text = realloc(t->text, t->cap * sizeof *t->text);
    t->attr = realloc(t->attr, t->cap * sizeof *t->attr);
    t->score = realloc(t->score, t->cap * sizeof *t->score);
  }
  t->text[t->n] = malloc(len + 1);
  memcpy(t->text[t->n], s, len);
  t->text[t->n][len] = '\0';
  t->attr[t->n] = attr;
  t->score[t->n] = score;
  return (int32_t)t->n++;
}

static inline int32_t tv_find(const tvocab *t, const char *s, size_t len) {
  for (size_t i = 0; i < t->n; i++)
    if (strlen(t->text[i]) == len && memcmp(t->text[i], s, len) == 0) return (int32_t)i;
  return -1;
}

static inline void tv_free(tvocab *t) {
  for (size_t i = 0; i < t->n; i++) free(t->text[i]);
  free(t->text);
  free(t->attr);
  free(t->score);
  memset(t, 0, sizeof *t);
}

/* Fills a desc's token arrays from t (the strs array is malloc'ed; free it). */
static inline brisk_vocab_str *tv_strs(const tvocab *t) {
  brisk_vocab_str *s = malloc(t->n * sizeof *s);
  for (size_t i = 0; i < t->n; i++) s[i] = (brisk_vocab_str){t->text[i], strlen(t->text[i])};
  return s;
}

/* Tokenizes into a malloc'ed array (asserting success). */
static inline int32_t *tok_all(const brisk_vocab *v, const char *s, size_t len, bool add_special,
                               bool parse_special, size_t *n) {
  size_t need = 0;
  brisk_status st = brisk_vocab_tokenize(v, s, len, add_special, parse_special, NULL, 0, &need);
  assert_true(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL);
  int32_t *out = malloc((need ? need : 1) * sizeof *out);
  assert_int_equal(brisk_vocab_tokenize(v, s, len, add_special, parse_special, out, need, n),
                   BRISK_OK);
  assert_int_equal(*n, need);
  return out;
}

static inline char *detok_all(const brisk_vocab *v, const int32_t *t, size_t n, uint32_t flags,
                              size_t *len) {
  size_t need = 0;
  brisk_status st = brisk_vocab_detokenize(v, t, n, flags, NULL, 0, &need);
  assert_true(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL);
  char *out = malloc(need + 1);
  assert_int_equal(brisk_vocab_detokenize(v, t, n, flags, out, need, len), BRISK_OK);
  assert_int_equal(*len, need);
  return out;
}

#endif
