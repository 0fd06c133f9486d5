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

size_t cli_utf8_char(const unsigned char *p, size_t n, bool *valid) {
  *valid = false;
  if (!n) return 0;
  unsigned c = p[0];
  if (c < 0x80) return *valid = true, 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0; /* no overlong forms */
    if (c == 0xed) hi = 0x9f; /* no UTF-16 surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f; /* nothing above U+10FFFF */
  } else
    return 1;
  /* An invalid sequence is replaced as its maximal subpart (Unicode 3.9,
   * U+FFFD substitution): the lead byte and the continuation bytes that
   * were right so far count as one. */
  size_t k = 1;
  if (k < n && p[k] >= lo && p[k] <= hi)
    k++;
  else
    return 1;
  while (k < len && k < n && (p[k] & 0xc0) == 0x80) k++;
  *valid = k == len;
  return k;
}

void cli_json_bytes(FILE *out, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  fputc('"', out);
  while (p < end) {
    bool valid;
    size_t k = cli_utf8_char(p, (size_t)(end - p), &valid);
    if (!valid) {
      /* Not UTF-8 on its own (e.g. half of a character in a byte-level
       * token): the replacement character keeps the output valid JSON. */
      fputs("\\ufffd", out);
      p += k;
      continue;
    }
    if (k > 1) {
      fwrite(p, 1, k, out);
      p += k;
      continue;
    }
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        fprintf(out, "\\u%04x", *p);
      else
        fputc(*p, out);
    }
    p++;
  }
  fputc('"', out);
}

void cli_json_string(FILE *out, const char *s) { cli_json_bytes(out, s, strlen(s)); }

bool cli_has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], flag) == 0) return true;
  return false;
}
