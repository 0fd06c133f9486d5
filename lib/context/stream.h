/* Attention sinks + sliding window (StreamingLLM) at the context: the KV
 * manager evicts a windowed sequence's old blocks (kv/kv.h); this keeps
 * positions as StreamingLLM does, positions within the cache.
 *
 * Keys are stored rotated by their own position, and the query by its own;
 * RoPE's score depends only on the difference. Past the sinks, the window
 * holds a run of consecutive positions, so a query and a window key are as
 * far apart in the cache as in the sequence: their keys need nothing. Only
 * the sinks move: after e positions were evicted, a sink at position s sits
 * e positions closer to the window than it was written, so its key is
 * rewritten rotated to s + e. Sinks are few (whole blocks, usually one),
 * and each rewrite starts from the key as it was before RoPE (kept on the
 * host when the sink was first written) and uses the backend's own RoPE
 * and K/V write, so rewrites never accumulate rounding and a rewrite back
 * (a failed batch) restores the same bits. Rotating the window's keys
 * instead would rewrite W keys per evicted block; rotating every key at
 * attention time would need a new attention operation on every backend. */
#ifndef BRISK_CONTEXT_STREAM_H
#define BRISK_CONTEXT_STREAM_H

#include "brisk.h"
#include "forward/forward.h"
#include "kv/kv.h"

typedef struct brisk_stream brisk_stream;

/* Sets or clears (0, 0) the window of empty sequence seq; allocates the
 * context's table *s on first use. n_sinks is at most max_tokens. */
brisk_status brisk_stream_set(brisk_stream **s, brisk_kv *kv, const brisk_model *m, int32_t n_seq,
                              int32_t max_tokens, int32_t seq, int32_t n_sinks, int32_t window);
void brisk_stream_free(brisk_stream *s);

/* After the KV reserve of a batch (seq[], pos[] of n tokens): points fb at
 * table positions and RoPE positions where a windowed sequence evicted,
 * lists the sink rows to keep, and rewrites the sinks of every sequence the
 * reserve evicted from. A NULL table does nothing. */
brisk_status brisk_stream_begin(brisk_stream *s, brisk_kv *kv, brisk_forward *f,
                                const brisk_forward_kv *storage, const int32_t *seq,
                                const int32_t *pos, int32_t n, brisk_forward_batch *fb);
/* After the pass succeeded: stores the kept sink rows. */
void brisk_stream_end(brisk_stream *s, const int32_t *seq, const brisk_forward_batch *fb);
/* After the pass failed and the KV manager rolled back: the sinks rewritten
 * by brisk_stream_begin go back to where they were. */
brisk_status brisk_stream_undo(brisk_stream *s, brisk_kv *kv, brisk_forward *f,
                               const brisk_forward_kv *storage);

#endif
