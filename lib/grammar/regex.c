/* Regular expressions to GBNF. The syntax is Python's `re` (and that of
 * JSON Schema's "pattern"), ASCII classes as with re.ASCII: literals and
 * escapes (\n \t \r \f \v \0 \xHH \uHHHH \UHHHHHHHH, escaped punctuation),
 * '.', classes [...] and [^...] with ranges, \d \w \s and their negations,
 * groups (...) (?:...) (?P<name>...), alternation, quantifiers * + ? {m}
 * {m,} {m,n} {,n} (lazy and possessive forms mean the same here), and '^'
 * at the start and '$' at the end. The whole text must match, as with
 * re.fullmatch. Backreferences, lookaround, \b and flags are refused.
 *
 * Every construct has a direct GBNF counterpart, so the result is one GBNF
 * expression; the grammar core does the rest. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct rx {
  const char *src, *p, *end;
  const char *what;
  int json; /* inside a JSON string literal */
  gr_buf *out;
  int depth;
  brisk_status st;
} rx;

__attribute__((format(printf, 3, 4))) static int rx_fail(rx *R, const char *at, const char *fmt,
                                                         ...);

#include <stdarg.h>
#include <stdio.h>

static int rx_fail(rx *R, const char *at, const char *fmt, ...) {
  if (R->st) return -1;
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t pos = 0;
  for (const char *q = R->src; q < at; q++)
    if (((unsigned char)*q & 0xC0) != 0x80) pos++;
  R->st = brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: position %zu: %s", R->what, pos, msg);
  return -1;
}

typedef struct rset {
  gr_range *r;
  size_t n, cap;
} rset;

static int rs_add(rx *R, rset *s, uint32_t lo, uint32_t hi) {
  if (brisk_grow((void **)&s->r, &s->cap, s->n + 1, sizeof *s->r)) {
    if (!R->st) R->st = brisk_error_oom();
    return -1;
  }
  s->r[s->n++] = (gr_range){lo, hi};
  return 0;
}

static int cmp_range(const void *a, const void *b) {
  const gr_range *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

static void rs_norm(rset *s) {
  if (s->n > 1) qsort(s->r, s->n, sizeof *s->r, cmp_range); /* (NULL when empty) */
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (k > 0 && s->r[i].lo <= s->r[k - 1].hi + 1) {
      if (s->r[i].hi > s->r[k - 1].hi) s->r[k - 1].hi = s->r[i].hi;
    } else {
      s->r[k++] = s->r[i];
    }
  }
  s->n = k;
}

/* Complement within [0, 0x10FFFF]. */
static int rs_negate(rx *R, rset *s) {
  rs_norm(s);
  rset c = {0};
  uint32_t next = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (s->r[i].lo > next && rs_add(R, &c, next, s->r[i].lo - 1)) goto fail;
    next = s->r[i].hi + 1;
  }
  if (next <= 0x10FFFF && rs_add(R, &c, next, 0x10FFFF)) goto fail;
  brisk_free(s->r);
  *s = c;
  return 0;
fail:
  brisk_free(c.r);
  return -1;
}

static int rs_has(const rset *s, uint32_t cp) {
  for (size_t i = 0; i < s->n; i++)
    if (s->r[i].lo <= cp && cp <= s->r[i].hi) return 1;
  return 0;
}

/* Removes [lo, hi] from a normalized set. */
static int rs_remove(rx *R, rset *s, uint32_t lo, uint32_t hi) {
  rset o = {0};
  for (size_t i = 0; i < s->n; i++) {
    gr_range x = s->r[i];
    if (x.hi < lo || x.lo > hi) {
      if (rs_add(R, &o, x.lo, x.hi)) goto fail;
      continue;
    }
    if (x.lo < lo && rs_add(R, &o, x.lo, lo - 1)) goto fail;
    if (x.hi > hi && rs_add(R, &o, hi + 1, x.hi)) goto fail;
  }
  brisk_free(s->r);
  *s = o;
  return 0;
fail:
  brisk_free(o.r);
  return -1;
}

