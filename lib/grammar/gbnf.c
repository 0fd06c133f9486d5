/* The GBNF parser: llama.cpp's grammar text format.
 *
 *   name ::= alternatives           one rule per line; a rule continues on
 *                                   the next line after "::=", after "|"
 *                                   and inside parentheses
 *   "literal"  [a-z0-9_]  [^"\\]  .  ( group )  name
 *   x*  x+  x?  x{m}  x{m,}  x{m,n}  x{,n}
 *   # comment to the end of the line
 *   escapes: \x7F \u00e9 \U0001F600 \t \r \n \\ \" \[ \] (and \- \^ in sets)
 *
 * Groups and repetitions become synthesized rules (x* is r ::= x r | "",
 * x{2,4} is x x r1 with r1 ::= x r2 | "", r2 ::= x | ""), so the matcher
 * sees only sets, references and alternatives. The checks after parsing
 * (check.c) guarantee that the matcher never reaches a dead end. */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct evec {
  gr_elem *v;
  size_t n, cap;
} evec;

typedef struct rule {
  evec body;
  char *name;
  size_t first_use; /* byte offset of the first reference, for messages */
  int defined;
} rule;

typedef struct parser {
  const char *src, *p, *end;
  const char *what;
  rule *rules;
  size_t n_rules, cap_rules;
  gr_range *ranges;
  size_t n_ranges, cap_ranges;
  uint32_t *set_start; /* [n_sets + 1] */
  size_t n_sets, cap_sets;
  size_t n_elems; /* over every rule, for the limit */
  int depth;
  brisk_status st;
} parser;

brisk_status gr_check(brisk_grammar *g, const char *what);

static void line_col(const parser *P, const char *at, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (const char *q = P->src; q < at && q < P->end; q++) {
    if (*q == '\n') {
      (*line)++;
      *col = 1;
    } else if (((unsigned char)*q & 0xC0) != 0x80) {
      (*col)++;
    }
  }
}

__attribute__((format(printf, 3, 4))) static int fail(parser *P, const char *at, const char *fmt,
                                                      ...) {
  if (P->st) return -1;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int line, col;
  line_col(P, at, &line, &col);
  P->st =
      brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: line %d column %d: %s", P->what, line, col, msg);
  return -1;
}

static int oom(parser *P) {
  if (!P->st) P->st = brisk_error_oom();
  return -1;
}

static int push_elem(parser *P, size_t r, uint32_t type, uint32_t value) {
  if (P->n_elems >= GR_MAX_ELEMS)
    return fail(P, P->p, "the grammar is too large (more than %d elements after expansion)",
                GR_MAX_ELEMS);
  evec *e = &P->rules[r].body;
  if (brisk_grow((void **)&e->v, &e->cap, e->n + 1, sizeof *e->v)) return oom(P);
  e->v[e->n++] = (gr_elem){type, value};
  P->n_elems++;
  return 0;
}

/* A new rule; its index, or -1. */
static long add_rule(parser *P, const char *name, size_t name_len) {
  if (P->n_rules >= GR_MAX_RULES)
    return fail(P, P->p, "the grammar has too many rules (more than %d)", GR_MAX_RULES);
  if (brisk_grow((void **)&P->rules, &P->cap_rules, P->n_rules + 1, sizeof *P->rules))
    return oom(P);
  rule *r = &P->rules[P->n_rules];
  memset(r, 0, sizeof *r);
  if (!(r->name = brisk_strndup(name, name_len))) return oom(P);
  r->first_use = (size_t)(P->p - P->src);
  return (long)P->n_rules++;
}

static long find_rule(parser *P, const char *name, size_t len) {
  for (size_t i = 0; i < P->n_rules; i++)
    if (strlen(P->rules[i].name) == len && !memcmp(P->rules[i].name, name, len)) return (long)i;
  long r = add_rule(P, name, len);
  if (r >= 0) P->rules[r].first_use = (size_t)(name - P->src); /* name points into the source */
  return r;
}

