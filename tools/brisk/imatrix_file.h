/* Importance matrices: per weight matrix, the sum over a text of each input
 * column's squared activation, in llama.cpp's file formats.
 *
 * GGUF (llama-imatrix's default since 2025): general.type = "imatrix",
 * imatrix.datasets (string array), imatrix.chunk_count and
 * imatrix.chunk_size (u32); per matrix NAME two F32 tensors,
 * NAME.in_sum2 [n_cols, n_mat] (sums of squares) and NAME.counts [1, n_mat]
 * (rows summed), n_mat > 1 for stacked expert matrices.
 *
 * Legacy .dat (read only): int32 n_entries; per entry int32 len, name,
 * int32 ncall, int32 nval, float values[nval] (mean square * ncall); then
 * optionally int32 chunk_count, int32 len, dataset name. */
#ifndef BRISK_CLI_IMATRIX_FILE_H
#define BRISK_CLI_IMATRIX_FILE_H

#include "brisk.h"

#include <stddef.h>
#include <stdint.h>

typedef struct imatrix_entry {
  char *name;
  int64_t n_cols;
  int64_t n_mat;
  double *sum2;   /* [n_mat][n_cols] */
  double *counts; /* [n_mat] rows summed */
} imatrix_entry;

typedef struct imatrix {
  imatrix_entry *e;
  size_t n, cap;
  uint32_t chunk_count, chunk_size;
  char *dataset; /* may be NULL */
} imatrix;

void imatrix_free(imatrix *m);
/* The entry called name, or NULL. */
imatrix_entry *imatrix_find(const imatrix *m, const char *name);
/* A new zeroed entry (n_mat 1) for name. BRISK_E_OUT_OF_MEMORY. */
brisk_status imatrix_add(imatrix *m, const char *name, int64_t n_cols, imatrix_entry **out);

/* Writes the GGUF form. BRISK_E_IO, BRISK_E_OUT_OF_MEMORY. */
brisk_status imatrix_write(const imatrix *m, const char *path);
/* Reads either form from memory (GGUF by its magic, else legacy). Every
 * size and value is checked: BRISK_E_FORMAT with a message for anything
 * that is not a well-formed file (negative or non-finite sums, a counts
 * tensor that does not match, names too long), BRISK_E_OUT_OF_MEMORY. */
brisk_status imatrix_read_memory(const void *data, size_t size, imatrix *out);
brisk_status imatrix_read(const char *path, imatrix *out);

/* The per-column importance of matrix `mat` of an entry (sum2 / count,
 * 1 where nothing was counted) into out[n_cols]. */
void imatrix_importance(const imatrix_entry *e, int64_t mat, float *out);

#endif
