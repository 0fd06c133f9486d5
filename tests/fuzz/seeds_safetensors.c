/* Seeds for fuzz_safetensors, made with brisk's own safetensors writer:
 * valid files with every dtype, scalars, empty and 5-D tensors and metadata,
 * plus copies with a byte of the header changed and cut short, which point
 * the fuzzer at the checks. Deterministic: the same seeds on every run. */
#include "fuzz_seeds.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/safetensors.h"

#include <stdio.h>
#include <string.h>

#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((call) != BRISK_OK) {                                                                      \
      fprintf(stderr, "seeds_safetensors: %s failed: %s\n", #call, brisk_last_error());            \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

/* Writes the file made of the first n_tensors of a fixed list as "NAME.st",
 * then variants of it. */
static int write_seed(const char *dir, const char *name, size_t n_tensors, bool metadata) {
  static const struct {
    const char *name;
    uint32_t dtype, n_dims;
    uint64_t shape[5];
  } list[] = {
      {"model.embed_tokens.weight", BRISK_DTYPE_BF16, 2, {6, 4}},
      {"model.layers.0.self_attn.q_proj.weight", BRISK_DTYPE_F16, 2, {4, 4}},
      {"model.norm.weight", BRISK_DTYPE_F32, 1, {4}},
      {"scale", BRISK_DTYPE_F32, 0, {0}},
      {"empty", BRISK_DTYPE_F16, 2, {0, 3}},
      {"visual.patch_embed.proj.weight", BRISK_DTYPE_BF16, 5, {2, 1, 2, 1, 2}},
  };
  unsigned char values[256];
  for (size_t i = 0; i < sizeof values; i++) values[i] = (unsigned char)(i * 37 + 11);
  brisk_safetensors_writer *w = NULL;
  void *buf = NULL;
  size_t size = 0;
  int rc = 1;
  TRY(brisk_safetensors_writer_create(&w));
  if (metadata) {
    TRY(brisk_safetensors_writer_set_metadata(w, "format", "pt"));
    TRY(brisk_safetensors_writer_set_metadata(w, "note", "caf\xc3\xa9 \"q\""));
  }
  for (size_t i = 0; i < n_tensors && i < sizeof list / sizeof list[0]; i++) {
    uint64_t n = list[i].dtype == BRISK_DTYPE_F32 ? 4 : 2;
    for (uint32_t d = 0; d < list[i].n_dims; d++) n *= list[i].shape[d];
    TRY(brisk_safetensors_writer_add_tensor(w, list[i].name, list[i].dtype, list[i].n_dims,
                                            list[i].shape, values, n));
  }
  TRY(brisk_safetensors_writer_write_memory(w, &buf, &size));
  char file[128];
  snprintf(file, sizeof file, "%s.st", name);
  rc = fuzz_seed_save(dir, file, buf, size);
  /* A header byte changed: a digit, a quote, a bracket, the length. */
  unsigned char *p = buf;
  size_t marks[] = {0, 3, 9, size / 3, size / 2};
  for (size_t i = 0; rc == 0 && i < sizeof marks / sizeof marks[0]; i++) {
    if (marks[i] >= size) continue;
    unsigned char saved = p[marks[i]];
    p[marks[i]] ^= 0x21;
    snprintf(file, sizeof file, "%s-flip%zu.st", name, i);
    rc = fuzz_seed_save(dir, file, p, size);
    p[marks[i]] = saved;
  }
  snprintf(file, sizeof file, "%s-cut.st", name);
  if (rc == 0) rc = fuzz_seed_save(dir, file, p, size - size / 4);
fail:
  brisk_free(buf);
  brisk_safetensors_writer_free(w);
  return rc;
}

int fuzz_write_seeds(const char *dir) {
  if (write_seed(dir, "empty", 0, false) || write_seed(dir, "meta-only", 0, true) ||
      write_seed(dir, "one", 1, false) || write_seed(dir, "three", 3, true) ||
      write_seed(dir, "all", 6, true))
    return 1;
  /* Hand-made headers for the paths a writer never takes. */
  static const char *headers[] = {
      "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
      "{\"a\\u0000\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,2]}}",
      "{'a':{\"dtype\":\"F16\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
  };
  for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
    unsigned char file[256] = {0};
    size_t h = strlen(headers[i]);
    for (int b = 0; b < 8; b++) file[b] = (unsigned char)(h >> (8 * b));
    memcpy(file + 8, headers[i], h);
    char name[32];
    snprintf(name, sizeof name, "hand%zu.st", i);
    if (fuzz_seed_save(dir, name, file, 8 + h + 8)) return 1;
  }
  return 0;
}