/* A synthesized rule named after rule `base`. */
static long synth_rule(parser *P, size_t base) {
  char name[96];
  int n = snprintf(name, sizeof name, "%.64s_%zu", P->rules[base].name, P->n_rules);
  long r = add_rule(P, name, (size_t)n);
  if (r >= 0) P->rules[r].defined = 1;
  return r;
}

static int is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

static void skip_space(parser *P, int newline_ok) {
  while (P->p < P->end) {
    char c = *P->p;
    if (c == ' ' || c == '\t') {
      P->p++;
    } else if (c == '#') {
      while (P->p < P->end && *P->p != '\n') P->p++;
    } else if (newline_ok && (c == '\n' || c == '\r')) {
      P->p++;
    } else {
      break;
    }
  }
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One UTF-8 character of the source. */
static int decode_utf8(parser *P, uint32_t *cp) {
  const unsigned char *s = (const unsigned char *)P->p;
  size_t left = (size_t)(P->end - P->p);
  unsigned char b = s[0];
  int len = b < 0x80                 ? 1
            : b >= 0xC2 && b <= 0xDF ? 2
            : b >= 0xE0 && b <= 0xEF ? 3
            : b >= 0xF0 && b <= 0xF4 ? 4
                                     : 0;
  if (len == 0 || (size_t)len > left) return fail(P, P->p, "invalid UTF-8 in the grammar");
  uint32_t v = len == 1 ? b : len == 2 ? b & 0x1Fu : len == 3 ? b & 0x0Fu : b & 0x07u;
  for (int i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return fail(P, P->p, "invalid UTF-8 in the grammar");
    v = v << 6 | (s[i] & 0x3Fu);
  }
  if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
      (v >= 0xD800 && v <= 0xDFFF))
    return fail(P, P->p, "invalid UTF-8 in the grammar");
  P->p += len;
  *cp = v;
  return 0;
}

/* One character of a literal or set, escapes decoded. */
static int parse_char(parser *P, uint32_t *cp) {
  if (P->p >= P->end) return fail(P, P->p, "unexpected end of the grammar");
  if (*P->p != '\\') return decode_utf8(P, cp);
  const char *at = P->p;
  if (P->p + 1 >= P->end) return fail(P, at, "unexpected end of the grammar after '\\'");
  char e = P->p[1];
  P->p += 2;
  int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
  if (digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
      int h = P->p < P->end ? hex_value(*P->p) : -1;
      if (h < 0) return fail(P, at, "escape \\%c needs %d hex digits", e, digits);
      v = v << 4 | (uint32_t)h;
      P->p++;
    }
    if (v > 0x10FFFF) return fail(P, at, "escape \\%c%.*s is past U+10FFFF", e, digits, at + 2);
    *cp = v;
    return 0;
  }
  switch (e) {
  case 't': *cp = '\t'; return 0;
  case 'r': *cp = '\r'; return 0;
  case 'n': *cp = '\n'; return 0;
  case '\\':
  case '"':
  case '[':
  case ']':
  case '-':
  case '^':
  case '/':
  case '.': *cp = (uint32_t)e; return 0;
  default: return fail(P, at, "unknown escape '\\%c'", e);
  }
}

