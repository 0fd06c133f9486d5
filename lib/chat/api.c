/* The public chat-template calls: argument checks, choosing the family, and
 * the renderer. */
#include "chat/chat.h"
#include "core/error.h"

#include <string.h>

BRISK_API const char *brisk_chat_template_name(const brisk_model *model) {
  if (!model) return NULL;
  return brisk_chat_family_name(brisk_chat_detect(brisk_model_chat_template(model)));
}

BRISK_API size_t brisk_chat_builtin_templates(const char **names, size_t capacity) {
  for (size_t i = 0; names && i < capacity && i < BRISK_CHAT_COUNT; i++)
    names[i] = brisk_chat_family_name((brisk_chat_family)i);
  return BRISK_CHAT_COUNT;
}

static brisk_status choose_family(const brisk_model *model, const char *name,
                                  brisk_chat_family *f) {
  if (name) {
    *f = brisk_chat_family_by_name(name);
    if (*f == BRISK_CHAT_UNKNOWN)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "chat template name '%s' is unknown (brisk_chat_builtin_templates "
                         "lists the names)",
                         name);
    return BRISK_OK;
  }
  if (!model)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_chat_apply: model and template name "
                                                 "are both NULL");
  const char *text = brisk_model_chat_template(model);
  if (!text)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "the model has no chat template; pass a template name such as \"chatml\"");
  *f = brisk_chat_detect(text);
  if (*f == BRISK_CHAT_UNKNOWN)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "the model's chat template (%zu bytes) is not one of the built-in "
                       "families, and brisk does not execute templates; pass a template name "
                       "(brisk_chat_builtin_templates lists them)",
                       strlen(text));
  return BRISK_OK;
}

BRISK_API brisk_status brisk_chat_apply(const brisk_model *model, const char *template_name,
                                        const brisk_chat_message *messages, size_t n_messages,
                                        int add_assistant_prefix, char *buf, size_t capacity,
                                        size_t *len) {
  if (!messages && n_messages > 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_chat_apply: messages is NULL but "
                       "n_messages is %zu",
                       n_messages);
  if (!buf && capacity > 0)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_chat_apply: buf is NULL but capacity is %zu", capacity);
  brisk_chat_family f;
  brisk_status st = choose_family(model, template_name, &f);
  if (st != BRISK_OK) return st;
  return brisk_chat_render(f, messages, n_messages, add_assistant_prefix, buf, capacity, len);
}
