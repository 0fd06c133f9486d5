/* The context's KV calls for a scheduler (lib/engine): it asks the KV
 * manager for a sequence's blocks before putting its tokens in a batch,
 * and the manager decides (kv/kv.h, brisk_kv_seq_reserve). */
#ifndef BRISK_CONTEXT_SCHED_H
#define BRISK_CONTEXT_SCHED_H

#include "brisk.h"
#include "kv/kv.h"

#include <stdint.h>

/* brisk_kv_seq_reserve on the context's KV manager: holds the blocks for
 * ask->n_tokens more tokens of seq and records its promise, or returns
 * BRISK_E_KV_FULL with nothing changed. A later brisk_decode of those
 * tokens then never finds the pool full. brisk_seq_truncate to the
 * current length gives held, unused blocks back. */
brisk_status brisk_context_seq_reserve(brisk_context *c, int32_t seq, const brisk_kv_ask *ask);
/* Tokens seq can take now (brisk_kv_seq_room). */
int64_t brisk_context_seq_room(brisk_context *c, int32_t seq);

#endif
