/* Fuzz target for tool calls in chat: parsing arbitrary model output in
 * every tool family, rendering a conversation with arbitrary tools JSON
 * and messages, and the grammar of calls for arbitrary tools. Input:
 * fields separated by 0x00: the output text, the tools JSON, then
 * alternating role and content (a role byte 's', 'u', 'a', 't', 'c' or
 * anything else). Every call must succeed or refuse with a message; parsed
 * calls are a JSON array; a grammar it returns always compiles. */
#include "fuzz_target.h"

#include "brisk.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_tools: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

enum { MAX_MSG = 16 };

static const char *const FAMILIES[] = {"chatml", "llama3", "mistral-v3", "mistral-v3-tekken"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  memcpy(buf, data, size);
  buf[size] = 0;
  const char *fields[2 * MAX_MSG + 2] = {buf, ""};
  size_t n_fields = 1;
  for (char *p = buf + strlen(buf) + 1; p <= buf + size && n_fields < 2 * MAX_MSG + 2;) {
    fields[n_fields++] = p;
    p += strlen(p) + 1;
  }
  const char *text = fields[0], *tools = n_fields > 1 ? fields[1] : "[]";
  brisk_chat_message msgs[MAX_MSG];
  size_t n = 0;
  for (size_t i = 2; i + 1 < n_fields; i += 2, n++) {
    char r = fields[i][0];
    msgs[n].role = r == 's'   ? "system"
                   : r == 'u' ? "user"
                   : r == 'a' ? "assistant"
                   : r == 't' ? "tool:abcdefghi"
                   : r == 'c' ? "tool_calls"
                              : fields[i];
    msgs[n].content = fields[i + 1];
  }
  for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++) {
    char *calls = NULL, *content = NULL;
    brisk_status st =
        brisk_chat_parse_tool_calls(NULL, FAMILIES[f], text, strlen(text), &calls, &content);
    CHECK(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY);
    if (calls) {
      json_object *o = json_tokener_parse(calls);
      CHECK(o && json_object_is_type(o, json_type_array));
      json_object_put(o);
    }
    brisk_string_free(calls);
    brisk_string_free(content);
    size_t len = 0;
    st = brisk_chat_apply_tools(NULL, FAMILIES[f], msgs, n, tools, 1, NULL, 0, &len);
    CHECK(st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_E_INVALID_ARGUMENT);
    if (st != BRISK_E_INVALID_ARGUMENT) {
      char *out = malloc(len + 1);
      size_t len2 = 0;
      CHECK(brisk_chat_apply_tools(NULL, FAMILIES[f], msgs, n, tools, 1, out, len + 1, &len2) ==
            BRISK_OK);
      CHECK(len2 == len && out[len] == 0);
      free(out);
    }
    char *g = NULL;
    st = brisk_tool_call_grammar(NULL, FAMILIES[f], tools, NULL, &g);
    CHECK(st == BRISK_OK || st == BRISK_E_INVALID_ARGUMENT || st == BRISK_E_OUT_OF_MEMORY);
    if (g) {
      brisk_constraint_params p;
      brisk_constraint_params_init(&p);
      p.kind = BRISK_CONSTRAINT_GBNF;
      p.text = g;
      brisk_grammar *gr = NULL;
      st = brisk_grammar_compile(&p, &gr);
      if (st) fprintf(stderr, "fuzz_tools: %s\n%s\n", brisk_last_error(), g);
      CHECK(st == BRISK_OK || st == BRISK_E_OUT_OF_MEMORY);
      brisk_grammar_free(gr);
      brisk_string_free(g);
    }
  }
  free(buf);
  return 0;
}
