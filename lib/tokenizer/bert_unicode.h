/* The Unicode properties the WordPiece (BERT) tokenizer needs, as tables
 * generated from the reference implementation, Hugging Face's tokenizers
 * library (lib/tokenizer/bert_unicode.c, made by tools/gen_bert_unicode.py):
 * what clean_text removes, what BertPreTokenizer takes for punctuation,
 * strip_accents (NFD without nonspacing marks) and lowercase per code
 * point. */
#ifndef BRISK_TOKENIZER_BERT_UNICODE_H
#define BRISK_TOKENIZER_BERT_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_cp_range {
  uint32_t lo, hi; /* inclusive */
} brisk_cp_range;

/* cp becomes out[0, n). */
typedef struct brisk_cp_map {
  uint32_t cp;
  uint32_t n;
  uint32_t out[3];
} brisk_cp_map;

typedef struct brisk_bert_unicode {
  const brisk_cp_range *other; /* removed by clean_text (controls, format, private use) */
  size_t n_other;
  const brisk_cp_range *punct; /* a word of their own */
  size_t n_punct;
  const brisk_cp_map *strip; /* sorted by cp; Hangul syllables are computed */
  size_t n_strip;
  const brisk_cp_map *lower; /* sorted by cp */
  size_t n_lower;
} brisk_bert_unicode;

extern const brisk_bert_unicode brisk_bert_unicode_tables;

/* What clean_text removes (besides NUL and U+FFFD, which it always drops). */
bool brisk_cp_is_other(uint32_t cp);
/* BertPreTokenizer's punctuation (ASCII punctuation included). */
bool brisk_cp_is_punct(uint32_t cp);
/* Rust's char::is_whitespace (the White_Space property). */
bool brisk_cp_is_space(uint32_t cp);
/* The CJK ideograph blocks BERT pads with spaces. */
bool brisk_cp_is_cjk(uint32_t cp);
/* strip_accents of cp into out (room for 3); returns how many code points
 * remain (0 for a nonspacing mark, 1 and cp itself when nothing changes). */
size_t brisk_cp_strip_accents(uint32_t cp, uint32_t out[3]);
/* cp's lowercase into out (room for 3); returns its length (1 or 2). */
size_t brisk_cp_lower(uint32_t cp, uint32_t out[3]);

#endif
