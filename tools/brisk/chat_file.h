/* brisk run --chat --save FILE / --load FILE: a conversation on disk, its
 * messages (to render later turns with the chat template) and the snapshot
 * of its KV cache (so that a resumed chat prefills nothing it had):
 *
 *   "brisk-chat 1\n"
 *   then records "ROLE LEN\n" + LEN bytes + "\n", ROLE system, user or
 *   assistant, in conversation order (system at most once, first),
 *   and last "snapshot LEN\n" + LEN bytes (brisk_seq_export's format).
 *
 * LEN is decimal, at most 2^40. */
#ifndef BRISK_TOOLS_CHAT_FILE_H
#define BRISK_TOOLS_CHAT_FILE_H

#include "brisk.h"

#include <stddef.h>

typedef struct chat_file {
  char *system;             /* NULL: none */
  brisk_chat_message *msgs; /* roles are static strings; contents malloc'ed */
  size_t n_msgs;
  const unsigned char *snapshot; /* into the parsed buffer */
  size_t snapshot_len;
} chat_file;

/* Parses data[0, n); NULL on success, else what is wrong (static text). On
 * success free with chat_file_free; the snapshot points into data. */
const char *chat_file_parse(const unsigned char *data, size_t n, chat_file *out);
void chat_file_free(chat_file *f);

/* Writes the conversation and sequence seq's snapshot to path; NULL or what
 * failed (a library message or static text). */
const char *chat_file_save(const char *path, const char *system, const brisk_chat_message *msgs,
                           size_t n_msgs, brisk_context *ctx, int32_t seq);

#endif
