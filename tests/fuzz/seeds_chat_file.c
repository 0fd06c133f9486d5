/* Seeds for fuzz_chat_file: saved chats with and without a system message,
 * empty and multi-line messages, and an empty snapshot record. */
#include "fuzz_seeds.h"

#include <string.h>

int fuzz_write_seeds(const char *dir) {
  static const char *const files[] = {
      "brisk-chat 1\nsystem 6\nBe kind\nuser 5\nHello\nassistant 3\nHi!\nsnapshot 4\nBRIS",
      "brisk-chat 1\nuser 0\n\nassistant 7\ntwo\nlin\nsnapshot 0\n",
      "brisk-chat 1\nsnapshot 8\nBRISKSEQ",
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char name[16] = "chat-0";
    name[5] = (char)('0' + i);
    bad |= fuzz_seed_save(dir, name, files[i], strlen(files[i]));
  }
  return bad;
}