/* \d \w \s and negations into s; 0 if c is none of them. */
static int class_escape(rx *R, char c, rset *s, int *done) {
  *done = 1;
  rset t = {0};
  int neg = c == 'D' || c == 'W' || c == 'S', rc = 0;
  switch (c) {
  case 'd':
  case 'D': rc = rs_add(R, &t, '0', '9'); break;
  case 'w':
  case 'W':
    rc = rs_add(R, &t, 'a', 'z') || rs_add(R, &t, 'A', 'Z') || rs_add(R, &t, '0', '9') ||
         rs_add(R, &t, '_', '_');
    break;
  case 's':
  case 'S': rc = rs_add(R, &t, '\t', '\r') || rs_add(R, &t, ' ', ' '); break;
  default: *done = 0; return 0;
  }
  if (!rc && neg) rc = rs_negate(R, &t);
  for (size_t i = 0; !rc && i < t.n; i++) rc = rs_add(R, s, t.r[i].lo, t.r[i].hi);
  brisk_free(t.r);
  return rc;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One character (escapes decoded) at R->p. */
static int rx_char(rx *R, uint32_t *cp, int in_class) {
  const char *at = R->p;
  const unsigned char *s = (const unsigned char *)R->p;
  if (*s != '\\') {
    unsigned char b = s[0];
    int len = b < 0x80                 ? 1
              : b >= 0xC2 && b <= 0xDF ? 2
              : b >= 0xE0 && b <= 0xEF ? 3
              : b >= 0xF0 && b <= 0xF4 ? 4
                                       : 0;
    if (len == 0 || len > R->end - R->p) return rx_fail(R, at, "invalid UTF-8");
    uint32_t v = len == 1 ? b : len == 2 ? b & 0x1Fu : len == 3 ? b & 0x0Fu : b & 0x07u;
    for (int i = 1; i < len; i++) {
      if ((s[i] & 0xC0) != 0x80) return rx_fail(R, at, "invalid UTF-8");
      v = v << 6 | (s[i] & 0x3Fu);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
        (v >= 0xD800 && v <= 0xDFFF))
      return rx_fail(R, at, "invalid UTF-8");
    R->p += len;
    *cp = v;
    return 0;
  }
  if (R->p + 1 >= R->end) return rx_fail(R, at, "the pattern ends with '\\'");
  char e = R->p[1];
  R->p += 2;
  int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
  if (digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
      int h = R->p < R->end ? hexval(*R->p) : -1;
      if (h < 0) return rx_fail(R, at, "\\%c needs %d hex digits", e, digits);
      v = v << 4 | (uint32_t)h;
      R->p++;
    }
    if (v > 0x10FFFF) return rx_fail(R, at, "\\%c escape past U+10FFFF", e);
    *cp = v;
    return 0;
  }
  switch (e) {
  case 'n': *cp = '\n'; return 0;
  case 't': *cp = '\t'; return 0;
  case 'r': *cp = '\r'; return 0;
  case 'f': *cp = '\f'; return 0;
  case 'v': *cp = '\v'; return 0;
  case 'a': *cp = '\a'; return 0;
  case '0': *cp = 0; return 0;
  default: break;
  }
  if (e == 'b' && in_class) {
    *cp = '\b';
    return 0;
  }
  if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
    return rx_fail(R, at, "unsupported escape '\\%c' (no backreferences, anchors or flags)", e);
  if ((unsigned char)e >= 0x80) return rx_fail(R, at, "unsupported escape of a non-ASCII byte");
  *cp = (unsigned char)e; /* escaped punctuation stands for itself */
  return 0;
}

/* Emits one character as a literal atom. */
static void emit_char(rx *R, uint32_t cp) {
  gr_buf *b = R->out;
  if (R->json && (cp == '"' || cp == '\\')) {
    gr_buf_puts(b, cp == '"' ? "\"\\\\\\\"\"" : "\"\\\\\\\\\"");
    return;
  }
  if (R->json && cp < 0x20) {
    gr_buf_printf(b, "\"\\\\u%04x\"", cp);
    return;
  }
  gr_buf_puts(b, "\"");
  gr_buf_escape_cp(b, cp);
  gr_buf_puts(b, "\"");
}

/* Emits a set as one atom: a class, or in JSON mode a group of a class and
 * the escaped forms of the characters JSON escapes. */
