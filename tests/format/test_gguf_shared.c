/* Real GGUF files from ../shared: the models and every vocabulary file.
 * Expected numbers come from gguf-py (GGUFReader) on the same files; the
 * FNV-1a hashes cover tensor bytes and every token string, so both the data
 * pointers and O(1) string-array access are checked against it. */
#include "test_support.h"

#include "core/alloc.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <string.h>

typedef struct shared_tensor {
  const char *name;
  uint32_t type, n_dims;
  uint64_t ne[4];
  uint64_t abs_offset, n_bytes; /* from the start of the file */
  uint64_t fnv;                 /* FNV-1a 64 of the data */
} shared_tensor;

typedef struct shared_file {
  const char *path;
  uint64_t size;
  int64_t n_kv, n_tensors;
  uint64_t data_offset;
  const char *arch, *tok_model;
  uint32_t block_count;
  uint64_t n_tokens, n_merges;
  const char *last_token;
  shared_tensor first, last;
  uint64_t tokens_fnv; /* over every token's bytes followed by a 0 byte */
  uint32_t bos;
} shared_file;

/* clang-format off: one file per entry reads better than one field per line. */
// clang-format off
static const shared_file files[] = {
    {"models/stories260K.gguf", 1054368, 24, 47, 14240u, "llama", "llama", 5, 512, 0, "q",
     {"token_embd.weight", 0, 2, {64, 512, 1, 1}, 14240u, 131072u, 0x92105060e9e7c6f6ull},
     {"blk.4.ffn_up.weight", 0, 2, {64, 172, 1, 1}, 1010336u, 44032u, 0xd442cd5a3b069612ull},
     0x73d5d50eeb6ff1f4ull, 1},
    {"models/tiny-f16.gguf", 39303392, 24, 39, 726240u, "llama", "llama", 4, 32000, 0,
     "\xe7\xbb\x99",
     {"token_embd.weight", 1, 2, {256, 32000, 1, 1}, 726240u, 16384000u, 0x16ed361e3700c240ull},
     {"blk.3.ffn_up.weight", 1, 2, {256, 688, 1, 1}, 38951136u, 352256u, 0xdb1be3d9f47db977ull},
     0xd0ffd146db872a00ull, 1},
    {"models/tiny-q8_0.gguf", 21885216, 25, 39, 726304u, "llama", "llama", 4, 32000, 0,
     "\xe7\xbb\x99",
     {"token_embd.weight", 8, 2, {256, 32000, 1, 1}, 726304u, 8704000u, 0xa43041dd8b781bd7ull},
     {"blk.3.ffn_up.weight", 8, 2, {256, 688, 1, 1}, 21698080u, 187136u, 0x790a55889b0906d6ull},
     0xd0ffd146db872a00ull, 1},
    {"models/tiny-q4_0.gguf", 12595488, 25, 39, 726304u, "llama", "llama", 4, 32000, 0,
     "\xe7\xbb\x99",
     {"token_embd.weight", 2, 2, {256, 32000, 1, 1}, 726304u, 4608000u, 0xb615121409683881ull},
     {"blk.3.ffn_up.weight", 2, 2, {256, 688, 1, 1}, 12496416u, 99072u, 0x5046935468c58386ull},
     0xd0ffd146db872a00ull, 1},
    {"tokenizer/ggml-vocab-deepseek-llm.gguf", 3970167, 23, 0, 3970176u, "llama", "gpt2", 30,
     102400, 99757, "[PAD102399]", {NULL}, {NULL}, 0x80f01ac7c6a591f4ull, 100000},
    {"tokenizer/ggml-vocab-falcon.gguf", 2287728, 18, 0, 2287744u, "falcon", "gpt2", 32, 65024,
     64784, "\xc4\xa0victoria", {NULL}, {NULL}, 0x6c20f7ba3e773a43ull, 11},
    {"tokenizer/ggml-vocab-gpt-2.gguf", 1766807, 16, 0, 1766816u, "gpt2", "gpt2", 12, 50257,
     50000, "<|endoftext|>", {NULL}, {NULL}, 0x9afb947b6443b4b9ull, 50256},
    {"tokenizer/ggml-vocab-llama-bpe.gguf", 7818140, 20, 0, 7818144u, "llama", "gpt2", 32,
     128256, 280147, "<|reserved_special_token_250|>", {NULL}, {NULL}, 0x1f6684e5433a83b3ull,
     128000},
    {"tokenizer/ggml-vocab-llama-spm.gguf", 723869, 22, 0, 723872u, "llama", "llama", 32, 32000,
     0, "\xe7\xbb\x99", {NULL}, {NULL}, 0xd0ffd146db872a00ull, 1},
    {"tokenizer/ggml-vocab-mpt.gguf", 1771393, 17, 0, 1771424u, "mpt", "gpt2", 32, 50432, 50009,
     "[PAD50431]", {NULL}, {NULL}, 0x2ea3a684101da3f9ull, 0},
    {"tokenizer/ggml-vocab-qwen2.gguf", 5928681, 20, 0, 5928704u, "qwen2", "gpt2", 32, 151936,
     151387, "[PAD151935]", {NULL}, {NULL}, 0x262ebf32b0ed0773ull, 151643},
    {"tokenizer/ggml-vocab-refact.gguf", 1720710, 18, 0, 1720736u, "refact", "gpt2", 32, 49216,
     48891, "[PAD49215]", {NULL}, {NULL}, 0x77aa7dc5db53482bull, 0},
};
// clang-format on

