/* The Unicode properties the WordPiece (BERT) tokenizer needs, as tables
 * generated from Python's unicodedata (lib/tokenizer/bert_unicode.c, made by
 * tools/gen_bert_unicode.py): general-category ranges, NFD without
 * nonspacing marks (strip_accents), and one-code-point lowercase. */
#ifndef BRISK_TOKENIZER_BERT_UNICODE_H
#define BRISK_TOKENIZER_BERT_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_cp_range {
  uint32_t lo, hi; /* inclusive */
} brisk_cp_range;

typedef struct brisk_cp_strip {
  uint32_t cp;
  uint32_t n; /* 0..3 code points remain */
  uint32_t out[3];
} brisk_cp_strip;

typedef struct brisk_cp_pair {
  uint32_t cp, to;
} brisk_cp_pair;

typedef struct brisk_bert_unicode {
  const brisk_cp_range *other; /* general category C* */
  size_t n_other;
  const brisk_cp_range *punct; /* P* */
  size_t n_punct;
  const brisk_cp_range *mn; /* Mn */
  size_t n_mn;
  const brisk_cp_strip *strip; /* sorted by cp */
  size_t n_strip;
  const brisk_cp_pair *lower; /* sorted by cp */
  size_t n_lower;
} brisk_bert_unicode;

extern const brisk_bert_unicode brisk_bert_unicode_tables;

/* Category tests over the tables. */
bool brisk_cp_is_other(uint32_t cp);
bool brisk_cp_is_punct(uint32_t cp);
bool brisk_cp_is_mn(uint32_t cp);
/* Rust's char::is_whitespace (the White_Space property). */
bool brisk_cp_is_space(uint32_t cp);
/* The CJK ideograph blocks BERT pads with spaces. */
bool brisk_cp_is_cjk(uint32_t cp);
/* NFD of cp without its nonspacing marks into out (room for 3); returns how
 * many code points remain (cp itself, 1, when it does not decompose). */
size_t brisk_cp_strip_accents(uint32_t cp, uint32_t out[3]);
/* cp's lowercase into out (room for 2); returns its length (1 or 2). */
size_t brisk_cp_lower(uint32_t cp, uint32_t out[2]);

#endif
