/* Seeds for fuzz_gguf, made with brisk's own GGUF writer: small valid files
 * covering every value type, every tensor type, v2/v3 and a few alignments,
 * and slightly broken copies (truncated, a field changed) that point the
 * fuzzer at the checks. Deterministic: the same seeds on every run. */
#include "fuzz_seeds.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdio.h>
#include <string.h>

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t next(void) { /* splitmix64 */
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct seed {
  void *data;
  size_t size;
} seed;

#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((call) != BRISK_OK) {                                                                      \
      fprintf(stderr, "seeds_gguf: %s failed: %s\n", #call, brisk_last_error());                   \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

/* Metadata of every type: scalars, strings and arrays of each. */
static int add_metadata(brisk_gguf_writer *w) {
  TRY(brisk_gguf_writer_set_str(w, "general.architecture", "llama"));
  TRY(brisk_gguf_writer_set_u32(w, "llama.block_count", 2));
  TRY(brisk_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f));
  TRY(brisk_gguf_writer_set_bool(w, "general.flag", true));
  TRY(brisk_gguf_writer_set_i32(w, "general.i32", -5));
  TRY(brisk_gguf_writer_set_u64(w, "general.u64", 1ull << 40));
  static const brisk_gguf_type scalars[] = {
      BRISK_GGUF_UINT8,  BRISK_GGUF_INT8,  BRISK_GGUF_UINT16,  BRISK_GGUF_INT16,
      BRISK_GGUF_UINT32, BRISK_GGUF_INT32, BRISK_GGUF_FLOAT32, BRISK_GGUF_BOOL,
      BRISK_GGUF_UINT64, BRISK_GGUF_INT64, BRISK_GGUF_FLOAT64};
  for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
    char key[64];
    unsigned char v[8 * 3];
    for (size_t k = 0; k < sizeof v; k++)
      v[k] = scalars[i] == BRISK_GGUF_BOOL ? k & 1 : (unsigned char)next();
    snprintf(key, sizeof key, "s.%s", brisk_gguf_type_name(scalars[i]));
    TRY(brisk_gguf_writer_set_scalar(w, key, scalars[i], v));
    snprintf(key, sizeof key, "a.%s", brisk_gguf_type_name(scalars[i]));
    TRY(brisk_gguf_writer_set_arr(w, key, scalars[i], v, 3));
  }
  const char *tokens[] = {"<unk>", "<s>", "", "\xe2\x96\x81the", "a\xc3\xa9"};
  TRY(brisk_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 5));
  brisk_gguf_str with_nul[] = {{"a\0b", 3}, {"", 0}};
  TRY(brisk_gguf_writer_set_arr_strn(w, "tokenizer.ggml.merges", with_nul, 2));
  return 0;
}

static int add_tensor(brisk_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                      uint64_t rows) {
  const brisk_dtype_info *info = brisk_dtype_get(type);
  uint64_t ne[4] = {info->block_size, rows, 1, 1};
  unsigned char data[512];
  uint64_t n = info->type_size * rows;
  for (uint64_t i = 0; i < n && i < sizeof data; i++) data[i] = (unsigned char)next();
  TRY(brisk_gguf_writer_add_tensor(w, name, type, n_dims, ne, data, n));
  return 0;
}

static int finish(brisk_gguf_writer *w, seed *out) {
  brisk_status st = brisk_gguf_writer_write_memory(w, &out->data, &out->size);
  brisk_gguf_writer_free(w);
  if (st != BRISK_OK) fprintf(stderr, "seeds_gguf: %s\n", brisk_last_error());
  return st != BRISK_OK;
}

static int save(const char *dir, const char *name, const seed *s, size_t size) {
  return fuzz_seed_save(dir, name, s->data, size < s->size ? size : s->size);
}

/* A copy with `n` bytes at `at` replaced. */
static int save_patched(const char *dir, const char *name, const seed *s, size_t at,
                        const void *bytes, size_t n) {
  unsigned char copy[65536];
  if (s->size > sizeof copy || at + n > s->size) return 1;
  memcpy(copy, s->data, s->size);
  memcpy(copy + at, bytes, n);
  return fuzz_seed_save(dir, name, copy, s->size);
}

int fuzz_write_seeds(const char *dir) {
  brisk_gguf_writer *w;
  seed empty, full, aligned, all_types;
  int err = 0;

  TRY(brisk_gguf_writer_create(3, 0, &w));
  err |= finish(w, &empty);

  TRY(brisk_gguf_writer_create(3, 0, &w));
  err |= add_metadata(w);
  err |= add_tensor(w, "token_embd.weight", BRISK_DTYPE_F32, 2, 3);
  err |= add_tensor(w, "blk.0.attn_q.weight", BRISK_DTYPE_Q8_0, 2, 2);
  err |= add_tensor(w, "output_norm.weight", BRISK_DTYPE_F16, 1, 1);
  err |= finish(w, &full);

  TRY(brisk_gguf_writer_create(2, 64, &w));
  err |= add_tensor(w, "a", BRISK_DTYPE_BF16, 3, 2);
  err |= add_tensor(w, "b", BRISK_DTYPE_Q4_0, 4, 1);
  err |= finish(w, &aligned);

  /* One block of every tensor type in the table. */
  TRY(brisk_gguf_writer_create(3, 32, &w));
  for (uint32_t id = 0; id < BRISK_DTYPE_COUNT; id++) {
    if (!brisk_dtype_get(id)) continue;
    char name[32];
    snprintf(name, sizeof name, "t.%s", brisk_dtype_name(id));
    err |= add_tensor(w, name, id, 1, 1);
  }
  err |= finish(w, &all_types);
  if (err) return 1;

  err |= save(dir, "valid-empty.gguf", &empty, empty.size);
  err |= save(dir, "valid-full.gguf", &full, full.size);
  err |= save(dir, "valid-v2-align64.gguf", &aligned, aligned.size);
  err |= save(dir, "valid-all-types.gguf", &all_types, all_types.size);

  /* Slightly broken: truncations, then single fields changed. */
  err |= save(dir, "broken-truncated-header.gguf", &full, 20);
  err |= save(dir, "broken-truncated-kv.gguf", &full, full.size * 3 / 5);
  err |= save(dir, "broken-truncated-data.gguf", &full, full.size - 40);
  err |= save_patched(dir, "broken-version-1.gguf", &full, 4, "\1\0\0\0", 4);
  err |= save_patched(dir, "broken-huge-n-kv.gguf", &full, 16, "\0\0\0\0\0\0\0\x40", 8);
  err |= save_patched(dir, "broken-huge-n-tensors.gguf", &full, 8,
                      "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  /* The first key's length, then its type (first kv starts at 24). */
  err |= save_patched(dir, "broken-key-length.gguf", &full, 24, "\xff\xff\xff\xff\0\0\0\0", 8);
  err |= save_patched(dir, "broken-value-type.gguf", &full, 24 + 8 + 20, "\x0d\0\0\0", 4);
  err |= save_patched(dir, "broken-alignment-3.gguf", &aligned, 24 + 8 + 17 + 4, "\3\0\0\0", 4);
  err |= save_patched(dir, "broken-tensor-type.gguf", &aligned,
                      24 + 8 + 17 + 4 + 4 + 8 + 1 + 4 + 3 * 8, "\x63\0\0\0", 4);

  brisk_free(empty.data);
  brisk_free(full.data);
  brisk_free(aligned.data);
  brisk_free(all_types.data);
  return err;
}
