#include "cli.h"

#include <stdarg.h>
#include <string.h>

int cli_fail(const char *cmd, const char *fmt, ...) {
  fprintf(stderr, "brisk %s: ", cmd);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 1;
}

void cli_json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    default:
      if (*p < 0x20) fprintf(out, "\\u%04x", *p);
      else fputc(*p, out);
    }
  }
  fputc('"', out);
}

bool cli_has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], flag) == 0) return true;
  return false;
}
