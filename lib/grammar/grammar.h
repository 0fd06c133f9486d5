/* Decoding constraints: a context-free grammar core (GBNF text, the format
 * of llama.cpp's grammars), the front ends that produce GBNF (JSON Schema,
 * JSON mode, regular expressions), a pushdown matcher over code points and
 * the token masks it yields for a vocabulary.
 *
 * Representation. A grammar is a flat array of elements: rule r is
 * elems[rule_start[r] ..], its alternatives separated by GR_ALT and ended by
 * GR_END; an alternative is a sequence of GR_SET (one code point from a
 * character set) and GR_REF (a rule). Repetitions and groups are rewritten
 * into extra rules at parse time, as llama.cpp does, so the matcher only
 * sees these four kinds.
 *
 * Matching. A parse stack is a linked list of nodes (pos, parent), interned
 * so that equal stacks have one id: pos is where matching goes on, parent
 * is what follows once the rule at pos finishes. Node 0 is the empty stack
 * (the text so far is a whole match). A state is a sorted set of node ids,
 * each at a GR_SET, plus the bytes of an unfinished UTF-8 character. Every
 * grammar is checked at compile time (no left recursion, every reachable
 * rule can finish, no empty character class), so a non-empty state can
 * always still reach a whole match. */
#ifndef BRISK_GRAMMAR_GRAMMAR_H
#define BRISK_GRAMMAR_GRAMMAR_H

/* The constraint API is in brisk.h's experimental section. Files that
 * include this header must include it before brisk.h (or define
 * BRISK_EXPERIMENTAL themselves). */
#ifndef BRISK_EXPERIMENTAL
#  define BRISK_EXPERIMENTAL
#endif
#include "brisk.h"

#include <stddef.h>
#include <stdint.h>

enum { GR_END = 0, GR_ALT = 1, GR_REF = 2, GR_SET = 3 };

typedef struct gr_elem {
  uint32_t type;  /* GR_* */
  uint32_t value; /* GR_REF: rule; GR_SET: set */
} gr_elem;

typedef struct gr_range {
  uint32_t lo, hi; /* inclusive code points */
} gr_range;

/* Limits that bound what untrusted grammar text can make us allocate. */
enum {
  GR_MAX_ELEMS = 1 << 20,  /* elements after rewriting repetitions */
  GR_MAX_RULES = 1 << 18,  /* rules, the synthesized ones included */
  GR_MAX_REPEAT = 1 << 12, /* m and n of {m,n} */
  GR_MAX_NEST = 256,       /* nesting of groups while parsing */
};

struct brisk_grammar {
  gr_elem *elems;
  size_t n_elems;
  uint32_t *rule_start; /* [n_rules] */
  char **rule_names;    /* [n_rules]; synthesized rules are "name_N" */
  size_t n_rules;
  gr_range *ranges;    /* sorted, disjoint ranges of every set, set by set */
  uint32_t *set_start; /* [n_sets + 1] set s = ranges[set_start[s] .. set_start[s+1]) */
  uint64_t *set_ascii; /* [n_sets][2] bitmap of the set's code points below 128 */
  size_t n_sets;
  uint32_t root;
  char *gbnf; /* the GBNF text it was compiled from (NUL-terminated) */
};

/* Parses GBNF text[0, len) with start rule `root` (NULL: "root") into a
 * checked grammar. Errors are BRISK_E_INVALID_ARGUMENT with a message
 * "<what>: line L column C: ..." naming the position (or the rule, for
 * errors found after parsing: undefined, left-recursive or never-ending
 * rules), BRISK_E_OUT_OF_MEMORY. */
brisk_status gr_parse(const char *text, size_t len, const char *root, const char *what,
                      brisk_grammar **out);
void gr_free(brisk_grammar *g);

/* Whether set s holds code point cp. */
int gr_set_has(const brisk_grammar *g, uint32_t s, uint32_t cp);
/* Whether set s holds any code point of [lo, hi]. */
int gr_set_meets(const brisk_grammar *g, uint32_t s, uint32_t lo, uint32_t hi);
/* Whether set s holds every code point of [lo, hi]. */
int gr_set_covers(const brisk_grammar *g, uint32_t s, uint32_t lo, uint32_t hi);

