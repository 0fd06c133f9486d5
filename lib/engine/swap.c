/* Swap-to-host preemption: a preempted request's KV goes to host memory
 * (context/swap.c) instead of being thrown away, and comes back when it is
 * admitted again. Any failure, or a full host tier, falls back to
 * recomputation, which needs nothing: a request never fails here. */
#include "engine/engine_internal.h"

void brisk_engine_swap_out(brisk_engine *e, brisk_engine_request *r) {
  /* A windowed sequence is recomputed (its snapshot would need its
   * evictions and moved sinks). */
  if (e->preempt_mode != BRISK_PREEMPT_SWAP || r->n_computed < 1 || r->window > 0) return;
  size_t bytes = brisk_seq_swap_bytes(e->ctx, r->n_computed);
  if (bytes == 0 || bytes > e->swap_limit - e->swap_used ||
      brisk_seq_swap_out(e->ctx, r->seq, &r->swap)) {
    e->n_swap_fallbacks++;
    return;
  }
  e->swap_used += r->swap.bytes;
  e->swap_out_bytes += r->swap.bytes;
  e->n_swapped_out++;
}

void brisk_engine_swap_in(brisk_engine *e, brisk_engine_request *r) {
  r->n_computed = 0;
  if (!r->swap.data) return;
  if (brisk_seq_swap_in(e->ctx, r->seq, &r->swap, r->tokens)) {
    e->n_swap_fallbacks++;
  } else {
    r->n_computed = r->swap.n_tokens;
    e->swap_in_bytes += r->swap.bytes;
    e->n_swapped_in++;
  }
  brisk_engine_swap_drop(e, r);
}

void brisk_engine_swap_drop(brisk_engine *e, brisk_engine_request *r) {
  e->swap_used -= r->swap.bytes;
  brisk_seq_swap_release(&r->swap);
}