static int cmp_range(const void *a, const void *b) {
  const gr_range *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorts and merges ranges[from, n_ranges), complements them if `negate`,
 * and closes them as a new set; its index, or -1. */
static long close_set(parser *P, size_t from, int negate, const char *at) {
  /* An empty class ("[]" or "[^]") may come before any range exists. */
  gr_range *r = P->ranges ? P->ranges + from : NULL;
  size_t n = P->n_ranges - from, k = 0;
  if (n > 1) qsort(r, n, sizeof *r, cmp_range);
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && r[i].lo <= r[k - 1].hi + 1) {
      if (r[i].hi > r[k - 1].hi) r[k - 1].hi = r[i].hi;
    } else {
      r[k++] = r[i];
    }
  }
  if (negate) {
    /* The complement of k sorted disjoint ranges has at most k + 1. */
    if (brisk_grow((void **)&P->ranges, &P->cap_ranges, from + 2 * k + 1, sizeof *P->ranges))
      return oom(P);
    r = P->ranges + from;
    gr_range *c = r + k;
    size_t m = 0;
    uint32_t next = 0;
    for (size_t i = 0; i < k; i++) {
      if (r[i].lo > next) c[m++] = (gr_range){next, r[i].lo - 1};
      next = r[i].hi + 1;
    }
    if (next <= 0x10FFFF) c[m++] = (gr_range){next, 0x10FFFF};
    memmove(r, c, m * sizeof *r);
    k = m;
  }
  if (k == 0) return fail(P, at, "the character class matches nothing");
  P->n_ranges = from + k;
  if (brisk_grow((void **)&P->set_start, &P->cap_sets, P->n_sets + 2, sizeof *P->set_start))
    return oom(P);
  P->set_start[P->n_sets] = (uint32_t)from;
  P->set_start[P->n_sets + 1] = (uint32_t)P->n_ranges;
  return (long)P->n_sets++;
}

static int add_range(parser *P, uint32_t lo, uint32_t hi) {
  if (brisk_grow((void **)&P->ranges, &P->cap_ranges, P->n_ranges + 1, sizeof *P->ranges))
    return oom(P);
  P->ranges[P->n_ranges++] = (gr_range){lo, hi};
  return 0;
}

static int push_set1(parser *P, size_t r, uint32_t lo, uint32_t hi, const char *at) {
  size_t from = P->n_ranges;
  if (add_range(P, lo, hi)) return -1;
  long s = close_set(P, from, 0, at);
  return s < 0 ? -1 : push_elem(P, r, GR_SET, (uint32_t)s);
}

static int parse_literal(parser *P, size_t r) {
  const char *start = P->p;
  P->p++; /* the opening quote */
  while (P->p < P->end && *P->p != '"') {
    const char *at = P->p;
    if (*P->p == '\n') return fail(P, start, "a literal does not end on its line");
    uint32_t cp;
    if (parse_char(P, &cp) || push_set1(P, r, cp, cp, at)) return -1;
  }
  if (P->p >= P->end) return fail(P, start, "a literal does not end (missing '\"')");
  P->p++;
  return 0;
}

static int parse_class(parser *P, size_t r) {
  const char *at = P->p;
  P->p++;
  int negate = P->p < P->end && *P->p == '^';
  if (negate) P->p++;
  size_t from = P->n_ranges;
  while (P->p < P->end && *P->p != ']') {
    uint32_t lo, hi;
    if (parse_char(P, &lo)) return -1;
    hi = lo;
    if (P->p + 1 < P->end && *P->p == '-' && P->p[1] != ']') {
      P->p++;
      const char *at2 = P->p;
      if (parse_char(P, &hi)) return -1;
      if (hi < lo) return fail(P, at2, "range end U+%04X is below its start U+%04X", hi, lo);
    }
    if (add_range(P, lo, hi)) return -1;
  }
  if (P->p >= P->end) return fail(P, at, "a character class does not end (missing ']')");
  P->p++;
  long s = close_set(P, from, negate, at);
  return s < 0 ? -1 : push_elem(P, r, GR_SET, (uint32_t)s);
}

static int parse_number(parser *P, long *v) {
  const char *at = P->p;
  long n = 0;
  if (P->p >= P->end || *P->p < '0' || *P->p > '9') return fail(P, at, "expected a number");
  while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
    n = n * 10 + (*P->p - '0');
    if (n > GR_MAX_REPEAT) return fail(P, at, "repetition count is above %d", GR_MAX_REPEAT);
    P->p++;
  }
  *v = n;
  return 0;
}

/* Replaces the atom body[start, n) of rule r by its repetition {lo, hi}
 * (hi -1: unbounded). */
