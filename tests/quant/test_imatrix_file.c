/* Importance-matrix files (tools/brisk/imatrix_file.c): the GGUF form
 * written and read back (values to float precision, llama.cpp's tensor
 * names and keys), the legacy .dat form read as llama-quantize reads it
 * (importance = value / ncall), and broken files refused with a message. */
#include "test_support.h"

#include "../../tools/brisk/imatrix_file.h"
#include "format/gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_gguf_roundtrip(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("imatrix_file");
  imatrix m = {0};
  imatrix_entry *a, *b;
  assert_int_equal(imatrix_add(&m, "blk.1.ffn_down.weight", 96, &a), BRISK_OK);
  assert_int_equal(imatrix_add(&m, "blk.0.attn_q.weight", 64, &b), BRISK_OK);
  for (int i = 0; i < 96; i++) a->sum2[i] = test_rng_uniform(&r, 0, 100);
  for (int i = 0; i < 64; i++) b->sum2[i] = test_rng_uniform(&r, 0, 1);
  a->counts[0] = 512;
  b->counts[0] = 256;
  m.chunk_count = 4;
  m.chunk_size = 128;
  m.dataset = strdup("calib.txt");
  char path[] = "/tmp/brisk_imatrix_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(imatrix_write(&m, path), BRISK_OK);

  /* llama.cpp's layout, looked at with the GGUF reader. */
  brisk_gguf *g;
  assert_int_equal(brisk_gguf_open(path, &g), BRISK_OK);
  brisk_gguf_str s;
  assert_int_equal(brisk_gguf_get_str(g, "general.type", &s), BRISK_OK);
  assert_string_equal(s.ptr, "imatrix");
  uint32_t v;
  assert_int_equal(brisk_gguf_get_u32(g, "imatrix.chunk_size", &v), BRISK_OK);
  assert_int_equal(v, 128);
  /* Name order, as llama-imatrix writes them. */
  assert_string_equal(brisk_gguf_tensor_at(g, 0)->name, "blk.0.attn_q.weight.in_sum2");
  assert_string_equal(brisk_gguf_tensor_at(g, 1)->name, "blk.0.attn_q.weight.counts");
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, "blk.1.ffn_down.weight.in_sum2");
  assert_non_null(t);
  assert_int_equal(t->ne[0], 96);
  assert_int_equal(t->ne[1], 1);
  brisk_gguf_close(g);

  imatrix back;
  assert_int_equal(imatrix_read(path, &back), BRISK_OK);
  assert_int_equal(back.n, 2);
  assert_int_equal(back.chunk_count, 4);
  assert_string_equal(back.dataset, "calib.txt");
  const imatrix_entry *e = imatrix_find(&back, "blk.1.ffn_down.weight");
  assert_non_null(e);
  assert_int_equal(e->n_cols, 96);
  assert_true(e->counts[0] == 512);
  float imp[96];
  imatrix_importance(e, 0, imp);
  for (int i = 0; i < 96; i++) assert_true(fabs(imp[i] - a->sum2[i] / 512) < 1e-6 * (1 + imp[i]));
  assert_null(imatrix_find(&back, "output.weight"));
  imatrix_free(&back);
  imatrix_free(&m);
  remove(path);
}

static size_t put(unsigned char *p, const void *v, size_t n) {
  memcpy(p, v, n);
  return n;
}

static void test_legacy(void **state) {
  (void)state;
  unsigned char buf[1024];
  size_t n = 0;
  int32_t entries = 1, len = 19, ncall = 4, nval = 8;
  n += put(buf + n, &entries, 4);
  n += put(buf + n, &len, 4);
  n += put(buf + n, "blk.0.attn_k.weight", 19);
  n += put(buf + n, &ncall, 4);
  n += put(buf + n, &nval, 4);
  for (int i = 0; i < nval; i++) {
    float x = 4.0f * (float)(i + 1); /* mean square (i + 1), times ncall */
    n += put(buf + n, &x, 4);
  }
  imatrix m;
  assert_int_equal(imatrix_read_memory(buf, n, &m), BRISK_OK); /* no trailer: accepted */
  assert_int_equal(m.n, 1);
  float imp[8];
  imatrix_importance(&m.e[0], 0, imp);
  for (int i = 0; i < 8; i++) assert_true(imp[i] == (float)(i + 1));
  imatrix_free(&m);

  /* Broken: truncated values, a negative value, a name length past the end. */
  assert_int_equal(imatrix_read_memory(buf, n - 2, &m), BRISK_E_FORMAT);
  assert_true(strlen(brisk_last_error()) > 0);
  float neg = -1;
  unsigned char bad[1024];
  memcpy(bad, buf, n);
  memcpy(bad + 4 + 4 + 19 + 8, &neg, 4);
  assert_int_equal(imatrix_read_memory(bad, n, &m), BRISK_E_FORMAT);
  memcpy(bad, buf, n);
  int32_t huge = 1000;
  memcpy(bad + 4, &huge, 4);
  assert_int_equal(imatrix_read_memory(bad, n, &m), BRISK_E_FORMAT);
  assert_int_equal(imatrix_read_memory(buf, 0, &m), BRISK_E_FORMAT);
  assert_int_equal(imatrix_read("/nonexistent/imatrix.gguf", &m), BRISK_E_IO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gguf_roundtrip),
      cmocka_unit_test(test_legacy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
