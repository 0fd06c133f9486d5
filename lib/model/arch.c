#include "model/arch.h"

#include <string.h>

static const brisk_arch_info table[BRISK_ARCH_COUNT] = {
    [BRISK_ARCH_LLAMA] = {"llama", BRISK_HP_ROPE_NORMAL, false, false, false},
    [BRISK_ARCH_MISTRAL] = {"mistral", BRISK_HP_ROPE_NORMAL, false, false, false},
    [BRISK_ARCH_QWEN2] = {"qwen2", BRISK_HP_ROPE_NEOX, true, false, false},
    [BRISK_ARCH_QWEN3] = {"qwen3", BRISK_HP_ROPE_NEOX, false, true, false},
    [BRISK_ARCH_MIXTRAL] = {"mixtral", BRISK_HP_ROPE_NORMAL, false, false, true},
};

const brisk_arch_info *brisk_arch_get(brisk_arch arch) {
  return (unsigned)arch < BRISK_ARCH_COUNT ? &table[arch] : NULL;
}

bool brisk_arch_from_name(const char *name, brisk_arch *out) {
  for (int i = 0; i < BRISK_ARCH_COUNT; i++)
    if (strcmp(name, table[i].name) == 0) {
      *out = (brisk_arch)i;
      return true;
    }
  return false;
}

bool brisk_arch_from_hf_model_type(const char *model_type, brisk_arch *out) {
  /* Hugging Face model_type values match our names for these families. */
  return brisk_arch_from_name(model_type, out);
}
