/* WordPiece tokenizers (BERT family): Hugging Face's BertNormalizer (clean
 * text, pad CJK ideographs with spaces, strip accents, lowercase),
 * BertPreTokenizer (split at whitespace, each punctuation character a word of
 * its own) and the WordPiece model (greedy longest match, continuation
 * pieces prefixed "##", a word with an unmatched rest is one unknown token).
 *
 * Special (added) tokens are matched in the raw text first, leftmost-longest,
 * as transformers' tokenizers do. Invalid UTF-8 bytes read as U+FFFD, which
 * clean_text removes. Unicode properties come from generated tables
 * (tokenizer/bert_unicode.h). Immutable once built: encode may run
 * concurrently on one tokenizer. */
#ifndef BRISK_TOKENIZER_WORDPIECE_H
#define BRISK_TOKENIZER_WORDPIECE_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_wordpiece brisk_wordpiece;

/* From a tokenizer.json whose model type is "WordPiece": model.vocab (dense
 * ids 0..n-1), unk_token, continuing_subword_prefix, max_input_chars_per_word;
 * normalizer BertNormalizer (or none), pre_tokenizer BertPreTokenizer (or
 * none); added_tokens; the [CLS]/[SEP] ids of a TemplateProcessing or
 * BertProcessing post-processor (else the tokens named [CLS] and [SEP]).
 * BRISK_E_UNSUPPORTED names anything else (another model type, another
 * normalizer); BRISK_E_FORMAT a malformed file. */
brisk_status brisk_wordpiece_from_hf_json(const char *json, size_t len, brisk_wordpiece **out);
/* From a vocab.txt (one token per line, id = line number) with BERT's
 * defaults: lowercase and strip accents when `lowercase`; [PAD], [UNK],
 * [CLS], [SEP] and [MASK] are the special tokens. */
brisk_status brisk_wordpiece_from_vocab_txt(const char *text, size_t len, bool lowercase,
                                            brisk_wordpiece **out);
/* From GGUF metadata as llama.cpp's converter writes a BERT vocabulary
 * (tokenizer.ggml.model "bert"): tokenizer.ggml.tokens with word starts
 * spelled "\u2581" + text and continuations without their "##", CONTROL
 * tokens (tokenizer.ggml.token_type 3) as they are; the Hugging Face
 * vocabulary is rebuilt from that, so texts tokenize as from the folder.
 * tokenizer.ggml.normalizer.lowercase (default true) and .strip_accents
 * (default: lowercase), as llama.cpp reads them; the other BertNormalizer
 * settings at their defaults. [UNK], [CLS] and [SEP] from the unknown,
 * cls (else bos) and seperator token ids, else by their texts. CONTROL
 * tokens are matched in the raw text as special tokens. BRISK_E_FORMAT
 * names a malformed key; BRISK_E_UNSUPPORTED another tokenizer model. */
typedef struct brisk_gguf brisk_gguf;
brisk_status brisk_wordpiece_from_gguf(const brisk_gguf *g, brisk_wordpiece **out);
void brisk_wordpiece_free(brisk_wordpiece *wp); /* NULL is a no-op */

int32_t brisk_wordpiece_n_tokens(const brisk_wordpiece *wp);
/* The text of token id (NUL-terminated, owned by wp), or NULL out of range. */
const char *brisk_wordpiece_token(const brisk_wordpiece *wp, int32_t id);
/* The ids of [CLS] and [SEP] (-1: none). */
int32_t brisk_wordpiece_cls(const brisk_wordpiece *wp);
int32_t brisk_wordpiece_sep(const brisk_wordpiece *wp);

/* Tokenizes text[0, len) into *ids (brisk_malloc'ed, freed by the caller
 * with brisk_free; NULL when *n is 0), with [CLS] first and [SEP] last when
 * add_special. */
brisk_status brisk_wordpiece_encode(const brisk_wordpiece *wp, const char *text, size_t len,
                                    bool add_special, int32_t **ids, size_t *n);

#endif
