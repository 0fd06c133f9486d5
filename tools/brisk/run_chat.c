#include "run_chat.h"
#include "chat_file.h"
#include "cli.h"
#include "line_edit.h"

#include <stdlib.h>
#include <string.h>

typedef struct chat {
  runner *r;
  const chat_opts *o;
  brisk_chat_message *msgs; /* contents owned (strdup'ed) */
  size_t n, cap;
  char *system;
  bool tty;
} chat;

static const char help_text[] =
    "  /help            this list\n"
    "  /bye             leave (also /exit, /quit, Ctrl-D, or Ctrl-C twice)\n"
    "  /clear           forget the conversation (the system message stays; also /reset)\n"
    "  /system TEXT     set the system message (empty: none)\n"
    "  a line ending in \\ continues on the next; \"\"\" starts and ends a block of lines\n"
    "  Ctrl-C stops a reply; arrow keys edit the line and recall earlier ones\n";

static bool push(chat *c, const char *role, const char *content) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    brisk_chat_message *m = realloc(c->msgs, cap * sizeof *m);
    if (!m) return false;
    c->msgs = m;
    c->cap = cap;
  }
  char *copy = strdup(content);
  if (!copy) return false;
  c->msgs[c->n++] = (brisk_chat_message){role, copy};
  return true;
}

static void clear_turns(chat *c) {
  for (size_t i = 0; i < c->n; i++) free((char *)c->msgs[i].content);
  c->n = 0;
}

/* The prompt of the whole conversation so far, system message first. */
static brisk_status render(chat *c, char **out) {
  brisk_chat_message *all = malloc((c->n + 1) * sizeof *all);
  if (!all) return BRISK_E_OUT_OF_MEMORY;
  size_t n = 0;
  if (c->system) all[n++] = (brisk_chat_message){"system", c->system};
  memcpy(all + n, c->msgs, c->n * sizeof *all);
  n += c->n;
  size_t len = 0;
  brisk_status st = brisk_chat_apply(c->r->m, c->o->tmpl, all, n, 1, NULL, 0, &len);
  if (st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_OK) {
    *out = malloc(len + 1);
    st = *out ? brisk_chat_apply(c->r->m, c->o->tmpl, all, n, 1, *out, len + 1, &len)
              : BRISK_E_OUT_OF_MEMORY;
  }
  free(all);
  return st;
}

/* One user turn: render, prefill what is new, stream the reply. Returns 0,
 * or 1 after a library error (printed). */
static int turn(chat *c, const char *text) {
  runner *r = c->r;
  if (!push(c, "user", text)) return cli_fail("run", "out of memory");
  char *prompt = NULL, *reply = NULL;
  int32_t *toks = NULL, n = 0;
  size_t reply_len = 0;
  brisk_status st = render(c, &prompt);
  if (!st)
    st = run_tokenize(r->m, prompt, BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL,
                      &toks, &n);
  if (!st && n + 1 > r->cap_kv) {
    fprintf(stderr,
            "the conversation (%d tokens) no longer fits the context (%d tokens); "
            "/clear starts over\n",
            n, r->cap_kv);
    free((char *)c->msgs[--c->n].content);
    free(prompt);
    free(toks);
    return 0;
  }
  if (!st) st = run_sync_prompt(r, toks, n);
  if (!st) st = run_generate(r, c->o->n_gen, stdout, &reply, &reply_len);
  free(prompt);
  free(toks);
  if (st == BRISK_E_CANCELLED) st = BRISK_OK;
  if (st) {
    free(reply);
    return cli_fail("run", "%s", brisk_last_error());
  }
  if (r->n_kv >= r->cap_kv)
    fprintf(stderr, "\n[the context of %d tokens is full; /clear starts over]", r->cap_kv);
  /* A stopped reply stays in the conversation as far as it got. */
  bool ok = push(c, "assistant", reply ? reply : "");
  free(reply);
  fputc('\n', stdout);
  fflush(stdout);
  return ok ? 0 : cli_fail("run", "out of memory");
}

/* Handles a /command; returns false to leave the chat. */
static bool command(chat *c, const char *line) {
  const char *arg = line + strcspn(line, " \t");
  size_t name_len = (size_t)(arg - line);
  while (*arg == ' ' || *arg == '\t') arg++;
#define IS(s) (name_len == strlen(s) && !strncmp(line, s, name_len))
  if (IS("/bye") || IS("/exit") || IS("/quit")) return false;
  if (IS("/help") || IS("/?"))
    fputs(help_text, stdout);
  else if (IS("/clear") || IS("/reset")) {
    clear_turns(c);
    fputs("(conversation cleared)\n", stdout);
  } else if (IS("/system")) {
    free(c->system);
    c->system = *arg ? strdup(arg) : NULL;
    fputs(*arg ? "(system message set)\n" : "(system message removed)\n", stdout);
  } else
    printf("unknown command %.*s (/help lists them)\n", (int)name_len, line);
#undef IS
  fflush(stdout);
  return true;
}

/* Resumes a saved conversation: its messages, and its KV cache restored
 * into sequence 0 (so nothing it held is prefilled again). 0 or 1 (printed). */
