/* Each family's format written out in C, following its reference template
 * (see brisk.h, "Chat templates"). Output goes through a bounded writer that
 * keeps counting past the end of the buffer, so one pass both fills the
 * buffer and measures the text. */
#include "chat/chat.h"
#include "core/error.h"

#include <stdint.h>
#include <string.h>

typedef enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_BAD } role_id;

typedef struct out {
  char *buf; // [cap]
  size_t cap;
  size_t len; /* bytes of the whole text so far, written or not */
  int overflow;
} out;

static void put_n(out *o, const char *s, size_t n) {
  if (n > SIZE_MAX - o->len) {
    o->overflow = 1;
    return;
  }
  if (o->len < o->cap) {
    size_t room = o->cap - o->len;
    memcpy(o->buf + o->len, s, n < room ? n : room);
  }
  o->len += n;
}

static void put(out *o, const char *s) { put_n(o, s, strlen(s)); }

/* Python's str.strip() as the references' trim/strip use it, limited to
 * ASCII whitespace. */
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void put_trimmed(out *o, const char *s, int left, int right) {
  const char *e = s + strlen(s);
  if (left)
    while (s < e && is_space(*s)) s++;
  if (right)
    while (e > s && is_space(e[-1])) e--;
  put_n(o, s, (size_t)(e - s));
}

static role_id role_of(const char *r) {
  if (!r) return ROLE_BAD;
  if (!strcmp(r, "system")) return ROLE_SYSTEM;
  if (!strcmp(r, "user")) return ROLE_USER;
  if (!strcmp(r, "assistant")) return ROLE_ASSISTANT;
  return ROLE_BAD;
}

static int system_only_first(brisk_chat_family f) {
  return f == BRISK_CHAT_LLAMA2 || f == BRISK_CHAT_MISTRAL_V1 || f == BRISK_CHAT_MISTRAL_V3 ||
         f == BRISK_CHAT_MISTRAL_V3_TEKKEN || f == BRISK_CHAT_GEMMA;
}

static brisk_status validate(brisk_chat_family f, const brisk_chat_message *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    role_id r = role_of(m[i].role);
    if (r == ROLE_BAD)
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "chat message %zu: role '%s' is not \"system\", \"user\" or \"assistant\"",
                         i, m[i].role ? m[i].role : "(null)");
    if (!m[i].content)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "chat message %zu (%s): content is NULL", i,
                         m[i].role);
    if (r == ROLE_SYSTEM && i > 0 && system_only_first(f))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "chat message %zu: the %s template accepts a system message only as "
                         "the first message",
                         i, brisk_chat_family_name(f));
  }
  return BRISK_OK;
}

/* A leading system message, which some families fold into a user turn. */
static const char *leading_system(const brisk_chat_message *m, size_t n) {
  return n > 0 && role_of(m[0].role) == ROLE_SYSTEM ? m[0].content : NULL;
}

static void chatml(out *o, const brisk_chat_message *m, size_t n, int gen) {
  for (size_t i = 0; i < n; i++) {
    put(o, "<|im_start|>");
    put(o, m[i].role);
    put(o, "\n");
    put(o, m[i].content);
    put(o, "<|im_end|>\n");
  }
  if (gen) put(o, "<|im_start|>assistant\n");
}

/* Llama 2 chat: every user turn is BOS + "[INST] " + strip(content) +
 * " [/INST]" (the first BOS is left to the tokenizer); the system prompt is
 * wrapped in <<SYS>> and prepended to the first turn before stripping. */
static void llama2(out *o, const brisk_chat_message *m, size_t n) {
  const char *sys = leading_system(m, n);
  size_t start = sys ? 1 : 0;
  for (size_t i = start; i < n; i++) {
    int user = role_of(m[i].role) == ROLE_USER;
    if (user)
      put(o, i > start ? "<s>[INST] " : "[INST] ");
    else
      put(o, " ");
    if (i == start && sys) {
      /* strip() of "<<SYS>>...\n\n" + content: only content's right end, or
       * the block's own trailing newlines when content is blank. */
      put(o, "<<SYS>>\n");
      put(o, sys);
      put(o, "\n<</SYS>>");
      const char *c = m[i].content;
      while (is_space(*c)) c++;
      if (*c) {
        put(o, "\n\n");
        put_trimmed(o, m[i].content, 0, 1);
      }
    } else {
      put_trimmed(o, m[i].content, 1, 1);
    }
    put(o, user ? " [/INST]" : " </s>");
  }
}

