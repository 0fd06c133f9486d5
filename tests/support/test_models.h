/* Random-weight model files written with brisk's own GGUF writer, for tests
 * of every architecture the loader knows. */
#ifndef BRISK_TEST_MODELS_H
#define BRISK_TEST_MODELS_H

#include "brisk.h"
#include "test_support.h"

#include <stdbool.h>
#include <stdint.h>

struct brisk_gguf_writer;

typedef struct test_model_spec {
  const char *arch; /* "llama", "mistral", "qwen2", "qwen3", "mixtral", "deepseek2" */
  uint32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
  uint32_t n_expert, n_expert_used, sliding_window;
  uint32_t weight_type; /* brisk_dtype of the matrices; bytes are random for quantized types */
  bool tied;
  /* No tokenizer keys at all (the model then has no vocabulary). By default
   * a small SPM vocabulary is written: <unk> <s> </s>, U+2581, then printable
   * ASCII characters, then merged pairs, up to n_vocab tokens. */
  bool no_vocab;
  /* Test hooks for malformed files: skip this tensor, or give it a wrong
   * number of rows; both NULL for a valid model. */
  const char *omit_tensor;
  const char *misshape_tensor;
  /* More hooks for hostile files (all 0 / NULL by default): the file's
   * general.alignment (0: 32); rope.freq_base (0: 10000); tokens written to
   * the vocabulary (0: n_vocab; the embedding keeps n_vocab rows); a
   * rope_freqs.weight tensor of head_dim / 2 factors; and a callback run
   * after the standard keys and before any tensor, to add keys or a leading
   * tensor. */
  uint32_t alignment;
  float rope_base;
  uint32_t vocab_tokens;
  const float *rope_freqs;
  void (*extra)(struct brisk_gguf_writer *w, const char *arch, void *user);
  void *extra_user;
  /* deepseek2 (multi-head latent attention, as llama.cpp's older converter
   * writes it: attn_kv_b whole): the latent rank, the rope part of
   * head_dim (the rest is the nope part), the value head; the first layer
   * dense, the others MoE with one shared expert. */
  uint32_t kv_lora_rank, rope_dim, v_head_dim;
  /* {arch}.attention.shared_kv_layers (0: not written): the last layers
   * reuse an earlier layer's K/V (their own K/V weights are still written,
   * as Gemma 3n checkpoints keep them). */
  uint32_t shared_kv_layers;
} test_model_spec;

/* A small valid spec for `arch`. */
test_model_spec test_model_default(const char *arch);

/* Writes the model to `path`; returns BRISK_OK or the writer's status.
 * *n_params receives the element count of the written weights (tied
 * embeddings once), if not NULL. */
brisk_status test_model_write(const char *path, const test_model_spec *spec, test_rng *rng,
                              uint64_t *n_params);

/* Writes the model to dir/NAME.gguf and loads it into *out (default model
 * params); the writer's or the loader's status. */
brisk_status test_model_load(const char *dir, const char *name, const test_model_spec *spec,
                             test_rng *rng, brisk_model **out);

/* A fresh temporary directory (mkdtemp) and its removal with all files. */
const char *test_tmpdir(void);
void test_tmpdir_remove(const char *dir);

#endif
