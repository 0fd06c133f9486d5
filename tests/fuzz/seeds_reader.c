/* Seeds for fuzz_reader: a small llama model written with brisk's GGUF
 * writer (two layers of F32 weights), behind each reader behaviour (whole,
 * short reads, an error, an early end, an over-long answer) at a few
 * offsets. Deterministic. */
#include "fuzz_seeds.h"

#include "core/alloc.h"
#include "core/dtype.h"
#include "format/gguf.h"

#include <stdio.h>
#include <string.h>

#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((call) != BRISK_OK) {                                                                      \
      fprintf(stderr, "seeds_reader: %s failed: %s\n", #call, brisk_last_error());                 \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

enum { VOCAB = 32, EMBD = 16, FF = 32, LAYERS = 2 };

static brisk_status add(brisk_gguf_writer *w, const char *name, uint64_t cols, uint64_t rows,
                        float *buf) {
  for (uint64_t i = 0; i < cols * rows; i++) buf[i] = (float)((i * 37 % 17) - 8) / 16.0f;
  uint64_t ne[2] = {cols, rows};
  return brisk_gguf_writer_add_tensor(w, name, BRISK_DTYPE_F32, rows > 1 ? 2 : 1, ne, buf,
                                      cols * rows * sizeof(float));
}

int fuzz_write_seeds(const char *dir) {
  static float buf[VOCAB * FF * 2];
  brisk_gguf_writer *w = NULL;
  void *img = NULL;
  size_t n = 0;
  unsigned char *seed = NULL;
  int rc = 1;
  TRY(brisk_gguf_writer_create(3, 32, &w));
  TRY(brisk_gguf_writer_set_str(w, "general.architecture", "llama"));
  TRY(brisk_gguf_writer_set_u32(w, "llama.block_count", LAYERS));
  TRY(brisk_gguf_writer_set_u32(w, "llama.embedding_length", EMBD));
  TRY(brisk_gguf_writer_set_u32(w, "llama.feed_forward_length", FF));
  TRY(brisk_gguf_writer_set_u32(w, "llama.attention.head_count", 2));
  TRY(brisk_gguf_writer_set_u32(w, "llama.attention.head_count_kv", 1));
  TRY(brisk_gguf_writer_set_u32(w, "llama.context_length", 64));
  TRY(brisk_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
  TRY(add(w, "token_embd.weight", EMBD, VOCAB, buf));
  TRY(add(w, "output_norm.weight", EMBD, 1, buf));
  for (int l = 0; l < LAYERS; l++) {
    char name[64];
    const struct {
      const char *t;
      uint64_t cols, rows;
    } ts[] = {{"attn_norm", EMBD, 1},     {"attn_q", EMBD, EMBD},      {"attn_k", EMBD, EMBD / 2},
              {"attn_v", EMBD, EMBD / 2}, {"attn_output", EMBD, EMBD}, {"ffn_norm", EMBD, 1},
              {"ffn_gate", EMBD, FF},     {"ffn_up", EMBD, FF},        {"ffn_down", FF, EMBD}};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
      snprintf(name, sizeof name, "blk.%d.%s.weight", l, ts[i].t);
      TRY(add(w, name, ts[i].cols, ts[i].rows, buf));
    }
  }
  TRY(brisk_gguf_writer_write_memory(w, &img, &n));
  seed = brisk_malloc(n + 8);
  if (!seed) goto fail;
  memcpy(seed + 8, img, n);
  /* control: chunk (2 bytes), mode, fail offset (3 bytes), repack, spare */
  const unsigned char ctl[][8] = {{0xff, 0xff, 0, 0, 0, 0, 1, 0},
                                  {7, 0, 0, 0, 0, 0, 1, 0},
                                  {0xff, 0xff, 1, 40, 0, 0, 0, 0},
                                  {0, 1, 2, 200, 1, 0, 1, 0},
                                  {3, 0, 3, 10, 0, 0, 0, 0}};
  for (size_t i = 0; i < sizeof ctl / sizeof *ctl; i++) {
    char name[32];
    memcpy(seed, ctl[i], 8);
    snprintf(name, sizeof name, "model-%zu", i);
    if (fuzz_seed_save(dir, name, seed, n + 8)) goto fail;
  }
  rc = 0;
fail:
  brisk_free(seed);
  brisk_free(img);
  brisk_gguf_writer_free(w);
  return rc;
}
