/* Fuzz target: brisk_model_load_from_reader over a GGUF image behind a
 * reader that returns short reads, fails or ends early where the input's
 * first 8 bytes say; then the same image through brisk_model_load_from_memory.
 * Aborts when a failure has no message, when a reader failure is not
 * BRISK_E_IO, or when the two paths disagree on an image both read whole. */
#include "fuzz_target.h"

#include "brisk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_reader: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

typedef struct src {
  const uint8_t *data;
  uint64_t size;
  uint32_t chunk;   /* longest read returned (>= 1) */
  uint64_t fail_at; /* a read reaching past this fails */
  int mode;         /* 0: no failure, 1: error (-1), 2: early end (0), 3: too long (n + 1) */
  int failed;
} src;

static int64_t read_cb(void *user, uint64_t off, void *buf, size_t n) {
  src *s = user;
  CHECK(off + n <= s->size); /* brisk never asks past the image */
  if (s->mode && off + n > s->fail_at) {
    s->failed = 1;
    return s->mode == 1 ? -1 : s->mode == 2 ? 0 : (int64_t)n + 1;
  }
  size_t give = n < s->chunk ? n : s->chunk;
  memcpy(buf, s->data + off, give);
  return (int64_t)give;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 9) return 0;
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  src s = {data + 8, size - 8, 1u + (uint32_t)(data[0] | data[1] << 8), 0, data[2] % 4, 0};
  s.fail_at = (uint64_t)(data[3] | data[4] << 8 | (uint32_t)data[5] << 16) % s.size;
  brisk_model_reader rd = {sizeof rd, s.size, read_cb, &s};
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.repack = data[6] & 1;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load_from_reader(&rd, &mp, &m);
  if (st) {
    CHECK(m == NULL);
    CHECK(brisk_last_error()[0] != 0);
    if (s.failed) CHECK(st == BRISK_E_IO);
  }
  brisk_model *m2 = NULL;
  brisk_status st2 = brisk_model_load_from_memory(data + 8, size - 8, &mp, &m2);
  if (!s.failed) CHECK(st == st2);
  if (m && m2) {
    CHECK(brisk_model_n_params(m) == brisk_model_n_params(m2));
    CHECK(brisk_model_n_layer(m) == brisk_model_n_layer(m2));
  }
  brisk_model_free(m);
  brisk_model_free(m2);
  return 0;
}
