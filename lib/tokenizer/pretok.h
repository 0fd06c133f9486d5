/* Pre-tokenization: splitting text into words with regexes before BPE.
 *
 * A pre-tokenizer is a list of split steps applied in order; each step splits
 * every piece the previous step produced (so a lookahead such as \s+(?!\S)
 * sees the end of its piece, as in llama.cpp and Hugging Face tokenizers).
 * Regexes are compiled with PCRE2 (UTF, Unicode properties, JIT when
 * available). Invalid UTF-8 in the input never matches any pattern, so such
 * bytes end up in the unmatched pieces between matches and reach BPE as raw
 * bytes: nothing is dropped or replaced.
 *
 * Pieces are produced depth-first through a callback, so memory does not
 * grow with the input beyond one match state per step. */
#ifndef BRISK_TOKENIZER_PRETOK_H
#define BRISK_TOKENIZER_PRETOK_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a step does with matches ("delimiters") and the text between them,
 * named as in Hugging Face's SplitDelimiterBehavior. */
typedef enum brisk_split_behavior {
  BRISK_SPLIT_ISOLATED = 0,        /* matches and gaps are separate pieces */
  BRISK_SPLIT_REMOVED = 1,         /* gaps only */
  BRISK_SPLIT_MERGED_PREVIOUS = 2, /* each match joins the piece before it */
  BRISK_SPLIT_MERGED_NEXT = 3,     /* each match joins the piece after it */
  BRISK_SPLIT_CONTIGUOUS = 4,      /* adjacent matches form one piece */
} brisk_split_behavior;

typedef struct brisk_pretok brisk_pretok;

brisk_status brisk_pretok_create(brisk_pretok **out);
void brisk_pretok_free(brisk_pretok *p);
/* Appends a step. `pattern` is PCRE2 syntax (NUL-terminated); `literal`
 * escapes it to match the text as is. `invert` swaps matches and gaps.
 * BRISK_E_FORMAT names the pattern and PCRE2's message if it does not
 * compile. */
brisk_status brisk_pretok_add(brisk_pretok *p, const char *pattern, bool literal,
                              brisk_split_behavior behavior, bool invert);
size_t brisk_pretok_n_steps(const brisk_pretok *p);

/* Properties llama.cpp ties to a GGUF pre-tokenizer name (pretok_names.c). */
typedef struct brisk_pretok_info {
  const char *canonical; /* the family name, e.g. "llama3" for "llama-bpe" */
  bool ignore_merges;    /* a word that is a whole token skips merging */
  bool clean_spaces;     /* detokenize may undo " ," style spacing */
  bool add_bos;          /* default for tokenizer.ggml.add_bos_token */
  bool no_bos;           /* the family has no BOS token (chatglm) */
  bool add_sep;          /* default for tokenizer.ggml.add_sep_token (RoBERTa-style pairs) */
  bool raw_utf8;         /* words are raw UTF-8, not GPT-2 byte-mapped; <0xXX> byte fallback */
  bool escape_spaces;    /* ' ' is U+2581 in the vocabulary (SentencePiece-style BPE) */
  bool force_bos;        /* BOS is added even where the file says not to (Gemma 4) */
  bool newline_words;    /* a run of '\n' that is one token is that token (Gemma 4) */
} brisk_pretok_info;

/* The regexes (NULL-terminated, static) of a GGUF tokenizer.ggml.pre name
 * and, when `info` is not NULL, its properties; NULL if the name is unknown. */
const char *const *brisk_pretok_lookup(const char *name, brisk_pretok_info *info);
/* Adds the steps for a GGUF tokenizer.ggml.pre name (a BPE vocabulary).
 * BRISK_E_UNSUPPORTED naming it if unknown. `info` may be NULL. */
brisk_status brisk_pretok_add_named(brisk_pretok *p, const char *name, brisk_pretok_info *info);
/* True if `name` is known (without compiling anything). */
bool brisk_pretok_known(const char *name);
/* The known names, for listings and tests: i < brisk_pretok_n_names(). */
size_t brisk_pretok_n_names(void);
const char *brisk_pretok_name_at(size_t i);

/* The GPT-2 pattern Hugging Face's ByteLevel pre-tokenizer uses. */
extern const char *const brisk_pretok_bytelevel_pattern;

/* Per-call matching state (one PCRE2 match block per step). Not shared
 * between threads; the pre-tokenizer itself is read-only and shareable. */
typedef struct brisk_pretok_ws brisk_pretok_ws;
brisk_status brisk_pretok_ws_create(const brisk_pretok *p, brisk_pretok_ws **out);
void brisk_pretok_ws_free(brisk_pretok_ws *ws);

/* Splits s[0, n) and calls emit for every non-empty final piece in order.
 * A non-OK status from emit stops the run and is returned. */
typedef brisk_status (*brisk_pretok_emit)(void *ctx, const char *s, size_t n);
brisk_status brisk_pretok_run(const brisk_pretok *p, brisk_pretok_ws *ws, const char *s, size_t n,
                              brisk_pretok_emit emit, void *ctx);

#endif
