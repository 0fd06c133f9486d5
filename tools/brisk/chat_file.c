/* The saved-chat file of brisk run --chat (chat_file.h). */
#include "chat_file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAT_MAGIC "brisk-chat 1\n"
#define MAX_LEN ((uint64_t)1 << 40)

void chat_file_free(chat_file *f) {
  free(f->system);
  for (size_t i = 0; i < f->n_msgs; i++) free((char *)f->msgs[i].content);
  free(f->msgs);
  memset(f, 0, sizeof *f);
}

/* "NAME LEN\n" at *at: the name (into name, NUL-terminated) and LEN. */
static const char *record(const unsigned char *d, size_t n, size_t *at, char name[16],
                          uint64_t *len) {
  size_t i = *at, k = 0;
  while (i < n && d[i] != ' ' && k < 15) name[k++] = (char)d[i++];
  name[k] = 0;
  if (i >= n || d[i] != ' ' || k == 0) return "a record does not start with 'NAME LEN'";
  i++;
  uint64_t v = 0;
  size_t digits = 0;
  while (i < n && d[i] >= '0' && d[i] <= '9' && digits < 14) v = v * 10 + (d[i++] - '0'), digits++;
  if (digits == 0 || i >= n || d[i] != '\n' || v > MAX_LEN)
    return "a record's length is not a number";
  *at = i + 1;
  *len = v;
  return NULL;
}

const char *chat_file_parse(const unsigned char *d, size_t n, chat_file *out) {
  memset(out, 0, sizeof *out);
  size_t at = strlen(CHAT_MAGIC);
  if (n < at || memcmp(d, CHAT_MAGIC, at)) return "not a brisk chat file (version 1)";
  size_t cap = 0;
  const char *err = NULL;
  for (;;) {
    char name[16];
    uint64_t len;
    if ((err = record(d, n, &at, name, &len))) break;
    if (len > n - at) {
      err = "a record runs past the end of the file";
      break;
    }
    if (!strcmp(name, "snapshot")) {
      if (at + len != n) err = "bytes follow the snapshot";
      out->snapshot = d + at, out->snapshot_len = (size_t)len;
      break;
    }
    const char *role = !strcmp(name, "system")      ? "system"
                       : !strcmp(name, "user")      ? "user"
                       : !strcmp(name, "assistant") ? "assistant"
                                                    : NULL;
    if (!role) {
      err = "a record is neither system, user, assistant nor snapshot";
      break;
    }
    if (role[0] == 's' && (out->system || out->n_msgs)) {
      err = "the system message is not the first record";
      break;
    }
    if (len + at >= n || d[at + len] != '\n') {
      err = "a message does not end with a newline";
      break;
    }
    if (memchr(d + at, 0, (size_t)len)) {
      err = "a message holds a NUL byte";
      break;
    }
    char *text = malloc((size_t)len + 1);
    if (!text) {
      err = "out of memory";
      break;
    }
    memcpy(text, d + at, (size_t)len);
    text[len] = 0;
    at += (size_t)len + 1;
    if (role[0] == 's') {
      out->system = text;
      continue;
    }
    if (out->n_msgs == cap) {
      cap = cap ? 2 * cap : 8;
      brisk_chat_message *m = realloc(out->msgs, cap * sizeof *m);
      if (!m) {
        free(text);
        err = "out of memory";
        break;
      }
      out->msgs = m;
    }
    out->msgs[out->n_msgs++] = (brisk_chat_message){role, text};
  }
  if (err) chat_file_free(out);
  return err;
}

static int file_write(void *u, const void *data, size_t n) {
  return fwrite(data, 1, n, (FILE *)u) != n;
}

const char *chat_file_save(const char *path, const char *system, const brisk_chat_message *msgs,
                           size_t n_msgs, brisk_context *ctx, int32_t seq) {
  size_t snap = 0;
  brisk_status st = brisk_seq_export(ctx, seq, NULL, 0, &snap);
  if (st != BRISK_E_BUFFER_TOO_SMALL) return brisk_last_error();
  FILE *f = fopen(path, "wb");
  if (!f) return "cannot open the file for writing";
  int bad = fputs(CHAT_MAGIC, f) < 0;
  if (system) bad |= fprintf(f, "system %zu\n%s\n", strlen(system), system) < 0;
  for (size_t i = 0; i < n_msgs && !bad; i++)
    bad |= fprintf(f, "%s %zu\n%s\n", msgs[i].role, strlen(msgs[i].content), msgs[i].content) < 0;
  bad |= fprintf(f, "snapshot %zu\n", snap) < 0;
  const char *err = NULL;
  if (!bad && brisk_seq_export_to(ctx, seq, file_write, f)) err = brisk_last_error();
  if (fclose(f) || bad) err = err ? err : "cannot write the file";
  if (err) remove(path);
  return err;
}