static int repeat(parser *P, size_t r, size_t start, long lo, long hi, const char *at) {
  size_t len = P->rules[r].body.n - start;
  gr_elem *atom = brisk_malloc(len * sizeof *atom);
  if (!atom) return oom(P);
  memcpy(atom, P->rules[r].body.v + start, len * sizeof *atom);
  P->rules[r].body.n = start;
  P->n_elems -= len;
  int rc = 0;
  for (long i = 0; i < lo && !rc; i++)
    for (size_t j = 0; j < len && !rc; j++) rc = push_elem(P, r, atom[j].type, atom[j].value);
  if (!rc && hi < 0) {
    /* rest ::= atom rest | "" */
    long rest = synth_rule(P, r);
    rc = rest < 0;
    for (size_t j = 0; j < len && !rc; j++)
      rc = push_elem(P, (size_t)rest, atom[j].type, atom[j].value);
    if (!rc)
      rc = push_elem(P, (size_t)rest, GR_REF, (uint32_t)rest) ||
           push_elem(P, (size_t)rest, GR_ALT, 0) || push_elem(P, (size_t)rest, GR_END, 0) ||
           push_elem(P, r, GR_REF, (uint32_t)rest);
  } else if (!rc && hi > lo) {
    /* opt_1 ::= atom opt_2 | "", ..., opt_k ::= atom | "" */
    long first = -1, prev = -1;
    for (long i = lo; i < hi && !rc; i++) {
      long opt = synth_rule(P, r);
      if (opt < 0) {
        rc = -1;
        break;
      }
      if (prev >= 0) rc = push_elem(P, (size_t)prev, GR_REF, (uint32_t)opt);
      if (!rc && prev >= 0)
        rc = push_elem(P, (size_t)prev, GR_ALT, 0) || push_elem(P, (size_t)prev, GR_END, 0);
      for (size_t j = 0; j < len && !rc; j++)
        rc = push_elem(P, (size_t)opt, atom[j].type, atom[j].value);
      if (first < 0) first = opt;
      prev = opt;
    }
    if (!rc)
      rc = push_elem(P, (size_t)prev, GR_ALT, 0) || push_elem(P, (size_t)prev, GR_END, 0) ||
           push_elem(P, r, GR_REF, (uint32_t)first);
  }
  (void)at;
  brisk_free(atom);
  return rc ? -1 : 0;
}

static int parse_alternates(parser *P, size_t r, int nested);

static int parse_sequence(parser *P, size_t r, int nested) {
  size_t last = (size_t)-1; /* start of the last atom, for repetitions */
  while (P->p < P->end) {
    char c = *P->p;
    const char *at = P->p;
    size_t start = P->rules[r].body.n;
    if (c == '"') {
      if (parse_literal(P, r)) return -1;
      last = start;
    } else if (c == '[') {
      if (parse_class(P, r)) return -1;
      last = start;
    } else if (c == '.') {
      P->p++;
      if (push_set1(P, r, 0, 0x10FFFF, at)) return -1;
      last = start;
    } else if (is_word(c)) {
      const char *name = P->p;
      while (P->p < P->end && is_word(*P->p)) P->p++;
      long ref = find_rule(P, name, (size_t)(P->p - name));
      if (ref < 0 || push_elem(P, r, GR_REF, (uint32_t)ref)) return -1;
      last = start;
    } else if (c == '(') {
      if (++P->depth > GR_MAX_NEST) return fail(P, at, "groups nest deeper than %d", GR_MAX_NEST);
      P->p++;
      skip_space(P, 1);
      long sub = synth_rule(P, r);
      if (sub < 0 || parse_alternates(P, (size_t)sub, 1)) return -1;
      if (P->p >= P->end || *P->p != ')') return fail(P, at, "a group does not end (missing ')')");
      P->p++;
      P->depth--;
      if (push_elem(P, r, GR_REF, (uint32_t)sub)) return -1;
      last = start;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (last == (size_t)-1) return fail(P, at, "'%c' has nothing before it to repeat", c);
      long lo = 0, hi = -1;
      P->p++;
      if (c == '+') lo = 1;
      if (c == '?') hi = 1;
      if (c == '{') {
        skip_space(P, nested);
        if (P->p < P->end && *P->p == ',') {
          lo = 0;
        } else if (parse_number(P, &lo)) {
          return -1;
        }
        skip_space(P, nested);
        if (P->p < P->end && *P->p == ',') {
          P->p++;
          skip_space(P, nested);
          if (P->p < P->end && *P->p != '}' && parse_number(P, &hi)) return -1;
        } else {
          hi = lo;
        }
        skip_space(P, nested);
        if (P->p >= P->end || *P->p != '}') return fail(P, at, "a repetition {m,n} misses '}'");
        P->p++;
        if (hi >= 0 && hi < lo) return fail(P, at, "repetition {%ld,%ld} has max < min", lo, hi);
      }
      /* An empty atom ("") repeats to nothing. */
      if (last < P->rules[r].body.n && repeat(P, r, last, lo, hi, at)) return -1;
      last = (size_t)-1; /* x** is an error, as in llama.cpp */
    } else {
      break;
    }
    skip_space(P, nested);
  }
  return 0;
}

