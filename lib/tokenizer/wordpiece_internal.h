/* The WordPiece tokenizer's state, shared by its loaders (wordpiece.c:
 * tokenizer.json and vocab.txt; wordpiece_gguf.c: GGUF metadata). */
#ifndef BRISK_TOKENIZER_WORDPIECE_INTERNAL_H
#define BRISK_TOKENIZER_WORDPIECE_INTERNAL_H

#include "tokenizer/table.h"
#include "tokenizer/wordpiece.h"

/* Longest continuation prefix accepted ("##" in every BERT vocabulary). */
#define WP_MAX_PREFIX 16

struct brisk_wordpiece {
  brisk_strtab vocab; /* token texts; string id = token id */
  int32_t n_tokens;
  int32_t unk, cls, sep;
  bool clean_text, chinese_chars, strip_accents, lowercase;
  bool split_words; /* BertPreTokenizer */
  uint32_t max_word_chars;
  char prefix[WP_MAX_PREFIX + 1];
  size_t prefix_len;
  int32_t *added; /* [n_added] special token ids, matched in the raw text */
  size_t n_added;
};

/* An empty tokenizer with BERT's defaults (BertNormalizer and
 * BertPreTokenizer on, "##", 100 characters a word); NULL when out of
 * memory. */
brisk_wordpiece *brisk_wordpiece_new(void);
/* Sets unk, cls and sep still unset (-1) to the tokens "[UNK]", "[CLS]"
 * and "[SEP]" when the vocabulary has them. */
void brisk_wordpiece_default_specials(brisk_wordpiece *wp);

#endif