static int load(chat *c, const char *path) {
  runner *r = c->r;
  FILE *f = fopen(path, "rb");
  if (!f) return cli_fail("run", "cannot read '%s'", path);
  unsigned char *data = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap && !(data = realloc(data, cap = cap ? 2 * cap : 1 << 16))) break;
    size_t got = fread(data + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  fclose(f);
  if (!data) return cli_fail("run", "out of memory");
  chat_file cf;
  const char *err = chat_file_parse(data, n, &cf);
  if (err) {
    free(data);
    return cli_fail("run", "%s: %s", path, err);
  }
  /* The snapshot's token ids (docs/snapshots.md: the count at byte 40, the
   * ids from byte 64) are what sequence 0 holds once it is restored. */
  const unsigned char *s = cf.snapshot;
  uint32_t nt = cf.snapshot_len >= 64 ? (uint32_t)s[40] | (uint32_t)s[41] << 8 |
                                            (uint32_t)s[42] << 16 | (uint32_t)s[43] << 24
                                      : 0;
  int rc = 0;
  if (nt > (uint32_t)r->cap_kv) {
    rc = cli_fail("run", "%s: the conversation (%u tokens) does not fit the context of %d tokens",
                  path, nt, r->cap_kv);
  } else if (brisk_seq_import(r->ctx, 0, cf.snapshot, cf.snapshot_len)) {
    rc = cli_fail("run", "%s: %s", path, brisk_last_error());
  } else {
    for (uint32_t i = 0; i < nt; i++)
      r->kv_tokens[i] = (int32_t)((uint32_t)s[64 + 4 * i] | (uint32_t)s[65 + 4 * i] << 8 |
                                  (uint32_t)s[66 + 4 * i] << 16 | (uint32_t)s[67 + 4 * i] << 24);
    r->n_kv = (int32_t)nt;
    if (cf.system) {
      free(c->system);
      c->system = cf.system, cf.system = NULL;
    }
    for (size_t i = 0; i < cf.n_msgs && !rc; i++)
      if (!push(c, cf.msgs[i].role, cf.msgs[i].content)) rc = cli_fail("run", "out of memory");
    if (!rc)
      fprintf(stderr, "(resumed %zu messages, %u tokens of KV cache, from %s)\n", cf.n_msgs, nt,
              path);
  }
  chat_file_free(&cf);
  free(data);
  return rc;
}

/* Appends s and a newline to the growing text *t. */
static bool append(char **t, size_t *len, const char *s, size_t n) {
  char *g = realloc(*t, *len + n + 2);
  if (!g) return false;
  memcpy(g + *len, s, n);
  *len += n;
  g[(*len)++] = '\n';
  g[*len] = 0;
  *t = g;
  return true;
}

int run_chat(runner *r, const chat_opts *o) {
  chat c = {.r = r, .o = o};
  if (o->system) c.system = strdup(o->system);
  line_reader *lr = line_reader_open();
  if (!lr) return cli_fail("run", "out of memory");
  c.tty = line_reader_interactive(lr);
  if (c.tty) fputs("chat: /help lists the commands, /bye leaves\n", stdout);
  run_catch_interrupt();
  int rc = o->load ? load(&c, o->load) : 0, ctrl_c = 0;
  if (!rc && o->first) {
    if (c.tty) printf("> %s\n", o->first);
    rc = turn(&c, o->first);
    if (run_interrupt) ctrl_c = 1, run_interrupt = 0;
  }
  char *text = NULL; /* the turn being typed, over several lines */
  size_t text_len = 0;
  bool block = false;
  while (!rc) {
    const char *line;
    /* A Ctrl-C that came between two reads (right after the message below,
     * say) counts as one at the prompt, not as nothing. */
    line_status ls =
        run_interrupt ? LINE_INTERRUPT : line_reader_get(lr, text ? "... " : "> ", &line);
    if (ls == LINE_INTERRUPT) {
      run_interrupt = 0;
      free(text);
      text = NULL, text_len = 0, block = false;
      if (ctrl_c++) break;
      fputs("(Ctrl-C again, Ctrl-D or /bye to leave)\n", stdout);
      fflush(stdout);
      continue;
    }
    if (ls == LINE_EOF) break;
    ctrl_c = 0;
    size_t len = strlen(line);
    if (!text && !line[0]) continue;
    line_reader_history_add(lr, line);
    if (!text && line[0] == '/') {
      if (!command(&c, line)) break;
      continue;
    }
    /* Multi-line input: """ ... """ or lines ending in a backslash. */
    bool more = false;
    if (!text && len >= 3 && !strncmp(line, "\"\"\"", 3)) {
      block = true;
      line += 3, len -= 3;
      if (!(text = calloc(1, 1))) {
        rc = cli_fail("run", "out of memory");
        break;
      }
      more = !(len >= 3 && !strcmp(line + len - 3, "\"\"\""));
      if (!more) len -= 3, block = false;
    } else if (block) {
      more = !(len >= 3 && !strcmp(line + len - 3, "\"\"\""));
      if (!more) len -= 3, block = false;
    } else if (len && line[len - 1] == '\\') {
      more = true;
      len--;
    }
    if ((len || text_len) && !append(&text, &text_len, line, len)) {
      rc = cli_fail("run", "out of memory");
      break;
    }
    if (more || !text) continue;
    if (text_len) text[--text_len] = 0; /* the last newline */
    if (text_len) rc = turn(&c, text);
    if (run_interrupt) ctrl_c = 1, run_interrupt = 0;
    free(text);
    text = NULL, text_len = 0;
  }
  free(text);
  if (!rc && o->save && r->n_kv > 0) {
    const char *err = chat_file_save(o->save, c.system, c.msgs, c.n, r->ctx, 0);
    if (err)
      rc = cli_fail("run", "cannot save the chat to '%s': %s", o->save, err);
    else if (c.tty)
      printf("(conversation saved to %s)\n", o->save);
  }
  clear_turns(&c);
  free(c.msgs);
  free(c.system);
  line_reader_close(lr);
  signal(SIGINT, SIG_DFL);
  return rc;
}
