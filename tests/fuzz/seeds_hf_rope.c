/* Seeds for fuzz_hf_rope: one head_dim byte, then rope objects shaped like
 * real configs' (transformers 5 rope_parameters and older rope_scaling):
 * default, linear, llama3, yarn, longrope with factor lists, partial
 * rotary dims, and keys brisk refuses. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const char *const seeds[] = {
    "{\"rope_type\": \"default\", \"rope_theta\": 500000.0}",
    "{\"rope_type\": \"linear\", \"rope_theta\": 1000000.0, \"factor\": 8.0}",
    "{\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, \"factor\": 8.0, \"low_freq_factor\": "
    "1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}",
    "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"beta_fast\": 32, \"beta_slow\": 1, "
    "\"original_max_position_embeddings\": 32768, \"truncate\": true}",
    "{\"type\": \"longrope\", \"short_factor\": [1.0, 1.1, 1.2, 1.3], \"long_factor\": [2, 3, 4, "
    "5], \"original_max_position_embeddings\": 4096}",
    "{\"rope_type\": \"default\", \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.75}",
    "{\"rope_type\": \"yarn\", \"factor\": 40, \"mscale\": 0.707, \"mscale_all_dim\": 0.707}",
    "{\"rope_type\": \"dynamic\", \"factor\": 2.0, \"mrope_section\": [16, 24, 24]}",
};

int fuzz_write_seeds(const char *dir) {
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    unsigned char buf[1024];
    size_t n = strlen(seeds[i]);
    if (n + 1 > sizeof buf) return 1;
    buf[0] = (unsigned char)(i == 4 ? 3 : 7); /* head_dim 8 (4 factors) or 16 */
    memcpy(buf + 1, seeds[i], n);
    char name[32];
    snprintf(name, sizeof name, "seed%zu.json", i);
    if (fuzz_seed_save(dir, name, buf, n + 1)) return 1;
  }
  return 0;
}
