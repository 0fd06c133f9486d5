/* Seeds for fuzz_tools: each family's call text, a tools array and a
 * conversation with a call and its result. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const char *outputs[] = {
    "Sure.\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "{\"name\": \"get\", \"parameters\": {\"city\": \"Paris\", \"n\": 2}}",
    "[TOOL_CALLS][{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}]",
    "<tool_call>\n{\"name\": 1}\n</tool_call> plain text [TOOL_CALLS][",
};

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get\", \"description\": \"Weather\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
    "\"maxLength\": 20}, \"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}}, "
    "\"required\": [\"city\"]}}}]";

int fuzz_write_seeds(const char *dir) {
  int bad = 0;
  for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
    char buf[4096];
    size_t k = 0;
    const char *parts[] = {outputs[i],
                           TOOLS,
                           "s",
                           "You are terse.",
                           "u",
                           "Weather in Paris?",
                           "c",
                           "[{\"id\": \"abcdefghi\", \"type\": \"function\", "
                           "\"function\": {\"name\": \"get\", \"arguments\": "
                           "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]",
                           "t",
                           "{\"temp\": 3}",
                           "u",
                           "Thanks"};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
      size_t l = strlen(parts[p]);
      memcpy(buf + k, parts[p], l);
      k += l;
      if (p + 1 < sizeof parts / sizeof parts[0]) buf[k++] = 0;
    }
    char name[32];
    snprintf(name, sizeof name, "tools-%zu", i);
    bad |= fuzz_seed_save(dir, name, buf, k);
  }
  return bad;
}
