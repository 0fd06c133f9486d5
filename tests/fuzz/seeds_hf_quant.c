/* Seeds for fuzz_hf_quant: quantization_config objects shaped like real
 * checkpoints' (AutoGPTQ, GPTQModel, AutoAWQ) with matching tensor layouts,
 * and some brisk refuses, each followed by a payload of packed words. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const struct {
  unsigned char layout, groups;
  const char *json;
} seeds[] = {
    /* 128 x 16, GPTQ, 1 group (128), no g_idx */
    {0x27, 0,
     "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, \"desc_act\": false, "
     "\"sym\": true, \"checkpoint_format\": \"gptq\"}"},
    /* 128 x 16, GPTQ, 4 groups of 32 */
    {0x07, 3,
     "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"desc_act\": true, "
     "\"sym\": false}"},
    /* 128 x 16, GPTQ act-order, 4 groups of 32 in a permuted column order */
    {0x07, 7,
     "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"desc_act\": true, "
     "\"sym\": false}"},
    /* 96 x 24, GPTQ v2 act-order, 3 groups of 32 */
    {0x0a, 6,
     "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 32, \"desc_act\": true, "
     "\"checkpoint_format\": \"gptq_v2\"}"},
    /* 64 x 8, GPTQ v2, whole-row group, no g_idx */
    {0x21, 0,
     "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": -1, \"checkpoint_format\": "
     "\"gptq_v2\"}"},
    /* 128 x 32, AWQ, 2 groups of 64 */
    {0x1f, 1,
     "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64, \"zero_point\": true, "
     "\"version\": \"gemm\"}"},
    /* 96 x 8, AWQ, 3 groups of 32 */
    {0x12, 2,
     "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 32, \"version\": \"GEMM\"}"},
    {0x07, 0, "{\"quant_method\": \"gptq\", \"bits\": 8, \"group_size\": 128}"},
    {0x17, 0,
     "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, \"version\": "
     "\"gemv\"}"},
    {0x07, 0,
     "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128, "
     "\"is_marlin_format\": true}"},
    {0x47, 0, "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128}"},
    {0x87, 0, "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128}"},
};

int fuzz_write_seeds(const char *dir) {
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    unsigned char buf[1024];
    size_t n = strlen(seeds[i].json);
    if (n + 3 + 64 > sizeof buf) return 1;
    buf[0] = seeds[i].layout;
    buf[1] = seeds[i].groups;
    memcpy(buf + 2, seeds[i].json, n);
    buf[2 + n] = 0;
    /* Payload: words whose nibbles are 0..15; scales of 0x3c00 (1.0) come
     * from the 0x00 0x3c pairs, group indices from the small words. */
    for (size_t j = 0; j < 64; j++)
      buf[3 + n + j] = (unsigned char)(j % 2 ? 0x3c : (j * 37) & 0x1f);
    char name[32];
    snprintf(name, sizeof name, "seed%zu.bin", i);
    if (fuzz_seed_save(dir, name, buf, n + 3 + 64)) return 1;
  }
  return 0;
}
