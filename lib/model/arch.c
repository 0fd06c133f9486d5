#include "model/arch.h"

#include <string.h>

static const brisk_arch_info table[BRISK_ARCH_COUNT] = {
    [BRISK_ARCH_LLAMA] = {"llama", BRISK_HP_ROPE_NORMAL, false, false, false},
    [BRISK_ARCH_MISTRAL] = {"mistral", BRISK_HP_ROPE_NORMAL, false, false, false},
    [BRISK_ARCH_QWEN2] = {"qwen2", BRISK_HP_ROPE_NEOX, true, false, false},
    [BRISK_ARCH_QWEN3] = {"qwen3", BRISK_HP_ROPE_NEOX, false, true, false},
    [BRISK_ARCH_MIXTRAL] = {"mixtral", BRISK_HP_ROPE_NORMAL, false, false, true},
    [BRISK_ARCH_GRANITE] = {"granite", BRISK_HP_ROPE_NORMAL, false, false, false},
    [BRISK_ARCH_OLMO2] = {"olmo2", BRISK_HP_ROPE_NEOX, false, true, false},
    [BRISK_ARCH_GEMMA2] = {"gemma2", BRISK_HP_ROPE_NEOX, false, false, false, true},
    [BRISK_ARCH_GEMMA3] = {"gemma3", BRISK_HP_ROPE_NEOX, false, true, false, true},
    [BRISK_ARCH_PHI3] = {"phi3", BRISK_HP_ROPE_NEOX, false, false, false, false},
    [BRISK_ARCH_QWEN2MOE] = {"qwen2moe", BRISK_HP_ROPE_NEOX, true, false, true, false},
    [BRISK_ARCH_QWEN3MOE] = {"qwen3moe", BRISK_HP_ROPE_NEOX, false, true, true, false},
    [BRISK_ARCH_DEEPSEEK2] = {"deepseek2", BRISK_HP_ROPE_NORMAL, false, false, true, false},
    [BRISK_ARCH_BERT] = {"bert", BRISK_HP_ROPE_NEOX, true, false, false, false, true},
};

const brisk_arch_info *brisk_arch_get(brisk_arch arch) {
  return (unsigned)arch < BRISK_ARCH_COUNT ? &table[arch] : NULL;
}

const char *brisk_arch_names(void) {
  return "llama, mistral, qwen2, qwen3, mixtral, granite, olmo2, gemma2, gemma3, phi3, qwen2moe, "
         "qwen3moe, deepseek2, bert";
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
  /* Hugging Face model_type values match our names for these families;
   * Gemma 3's text-only checkpoints say "gemma3_text". */
  if (!strcmp(model_type, "gemma3_text")) model_type = "gemma3";
  if (!strcmp(model_type, "qwen2_moe")) model_type = "qwen2moe";
  if (!strcmp(model_type, "qwen3_moe")) model_type = "qwen3moe";
  if (!strcmp(model_type, "deepseek_v2")) model_type = "deepseek2";
  return brisk_arch_from_name(model_type, out);
}
