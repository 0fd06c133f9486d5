#include "context/sched.h"

#include "context/swap.h"

brisk_status brisk_context_seq_reserve(brisk_context *c, int32_t seq, const brisk_kv_ask *ask) {
  brisk_kv *kv;
  brisk_forward_kv *storage;
  brisk_context_kv_parts(c, &kv, &storage);
  return brisk_kv_seq_reserve(kv, seq, ask);
}

int64_t brisk_context_seq_room(brisk_context *c, int32_t seq) {
  brisk_kv *kv;
  brisk_forward_kv *storage;
  brisk_context_kv_parts(c, &kv, &storage);
  return brisk_kv_seq_room(kv, seq);
}
