#include "context/batch.h"

#include "core/alloc.h"
#include "core/error.h"

BRISK_API brisk_status brisk_batch_create(int32_t capacity, brisk_batch **out) {
  if (!out || capacity < 1)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_batch_create: capacity %d must be >= 1",
                       capacity);
  brisk_batch *b = brisk_calloc(1, sizeof *b);
  if (!b) return brisk_error_oom();
  size_t n = (size_t)capacity;
  b->capacity = capacity;
  b->token = brisk_malloc(n * sizeof *b->token);
  b->pos = brisk_malloc(n * sizeof *b->pos);
  b->seq = brisk_malloc(n * sizeof *b->seq);
  b->want = brisk_malloc(n);
  if (!b->token || !b->pos || !b->seq || !b->want) {
    brisk_batch_free(b);
    return brisk_error_oom();
  }
  *out = b;
  return BRISK_OK;
}

BRISK_API void brisk_batch_free(brisk_batch *b) {
  if (!b) return;
  brisk_free(b->token);
  brisk_free(b->pos);
  brisk_free(b->seq);
  brisk_free(b->want);
  brisk_free(b);
}

BRISK_API void brisk_batch_clear(brisk_batch *b) {
  if (b) b->n = 0;
}

BRISK_API int32_t brisk_batch_size(const brisk_batch *b) { return b ? b->n : 0; }

BRISK_API brisk_status brisk_batch_add(brisk_batch *b, int32_t token, int32_t pos, int32_t seq,
                                       int want_logits) {
  if (!b) return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_batch_add: batch is NULL");
  if (b->n == b->capacity)
    return brisk_error(BRISK_E_BUFFER_TOO_SMALL, "batch is full (capacity %d)", b->capacity);
  b->token[b->n] = token;
  b->pos[b->n] = pos;
  b->seq[b->n] = seq;
  b->want[b->n] = want_logits != 0;
  b->n++;
  return BRISK_OK;
}