static int parse_alternates(parser *P, size_t r, int nested) {
  if (parse_sequence(P, r, nested)) return -1;
  while (P->p < P->end && *P->p == '|') {
    if (push_elem(P, r, GR_ALT, 0)) return -1;
    P->p++;
    skip_space(P, 1);
    if (parse_sequence(P, r, nested)) return -1;
  }
  return push_elem(P, r, GR_END, 0);
}

static int parse_rule(parser *P) {
  const char *at = P->p;
  const char *name = P->p;
  while (P->p < P->end && is_word(*P->p)) P->p++;
  if (P->p == name) return fail(P, at, "expected a rule name");
  size_t len = (size_t)(P->p - name);
  skip_space(P, 0);
  if (P->end - P->p < 3 || memcmp(P->p, "::=", 3))
    return fail(P, P->p, "expected '::=' after rule name '%.*s'", (int)len, name);
  P->p += 3;
  skip_space(P, 1);
  long r = find_rule(P, name, len);
  if (r < 0) return -1;
  if (P->rules[r].defined) return fail(P, at, "rule '%.*s' is defined twice", (int)len, name);
  P->rules[r].defined = 1;
  if (parse_alternates(P, (size_t)r, 0)) return -1;
  if (P->p < P->end && *P->p != '\n' && *P->p != '\r')
    return fail(P, P->p, "unexpected '%c' (expected the end of the rule)", *P->p);
  skip_space(P, 1);
  return 0;
}

static void free_parser(parser *P) {
  for (size_t i = 0; i < P->n_rules; i++) {
    brisk_free(P->rules[i].body.v);
    brisk_free(P->rules[i].name);
  }
  brisk_free(P->rules);
  brisk_free(P->ranges);
  brisk_free(P->set_start);
}

void gr_free(brisk_grammar *g) {
  if (!g) return;
  for (size_t i = 0; i < g->n_rules; i++) brisk_free(g->rule_names[i]);
  brisk_free(g->rule_names);
  brisk_free(g->elems);
  brisk_free(g->rule_start);
  brisk_free(g->ranges);
  brisk_free(g->set_start);
  brisk_free(g->set_ascii);
  brisk_free(g->gbnf);
  brisk_free(g);
}

/* Moves the parser's rules into one flat grammar. */
static brisk_status flatten(parser *P, brisk_grammar *g) {
  size_t n = 0;
  for (size_t i = 0; i < P->n_rules; i++) n += P->rules[i].body.n;
  g->elems = brisk_malloc((n ? n : 1) * sizeof *g->elems);
  g->rule_start = brisk_calloc(P->n_rules ? P->n_rules : 1, sizeof *g->rule_start);
  g->rule_names = brisk_calloc(P->n_rules ? P->n_rules : 1, sizeof *g->rule_names);
  g->set_ascii = brisk_calloc(P->n_sets ? 2 * P->n_sets : 1, sizeof *g->set_ascii);
  if (!g->elems || !g->rule_start || !g->rule_names || !g->set_ascii) return brisk_error_oom();
  size_t k = 0;
  for (size_t i = 0; i < P->n_rules; i++) {
    g->rule_start[i] = (uint32_t)k;
    memcpy(g->elems + k, P->rules[i].body.v, P->rules[i].body.n * sizeof *g->elems);
    k += P->rules[i].body.n;
    g->rule_names[i] = P->rules[i].name;
    P->rules[i].name = NULL;
  }
  g->n_elems = n;
  g->n_rules = P->n_rules;
  g->ranges = P->ranges;
  g->set_start = P->set_start;
  g->n_sets = P->n_sets;
  P->ranges = NULL;
  P->set_start = NULL;
  for (size_t s = 0; s < g->n_sets; s++)
    for (uint32_t j = g->set_start[s]; j < g->set_start[s + 1]; j++)
      for (uint32_t c = g->ranges[j].lo; c <= g->ranges[j].hi && c < 128; c++)
        g->set_ascii[2 * s + c / 64] |= 1ull << (c % 64);
  return BRISK_OK;
}

