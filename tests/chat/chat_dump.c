/* Prints brisk_chat_apply's text for a model and a conversation given as
 * role/content argument pairs, for the jinja2 cross-check (jinja_check.py).
 *   chat_dump MODEL GEN(0|1) ROLE CONTENT [ROLE CONTENT ...] */
#include "brisk.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3 || (argc - 3) % 2) return 2;
  brisk_model_params p;
  brisk_model_params_init(&p);
  p.vocab_only = 1;
  brisk_model *m = NULL;
  if (brisk_model_load(argv[1], &p, &m) != BRISK_OK) return 1;
  size_t n = (size_t)(argc - 3) / 2, len = 0;
  brisk_chat_message msgs[16]; // [n]
  if (n > 16) return 2;
  for (size_t i = 0; i < n; i++) msgs[i] = (brisk_chat_message){argv[3 + 2 * i], argv[4 + 2 * i]};
  static char buf[1 << 16];
  if (brisk_chat_apply(m, NULL, msgs, n, atoi(argv[2]), buf, sizeof buf, &len) != BRISK_OK) {
    fprintf(stderr, "chat_dump: %s\n", brisk_last_error());
    return 1;
  }
  fwrite(buf, 1, len, stdout);
  brisk_model_free(m);
  return 0;
}
