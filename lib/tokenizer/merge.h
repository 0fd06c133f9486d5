/* The merge engine shared by SPM and BPE: a word is a list of units (one
 * character, or one byte for byte-level BPE), each with the intern id of its
 * text; adjacent symbols are joined pair by pair, cheapest pair first and
 * leftmost on ties, through a binary heap with lazy deletion of pairs that
 * went stale: O(n log n) for n units. */
#ifndef BRISK_TOKENIZER_MERGE_H
#define BRISK_TOKENIZER_MERGE_H

#include "tokenizer/vocab_internal.h"

typedef struct brisk_unit {
  const char *p; /* the unit's bytes in the input (for fallbacks) */
  uint32_t len;
  int32_t id; /* intern id of its text, -1 if no string of the vocab names it */
} brisk_unit;

typedef struct brisk_sym {
  int32_t id;         /* intern id of the symbol's text */
  int32_t prev, next; /* neighbours, -1 at the ends */
  uint32_t u0, nu;    /* units [u0, u0 + nu); nu == 0 once merged away */
} brisk_sym;

typedef struct brisk_merge_ent {
  uint32_t cost;
  int32_t left, right; /* symbol indices */
  int32_t lid, rid;    /* their ids when pushed: stale if either changed */
  int32_t result;
} brisk_merge_ent;

typedef struct brisk_merge_ws {
  brisk_sym *syms; /* [n] after a run; the list starts at 0 */
  size_t syms_cap;
  brisk_merge_ent *heap;
  size_t heap_n, heap_cap;
} brisk_merge_ws;

void brisk_merge_ws_free(brisk_merge_ws *ws);
/* Merges units[0, n) (n >= 1) into ws->syms. */
brisk_status brisk_merge_run(const brisk_vocab *v, brisk_merge_ws *ws, const brisk_unit *units,
                             size_t n);

/* True if a word may be cut between units with these ids. */
static inline bool brisk_merge_can_cut(const brisk_vocab *v, int32_t left, int32_t right) {
  return left < 0 || right < 0 || brisk_u64map_get(&v->junctions, brisk_pair_key(left, right)) < 0;
}

#endif