brisk_status gr_parse(const char *text, size_t len, const char *root, const char *what,
                      brisk_grammar **out) {
  parser P = {.src = text, .p = text, .end = text + len, .what = what ? what : "grammar"};
  if (!root) root = "root";
  brisk_grammar *g = NULL;
  skip_space(&P, 1);
  while (P.p < P.end && !P.st) parse_rule(&P);
  brisk_status st = P.st;
  if (!st && P.n_rules == 0)
    st = brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: the grammar has no rules", P.what);
  for (size_t i = 0; !st && i < P.n_rules; i++)
    if (!P.rules[i].defined) {
      int line, col;
      line_col(&P, P.src + P.rules[i].first_use, &line, &col);
      st = brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "%s: line %d column %d: rule '%s' is used but never defined", P.what, line,
                       col, P.rules[i].name);
    }
  long r = -1;
  for (size_t i = 0; !st && i < P.n_rules && r < 0; i++)
    if (!strcmp(P.rules[i].name, root)) r = (long)i;
  if (!st && r < 0)
    st = brisk_error(BRISK_E_INVALID_ARGUMENT, "%s: there is no rule named '%s' to start from",
                     P.what, root);
  if (!st && !(g = brisk_calloc(1, sizeof *g))) st = brisk_error_oom();
  if (!st && !(g->gbnf = brisk_strndup(text, len))) st = brisk_error_oom();
  if (!st) st = flatten(&P, g);
  if (!st) {
    g->root = (uint32_t)r;
    st = gr_check(g, P.what);
  }
  free_parser(&P);
  if (st) {
    gr_free(g);
    return st;
  }
  *out = g;
  return BRISK_OK;
}

int gr_set_has(const brisk_grammar *g, uint32_t s, uint32_t cp) {
  if (cp < 128) return (int)(g->set_ascii[2 * s + cp / 64] >> (cp % 64) & 1);
  size_t lo = g->set_start[s], hi = g->set_start[s + 1];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->ranges[mid].hi < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < g->set_start[s + 1] && g->ranges[lo].lo <= cp;
}

int gr_set_covers(const brisk_grammar *g, uint32_t s, uint32_t lo, uint32_t hi) {
  size_t a = g->set_start[s], b = g->set_start[s + 1];
  while (a < b) { /* the first range ending at or after lo */
    size_t mid = a + (b - a) / 2;
    if (g->ranges[mid].hi < lo)
      a = mid + 1;
    else
      b = mid;
  }
  /* Ranges may touch: follow them while they leave no gap. */
  for (uint32_t at = lo; a < g->set_start[s + 1] && g->ranges[a].lo <= at; a++) {
    if (g->ranges[a].hi >= hi) return 1;
    at = g->ranges[a].hi + 1;
  }
  return 0;
}

int gr_set_meets(const brisk_grammar *g, uint32_t s, uint32_t lo, uint32_t hi) {
  size_t a = g->set_start[s], b = g->set_start[s + 1];
  while (a < b) { /* the first range ending at or after lo */
    size_t mid = a + (b - a) / 2;
    if (g->ranges[mid].hi < lo)
      a = mid + 1;
    else
      b = mid;
  }
  return a < g->set_start[s + 1] && g->ranges[a].lo <= hi;
}
