/* Seeds for fuzz_model: tiny models of every architecture from the test
 * writer (tests/support/test_models.c), F32 and Q8_0, with and without a
 * vocabulary, tied and not, and with RoPE scaling keys, so mutations start
 * from files that load. Each is written twice: with an even and an odd last
 * byte (full load, vocabulary only). */
#include "fuzz_seeds.h"
#include "test_models.h"

#include "core/dtype.h"
#include "format/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void yarn(struct brisk_gguf_writer *w, const char *arch, void *user) {
  (void)user;
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  brisk_gguf_writer_set_str(w, key, "yarn");
  snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
  brisk_gguf_writer_set_f32(w, key, 4.0f);
}

static int save(const char *dir, const char *name, const test_model_spec *s) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.tmp", dir, name);
  test_rng r = test_rng_seeded(name);
  if (test_model_write(path, s, &r, NULL)) return 1;
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  int bad = fread(buf, 1, (size_t)n, f) != (size_t)n;
  fclose(f);
  unlink(path);
  char out[256];
  buf[n] = 0; /* an extra even byte: a full load */
  snprintf(out, sizeof out, "%s-full", name);
  bad = bad || fuzz_seed_save(dir, out, buf, (size_t)n + 1);
  buf[n] = 1;
  snprintf(out, sizeof out, "%s-vocab", name);
  bad = bad || fuzz_seed_save(dir, out, buf, (size_t)n + 1);
  free(buf);
  return bad;
}

int fuzz_write_seeds(const char *dir) {
  const char *archs[] = {"llama", "mistral", "qwen2", "qwen3", "mixtral"};
  int bad = 0;
  for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
    test_model_spec s = test_model_default(archs[a]);
    s.n_vocab = 40, s.n_embd = 8, s.n_layer = 1, s.n_head = 2, s.n_head_kv = 1, s.head_dim = 4,
    s.n_ff = 8, s.n_ctx = 64;
    if (s.n_expert) s.n_expert = 2, s.n_expert_used = 1;
    if (s.sliding_window) s.sliding_window = 4;
    char name[64];
    snprintf(name, sizeof name, "%s-f32", archs[a]);
    bad |= save(dir, name, &s);
    s.tied = true;
    s.no_vocab = true;
    snprintf(name, sizeof name, "%s-tied-novocab", archs[a]);
    bad |= save(dir, name, &s);
  }
  /* Latent attention: a dense layer, then a MoE one with a shared expert. */
  test_model_spec ds = test_model_default("deepseek2");
  ds.n_vocab = 40, ds.n_embd = 8, ds.n_layer = 2, ds.n_head = 2, ds.n_head_kv = 2, ds.head_dim = 6,
  ds.rope_dim = 2, ds.kv_lora_rank = 4, ds.v_head_dim = 4, ds.n_ff = 8, ds.n_ctx = 64,
  ds.n_expert = 2, ds.n_expert_used = 1;
  bad |= save(dir, "deepseek2-f32", &ds);
  test_model_spec s = test_model_default("llama");
  s.n_vocab = 40, s.n_embd = 32, s.n_layer = 1, s.n_head = 2, s.n_head_kv = 2, s.head_dim = 16,
  s.n_ff = 32, s.n_ctx = 64, s.weight_type = BRISK_DTYPE_Q8_0;
  bad |= save(dir, "llama-q8_0", &s);
  s.weight_type = BRISK_DTYPE_F32;
  s.n_embd = 8, s.head_dim = 4, s.n_ff = 8;
  s.extra = yarn;
  bad |= save(dir, "llama-yarn", &s);
  float f[2] = {1.0f, 4.0f};
  s.extra = NULL;
  s.rope_freqs = f;
  s.vocab_tokens = 30;
  bad |= save(dir, "llama-freqs-padded", &s);
  return bad;
}