static void llama3(out *o, const brisk_chat_message *m, size_t n, int gen) {
  for (size_t i = 0; i < n; i++) {
    put(o, "<|start_header_id|>");
    put(o, m[i].role);
    put(o, "<|end_header_id|>\n\n");
    put_trimmed(o, m[i].content, 1, 1);
    put(o, "<|eot_id|>");
  }
  if (gen) put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Mistral v1/v3/v3-tekken: the system prompt joins a user turn with a blank
 * line: the first one in v1, the last message (if a user turn) in v3. */
static void mistral_v1_v3(out *o, brisk_chat_family f, const brisk_chat_message *m, size_t n) {
  const char *sys = leading_system(m, n);
  size_t start = sys ? 1 : 0;
  int v1 = f == BRISK_CHAT_MISTRAL_V1, tekken = f == BRISK_CHAT_MISTRAL_V3_TEKKEN;
  for (size_t i = start; i < n; i++) {
    if (role_of(m[i].role) == ROLE_USER) {
      put(o, v1 ? " [INST] " : tekken ? "[INST]" : "[INST] ");
      if (sys && (v1 ? i == start : i + 1 == n)) {
        put(o, sys);
        put(o, "\n\n");
      }
      put(o, m[i].content);
      put(o, v1 ? " [/INST]" : "[/INST]");
    } else {
      if (!tekken) put(o, " ");
      put_trimmed(o, m[i].content, !v1 && !tekken, !v1 && !tekken);
      put(o, "</s>");
    }
  }
}

static void mistral_v7(out *o, brisk_chat_family f, const brisk_chat_message *m, size_t n) {
  const char *sp = f == BRISK_CHAT_MISTRAL_V7 ? " " : "";
  for (size_t i = 0; i < n; i++) {
    role_id r = role_of(m[i].role);
    put(o, r == ROLE_SYSTEM ? "[SYSTEM_PROMPT]" : r == ROLE_USER ? "[INST]" : "");
    put(o, sp);
    put(o, m[i].content);
    put(o, r == ROLE_SYSTEM ? "[/SYSTEM_PROMPT]" : r == ROLE_USER ? "[/INST]" : "</s>");
  }
}

/* Gemma: the assistant is "model"; a system prompt (Gemma 3's reference)
 * goes in front of the first turn's trimmed content, untrimmed. */
static void gemma(out *o, const brisk_chat_message *m, size_t n, int gen) {
  const char *sys = leading_system(m, n);
  size_t start = sys ? 1 : 0;
  for (size_t i = start; i < n; i++) {
    put(o, role_of(m[i].role) == ROLE_USER ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
    if (sys && i == start) {
      put(o, sys);
      put(o, "\n\n");
    }
    put_trimmed(o, m[i].content, 1, 1);
    put(o, "<end_of_turn>\n");
  }
  if (gen) put(o, "<start_of_turn>model\n");
}

static void phi3(out *o, const brisk_chat_message *m, size_t n, int gen) {
  for (size_t i = 0; i < n; i++) {
    put(o, "<|");
    put(o, m[i].role);
    put(o, "|>\n");
    put(o, m[i].content);
    put(o, "<|end|>\n");
  }
  if (gen) put(o, "<|assistant|>\n");
}

brisk_status brisk_chat_render(brisk_chat_family f, const brisk_chat_message *m, size_t n, int gen,
                               char *buf, size_t capacity, size_t *len) {
  if (!brisk_chat_family_name(f))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "chat template family %d is unknown", (int)f);
  brisk_status st = validate(f, m, n);
  if (st != BRISK_OK) return st;
  out o = {buf, capacity, 0, 0};
  switch (f) {
  case BRISK_CHAT_CHATML: chatml(&o, m, n, gen); break;
  case BRISK_CHAT_LLAMA2: llama2(&o, m, n); break;
  case BRISK_CHAT_LLAMA3: llama3(&o, m, n, gen); break;
  case BRISK_CHAT_MISTRAL_V1:
  case BRISK_CHAT_MISTRAL_V3:
  case BRISK_CHAT_MISTRAL_V3_TEKKEN: mistral_v1_v3(&o, f, m, n); break;
  case BRISK_CHAT_MISTRAL_V7:
  case BRISK_CHAT_MISTRAL_V7_TEKKEN: mistral_v7(&o, f, m, n); break;
  case BRISK_CHAT_GEMMA: gemma(&o, m, n, gen); break;
  case BRISK_CHAT_PHI3: phi3(&o, m, n, gen); break;
  default: return brisk_error(BRISK_E_INTERNAL, "chat family %d has no renderer", (int)f);
  }
  if (o.overflow)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "chat messages: total length overflows size_t");
  if (len) *len = o.len;
  if (o.len < capacity) {
    buf[o.len] = 0;
    return BRISK_OK;
  }
  if (capacity > 0) buf[capacity - 1] = 0;
  return brisk_error(BRISK_E_BUFFER_TOO_SMALL,
                     "chat text needs %zu bytes plus the NUL; the buffer holds %zu", o.len,
                     capacity);
}
