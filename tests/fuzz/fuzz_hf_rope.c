/* Fuzz target: the RoPE settings of a Hugging Face config.json
 * (model/hf_rope.c). The first input byte picks head_dim (2 to 512, even);
 * the rest is the rope object as JSON ("rope_parameters" or "rope_scaling").
 * Aborts when the reader returns a status it does not promise, fails
 * without a message, or accepts settings outside what it validates. */
#include "fuzz_target.h"

#include "core/alloc.h"
#include "core/error.h"
#include "format/json.h"
#include "model/hf_rope.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_hf_rope: %s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,   \
              brisk_last_error());                                                                 \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint32_t head_dim = 2 + 2u * data[0];
  struct json_object *o = NULL;
  if (brisk_json_parse((const char *)data + 1, size - 1, true, "rope", &o) != BRISK_OK) return 0;
  brisk_hf_rope *r = brisk_calloc(1, sizeof *r);
  if (!r) {
    brisk_json_free(o);
    return 0;
  }
  r->base = 10000.0f;
  r->allow_mscale = data[size - 1] & 1; /* DeepSeek's mscale pair read or refused */
  brisk_status st = brisk_hf_rope_read(o, "rope_parameters", head_dim, r);
  CHECK(st == BRISK_OK || st == BRISK_E_FORMAT || st == BRISK_E_UNSUPPORTED ||
        st == BRISK_E_OUT_OF_MEMORY);
  if (st) {
    CHECK(brisk_last_error()[0] != '\0');
  } else {
    CHECK(r->dim == 0 || (r->dim % 2 == 0 && r->dim <= head_dim));
    CHECK(r->scaling >= BRISK_HP_ROPE_SCALING_NONE && r->scaling <= BRISK_HP_ROPE_SCALING_LONGROPE);
    CHECK(r->n_factors <= BRISK_HF_ROPE_MAX_FACTORS);
    CHECK(isfinite(r->attn_factor) && isfinite(r->mscale_all_dim));
    for (uint32_t i = 0; i < r->n_factors; i++)
      CHECK(isfinite(r->short_factor[i]) && r->short_factor[i] > 0 && isfinite(r->long_factor[i]) &&
            r->long_factor[i] > 0);
  }
  brisk_free(r);
  brisk_json_free(o);
  return 0;
}