static int emit_set(rx *R, rset *s, const char *at) {
  rs_norm(s);
  gr_buf *b = R->out;
  uint32_t special[34];
  int n_special = 0;
  if (R->json) {
    for (uint32_t c = 0; c < 0x20; c++)
      if (rs_has(s, c)) special[n_special++] = c;
    if (rs_has(s, '"')) special[n_special++] = '"';
    if (rs_has(s, '\\')) special[n_special++] = '\\';
    if (rs_remove(R, s, 0, 0x1F) || rs_remove(R, s, '"', '"') || rs_remove(R, s, '\\', '\\'))
      return -1;
  }
  if (s->n == 0 && n_special == 0) return rx_fail(R, at, "the class matches nothing");
  int group = n_special > 0;
  if (group) gr_buf_puts(b, "( ");
  if (s->n > 0) {
    gr_buf_puts(b, "[");
    for (size_t i = 0; i < s->n; i++) {
      gr_buf_escape_cp(b, s->r[i].lo);
      if (s->r[i].hi != s->r[i].lo) {
        gr_buf_puts(b, "-");
        gr_buf_escape_cp(b, s->r[i].hi);
      }
    }
    gr_buf_puts(b, "]");
  }
  for (int i = 0; i < n_special; i++) {
    if (i > 0 || s->n > 0) gr_buf_puts(b, " | ");
    emit_char(R, special[i]);
  }
  if (group) gr_buf_puts(b, " )");
  return 0;
}

static int parse_class(rx *R) {
  const char *at = R->p;
  R->p++;
  int neg = R->p < R->end && *R->p == '^';
  if (neg) R->p++;
  rset s = {0};
  int first = 1;
  while (R->p < R->end && (*R->p != ']' || first)) {
    first = 0;
    if (*R->p == '\\' && R->p + 1 < R->end) {
      int done;
      if (class_escape(R, R->p[1], &s, &done)) goto fail;
      if (done) {
        R->p += 2;
        continue;
      }
    }
    uint32_t lo, hi;
    if (rx_char(R, &lo, 1)) goto fail;
    hi = lo;
    if (R->p + 1 < R->end && *R->p == '-' && R->p[1] != ']') {
      R->p++;
      const char *at2 = R->p;
      if (*R->p == '\\' && R->p + 1 < R->end && strchr("dDwWsS", R->p[1])) {
        rx_fail(R, at2, "a class escape cannot end a range");
        goto fail;
      }
      if (rx_char(R, &hi, 1)) goto fail;
      if (hi < lo) {
        rx_fail(R, at2, "bad character range (end below start)");
        goto fail;
      }
    }
    if (rs_add(R, &s, lo, hi)) goto fail;
  }
  if (R->p >= R->end) {
    rx_fail(R, at, "unterminated character class");
    goto fail;
  }
  R->p++;
  if (neg && rs_negate(R, &s)) goto fail;
  int rc = emit_set(R, &s, at);
  brisk_free(s.r);
  return rc;
fail:
  brisk_free(s.r);
  return -1;
}

static int parse_alt(rx *R, int top);

/* A quantifier after an atom, if any; sets *ok to whether one was read. */
static int parse_quant(rx *R, int *ok) {
  *ok = 0;
  if (R->p >= R->end) return 0;
  char c = *R->p;
  const char *at = R->p;
  if (c == '*' || c == '+' || c == '?') {
    char q[2] = {c, 0};
    gr_buf_puts(R->out, q);
    R->p++;
    *ok = 1;
  } else if (c == '{') {
    /* {m}, {m,}, {m,n}, {,n}; anything else is a literal '{' (as in re). */
    const char *q = R->p + 1;
    long m = -1, n = -1;
    const char *d = q;
    long v = 0;
    while (q < R->end && *q >= '0' && *q <= '9' && v <= GR_MAX_REPEAT) v = v * 10 + (*q++ - '0');
    if (q > d) m = v;
    int comma = q < R->end && *q == ',';
    if (comma) {
      q++;
      d = q;
      v = 0;
      while (q < R->end && *q >= '0' && *q <= '9' && v <= GR_MAX_REPEAT) v = v * 10 + (*q++ - '0');
      if (q > d) n = v;
    } else {
      n = m;
    }
    if (q >= R->end || *q != '}' || (m < 0 && !comma) || (m < 0 && n < 0)) return 0;
    if (m > GR_MAX_REPEAT || n > GR_MAX_REPEAT)
      return rx_fail(R, at, "repetition count above %d", GR_MAX_REPEAT);
    if (m < 0) m = 0;
    if (n >= 0 && n < m) return rx_fail(R, at, "min repeat greater than max repeat");
    if (n < 0)
      gr_buf_printf(R->out, "{%ld,}", m);
    else
      gr_buf_printf(R->out, "{%ld,%ld}", m, n);
    R->p = q + 1;
    *ok = 1;
  }
  if (*ok && R->p < R->end && (*R->p == '?' || *R->p == '+')) R->p++; /* lazy / possessive */
  if (*ok && R->p < R->end && strchr("*+?", *R->p)) return rx_fail(R, R->p, "multiple repeat");
  if (*ok && R->p < R->end && *R->p == '{') {
    int again;
    const char *save = R->p;
    size_t n0 = R->out->n;
    if (parse_quant(R, &again)) return -1;
    if (again) return rx_fail(R, save, "multiple repeat");
    R->out->n = n0;
  }
  return 0;
}

