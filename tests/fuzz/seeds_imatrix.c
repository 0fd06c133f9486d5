/* Seeds for fuzz_imatrix: importance matrices in both of llama.cpp's forms,
 * made here (the GGUF one with brisk's GGUF writer, as brisk imatrix writes
 * it; the legacy .dat byte by byte), and broken copies: truncated, a
 * negative sum, a counts tensor of the wrong shape, a bad name length. */
#include "fuzz_seeds.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int gguf_seed(const char *dir, const char *name, uint64_t counts_cols, float first) {
  brisk_gguf_writer *w = NULL;
  const char *ds = "calib.txt";
  float sums[2][64], counts[2] = {128, 64};
  for (int i = 0; i < 64; i++) sums[0][i] = sums[1][i] = (float)(i + 1) * 0.5f;
  sums[0][0] = first;
  const uint64_t ne[2] = {64, 1}, ne2[2] = {64, 2}, nc[2] = {counts_cols, 1}, nc2[2] = {1, 2};
  void *data = NULL;
  size_t size = 0;
  int rc = brisk_gguf_writer_create(3, 32, &w) ||
           brisk_gguf_writer_set_str(w, "general.type", "imatrix") ||
           brisk_gguf_writer_set_arr_str(w, "imatrix.datasets", &ds, 1) ||
           brisk_gguf_writer_set_u32(w, "imatrix.chunk_count", 4) ||
           brisk_gguf_writer_set_u32(w, "imatrix.chunk_size", 32) ||
           brisk_gguf_writer_add_tensor(w, "blk.0.attn_q.weight.in_sum2", BRISK_DTYPE_F32, 2, ne,
                                        sums, sizeof sums[0]) ||
           brisk_gguf_writer_add_tensor(w, "blk.0.attn_q.weight.counts", BRISK_DTYPE_F32, 2, nc,
                                        counts, 4 * counts_cols) ||
           brisk_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight.in_sum2", BRISK_DTYPE_F32, 2,
                                        ne2, sums, sizeof sums) ||
           brisk_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight.counts", BRISK_DTYPE_F32, 2,
                                        nc2, counts, sizeof counts) ||
           brisk_gguf_writer_write_memory(w, &data, &size);
  brisk_gguf_writer_free(w);
  if (rc) {
    fprintf(stderr, "seeds_imatrix: the GGUF writer failed: %s\n", brisk_last_error());
    return 1;
  }
  rc = fuzz_seed_save(dir, name, data, size);
  brisk_free(data);
  return rc;
}

static size_t put(uint8_t *p, const void *v, size_t n) {
  memcpy(p, v, n);
  return n;
}

int fuzz_write_seeds(const char *dir) {
  if (gguf_seed(dir, "gguf", 1, 0.25f) || gguf_seed(dir, "gguf_negative", 1, -1.f) ||
      gguf_seed(dir, "gguf_bad_counts", 2, 1.f))
    return 1;
  uint8_t buf[4096];
  size_t n = 0;
  const int32_t entries = 2, chunks = 3;
  n += put(buf + n, &entries, 4);
  const char *names[2] = {"blk.0.attn_k.weight", "output.weight"};
  for (int e = 0; e < 2; e++) {
    int32_t len = (int32_t)strlen(names[e]), ncall = 3, nval = 32;
    n += put(buf + n, &len, 4);
    n += put(buf + n, names[e], (size_t)len);
    n += put(buf + n, &ncall, 4);
    n += put(buf + n, &nval, 4);
    for (int i = 0; i < nval; i++) {
      float v = 0.1f * (float)(i + e);
      n += put(buf + n, &v, 4);
    }
  }
  const int32_t dlen = 9;
  n += put(buf + n, &chunks, 4);
  n += put(buf + n, &dlen, 4);
  n += put(buf + n, "calib.txt", 9);
  if (fuzz_seed_save(dir, "legacy", buf, n) || fuzz_seed_save(dir, "legacy_truncated", buf, n / 2))
    return 1;
  const int32_t bad = 1 << 30;
  memcpy(buf + 4, &bad, 4); /* the first name's length */
  return fuzz_seed_save(dir, "legacy_bad_len", buf, n);
}
