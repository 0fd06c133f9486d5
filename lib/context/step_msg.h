/* The message rank 0 sends its followers each step (context/tp.c: the
 * tensor-parallel ranks; context/pp.c: the pipeline stages): a header, then
 * the batch's arrays in one payload, in a fixed order. One definition, so
 * that both kinds of follower read the bytes the same way. */
#ifndef BRISK_CONTEXT_STEP_MSG_H
#define BRISK_CONTEXT_STEP_MSG_H

#include "core/alloc.h"
#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

typedef struct brisk_step_header {
  int64_t op, n_tokens, n_seqs, max_blocks, n_out, n_copies;
} brisk_step_header;

/* The payload's arrays: slot[n_tokens], tokens, pos, seq_row[n_tokens],
 * out_rows[n_out], tables[n_seqs][max_blocks], copies[n_copies][2]. */
typedef struct brisk_step_views {
  int64_t *slot;
  int32_t *tokens, *pos, *seq_row, *out_rows, *tables, *copies;
} brisk_step_views;

static inline size_t brisk_step_payload_bytes(const brisk_step_header *h) {
  return (size_t)h->n_tokens * (sizeof(int64_t) + 3 * sizeof(int32_t)) +
         (size_t)(h->n_out + h->n_seqs * h->max_blocks + 2 * h->n_copies) * sizeof(int32_t);
}

static inline brisk_step_views brisk_step_views_of(unsigned char *p, const brisk_step_header *h) {
  brisk_step_views v;
  v.slot = (int64_t *)(void *)p;
  v.tokens = (int32_t *)(void *)(v.slot + h->n_tokens);
  v.pos = v.tokens + h->n_tokens;
  v.seq_row = v.pos + h->n_tokens;
  v.out_rows = v.seq_row + h->n_tokens;
  v.tables = v.out_rows + h->n_out;
  v.copies = v.tables + h->n_seqs * h->max_blocks;
  return v;
}

/* A message buffer of at least `bytes` (its contents are not kept). */
static inline brisk_status brisk_step_grow(unsigned char **msg, size_t *cap, size_t bytes) {
  if (bytes <= *cap) return BRISK_OK;
  brisk_free(*msg);
  *cap = 0;
  if (!(*msg = brisk_malloc(bytes))) return brisk_error_oom();
  *cap = bytes;
  return BRISK_OK;
}

#endif