static uint64_t fnv_update(uint64_t h, const void *p, uint64_t n) {
  const unsigned char *b = p;
  for (uint64_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

static void check_tensor(const brisk_gguf *g, const shared_tensor *want) {
  const brisk_gguf_tensor *t = brisk_gguf_find_tensor(g, want->name);
  assert_non_null(t);
  assert_int_equal(t->type, want->type);
  assert_int_equal(t->n_dims, want->n_dims);
  for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], want->ne[d]);
  assert_int_equal(t->n_bytes, want->n_bytes);
  assert_int_equal(brisk_gguf_data_offset(g) + t->offset, want->abs_offset);
  assert_ptr_equal(t->data, (const unsigned char *)brisk_gguf_bytes(g) + want->abs_offset);
  assert_int_equal(fnv_update(FNV_INIT, t->data, t->n_bytes), want->fnv);
}

static void check_file(const brisk_gguf *g, const shared_file *f) {
  char key[128];
  brisk_gguf_str s;
  uint32_t u;
  assert_int_equal(brisk_gguf_version(g), 3);
  assert_int_equal(brisk_gguf_alignment(g), 32);
  assert_int_equal(brisk_gguf_file_size(g), f->size);
  assert_int_equal(brisk_gguf_n_kv(g), f->n_kv);
  assert_int_equal(brisk_gguf_n_tensors(g), f->n_tensors);
  assert_int_equal(brisk_gguf_data_offset(g), f->data_offset);
  assert_int_equal(brisk_gguf_get_str(g, "general.architecture", &s), BRISK_OK);
  assert_string_equal(s.ptr, f->arch);
  assert_int_equal(brisk_gguf_get_str(g, "tokenizer.ggml.model", &s), BRISK_OK);
  assert_string_equal(s.ptr, f->tok_model);
  snprintf(key, sizeof key, "%s.block_count", f->arch);
  assert_int_equal(brisk_gguf_get_u32(g, key, &u), BRISK_OK);
  assert_int_equal(u, f->block_count);
  assert_int_equal(brisk_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &u), BRISK_OK);
  assert_int_equal(u, f->bos);

  brisk_gguf_type et;
  uint64_t n;
  assert_int_equal(brisk_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), BRISK_OK);
  assert_int_equal(et, BRISK_GGUF_STRING);
  assert_int_equal(n, f->n_tokens);
  int64_t ti = brisk_gguf_find_key(g, "tokenizer.ggml.tokens");
  uint64_t h = FNV_INIT;
  for (uint64_t j = 0; j < n; j++) {
    brisk_gguf_str tok = brisk_gguf_arr_str(g, ti, j);
    h = fnv_update(h, tok.ptr, tok.len + 1); /* + its NUL terminator */
  }
  assert_int_equal(h, f->tokens_fnv);
  assert_string_equal(brisk_gguf_arr_str(g, ti, n - 1).ptr, f->last_token);
  /* token_type is i32 per token. */
  assert_int_equal(brisk_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &n), BRISK_OK);
  assert_int_equal(et, BRISK_GGUF_INT32);
  assert_int_equal(n, f->n_tokens);
  if (f->n_merges) {
    assert_int_equal(brisk_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n), BRISK_OK);
    assert_int_equal(et, BRISK_GGUF_STRING);
    assert_int_equal(n, f->n_merges);
  } else {
    assert_int_equal(brisk_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n), BRISK_E_NOT_FOUND);
  }
  if (f->first.name) {
    check_tensor(g, &f->first);
    check_tensor(g, &f->last);
    assert_string_equal(brisk_gguf_tensor_at(g, 0)->name, f->first.name);
    assert_string_equal(brisk_gguf_tensor_at(g, f->n_tensors - 1)->name, f->last.name);
    /* Tensors are in the file, aligned, and of a known type. */
    for (int64_t i = 0; i < f->n_tensors; i++) {
      const brisk_gguf_tensor *t = brisk_gguf_tensor_at(g, i);
      assert_int_equal(t->offset % 32, 0);
      assert_non_null(brisk_dtype_get(t->type));
      assert_true(brisk_gguf_data_offset(g) + t->offset + t->n_bytes <= f->size);
    }
  }
  /* Every value formats. */
  char text[256];
  for (int64_t i = 0; i < brisk_gguf_n_kv(g); i++) {
    brisk_gguf_format_value(g, i, text, sizeof text);
    assert_non_null(brisk_gguf_key(g, i));
  }
}

static void test_shared_files(void **state) {
  (void)state;
  if (!test_shared_dir()) SKIP_BECAUSE("../shared is absent (set BRISK_SHARED_DIR)");
  uint64_t live0 = brisk_alloc_live_count();
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    const char *path = test_shared_path(files[i].path);
    if (!path) {
      fprintf(stderr, "SKIP: %s is absent\n", files[i].path);
      continue;
    }
    brisk_gguf *g;
    uint64_t t0 = brisk_now_ns();
    assert_int_equal(brisk_gguf_open(path, &g), BRISK_OK);
    uint64_t t1 = brisk_now_ns();
    assert_true(brisk_gguf_is_mapped(g));
    fprintf(stderr, "%s: opened (mmap) in %.2f ms\n", files[i].path, (double)(t1 - t0) / 1e6);
    check_file(g, &files[i]);
    brisk_gguf_close(g);
    /* The read() path gives the same view. */
    assert_int_equal(
        brisk_gguf_open_flags(test_shared_path(files[i].path), BRISK_GGUF_OPEN_NO_MMAP, &g),
        BRISK_OK);
    assert_false(brisk_gguf_is_mapped(g));
    check_file(g, &files[i]);
    brisk_gguf_close(g);
  }
  assert_int_equal(brisk_alloc_live_count(), live0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
