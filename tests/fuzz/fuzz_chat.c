/* Fuzz target for chat templates: template recognition over arbitrary text,
 * and rendering arbitrary conversations in every family. Input: a byte whose
 * bit 0 asks for the assistant prefix, then fields separated by 0x00: the
 * first is a template text to recognize, the others alternate role and
 * content (a role byte 's', 'u', 'a' or anything else). Rendering must
 * succeed or refuse with a message; its text is at most the input's bytes
 * plus 64 per message plus 64; the measuring call (capacity 0) and the
 * writing call agree; a short buffer gets a NUL-terminated prefix. */
#include "fuzz_target.h"

#include "chat/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_chat: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

enum { MAX_MSG = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int prefix = data[0] & 1;
  /* A NUL-terminated copy, so every field is a C string. */
  char *buf = malloc(size);
  memcpy(buf, data + 1, size - 1);
  buf[size - 1] = 0;
  const char *fields[2 * MAX_MSG + 1] = {buf};
  size_t n_fields = 1, input = 0;
  for (char *p = buf + strlen(buf) + 1; p <= buf + size - 1 && n_fields < 2 * MAX_MSG + 1;) {
    fields[n_fields++] = p;
    p += strlen(p) + 1;
  }
  brisk_chat_family f = brisk_chat_detect(fields[0]);
  CHECK(f == BRISK_CHAT_UNKNOWN || brisk_chat_family_name(f) != NULL);
  brisk_chat_message msgs[MAX_MSG];
  size_t n = 0;
  for (size_t i = 1; i + 1 < n_fields; i += 2, n++) {
    char r = fields[i][0];
    msgs[n].role = r == 's' ? "system" : r == 'u' ? "user" : r == 'a' ? "assistant" : fields[i];
    msgs[n].content = fields[i + 1];
    input += strlen(msgs[n].role) + strlen(msgs[n].content);
  }
  for (int fam = 0; fam < BRISK_CHAT_COUNT; fam++) {
    size_t len = 0;
    brisk_status st = brisk_chat_render((brisk_chat_family)fam, msgs, n, prefix, NULL, 0, &len);
    if (st == BRISK_E_INVALID_ARGUMENT) continue;
    CHECK(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL);
    CHECK(len <= input + 64 * n + 64);
    char *out = malloc(len + 1);
    size_t len2 = 0;
    CHECK(brisk_chat_render((brisk_chat_family)fam, msgs, n, prefix, out, len + 1, &len2) ==
          BRISK_OK);
    CHECK(len2 == len && out[len] == 0);
    if (len > 0) {
      size_t half = len / 2 + 1;
      CHECK(brisk_chat_render((brisk_chat_family)fam, msgs, n, prefix, out, half, &len2) ==
            BRISK_E_BUFFER_TOO_SMALL);
      CHECK(len2 == len && out[half - 1] == 0);
    }
    free(out);
  }
  free(buf);
  return 0;
}
