/* Fuzz target for brisk_seq_import: arbitrary bytes as a sequence snapshot
 * for a context of a tiny random model. Input: a mode byte (bits 0-1: the
 * context's KV type; bit 2: rewrite the header checksum and bit 3 the
 * trailing checksum, so that mutations reach the field checks behind
 * them), then the snapshot. Invariants: an import either succeeds or
 * fails with a message and leaves the sequence empty and the pool's free
 * blocks as they were; a successful one holds the header's token count and
 * exports back to exactly the same bytes. */
#include "fuzz_target.h"

#include "snapshot_model.h"

#include "core/hash.h"

#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_snapshot: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,  \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static brisk_model *g_model;
static brisk_context *g_ctx[4];

static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The chained checksum over the payload as the format lays it out, when the
 * header's sizes are consistent with n bytes. */
static void reseal_tail(uint8_t *s, size_t n) {
  if (n < 72) return;
  uint32_t nt =
      (uint32_t)s[40] | (uint32_t)s[41] << 8 | (uint32_t)s[42] << 16 | (uint32_t)s[43] << 24;
  uint32_t nl =
      (uint32_t)s[28] | (uint32_t)s[29] << 8 | (uint32_t)s[30] << 16 | (uint32_t)s[31] << 24;
  if (nl == 0 || nl > 64 || (uint64_t)nt * 8 + 72 > n) return;
  size_t kv = n - 72 - (size_t)nt * 8;
  if (kv % (2 * (size_t)nl)) return;
  size_t sec = kv / (2 * (size_t)nl);
  uint64_t h = brisk_hash64(s + 64, (size_t)nt * 8, get64(s + 56));
  for (uint32_t i = 0; i < 2 * nl; i++) h = brisk_hash64(s + 64 + (size_t)nt * 8 + i * sec, sec, h);
  put64(s + n - 8, h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_model) {
    brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
    CHECK((g_model = snapshot_fuzz_model()) != NULL);
    for (unsigned t = 0; t < 4; t++) CHECK((g_ctx[t] = snapshot_fuzz_context(g_model, t)));
  }
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  brisk_context *c = g_ctx[mode & 3];
  size_t n = size - 1;
  uint8_t *s = malloc(n ? n : 1);
  CHECK(s != NULL);
  memcpy(s, data + 1, n);
  if ((mode & 4) && n >= 64) put64(s + 56, brisk_hash64(s, 56, 0));
  if (mode & 8) reseal_tail(s, n);
  brisk_kv_stats before = {.struct_size = sizeof before}, after = before;
  CHECK(brisk_context_kv_stats(c, &before) == BRISK_OK);
  brisk_status st = brisk_seq_import(c, 1, s, n);
  CHECK(brisk_context_kv_stats(c, &after) == BRISK_OK);
  if (st != BRISK_OK) {
    CHECK(brisk_last_error()[0] != 0);
    CHECK(brisk_seq_len(c, 1) == 0);
    CHECK(after.n_free_blocks == before.n_free_blocks);
  } else {
    uint32_t nt =
        (uint32_t)s[40] | (uint32_t)s[41] << 8 | (uint32_t)s[42] << 16 | (uint32_t)s[43] << 24;
    CHECK(brisk_seq_len(c, 1) == (int32_t)nt);
    size_t m = 0;
    CHECK(brisk_seq_export(c, 1, NULL, 0, &m) == BRISK_E_BUFFER_TOO_SMALL);
    CHECK(m == n);
    uint8_t *again = malloc(m);
    CHECK(again && brisk_seq_export(c, 1, again, m, &m) == BRISK_OK);
    CHECK(memcmp(again, s, n) == 0);
    free(again);
    CHECK(brisk_seq_free(c, 1) == BRISK_OK);
  }
  free(s);
  return 0;
}
