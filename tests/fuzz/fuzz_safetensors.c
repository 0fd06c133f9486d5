/* Fuzz target: bytes -> brisk_safetensors_open_memory, then every accessor.
 * Aborts when an opened file breaks what safetensors.h promises (extents
 * inside the data section and matching shape x dtype, no overlaps, names
 * found again by lookup, metadata readable) or a failure has no message. */
#include "fuzz_target.h"

#include "core/dtype.h"
#include "format/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_safetensors: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Folds bytes into a sum the compiler cannot drop, so every byte is read. */
static volatile uint64_t sink;
static void touch(const void *p, uint64_t n) {
  const unsigned char *b = p;
  uint64_t h = 0;
  for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
  sink += h;
}

static int cmp_offset(const void *a, const void *b) {
  const brisk_safetensors_tensor *x = *(const brisk_safetensors_tensor *const *)a;
  const brisk_safetensors_tensor *y = *(const brisk_safetensors_tensor *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  brisk_safetensors *st = NULL;
  brisk_status s = brisk_safetensors_open_memory(data, size, &st);
  if (s != BRISK_OK) {
    CHECK(s == BRISK_E_FORMAT || s == BRISK_E_UNSUPPORTED || s == BRISK_E_OUT_OF_MEMORY);
    CHECK(st == NULL && brisk_last_error()[0] != 0);
    return 0;
  }
  CHECK(size >= 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
  const uint8_t *section = data + 8 + hlen;
  uint64_t section_size = size - 8 - hlen;
  size_t n = brisk_safetensors_n_tensors(st);
  const brisk_safetensors_tensor **by_offset = malloc((n ? n : 1) * sizeof *by_offset);
  CHECK(by_offset);
  for (size_t i = 0; i < n; i++) {
    const brisk_safetensors_tensor *t = brisk_safetensors_tensor_at(st, i);
    CHECK(t && t->name && brisk_safetensors_find(st, t->name) == t);
    CHECK(brisk_safetensors_dtype_name(t->dtype) != NULL);
    CHECK(t->n_dims <= BRISK_SAFETENSORS_MAX_DIMS);
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < BRISK_SAFETENSORS_MAX_DIMS; d++) {
      if (d >= t->n_dims) CHECK(t->shape[d] == 1);
      n_el *= t->shape[d]; /* cannot wrap: the reader checked the product */
    }
    CHECK(n_el == t->n_elements);
    CHECK(t->n_bytes ==
          n_el * (t->dtype == BRISK_DTYPE_F32 || t->dtype == BRISK_DTYPE_I32 ? 4 : 2));
    CHECK(t->offset <= section_size && t->n_bytes <= section_size - t->offset);
    CHECK((const uint8_t *)t->data == section + t->offset);
    touch(t->data, t->n_bytes);
    by_offset[i] = t;
  }
  qsort(by_offset, n, sizeof *by_offset, cmp_offset);
  uint64_t end = 0;
  for (size_t i = 0; i < n; i++) {
    if (by_offset[i]->n_bytes == 0) continue;
    CHECK(by_offset[i]->offset >= end);
    end = by_offset[i]->offset + by_offset[i]->n_bytes;
  }
  free(by_offset);
  CHECK(brisk_safetensors_tensor_at(st, n) == NULL);
  const char *k, *v;
  size_t m = 0;
  for (; brisk_safetensors_metadata_at(st, m, &k, &v); m++) {
    touch(k, strlen(k));
    touch(v, strlen(v));
    CHECK(brisk_safetensors_metadata(st, k) != NULL);
  }
  CHECK(m == brisk_safetensors_n_metadata(st));
  brisk_safetensors_close(st);
  return 0;
}
