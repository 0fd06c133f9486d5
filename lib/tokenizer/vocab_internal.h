/* The vocabulary's insides, shared by the tokenizer's source files only. */
#ifndef BRISK_TOKENIZER_VOCAB_INTERNAL_H
#define BRISK_TOKENIZER_VOCAB_INTERNAL_H

#include "tokenizer/pretok.h"
#include "tokenizer/table.h"
#include "tokenizer/tokenizer.h"

/* A text rewrite applied to each fragment before pre-tokenization
 * (Hugging Face normalizers and Metaspace). */
typedef enum brisk_norm_kind {
  BRISK_NORM_REPLACE = 1,        /* every `from` -> `to` */
  BRISK_NORM_PREPEND = 2,        /* `to` before a non-empty fragment */
  BRISK_NORM_PREPEND_FIRST = 3,  /* the same, first fragment of the input only,
                                    and not if it already starts with `to` */
  BRISK_NORM_PREPEND_UNLESS = 4, /* every fragment, not if it starts with `to` */
} brisk_norm_kind;

/* The normalizers together may grow a fragment of n bytes to at most
 * n * BRISK_NORM_MAX_GROWTH + BRISK_NORM_MAX_EXTRA bytes; past that
 * tokenizing fails (BRISK_E_UNSUPPORTED) instead of allocating. */
enum { BRISK_NORM_MAX_GROWTH = 4, BRISK_NORM_MAX_EXTRA = 1024 };

/* The longest token text a vocabulary may have (real ones stay under a few
 * hundred bytes): each token's text, and so each detokenized token, is at
 * most this long. */
enum { BRISK_VOCAB_MAX_TOKEN_BYTES = 65536 };

typedef struct brisk_norm_op {
  brisk_norm_kind kind;
  char *from, *to; /* brisk_malloc'ed, NUL-terminated */
  size_t from_len, to_len;
} brisk_norm_op;

/* Special-token trie: leftmost-longest matching of CONTROL / USER_DEFINED /
 * UNKNOWN token texts. */
typedef struct brisk_trie_node {
  int32_t child;   /* first child, -1 none */
  int32_t sibling; /* next sibling, -1 none */
  int32_t id_any;  /* token ending here (any special kind), -1 none */
  int32_t id_user; /* token ending here that is USER_DEFINED, -1 none */
  uint8_t byte;
} brisk_trie_node;

struct brisk_vocab {
  brisk_vocab_type type;
  char pre_name[64];
  int32_t n_tokens;

  /* Ids 0..n_tokens-1 are the tokens; later ids are other strings merges and
   * characters name (intern ids of units and merge halves). */
  brisk_strtab strs;
  float *scores;   /* [n_tokens] */
  uint16_t *attrs; /* [n_tokens] BRISK_TOKEN_ATTR_* */
  uint8_t *eog;    /* [n_tokens] 1 = end of generation */

  /* Rendered pieces (control tokens as their text). */
  char *pieces;        /* [pieces_len] */
  size_t *piece_off;   /* [n_tokens] */
  uint32_t *piece_len; /* [n_tokens] */

  /* Merges: pair (left id, right id) -> entry e; lower cost merges first. */
  brisk_u64map pairs;
  uint32_t *pair_cost;  /* [n_pairs] */
  int32_t *pair_result; /* [n_pairs] intern id of the joined string */
  size_t n_pairs;
  /* Character pairs (intern ids) that some merge joins: elsewhere a word can
   * be cut without changing the result. */
  brisk_u64map junctions;

  int32_t byte_tok[256];  /* token of <0xXX>, -1 if none */
  int32_t bl_unit[256];   /* byte-level: intern id of byte b's code point */
  int32_t space_unit;     /* SPM: intern id of U+2581 */
  int32_t byte_unit[256]; /* intern id of the one-byte unit b (escaped, byte-level) */
  uint8_t cut[8192];      /* bit [a][b]: a word may be cut between one-byte units a, b */
  uint32_t max_token_len;

  int32_t special[BRISK_VOCAB_SPECIAL_COUNT];
  bool add_bos, add_eos;
  bool add_space_prefix;    /* SPM: prepend ' ' at the start and after specials */
  bool strip_leading_space; /* detokenize removes it again */
  bool escape_spaces;       /* SPM: ' ' -> U+2581 */
  bool byte_level;          /* words are bytes mapped to GPT-2 code points */
  bool byte_fallback;       /* unknown characters -> <0xXX> tokens */
  bool ignore_merges;       /* a word that is a token is emitted whole */
  bool clean_spaces;
  bool fuse_unk; /* consecutive unknowns become one */

  brisk_pretok *pre;   /* NULL: a word is the whole fragment */
  brisk_norm_op *norm; /* [n_norm] */
  size_t n_norm;

  brisk_trie_node *trie; /* [n_trie], node 0 is the root */
  size_t n_trie, trie_cap;
  uint8_t first_any[32], first_user[32]; /* bitmaps of first bytes */

  bool add_sep;       /* a SEP token closes a sequence pair (RoBERTa-style); not added
                         by tokenize, as in llama.cpp */
  bool newline_words; /* a word of '\n's that is one token is that token (Gemma 4) */
};

/* What loaders hand to brisk_vocab_build. */
typedef struct brisk_vocab_str {
  const char *ptr;
  size_t len;
} brisk_vocab_str;

typedef struct brisk_vocab_desc {
  brisk_vocab_type type;
  const char *pre_name; /* for brisk_vocab_pre_name */
  uint32_t n_tokens;
  const brisk_vocab_str *tokens;                   /* [n_tokens] */
  const float *scores;                             /* [n_tokens] or NULL (all 0) */
  const uint16_t *attrs;                           /* [n_tokens] or NULL (all NORMAL) */
  size_t n_merges;                                 /* BPE */
  const brisk_vocab_str *merge_left, *merge_right; /* [n_merges] */
  int32_t special[BRISK_VOCAB_SPECIAL_COUNT];      /* -1 none; checked */
  bool add_bos, add_eos, add_space_prefix, strip_leading_space, escape_spaces;
  bool byte_level, byte_fallback, ignore_merges, clean_spaces, fuse_unk;
  bool add_sep, newline_words;
} brisk_vocab_desc;

void brisk_vocab_desc_init(brisk_vocab_desc *d);

/* Builds everything derived from a desc. Takes ownership of `pre` and
 * `norm` (NULL for none) whether it succeeds or not. */
brisk_status brisk_vocab_build(const brisk_vocab_desc *d, brisk_pretok *pre, brisk_norm_op *norm,
                               size_t n_norm, brisk_vocab **out);
void brisk_norm_ops_free(brisk_norm_op *ops, size_t n);

/* Marks EOG tokens by id and by well-known texts; called by build. */
void brisk_vocab_mark_eog(brisk_vocab *v);

/* Special-token trie (special.c). */
brisk_status brisk_vocab_build_trie(brisk_vocab *v);
/* Longest special token at s[0, n): its id and length, or -1. */
int32_t brisk_vocab_match_special(const brisk_vocab *v, const char *s, size_t n, bool parse_special,
                                  size_t *match_len);

/* Merge tables (merges.c). */
brisk_status brisk_vocab_build_merges(brisk_vocab *v, const brisk_vocab_desc *d);

#endif
