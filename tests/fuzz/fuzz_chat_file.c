/* Fuzz target for the saved-chat file of brisk run --chat --load
 * (tools/brisk/chat_file.c): arbitrary bytes. Invariants: a parse either
 * fails with a reason and owns nothing, or gives messages whose roles are
 * user/assistant, whose contents are NUL-terminated copies, and a snapshot
 * that lies inside the input and ends it. */
#include "fuzz_target.h"

#include "../../tools/brisk/chat_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_chat_file: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  chat_file f;
  const char *err = chat_file_parse(data, size, &f);
  if (err) {
    CHECK(err[0] != 0);
    CHECK(f.msgs == NULL && f.system == NULL && f.n_msgs == 0);
    return 0;
  }
  CHECK(f.snapshot >= data && f.snapshot + f.snapshot_len == data + size);
  for (size_t i = 0; i < f.n_msgs; i++) {
    CHECK(!strcmp(f.msgs[i].role, "user") || !strcmp(f.msgs[i].role, "assistant"));
    CHECK(strlen(f.msgs[i].content) < size);
  }
  if (f.system) CHECK(strlen(f.system) < size);
  chat_file_free(&f);
  return 0;
}
