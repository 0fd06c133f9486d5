/* Template recognition: each family's reference templates carry literal
 * fragments no other family uses. Order matters where families share a
 * marker: every mistral and llama2 template contains "[INST]". */
#include "chat/chat.h"

#include <string.h>

static const char *const family_names[BRISK_CHAT_COUNT] = {
    [BRISK_CHAT_CHATML] = "chatml",         [BRISK_CHAT_LLAMA2] = "llama2",
    [BRISK_CHAT_LLAMA3] = "llama3",         [BRISK_CHAT_MISTRAL_V1] = "mistral-v1",
    [BRISK_CHAT_MISTRAL_V3] = "mistral-v3", [BRISK_CHAT_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
    [BRISK_CHAT_MISTRAL_V7] = "mistral-v7", [BRISK_CHAT_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken",
    [BRISK_CHAT_GEMMA] = "gemma",           [BRISK_CHAT_PHI3] = "phi3",
};

const char *brisk_chat_family_name(brisk_chat_family f) {
  return f >= 0 && f < BRISK_CHAT_COUNT ? family_names[f] : NULL;
}

brisk_chat_family brisk_chat_family_by_name(const char *name) {
  if (!name) return BRISK_CHAT_UNKNOWN;
  for (int f = 0; f < BRISK_CHAT_COUNT; f++)
    if (strcmp(name, family_names[f]) == 0) return (brisk_chat_family)f;
  return BRISK_CHAT_UNKNOWN;
}

static int has(const char *text, const char *needle) { return strstr(text, needle) != NULL; }

/* A string literal that opens with `frag` in either quote style. */
static int has_literal(const char *text, const char *frag) {
  char q[64];
  size_t n = strlen(frag);
  if (n + 2 > sizeof q) return 0;
  q[0] = '\'';
  memcpy(q + 1, frag, n + 1);
  if (has(text, q)) return 1;
  q[0] = '"';
  return has(text, q);
}

static brisk_chat_family detect_inst(const char *t) {
  if (has(t, "<<SYS>>")) return BRISK_CHAT_LLAMA2;
  /* v7 puts the system prompt in its own block; the SPM variant (Large 2411)
   * writes a space after each opening tag, tekken (Small 3) does not. */
  if (has(t, "[SYSTEM_PROMPT]"))
    return has(t, "[SYSTEM_PROMPT] ") ? BRISK_CHAT_MISTRAL_V7 : BRISK_CHAT_MISTRAL_V7_TEKKEN;
  /* v1 (the official 2024 templates of Mistral 7B v0.1/v0.2 and Mixtral
   * 8x7B) opens every user turn with a space: ' [INST] '. */
  if (has_literal(t, " [INST]")) return BRISK_CHAT_MISTRAL_V1;
  /* v3 and v3-tekken come with function calling; tekken leaves no space
   * after the tag: "[INST]" + content. */
  if (has(t, "[AVAILABLE_TOOLS]") || has(t, "[TOOL_CALLS]"))
    return has(t, "\"[INST]\"") || has(t, "'[INST]'") ? BRISK_CHAT_MISTRAL_V3_TEKKEN
                                                      : BRISK_CHAT_MISTRAL_V3;
  return BRISK_CHAT_UNKNOWN;
}

brisk_chat_family brisk_chat_detect(const char *t) {
  if (!t) return BRISK_CHAT_UNKNOWN;
  if (has(t, "<|im_start|>") && has(t, "<|im_end|>")) return BRISK_CHAT_CHATML;
  if (has(t, "[INST]")) return detect_inst(t);
  if (has(t, "<start_of_turn>") && has(t, "<end_of_turn>")) return BRISK_CHAT_GEMMA;
  if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>") && has(t, "<|eot_id|>"))
    return BRISK_CHAT_LLAMA3;
  if (has(t, "<|user|>") && has(t, "<|assistant|>") && has(t, "<|end|>")) return BRISK_CHAT_PHI3;
  return BRISK_CHAT_UNKNOWN;
}
