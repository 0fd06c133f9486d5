/* A host-memory copy of one sequence's KV, for swap-to-host preemption: the
 * sequence's blocks are copied out (every layer, K and V, in the context's
 * dtype and block layout) so that they can be freed, and copied back later
 * into freshly allocated blocks of an empty sequence. */
#ifndef BRISK_CONTEXT_SWAP_H
#define BRISK_CONTEXT_SWAP_H

#include "brisk.h"
#include "forward/forward.h"
#include "kv/kv.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct brisk_seq_swap {
  int32_t n_tokens;    /* positions [0, n_tokens) of the sequence */
  int32_t n_blocks;    /* ceil(n_tokens / block_size) */
  size_t bytes;        /* of data */
  unsigned char *data; /* [n_blocks][n_layer][2 (K, V)][block_bytes]; NULL when empty */
} brisk_seq_swap;

/* The context's KV manager and block storage, and the backend holding
 * layer l's K/V, for swap.c (defined in context.c, whose struct is private
 * to it). */
void brisk_context_kv_parts(brisk_context *c, brisk_kv **kv, brisk_forward_kv **storage);
/* True for a context of a tensor-parallel model (context/tp.h). */
bool brisk_context_is_split(const brisk_context *c);
/* Test hook: follower `rank` fails its next step (context/tp.h). */
void brisk_context_tp_force_error(brisk_context *c, int rank);
/* Test hook: pipeline stage `stage` (>= 1) fails its next step. */
void brisk_context_pp_force_error(brisk_context *c, int stage);
brisk_backend *brisk_context_layer_backend(brisk_context *c, uint32_t layer);

/* Host bytes a copy of n_tokens tokens takes; 0 if n_tokens < 1 or on
 * size_t overflow (a copy that large cannot be made). */
size_t brisk_seq_swap_bytes(brisk_context *c, int32_t n_tokens);

/* Copies all of seq's KV into *out (empty on entry), allocated with
 * brisk_malloc. The sequence is left as it was; the caller frees it.
 * BRISK_E_OUT_OF_MEMORY, BRISK_E_INVALID_ARGUMENT (bad or empty sequence)
 * or a backend error leave *out empty. */
brisk_status brisk_seq_swap_out(brisk_context *c, int32_t seq, brisk_seq_swap *out);

/* Allocates blocks for the empty sequence seq and copies *in back into
 * them: afterwards seq holds in->n_tokens tokens, as when swapped out.
 * tokens[0 .. in->n_tokens) are the sequence's token ids (the prefix cache
 * indexes the restored full blocks by them, as if they were decoded). On
 * any error (BRISK_E_KV_FULL, BRISK_E_OUT_OF_MEMORY, a backend error) seq
 * is empty again and no block is held. *in is not changed. */
brisk_status brisk_seq_swap_in(brisk_context *c, int32_t seq, const brisk_seq_swap *in,
                               const int32_t *tokens);

/* Turns on the prefix cache's host tier of the context's KV manager with
 * `budget` bytes (kv.h: brisk_kv_set_host_tier), its block copies made as
 * swap's are; 0 leaves it off. BRISK_E_UNSUPPORTED for a tensor- or
 * pipeline-parallel context. */
brisk_status brisk_context_prefix_host_setup(brisk_context *c, uint64_t budget);

/* Frees the host copy and empties *s. */
void brisk_seq_swap_release(brisk_seq_swap *s);

#endif
