#include "line_edit.h"
#include "run_gen.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#ifdef BRISK_HAVE_LIBEDIT
#  include <histedit.h>
#endif

struct line_reader {
#ifdef BRISK_HAVE_LIBEDIT
  EditLine *el;
  History *hist;
#endif
  const char *prompt;
  char *buf; /* the current line (plain reads, or a copy of libedit's) */
  size_t cap;
};

#ifdef BRISK_HAVE_LIBEDIT
/* libedit's character reader, waiting with poll so that a Ctrl-C is seen
 * whenever it comes: one that lands while el_gets is still setting up (before
 * its read blocks) would otherwise leave the read waiting for a key. Bytes
 * are decoded as the locale says, as libedit's own reader does. */
static int read_char(EditLine *el, wchar_t *wc) {
  (void)el;
  mbstate_t st;
  memset(&st, 0, sizeof st);
  for (;;) {
    if (run_interrupt) {
      errno = EINTR;
      return -1;
    }
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    int r = poll(&pfd, 1, 100);
    if (r < 0 && errno != EINTR) return -1;
    if (r <= 0) continue;
    char byte;
    ssize_t n = read(STDIN_FILENO, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? -1 : 0;
    size_t k = mbrtowc(wc, &byte, 1, &st);
    if (k == (size_t)-2) continue; /* more bytes of this character */
    if (k == (size_t)-1) {         /* not valid here: pass the byte on */
      memset(&st, 0, sizeof st);
      *wc = (wchar_t)(unsigned char)byte;
    }
    return 1;
  }
}

static char *prompt_of(EditLine *el) {
  line_reader *lr = NULL;
  el_get(el, EL_CLIENTDATA, &lr);
  return (char *)(lr && lr->prompt ? lr->prompt : "");
}
#endif

line_reader *line_reader_open(void) {
  line_reader *lr = calloc(1, sizeof *lr);
  if (!lr) return NULL;
#ifdef BRISK_HAVE_LIBEDIT
  if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
    lr->el = el_init("brisk", stdin, stdout, stderr);
    lr->hist = history_init();
    if (!lr->el || !lr->hist) {
      if (lr->el) el_end(lr->el);
      if (lr->hist) history_end(lr->hist);
      lr->el = NULL;
      lr->hist = NULL;
    } else {
      HistEvent ev;
      history(lr->hist, &ev, H_SETSIZE, 1000);
      history(lr->hist, &ev, H_SETUNIQUE, 1);
      el_set(lr->el, EL_CLIENTDATA, lr);
      el_set(lr->el, EL_EDITOR, "emacs");
      el_set(lr->el, EL_PROMPT, prompt_of);
      el_set(lr->el, EL_HIST, history, lr->hist);
      /* brisk handles SIGINT itself (run_catch_interrupt). */
      el_set(lr->el, EL_SIGNAL, 0);
      el_set(lr->el, EL_GETCFN, read_char);
    }
  }
#endif
  return lr;
}

bool line_reader_interactive(const line_reader *lr) {
#ifdef BRISK_HAVE_LIBEDIT
  if (lr->el) return true;
#endif
  return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
}

static line_status keep(line_reader *lr, const char *s, size_t n) {
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  if (n + 1 > lr->cap) {
    char *b = realloc(lr->buf, n + 1);
    if (!b) return LINE_EOF;
    lr->buf = b;
    lr->cap = n + 1;
  }
  memmove(lr->buf, s, n);
  lr->buf[n] = 0;
  return LINE_OK;
}

line_status line_reader_get(line_reader *lr, const char *prompt, const char **line) {
  lr->prompt = prompt;
  *line = NULL;
#ifdef BRISK_HAVE_LIBEDIT
  if (lr->el) {
    int count = 0;
    errno = 0;
    const char *s = el_gets(lr->el, &count);
    if (run_interrupt || (!s && count < 0 && errno == EINTR)) {
      /* Ctrl-C: drop the half-typed line, restore the terminal and start
       * the next read afresh. */
      el_reset(lr->el);
      fputc('\n', stdout);
      fflush(stdout);
      return LINE_INTERRUPT;
    }
    if (!s || count <= 0) return LINE_EOF;
    line_status st = keep(lr, s, (size_t)count);
    *line = lr->buf;
    return st;
  }
#endif
  if (line_reader_interactive(lr)) fputs(prompt, stdout), fflush(stdout);
  errno = 0;
  ssize_t n = getline(&lr->buf, &lr->cap, stdin);
  if (n < 0) {
    if (run_interrupt || errno == EINTR) {
      clearerr(stdin);
      fputc('\n', stdout);
      return LINE_INTERRUPT;
    }
    return LINE_EOF;
  }
  line_status st = keep(lr, lr->buf, (size_t)n);
  *line = lr->buf;
  return st;
}

void line_reader_history_add(line_reader *lr, const char *line) {
#ifdef BRISK_HAVE_LIBEDIT
  if (lr->hist && line[0]) {
    HistEvent ev;
    history(lr->hist, &ev, H_ENTER, line);
  }
#else
  (void)lr;
  (void)line;
#endif
}

void line_reader_close(line_reader *lr) {
  if (!lr) return;
#ifdef BRISK_HAVE_LIBEDIT
  if (lr->el) el_end(lr->el);
  if (lr->hist) history_end(lr->hist);
#endif
  free(lr->buf);
  free(lr);
}
