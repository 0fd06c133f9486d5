/* Seeds for fuzz_chat: real template fingerprints, each followed by a
 * system / user / assistant / user conversation. */
#include "fuzz_seeds.h"

#include <stdio.h>
#include <string.h>

static const char *templates[] = {
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' "
    "+ message['content'] + ' [/INST]' }}{% endif %}{% endfor %}",
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% endfor %}",
    "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\\n"
    "{{ message['content'] | trim }}<end_of_turn>\\n{% endfor %}",
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] "
    "+ '<|end|>\\n' }}{% endfor %}",
    "<<SYS>>[INST][/INST]",
};

int fuzz_write_seeds(const char *dir) {
  int bad = 0;
  for (size_t i = 0; i < sizeof templates / sizeof templates[0]; i++) {
    char buf[4096];
    size_t k = 0;
    buf[k++] = (char)(i & 1);
    const char *parts[] = {templates[i], "s", "You are terse.", "u", "Hi there", "a",
                           "  Hello!  ", "u", "What is 2+2?"};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
      size_t l = strlen(parts[p]);
      memcpy(buf + k, parts[p], l);
      k += l;
      if (p + 1 < sizeof parts / sizeof parts[0]) buf[k++] = 0;
    }
    char name[32];
    snprintf(name, sizeof name, "conversation-%zu", i);
    bad |= fuzz_seed_save(dir, name, buf, k);
  }
  return bad;
}
