/* The string builder the front ends write GBNF with, and the JSON mode
 * grammar. */
#include "grammar/grammar.h"

#include "core/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void gr_buf_put(gr_buf *b, const char *s, size_t len) {
  if (b->oom) return;
  if (brisk_grow((void **)&b->s, &b->cap, b->n + len + 1, 1)) {
    b->oom = 1;
    return;
  }
  memcpy(b->s + b->n, s, len);
  b->n += len;
  b->s[b->n] = 0;
}

void gr_buf_puts(gr_buf *b, const char *s) { gr_buf_put(b, s, strlen(s)); }

void gr_buf_printf(gr_buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof tmp) {
    b->oom = 1; /* only short fragments are formatted */
    return;
  }
  gr_buf_put(b, tmp, (size_t)n);
}

void gr_buf_escape_cp(gr_buf *b, uint32_t cp) {
  char tmp[16];
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
      cp == ' ' || cp == '_' || cp == ',' || cp == ':' || cp == '{' || cp == '}' || cp == '(' ||
      cp == ')' || cp == '.' || cp == '+' || cp == '*' || cp == '?' || cp == '|' || cp == '=' ||
      cp == '<' || cp == '>' || cp == '@' || cp == '!' || cp == '%' || cp == '&' || cp == ';' ||
      cp == '\'' || cp == '`' || cp == '~' || cp == '$' || cp == '#' || cp == '/') {
    tmp[0] = (char)cp;
    gr_buf_put(b, tmp, 1);
    return;
  }
  int n = cp < 0x100     ? snprintf(tmp, sizeof tmp, "\\x%02X", cp)
          : cp < 0x10000 ? snprintf(tmp, sizeof tmp, "\\u%04X", cp)
                         : snprintf(tmp, sizeof tmp, "\\U%08X", cp);
  gr_buf_put(b, tmp, (size_t)n);
}

/* Any JSON object (RFC 8259). Whitespace between tokens is limited to 20
 * characters, and there is none around the object: a model that may emit
 * whitespace forever otherwise sometimes does. */
const char *gr_json_gbnf(void) {
  return "root   ::= object\n"
         "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
         "object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\"\n"
         "member ::= string ws \":\" ws value ws\n"
         "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
         "string ::= \"\\\"\" char* \"\\\"\"\n"
         "char   ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
         "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
         "ws     ::= [ \\t\\n\\r]{0,20}\n";
}