/* A growable NUL-terminated string the front ends write GBNF into. The
 * first allocation failure sets `oom` and later appends do nothing. */
typedef struct gr_buf {
  char *s;
  size_t n, cap;
  int oom;
} gr_buf;
void gr_buf_put(gr_buf *b, const char *s, size_t len);
void gr_buf_puts(gr_buf *b, const char *s);
void gr_buf_printf(gr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends code point cp as GBNF escapes usable inside "..." and [...]. */
void gr_buf_escape_cp(gr_buf *b, uint32_t cp);

/* Front ends: GBNF text for a JSON Schema, for any JSON object, and for a
 * regular expression (the whole text must match). Errors name the schema
 * path ("/properties/age/minimum") or the pattern position. The caller
 * frees *gbnf with brisk_free. */
brisk_status gr_schema_to_gbnf(const char *schema, size_t len, char **gbnf);
const char *gr_json_gbnf(void);
brisk_status gr_regex_to_gbnf(const char *re, size_t len, char **gbnf);
/* The regex as one GBNF expression (for rules of a larger grammar), with
 * rules it needs named prefix_N appended to `rules`. json_string: match
 * the text inside a JSON string literal instead (characters that JSON
 * escapes appear escaped; classes leave them out). */
brisk_status gr_regex_expr(const char *re, size_t len, int json_string, const char *prefix,
                           gr_buf *expr, gr_buf *rules, const char *what);

/* ---- matcher ---- */

typedef struct gr_node {
  int32_t pos;    /* element index; -1 for node 0 */
  int32_t parent; /* node id; 0 = nothing follows */
} gr_node;

typedef struct gr_matcher {
  const brisk_grammar *g;
  gr_node *nodes;
  size_t n_nodes, cap_nodes;
  int32_t *table; /* open addressing over nodes, -1 = empty */
  size_t table_cap;
  int32_t *succ_off; /* [cap_nodes] offset into succ, -1 = not computed */
  int32_t *succ_len; /* [cap_nodes] */
  int32_t *succ;
  size_t n_succ, cap_succ;
  uint32_t *mark; /* [cap_nodes] stamp for de-duplicating sets */
  uint32_t stamp;
  int32_t *initial; /* the start state */
  size_t n_initial;
  int32_t *tmp; /* scratch for set building */
  size_t n_tmp, cap_tmp;
  brisk_status err; /* sticky: OOM or a limit hit while growing */
} gr_matcher;

/* Limits on matcher growth: interned stacks, and nodes in one state. */
enum { GR_MAX_NODES = 1 << 22, GR_MAX_SET = 1 << 12 };

/* Node 1 stands for "some stack not known here" (GR_SENT): the bottom of a
 * truncated stack. A set holding it means "the known part has finished;
 * what follows depends on the rest of the stack". Real nodes start at 2.
 * Truncated stacks keep at most GR_MAX_CUT frames. */
enum { GR_SENT = 1, GR_FIRST_NODE = 2, GR_MAX_CUT = 64 };

brisk_status gr_matcher_init(gr_matcher *m, const brisk_grammar *g);
void gr_matcher_release(gr_matcher *m);

/* Advances the node set in[0, n) by code point cp into out (capacity
 * GR_MAX_SET); returns the count (0: cp is not allowed), or -1 with m->err
 * set (out of memory, or a state past the limits). */
int gr_advance(gr_matcher *m, const int32_t *in, int n, uint32_t cp, int32_t *out);
/* The id of node (pos, parent), made if new; -1 on failure (m->err). */
int32_t gr_node_id(gr_matcher *m, int32_t pos, int32_t parent);
/* The nodes that follow once node n's character set took a code point
 * (whichever: they depend only on n): *out (valid until the matcher
 * grows) and their count; 0 for nodes 0 and GR_SENT, -1 on failure. */
int gr_successors(gr_matcher *m, int32_t n, const int32_t **out);
/* Node n's stack cut to its top `depth` frames (at most GR_MAX_CUT) over
 * GR_SENT (n itself when it is no deeper); -1 on failure. */
int32_t gr_truncate(gr_matcher *m, int32_t n, int depth);
/* Whether some node of in[0, n) can take a code point of [lo, hi]. */
int gr_can_take(const gr_matcher *m, const int32_t *in, int n, uint32_t lo, uint32_t hi);

/* UTF-8 decoding one byte at a time, for text that arrives in tokens. */
typedef struct gr_utf8 {
  uint32_t acc;    /* bits so far */
  uint8_t rem;     /* continuation bytes still expected; 0 = between characters */
  uint8_t len;     /* length of the character being decoded */
  uint8_t n;       /* bytes of it seen */
  uint8_t byte[4]; /* those bytes */
} gr_utf8;

/* Feeds byte b. Returns 1 with *cp set when a character completed, 0 when
 * more bytes are needed (then [*lo, *hi] is the range it can still become),
 * -1 for a byte that cannot continue valid UTF-8. */
int gr_utf8_step(gr_utf8 *u, uint8_t b, uint32_t *cp, uint32_t *lo, uint32_t *hi);
/* The valid characters an unfinished one (u->rem > 0) can still become:
 * [*lo, *hi] and 1, or 0 when none. */
int gr_utf8_range(const gr_utf8 *u, uint32_t *lo, uint32_t *hi);
/* The representative of u's class (same length and bytes seen): the
 * prefix whose every continuation is valid exactly when u's is, E0, ED,
 * F0, F4 kept as they restrict the next byte, others replaced by C2, E1
 * or F1 and continuation bytes by 0x80. Two prefixes of one class differ
 * for a mask only in which characters they can become. */
void gr_utf8_class(const gr_utf8 *u, gr_utf8 *rep);

/* ---- vocabulary and masks ---- */

/* A model's token texts sorted by bytes, with the length each shares with
 * the one before, so that one walk serves every token with a given prefix. */
typedef struct gr_vocab {
  int32_t n_vocab;
  int32_t n_sorted;
  int32_t *id;      /* [n_sorted] token of each sorted entry */
  uint32_t *off;    /* [n_sorted + 1] its bytes are bytes[off[i] .. off[i+1]) */
  uint32_t *lcp;    /* [n_sorted] bytes shared with entry i - 1 (0 for i = 0) */
  char *bytes;      /* all texts */
  uint32_t max_len; /* longest text */
  int32_t *eog;     /* end-of-generation tokens */
  int32_t n_eog;
  uint8_t *is_eog; /* [n_vocab] */
  /* The same texts as a byte trie in preorder (see vocab.c): node x has
   * byte t_byte[x] at depth t_depth[x], subtree [x, t_end[x]), made by
   * sorted entry t_ent[x]; t_ent[n_tnodes] = n_sorted. */
  uint32_t n_tnodes;
  uint8_t *t_byte;
  uint32_t *t_depth, *t_end;
  int32_t *t_ent;
} gr_vocab;

brisk_status gr_vocab_build(const brisk_model *model, gr_vocab *v);
/* From explicit token texts (tests and benchmarks): text i of len[i] bytes;
 * eog lists end-of-generation tokens (their texts are ignored). */
brisk_status gr_vocab_build_texts(int32_t n_vocab, const char *const *texts, const uint32_t *len,
                                  const int32_t *eog, int32_t n_eog, gr_vocab *v);
void gr_vocab_release(gr_vocab *v);

/* Where one generation is: the node set, an unfinished character, and
 * whether an end-of-generation token was accepted. */
typedef struct gr_state {
  int32_t *set;
  int n, cap;
  gr_utf8 utf8;
  int ended;
} gr_state;

/* The walk's states as a lazily built byte automaton: a state is a node
 * set plus an unfinished character, interned; each (state, byte)
 * transition is computed once with the matcher and then looked up, so a
 * walk over the vocabulary costs a table lookup per byte. */
typedef struct gr_dstate {
  uint32_t off, n; /* node set: sets[off .. off + n) */
  gr_utf8 u;
  uint8_t sent; /* the set holds GR_SENT */
} gr_dstate;

typedef struct gr_dfa {
  int32_t *sets;
  size_t n_sets, cap_sets;
  gr_dstate *st;
  size_t n_st, cap_st;
  int32_t *st_table; /* open addressing over states, -1 = empty */
  size_t st_table_cap;
  int32_t *row_of; /* [cap_row_of] each state's row in rows, -1 = none yet */
  size_t cap_row_of;
  int32_t *rows; /* [n_rows][256] next state, -1 = dead, GR_DFA_UNKNOWN */
  size_t n_rows, cap_rows;
  size_t tr_n; /* transitions computed */
} gr_dfa;

enum { GR_DFA_UNKNOWN = -3 };

/* A grammar bound to a vocabulary: matcher, vocabulary and mask caches.
 * One serves every state of the grammar (the engine's completions, and
 * every request of an engine with the same constraint, share one); not
 * thread-safe.
 *
 * Two caches, both rebuilt on demand (clearing one loses only time):
 * - node entries (XGrammar's adaptive token mask cache): for a parse stack
 *   cut to its top frames over GR_SENT, the tokens it accepts whatever lies
 *   below the cut, and the few it leaves to the rest of the stack
 *   (context-dependent). A stack's top element alone (one frame) is the
 *   grammar position; its entry is one trie walk, made once per position;
 *   a deeper cut's entry starts from its position's and matches only that
 *   one's context-dependent tokens.
 * - state masks: the whole mask of a state (node set, unfinished
 *   character), keyed by the state, so a state seen before is one lookup. */
typedef struct gr_masker {
  gr_matcher m;
  gr_vocab v;
  int32_t n_words; /* uint32 words per mask */
  /* State masks: entries live in `masks` ([cap_entries][n_words]) until
   * the cache fills and is cleared. */
  uint64_t *keys;     /* [table_cap] hash, 0 = empty */
  int32_t *key_entry; /* [table_cap] entry index */
  int32_t *key_set;   /* [cap_entries] offset of the entry's set in key_sets */
  int32_t *key_n;     /* [cap_entries] its length (and partial bytes after it) */
  int32_t *key_sets;
  size_t n_key_sets, cap_key_sets;
  uint32_t *masks;
  int32_t *n_allowed; /* [cap_entries] */
  size_t table_cap, n_entries, cap_entries, masks_cap;
  /* Node entries: ne_of[node] (-1 = none; [cap_ne_of]) indexes the
   * entry arrays ([ne_cap]): its mask (ne_slot into ne_mask,
   * [ne_slot_cap][n_words], or a token list) and ne_dep_off/ne_dep_n,
   * the entry's context-dependent sorted entries in ne_deps. */
  int32_t *ne_of;
  size_t cap_ne_of;
  uint32_t *ne_mask;
  uint32_t *ne_dep_off, *ne_dep_n;
  size_t ne_n, ne_cap, ne_mask_cap;
  int32_t *ne_deps;
  size_t n_ne_deps, cap_ne_deps;
  uint32_t *ne_tok_off,
      *ne_tok_n; /* [ne_cap] a sparse entry's tokens in ne_toks; n = UINT32_MAX: none */
  int32_t *ne_toks;
  size_t n_ne_toks, cap_ne_toks;
  uint32_t *ne_seen; /* [ne_cap] stamp: the entry was OR-ed into this mask */
  uint32_t ne_stamp;
  int32_t *dtmp, *dtmp2; /* scratch for dependent lists */
  size_t cap_dtmp, cap_dtmp2;
  /* Walk scratch: per depth, the automaton state and whether GR_SENT was
   * met on the way. */
  int32_t *pool;
  size_t cap_pool;
  uint32_t *d_off, *d_n;
  int32_t *tok_entry; /* [n_vocab] sorted entry of each token, -1 = none; made on first accept */
  gr_dfa dfa;
  uint64_t n_hits, n_misses;
  uint64_t n_cut;          /* state misses settled through node entries with a cut stack */
  uint64_t n_entries_made; /* node entries computed (walks) */
  uint64_t n_dep_tokens;   /* context-dependent tokens matched from states */
  /* Made ahead by gr_masker_precompute: the budget (stacks visited, and
   * tokens matched for their deeper cuts; set at init, lowered by tests),
   * whether it ran out (then the rest is made on demand), stacks visited;
   * n_work counts the automaton steps of every walk (the trie has
   * v.n_tnodes nodes: a whole walk is at most that many). */
  uint32_t pre_nodes;
  uint64_t pre_work;
  int pre_capped;
  size_t n_pre_nodes;
  uint64_t n_work;
  /* Entry e's mask slot in ne_mask (UINT32_MAX: sparse, none), slots
   * used and their budget; entries of stacks inside a character keyed
   * (node, class) in pe_key / pe_val (open addressing, 0 = empty). */
  uint32_t *ne_slot;
  size_t ne_slots, ne_slot_cap;
  uint64_t *pe_key;
  int32_t *pe_val;
  size_t pe_n, pe_cap;
  uint64_t *lead_live; /* [n_sets][2] bit b - 128: set s meets what lead byte b can start */
  int32_t *cset;       /* the canonical state of a state inside a character (gr_mask) */
  size_t cap_cset;
} gr_masker;

/* The automaton: the id of state (set, u) (-1 on OOM); the state after
 * byte b (-1: not allowed, -2: failure, see k->m.err); clearing once past
 * its budget; freeing. */
int32_t gr_dfa_intern(gr_dfa *d, const int32_t *set, uint32_t n, const gr_utf8 *u);
int32_t gr_dfa_step(gr_masker *k, int32_t ws, uint8_t b);
void gr_dfa_clear_if_full(gr_dfa *d);
void gr_dfa_release(gr_dfa *d);
/* Fills k->lead_live (a new state's row then finds its dead lead bytes
 * by OR-ing bitmaps, not by 128 range searches per state). */
brisk_status gr_dfa_lead_bytes(gr_masker *k);
/* Takes byte b from node set in[0, n) with decoder *u into out (capacity
 * GR_MAX_SET): the new count, 0 when b is not allowed, -1 on failure. */
int gr_masker_step_byte(gr_masker *k, const int32_t *in, int n, gr_utf8 *u, uint8_t b,
                        int32_t *out);

brisk_status gr_masker_init(gr_masker *k, const brisk_grammar *g, const brisk_model *model);
/* The same for a vocabulary built by the caller (moved into the masker). */
brisk_status gr_masker_init_vocab(gr_masker *k, const brisk_grammar *g, gr_vocab *v);
void gr_masker_release(gr_masker *k);
/* Makes the entry of every grammar position (each character set element
 * with nothing known below it) now, up to the node-entry budget, so that
 * generation meets only the context-dependent work: XGrammar's
 * preprocessing. Costs one trie walk per position. Then the entries of
 * the stacks a generation can reach (their deeper cuts), breadth first
 * from the start state, within k->pre_nodes stacks and k->pre_work
 * automaton steps (k->pre_capped says whether that budget ran out).
 * Last, the state-mask cache's pages are written, so that generation
 * pays no page faults for new entries (its budget is resident from
 * then: GR_CACHE_BYTES). */
brisk_status gr_masker_precompute(gr_masker *k);

brisk_status gr_state_init(gr_masker *k, gr_state *s);
void gr_state_release(gr_state *s);
brisk_status gr_state_copy(gr_state *dst, const gr_state *src);
void gr_state_reset(gr_masker *k, gr_state *s);
/* Whether the text so far is a whole match (no unfinished character). */
int gr_state_accepting(const gr_state *s);
/* Feeds bytes; returns 1 if they are allowed (the state advanced), 0 if
 * not (the state is unchanged), -1 on OOM or a limit (k->m.err). */
int gr_state_feed(gr_masker *k, gr_state *s, const char *bytes, size_t len);
/* The allowed tokens of state s: *mask (n_words words, bit t % 32 of word
 * t / 32; valid until the next call on k) and their count. */
brisk_status gr_mask(gr_masker *k, const gr_state *s, const uint32_t **mask, int32_t *n_allowed);
/* Accepts token t (must be allowed); BRISK_E_INVALID_ARGUMENT otherwise. */
brisk_status gr_accept(gr_masker *k, gr_state *s, int32_t token);

/* ---- public object ---- */

struct brisk_constraint {
  gr_masker *k;     /* shared by clones; freed with the last one */
  int32_t *refs;    /* shared count of owners of k */
  brisk_grammar *g; /* owned through k's owners, like k */
  gr_state s;
};

/* A second state on the same masker (the engine's completions). */
brisk_status brisk_constraint_clone(const brisk_constraint *c, brisk_constraint **out);

#endif
