/* Tokenizers: vocabularies, text -> tokens, tokens -> text.
 *
 * A brisk_vocab is built from a GGUF file's tokenizer.ggml.* metadata or from
 * a Hugging Face tokenizer.json, and is immutable afterwards: every function
 * taking a `const brisk_vocab *` may run concurrently on one vocabulary from
 * many threads (each call allocates its own scratch memory).
 *
 * Two algorithms:
 *  - SPM (GGUF tokenizer.ggml.model "llama"): SentencePiece-style merging of
 *    adjacent symbols by token score, highest first and leftmost on ties, as
 *    llama.cpp does; spaces become U+2581, an optional space is prepended,
 *    characters without a token become <0xXX> byte tokens (or unknown).
 *  - BPE ("gpt2", and every tokenizer.json): pre-tokenization by the model's
 *    regexes, then merging by merge rank, lowest first and leftmost on ties;
 *    byte-level vocabularies map bytes to GPT-2's printable code points.
 * Both merge with a priority queue, O(n log n) in the symbols of a word.
 *
 * Text is bytes, not necessarily valid UTF-8. Invalid bytes are never dropped
 * or replaced while tokenizing: SPM gives each its <0xXX> byte token (or the
 * unknown token when the vocabulary has no byte tokens), byte-level BPE its
 * byte token, so that detokenize(tokenize(x)) == x still holds. Embedded NUL
 * bytes are ordinary characters. The one loss: SPM spells spaces U+2581, so
 * a literal U+2581 in the input detokenizes as a space (as in llama.cpp).
 *
 * Special tokens: CONTROL and UNKNOWN tokens are recognized in the input text
 * only with parse_special; USER_DEFINED tokens (Hugging Face's non-special
 * added tokens) are always recognized, as Hugging Face and llama.cpp do (the
 * published test vectors depend on it). Matching is leftmost-longest.
 *
 * Bounded memory: a word (SPM: the text) is cut wherever no merge can join
 * the characters on both sides, which changes nothing; a run of more than
 * BRISK_TOKENIZER_MAX_CHUNK characters with no such point anywhere is cut by
 * force, the only case where the result can differ from an unbounded run. */
#ifndef BRISK_TOKENIZER_TOKENIZER_H
#define BRISK_TOKENIZER_TOKENIZER_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_gguf brisk_gguf;
typedef struct brisk_vocab brisk_vocab;

#define BRISK_TOKENIZER_MAX_CHUNK (1u << 16)

typedef enum brisk_vocab_type {
  BRISK_VOCAB_SPM = 1, /* score-driven merges (SentencePiece BPE, llama.cpp "llama") */
  BRISK_VOCAB_BPE = 2, /* rank-driven merges (GPT-2 style and tokenizer.json) */
} brisk_vocab_type;

/* Token attributes (bit flags), numbered apart from GGUF's token_type. */
#define BRISK_TOKEN_ATTR_NORMAL (1u << 0)
#define BRISK_TOKEN_ATTR_UNKNOWN (1u << 1)
#define BRISK_TOKEN_ATTR_CONTROL (1u << 2)
#define BRISK_TOKEN_ATTR_USER_DEFINED (1u << 3)
#define BRISK_TOKEN_ATTR_BYTE (1u << 4)
#define BRISK_TOKEN_ATTR_UNUSED (1u << 5)
#define BRISK_TOKEN_ATTR_LSTRIP (1u << 6) /* matching eats whitespace before it */
#define BRISK_TOKEN_ATTR_RSTRIP (1u << 7) /* matching eats whitespace after it */

typedef enum brisk_vocab_special {
  BRISK_VOCAB_BOS = 0,
  BRISK_VOCAB_EOS,
  BRISK_VOCAB_UNK,
  BRISK_VOCAB_PAD,
  BRISK_VOCAB_EOT,
  BRISK_VOCAB_EOM,
  BRISK_VOCAB_SEP,
  BRISK_VOCAB_MASK,
  BRISK_VOCAB_FIM_PRE,
  BRISK_VOCAB_FIM_SUF,
  BRISK_VOCAB_FIM_MID,
  BRISK_VOCAB_FIM_PAD,
  BRISK_VOCAB_FIM_REP,
  BRISK_VOCAB_FIM_SEP,
  BRISK_VOCAB_SPECIAL_COUNT
} brisk_vocab_special;

