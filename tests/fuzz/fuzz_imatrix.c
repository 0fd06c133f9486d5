/* Fuzz target: llama.cpp's importance-matrix files (GGUF form and legacy
 * .dat) through imatrix_read_memory, then every entry's importance taken as
 * brisk quantize --imatrix takes it. Aborts when a failure has no message,
 * or when an accepted file holds what the reader promised to refuse
 * (non-finite or negative sums, entries without values). */
#include "fuzz_target.h"

#include "../../tools/brisk/imatrix_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_imatrix: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_NONE);
  imatrix m;
  brisk_status st = imatrix_read_memory(data, size, &m);
  if (st) {
    CHECK(brisk_last_error()[0]);
    CHECK(m.n == 0 && m.e == NULL);
    return 0;
  }
  for (size_t i = 0; i < m.n; i++) {
    const imatrix_entry *e = &m.e[i];
    CHECK(e->name && e->name[0] && e->n_cols >= 1 && e->n_mat >= 1);
    CHECK(imatrix_find(&m, e->name) != NULL);
    float *imp = e->n_cols <= (1 << 20) ? malloc((size_t)e->n_cols * sizeof *imp) : NULL;
    for (int64_t k = 0; imp && k < e->n_mat; k++) {
      imatrix_importance(e, k, imp);
      for (int64_t j = 0; j < e->n_cols; j++) CHECK(isfinite(imp[j]) && imp[j] >= 0);
    }
    free(imp);
  }
  imatrix_free(&m);
  return 0;
}