static int parse_concat(rx *R, int top) {
  int any = 0;
  while (R->p < R->end && *R->p != '|' && *R->p != ')') {
    const char *at = R->p;
    char c = *R->p;
    if (any) gr_buf_puts(R->out, " ");
    if (c == '^') {
      if (!top || any || R->p != R->src)
        return rx_fail(R, at, "'^' is only supported at the start of the pattern");
      R->p++;
      continue;
    }
    if (c == '$') {
      if (!top || R->p + 1 != R->end)
        return rx_fail(R, at, "'$' is only supported at the end of the pattern");
      R->p++;
      continue;
    }
    if (c == '*' || c == '+' || c == '?') return rx_fail(R, at, "nothing to repeat before '%c'", c);
    if (c == '(') {
      if (++R->depth > GR_MAX_NEST) return rx_fail(R, at, "groups nest too deeply");
      R->p++;
      if (R->p < R->end && *R->p == '?') {
        if (R->p + 1 < R->end && R->p[1] == ':') {
          R->p += 2;
        } else if (R->p + 2 < R->end && R->p[1] == 'P' && R->p[2] == '<') {
          const char *q = R->p + 3;
          while (q < R->end && *q != '>') q++;
          if (q >= R->end) return rx_fail(R, at, "unterminated group name");
          R->p = q + 1;
        } else {
          return rx_fail(R, at, "unsupported group '(?%c' (lookaround, flags, backreferences)",
                         R->p + 1 < R->end ? R->p[1] : ' ');
        }
      }
      gr_buf_puts(R->out, "( ");
      if (parse_alt(R, 0)) return -1;
      if (R->p >= R->end || *R->p != ')') return rx_fail(R, at, "missing ')'");
      R->p++;
      R->depth--;
      gr_buf_puts(R->out, " )");
    } else if (c == '[') {
      if (parse_class(R)) return -1;
    } else if (c == '.') {
      R->p++;
      rset s = {0};
      int rc =
          rs_add(R, &s, 0, '\n' - 1) || rs_add(R, &s, '\n' + 1, 0x10FFFF) || emit_set(R, &s, at);
      brisk_free(s.r);
      if (rc) return -1;
    } else if (c == '\\' && R->p + 1 < R->end && strchr("dDwWsS", R->p[1])) {
      rset s = {0};
      int done;
      int rc = class_escape(R, R->p[1], &s, &done);
      R->p += 2;
      if (!rc) rc = emit_set(R, &s, at);
      brisk_free(s.r);
      if (rc) return -1;
    } else {
      uint32_t cp;
      if (rx_char(R, &cp, 0)) return -1;
      emit_char(R, cp);
    }
    int q;
    if (parse_quant(R, &q)) return -1;
    any = 1;
  }
  if (!any) gr_buf_puts(R->out, "\"\"");
  return 0;
}

static int parse_alt(rx *R, int top) {
  if (parse_concat(R, top)) return -1;
  while (R->p < R->end && *R->p == '|') {
    R->p++;
    gr_buf_puts(R->out, " | ");
    if (parse_concat(R, top)) return -1;
  }
  return 0;
}

brisk_status gr_regex_expr(const char *re, size_t len, int json_string, const char *prefix,
                           gr_buf *expr, gr_buf *rules, const char *what) {
  (void)prefix;
  (void)rules;
  rx R = {.src = re, .p = re, .end = re + len, .what = what, .json = json_string, .out = expr};
  gr_buf_puts(expr, "( ");
  if (!parse_alt(&R, 1) && R.p < R.end) rx_fail(&R, R.p, "unbalanced ')'");
  gr_buf_puts(expr, " )");
  if (R.st) return R.st;
  if (expr->oom) return brisk_error_oom();
  return BRISK_OK;
}

brisk_status gr_regex_to_gbnf(const char *re, size_t len, char **gbnf) {
  gr_buf b = {0};
  gr_buf_puts(&b, "root ::= ");
  brisk_status st = gr_regex_expr(re, len, 0, "re", &b, NULL, "regex");
  gr_buf_puts(&b, "\n");
  if (!st && b.oom) st = brisk_error_oom();
  if (st) {
    brisk_free(b.s);
    return st;
  }
  *gbnf = b.s;
  return BRISK_OK;
}