/* ---- Loading ---------------------------------------------------------- */

/* From GGUF metadata: tokenizer.ggml.model ("llama" = SPM, "gpt2" = BPE;
 * others BRISK_E_UNSUPPORTED naming it), .tokens, .scores, .token_type,
 * .merges, .pre (every name llama.cpp knows, with what it implies: raw UTF-8
 * words, U+2581 spaces, llama.cpp's flags; a missing or unknown name means
 * "default" with a warning), "gemma4" as a model name, the *_token_id keys
 * and .add_bos_token / .add_eos_token / .add_sep_token / .add_space_prefix.
 * Everything is copied:
 * the vocabulary does not reference `g` afterwards. BRISK_E_FORMAT on
 * malformed metadata (message names the key and the numbers). */
brisk_status brisk_vocab_from_gguf(const brisk_gguf *g, brisk_vocab **out);
brisk_status brisk_vocab_from_gguf_file(const char *path, brisk_vocab **out);

/* From a Hugging Face tokenizer.json (json-c): model type BPE with vocab and
 * merges (either "a b" strings or ["a", "b"] pairs), byte_fallback,
 * ignore_merges, unk_token, fuse_unk; added_tokens (special -> CONTROL, else
 * USER_DEFINED; lstrip/rstrip honored); normalizers Sequence, Prepend,
 * Replace (string patterns), NFC/NFKC (not applied: input is assumed
 * normalized, with a warning, as llama.cpp does); pre-tokenizers Sequence,
 * ByteLevel, Split (string or regex, every behavior, invert), Digits,
 * Punctuation, Whitespace, WhitespaceSplit, Metaspace (first in the
 * sequence); decoders are read for the leading-space rule. Anything else is
 * BRISK_E_UNSUPPORTED naming it. BOS/EOS and add_bos/add_eos come from a
 * TemplateProcessing post-processor when present (tokenizer_config.json is
 * not read: set them with brisk_vocab_set_special / _set_add_special). */
brisk_status brisk_vocab_from_hf_json(const char *json, size_t len, brisk_vocab **out);
/* Reads at most 256 MiB. BRISK_E_IO names the path. */
brisk_status brisk_vocab_from_hf_file(const char *path, brisk_vocab **out);

void brisk_vocab_free(brisk_vocab *v); /* NULL is a no-op */

/* Overrides, for whoever knows better (config files); only before the vocab
 * is shared. id -1 removes; out of range is BRISK_E_INVALID_ARGUMENT. */
brisk_status brisk_vocab_set_special(brisk_vocab *v, brisk_vocab_special which, int32_t id);
/* -1 leaves a flag unchanged, 0/1 sets it. */
void brisk_vocab_set_add_special(brisk_vocab *v, int add_bos, int add_eos);

/* ---- Queries ---------------------------------------------------------- */

brisk_vocab_type brisk_vocab_get_type(const brisk_vocab *v);
int32_t brisk_vocab_n_tokens(const brisk_vocab *v);
/* GGUF pre-tokenizer name ("" for SPM, "tokenizer.json" for HF files). */
const char *brisk_vocab_pre_name(const brisk_vocab *v);
/* -1 if the vocabulary has none. */
int32_t brisk_vocab_special_id(const brisk_vocab *v, brisk_vocab_special which);
bool brisk_vocab_adds_bos(const brisk_vocab *v);
bool brisk_vocab_adds_eos(const brisk_vocab *v);
/* Whether a SEP token separates and closes a pair of texts (llama.cpp's
 * add_sep: GGUF tokenizer.ggml.add_sep_token or the pre-tokenizer name, e.g.
 * roberta-bpe); brisk_vocab_tokenize does not add it, as in llama.cpp. */
bool brisk_vocab_adds_sep(const brisk_vocab *v);
bool brisk_vocab_adds_space_prefix(const brisk_vocab *v);
/* End of generation: EOS, EOT, EOM and tokens such as <|im_end|>. */
bool brisk_vocab_is_eog(const brisk_vocab *v, int32_t id);
/* BRISK_TOKEN_ATTR_* bits; 0 for an id out of range. */
uint32_t brisk_vocab_token_attr(const brisk_vocab *v, int32_t id);
/* The stored token text (U+2581 / byte-level form), NULL if out of range;
 * valid while the vocab lives. */
