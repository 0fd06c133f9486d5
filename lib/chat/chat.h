/* Chat templates, recognized and never executed: a model's template text is
 * matched against fingerprints of the common families, and each family is
 * rendered by our own code (render.c), so no template engine ever runs text
 * that came from a model file. */
#ifndef BRISK_CHAT_CHAT_H
#define BRISK_CHAT_CHAT_H

#include "brisk.h"

#include <stddef.h>

typedef enum brisk_chat_family {
  BRISK_CHAT_CHATML = 0,
  BRISK_CHAT_LLAMA2 = 1,
  BRISK_CHAT_LLAMA3 = 2,
  BRISK_CHAT_MISTRAL_V1 = 3,
  BRISK_CHAT_MISTRAL_V3 = 4,
  BRISK_CHAT_MISTRAL_V3_TEKKEN = 5,
  BRISK_CHAT_MISTRAL_V7 = 6,
  BRISK_CHAT_MISTRAL_V7_TEKKEN = 7,
  BRISK_CHAT_GEMMA = 8,
  BRISK_CHAT_PHI3 = 9,
  BRISK_CHAT_COUNT = 10,
  BRISK_CHAT_UNKNOWN = -1
} brisk_chat_family;

/* The family's public name ("chatml", ...); NULL outside [0, COUNT). */
const char *brisk_chat_family_name(brisk_chat_family f);

/* The family called `name`, or BRISK_CHAT_UNKNOWN. */
brisk_chat_family brisk_chat_family_by_name(const char *name);

/* The family whose fingerprints `template_text` carries, or
 * BRISK_CHAT_UNKNOWN (also for NULL). */
brisk_chat_family brisk_chat_detect(const char *template_text);

/*
 * Renders messages in family `f` into buf (capacity bytes, NUL-terminated
 * when it fits). *len = the text's length without the NUL.
 * BRISK_E_INVALID_ARGUMENT for a NULL/unknown role or NULL content, or a
 * system message where the family accepts none; BRISK_E_BUFFER_TOO_SMALL
 * when len + 1 > capacity (buf then holds a NUL-terminated prefix if
 * capacity > 0). Allocates nothing.
 */
brisk_status brisk_chat_render(brisk_chat_family f, const brisk_chat_message *messages,
                               size_t n_messages, int add_assistant_prefix, char *buf,
                               size_t capacity, size_t *len);

#endif
