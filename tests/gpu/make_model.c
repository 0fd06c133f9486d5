/* Writes a model with the layer shapes of an 8B llama (n_embd 4096, 32
 * heads of 128, 8 KV heads, n_ff 14336) but few layers and a 32000-token
 * vocabulary, random weights in one type: the GPU benchmark's model
 * (tests/gpu/run.sh), whose per-layer decode traffic and prefill FLOPs are
 * those of the real thing. Usage: gpu_make_model OUT.gguf TYPE N_LAYER,
 * TYPE one of f16, bf16, q8_0, q4_0. */
#include "test_models.h"

#include "core/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: gpu_make_model OUT.gguf f16|bf16|q8_0|q4_0 N_LAYER\n");
    return 2;
  }
  const struct {
    const char *name;
    uint32_t type;
  } types[] = {{"f16", BRISK_DTYPE_F16},
               {"bf16", BRISK_DTYPE_BF16},
               {"q8_0", BRISK_DTYPE_Q8_0},
               {"q4_0", BRISK_DTYPE_Q4_0}};
  uint32_t type = 0;
  bool found = false;
  for (size_t i = 0; i < sizeof types / sizeof *types; i++)
    if (!strcmp(argv[2], types[i].name)) {
      type = types[i].type;
      found = true;
    }
  int n_layer = atoi(argv[3]);
  if (!found || n_layer < 1 || n_layer > 64) {
    fprintf(stderr, "gpu_make_model: type %s or %s layers not supported\n", argv[2], argv[3]);
    return 2;
  }
  test_model_spec s = test_model_default("llama");
  s.n_vocab = 32000;
  s.n_embd = 4096;
  s.n_layer = (uint32_t)n_layer;
  s.n_head = 32;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.n_ff = 14336;
  s.n_ctx = 4096;
  s.weight_type = type;
  test_rng r = test_rng_seeded("gpu_make_model");
  brisk_status st = test_model_write(argv[1], &s, &r, NULL);
  if (st) {
    fprintf(stderr, "gpu_make_model: %s\n", brisk_last_error());
    return 1;
  }
  return 0;
}