const char *brisk_vocab_token_text(const brisk_vocab *v, int32_t id, size_t *len);
float brisk_vocab_token_score(const brisk_vocab *v, int32_t id);
/* Exact token text lookup, -1 if none. */
int32_t brisk_vocab_find(const brisk_vocab *v, const char *text, size_t len);

/* ---- Text -> tokens --------------------------------------------------- */

/* Tokenizes text[0, len) (text may be NULL when len is 0). add_special adds
 * BOS/EOS as the vocabulary says; parse_special recognizes CONTROL tokens in
 * the text. Writes min(n, capacity) tokens and sets *n_needed = n; returns
 * BRISK_E_BUFFER_TOO_SMALL (message with both numbers) when capacity < n.
 * tokens may be NULL when capacity is 0. */
brisk_status brisk_vocab_tokenize(const brisk_vocab *v, const char *text, size_t len,
                                  bool add_special, bool parse_special, int32_t *tokens,
                                  size_t capacity, size_t *n_needed);

/* ---- Tokens -> text --------------------------------------------------- */

/* The raw bytes a token stands for: SPM U+2581 -> ' ', <0xXX> -> the byte;
 * byte-level BPE code points -> bytes; USER_DEFINED tokens as written;
 * CONTROL and UNKNOWN tokens render empty unless render_special. Zero-copy;
 * NULL if id is out of range. Valid while the vocab lives. */
const char *brisk_vocab_piece(const brisk_vocab *v, int32_t id, bool render_special, size_t *len);
/* The same into a caller buffer (no NUL added): BRISK_E_BUFFER_TOO_SMALL with
 * *n_needed set when cap is short; BRISK_E_INVALID_ARGUMENT for a bad id. */
brisk_status brisk_vocab_token_to_piece(const brisk_vocab *v, int32_t id, bool render_special,
                                        char *buf, size_t cap, size_t *n_needed);

#define BRISK_DETOK_REMOVE_SPECIAL 1u  /* drop the BOS / EOS the vocab adds itself */
#define BRISK_DETOK_RENDER_SPECIAL 2u  /* CONTROL / UNKNOWN tokens as their text */
#define BRISK_DETOK_CLEAN_SPACES 4u    /* undo " ," " 's" spacing where the vocab asks */
#define BRISK_DETOK_REPLACE_INVALID 8u /* invalid UTF-8 -> U+FFFD */

/* Concatenated pieces. Where the vocab prepends a space when tokenizing
 * (SPM add_space_prefix), one leading space is removed from the first text
 * after the start and after each special token, so that
 * detokenize(tokenize(x)) == x (with RENDER_SPECIAL also for parse_special).
 * Writes min(n, cap) bytes (no NUL), *n_needed = n, BRISK_E_BUFFER_TOO_SMALL
 * when short; BRISK_E_INVALID_ARGUMENT names the first id out of range. */
brisk_status brisk_vocab_detokenize(const brisk_vocab *v, const int32_t *tokens, size_t n_tokens,
                                    uint32_t flags, char *buf, size_t cap, size_t *n_needed);

/* Streaming detokenizer: one token at a time; releases only complete UTF-8
 * sequences and holds back the start of one that is still missing bytes.
 * The concatenation of everything released (pushes then flush) equals
 * brisk_vocab_detokenize of the same tokens with the same flags (flags:
 * RENDER_SPECIAL, REPLACE_INVALID; CLEAN_SPACES and REMOVE_SPECIAL are not
 * applied to streams). One stream per generation; not thread-safe. */
typedef struct brisk_detok_stream brisk_detok_stream;
brisk_status brisk_detok_stream_create(const brisk_vocab *v, uint32_t flags,
                                       brisk_detok_stream **out);
void brisk_detok_stream_free(brisk_detok_stream *s); /* NULL is a no-op */
/* *text (not NUL-terminated, possibly empty) stays valid until the next call
 * on the stream. BRISK_E_INVALID_ARGUMENT for a bad id (state unchanged). */
brisk_status brisk_detok_stream_push(brisk_detok_stream *s, int32_t token, const char **text,
                                     size_t *len);
/* Releases what is held back (an incomplete sequence as is, or U+FFFD with
 * REPLACE_INVALID) and starts over as at creation. */
brisk_status brisk_detok_stream_flush(brisk_detok_stream *s, const char **text, size_t *len);

#endif
