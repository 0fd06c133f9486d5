/* JSON Schema to GBNF. Every string the grammar accepts validates against
 * the schema; the grammar may accept fewer strings than the schema does
 * (properties come in the schema's order, no properties beyond those
 * listed, one optional space after ':' and ',', numbers of at most 16
 * integer digits, and the regular subsets of bounded numbers and formats
 * described below). Keywords that constrain values in ways not handled here
 * are refused with the keyword's path, never ignored, so "accepted by the
 * grammar" implies "valid".
 *
 * Supported: type (one or a list), properties, required,
 * additionalProperties (false, true or a schema for objects without
 * properties), items, minItems, maxItems, enum, const, anyOf, allOf with
 * one member, $ref to any JSON pointer in the document (#, #/$defs/x,
 * #/definitions/x; recursion allowed), minLength, maxLength, pattern,
 * format (date, time, date-time, uuid, email, ipv4), minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum (numbers: integers in range, and
 * fractions only where the whole interval (i, i + 1) is in range), and the
 * annotations (title, description, default, examples, ...). */
#include "grammar/grammar.h"

#include "core/alloc.h"
#include "core/error.h"
#include "format/json.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct sref {
  char *ptr; /* the $ref text */
  int rule;  /* its rule number */
} sref;

typedef struct sctx {
  struct json_object *doc;
  gr_buf rules;
  int n_rules;
  sref *refs;
  size_t n_refs, cap_refs;
  brisk_status st;
  int depth;
} sctx;

#define MAX_DEPTH 64
#define INT_CAP 999999999999999999LL /* integers are kept within 18 digits */

__attribute__((format(printf, 3, 4))) static int sfail(sctx *C, const char *path, const char *fmt,
                                                       ...);
#include <stdarg.h>
static int sfail(sctx *C, const char *path, const char *fmt, ...) {
  if (C->st) return -1;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  C->st = brisk_error(BRISK_E_INVALID_ARGUMENT, "json_schema: at %s: %s", *path ? path : "/", msg);
  return -1;
}

static const char *BASE =
    "sp ::= \" \"?\n"
    "jstring ::= \"\\\"\" jchar* \"\\\"\"\n"
    "jchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    /* one escape or character = one character of the decoded string */
    "jchar1 ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt]\n"
    "jint ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"
    "jnumber ::= jint ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"
    "jvalue ::= jobject | jarray | jstring | jnumber | \"true\" | \"false\" | \"null\"\n"
    "jobject ::= \"{\" sp ( jstring \":\" sp jvalue ( \",\" sp jstring \":\" sp jvalue )* )? "
    "\"}\"\n"
    "jarray ::= \"[\" sp ( jvalue ( \",\" sp jvalue )* )? \"]\"\n"
    "jdate ::= [1-9] [0-9]{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] "
    "[0-9] | \"3\" [01] ) | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) "
    "| \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )\n"
    "jtime ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" "
    "[0-9]{1,6} )? ( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "juuid ::= [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" "
    "[0-9a-f]{12}\n"
    "jemail ::= [a-z0-9]{1,20} ( \".\" [a-z0-9]{1,20} )? \"@\" [a-z0-9]{1,20} \".\" [a-z]{2,6}\n"
    "joctet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9]\n"
    "jipv4 ::= joctet \".\" joctet \".\" joctet \".\" joctet\n";

static const char *const ANNOTATIONS[] = {
    "title",    "description", "$schema",    "$id",   "$comment",    "examples", "default",
    "readOnly", "writeOnly",   "deprecated", "$defs", "definitions", "$anchor",  NULL};

static int is_annotation(const char *k) {
  for (int i = 0; ANNOTATIONS[i]; i++)
    if (!strcmp(k, ANNOTATIONS[i])) return 1;
  return 0;
}

/* Appends JSON text (UTF-8) as one GBNF literal. */
static void put_literal(gr_buf *b, const char *s, size_t len) {
  gr_buf_puts(b, "\"");
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    uint32_t cp = *p;
    int n = cp < 0x80 ? 1 : cp < 0xE0 ? 2 : cp < 0xF0 ? 3 : 4;
    if (n > end - p) n = 1;
    if (n > 1) {
      cp &= n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07;
      for (int i = 1; i < n; i++) cp = cp << 6 | (p[i] & 0x3Fu);
    }
    gr_buf_escape_cp(b, cp);
    p += n;
  }
  gr_buf_puts(b, "\"");
}

/* A JSON value's canonical text as a literal. */
static void put_value(gr_buf *b, struct json_object *v) {
  const char *t =
      json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  put_literal(b, t, strlen(t));
}

/* Non-negative integers [lo, hi] of the same digit count, as an expression. */
static void range_same(gr_buf *b, const char *lo, const char *hi, size_t n) {
  size_t i = 0;
  while (i < n && lo[i] == hi[i]) i++;
  if (i > 0) {
    gr_buf_puts(b, "\"");
    gr_buf_put(b, lo, i);
    gr_buf_puts(b, "\" ");
  }
  if (i == n) return;
  lo += i;
  hi += i;
  n -= i;
  if (n == 1) {
    gr_buf_printf(b, "[%c-%c]", lo[0], hi[0]);
    return;
  }
  char nines[20], zeros[20];
  memset(nines, '9', n - 1);
  memset(zeros, '0', n - 1);
  /* Whole blocks where the rest of lo is all zeros or of hi all nines, so
   * each side recurses down one branch only (linear in the digit count). */
  int lo_zero = !memcmp(lo + 1, zeros, n - 1), hi_nine = !memcmp(hi + 1, nines, n - 1);
  char a = lo_zero ? lo[0] : (char)(lo[0] + 1), z = hi_nine ? hi[0] : (char)(hi[0] - 1);
  int first = 1;
  gr_buf_puts(b, "( ");
  if (!lo_zero) {
    gr_buf_printf(b, "\"%c\" ", lo[0]);
    range_same(b, lo + 1, nines, n - 1);
    first = 0;
  }
  if (a <= z) {
    gr_buf_printf(b, "%s[%c-%c] [0-9]{%zu}", first ? "" : " | ", a, z, n - 1);
    first = 0;
  }
  if (!hi_nine) {
    gr_buf_printf(b, "%s\"%c\" ", first ? "" : " | ", hi[0]);
    range_same(b, zeros, hi + 1, n - 1);
  }
  gr_buf_puts(b, " )");
}

/* Non-negative integers [lo, hi] (hi < 0: unbounded), no leading zeros. */
static void range_nonneg(gr_buf *b, long long lo, long long hi) {
  gr_buf_puts(b, "( ");
  int first = 1;
  long long p = 1; /* 10^(len - 1) */
  for (int len = 1; len <= 18; len++, p *= 10) {
    long long seg_lo = len == 1 ? 0 : p, seg_hi = p * 10 - 1;
    if (seg_lo < lo) seg_lo = lo;
    if (hi >= 0 && seg_hi > hi) seg_hi = hi;
    if (seg_lo > seg_hi) continue;
    if (!first) gr_buf_puts(b, " | ");
    first = 0;
    char a[24], z[24];
    snprintf(a, sizeof a, "%lld", seg_lo);
    snprintf(z, sizeof z, "%lld", seg_hi);
    range_same(b, a, z, strlen(a));
  }
  gr_buf_puts(b, " )");
}

/* Integers [lo, hi]; LLONG_MIN / LLONG_MAX mean unbounded. */
static void range_int(gr_buf *b, long long lo, long long hi) {
  int no_lo = lo <= -INT_CAP, no_hi = hi >= INT_CAP;
  if (no_lo) lo = -INT_CAP;
  if (no_hi) hi = INT_CAP;
  if (lo >= 0) {
    range_nonneg(b, lo, hi);
  } else if (hi < 0) {
    gr_buf_puts(b, "\"-\" ");
    range_nonneg(b, -hi, -lo);
  } else {
    gr_buf_puts(b, "( \"-\" ");
    range_nonneg(b, 1, -lo);
    gr_buf_puts(b, " | ");
    range_nonneg(b, 0, hi);
    gr_buf_puts(b, " )");
  }
}

static int gen(sctx *C, struct json_object *s, const char *path, gr_buf *out);

static int new_rule(sctx *C) { return C->n_rules++; }

/* A $ref: the rule of the schema it points at, made on first use. */
static int ref_rule(sctx *C, const char *ref, const char *path) {
  for (size_t i = 0; i < C->n_refs; i++)
    if (!strcmp(C->refs[i].ptr, ref)) return C->refs[i].rule;
  if (ref[0] != '#') return sfail(C, path, "$ref '%s' is not a pointer into this document", ref);
  struct json_object *t = C->doc;
  const char *p = ref + 1;
  while (*p) {
    if (*p != '/') return sfail(C, path, "$ref '%s' is not a JSON pointer", ref);
    p++;
    char key[256];
    size_t k = 0;
    while (*p && *p != '/' && k + 1 < sizeof key) {
      if (p[0] == '~' && p[1] == '0') {
        key[k++] = '~';
        p += 2;
      } else if (p[0] == '~' && p[1] == '1') {
        key[k++] = '/';
        p += 2;
      } else {
        key[k++] = *p++;
      }
    }
    key[k] = 0;
    struct json_object *next = NULL;
    if (json_object_is_type(t, json_type_object)) {
      if (!json_object_object_get_ex(t, key, &next)) next = NULL;
    } else if (json_object_is_type(t, json_type_array)) {
      char *e;
      long idx = strtol(key, &e, 10);
      if (*e == 0 && idx >= 0 && (size_t)idx < json_object_array_length(t))
        next = json_object_array_get_idx(t, (size_t)idx);
    }
    if (!next) return sfail(C, path, "$ref '%s' points at nothing", ref);
    t = next;
  }
  if (brisk_grow((void **)&C->refs, &C->cap_refs, C->n_refs + 1, sizeof *C->refs)) {
    C->st = brisk_error_oom();
    return -1;
  }
  int r = new_rule(C);
  char *copy = brisk_strdup(ref);
  if (!copy) {
    C->st = brisk_error_oom();
    return -1;
  }
  C->refs[C->n_refs++] = (sref){copy, r};
  gr_buf body = {0};
  int rc = gen(C, t, ref, &body);
  if (!rc) {
    gr_buf_printf(&C->rules, "r%d ::= ", r);
    gr_buf_put(&C->rules, body.s ? body.s : "", body.n);
    gr_buf_puts(&C->rules, "\n");
    if (body.oom) C->rules.oom = 1;
  }
  brisk_free(body.s);
  return rc ? -1 : r;
}

/* A helper rule holding expression `e` (so it is written once). */
static int hold(sctx *C, gr_buf *e) {
  int r = new_rule(C);
  gr_buf_printf(&C->rules, "r%d ::= ", r);
  gr_buf_put(&C->rules, e->s ? e->s : "\"\"", e->s ? e->n : 2);
  gr_buf_puts(&C->rules, "\n");
  if (e->oom) C->rules.oom = 1;
  return r;
}

static int get_num(sctx *C, struct json_object *s, const char *key, const char *path, double *v,
                   int *has) {
  struct json_object *x;
  *has = 0;
  if (!json_object_object_get_ex(s, key, &x)) return 0;
  if (!json_object_is_type(x, json_type_int) && !json_object_is_type(x, json_type_double))
    return sfail(C, path, "'%s' must be a number", key);
  *v = json_object_get_double(x);
  if (!isfinite(*v)) return sfail(C, path, "'%s' must be finite", key);
  *has = 1;
  return 0;
}

static int get_count(sctx *C, struct json_object *s, const char *key, const char *path,
                     long long *v, int *has) {
  double d;
  if (get_num(C, s, key, path, &d, has)) return -1;
  if (!*has) return 0;
  if (d < 0 || d != floor(d)) return sfail(C, path, "'%s' must be a non-negative integer", key);
  *v = d > 1e15 ? (long long)1e15 : (long long)d;
  return 0;
}

static int gen_number(sctx *C, struct json_object *s, const char *path, int integer, gr_buf *out) {
  double mn, mx, emn, emx;
  int hmn, hmx, hemn, hemx;
  struct json_object *x;
  if ((json_object_object_get_ex(s, "exclusiveMinimum", &x) &&
       json_object_is_type(x, json_type_boolean)) ||
      (json_object_object_get_ex(s, "exclusiveMaximum", &x) &&
       json_object_is_type(x, json_type_boolean)))
    return sfail(C, path, "boolean exclusiveMinimum/exclusiveMaximum (draft 4) is not supported");
  if (get_num(C, s, "minimum", path, &mn, &hmn) || get_num(C, s, "maximum", path, &mx, &hmx) ||
      get_num(C, s, "exclusiveMinimum", path, &emn, &hemn) ||
      get_num(C, s, "exclusiveMaximum", path, &emx, &hemx))
    return -1;
  if (!hmn && !hmx && !hemn && !hemx) {
    gr_buf_puts(out, integer ? "jint" : "jnumber");
    return 0;
  }
  /* Integer range [A, B]: the integers satisfying every bound. */
  double A = -1e300, B = 1e300;
  if (hmn) A = fmax(A, ceil(mn));
  if (hemn) A = fmax(A, floor(emn) + 1);
  if (hmx) B = fmin(B, floor(mx));
  if (hemx) B = fmin(B, ceil(emx) - 1);
  /* Fractions i.f with f > 0 lie in (i, i + 1): allowed for i >= 0 when
   * i >= every lower bound and i + 1 <= every upper bound. */
  double F0 = 0, F1 = 1e300;
  if (hmn) F0 = fmax(F0, ceil(mn));
  if (hemn) F0 = fmax(F0, ceil(emn));
  if (hmx) F1 = fmin(F1, floor(mx) - 1);
  if (hemx) F1 = fmin(F1, floor(emx) - 1);
  /* Within the 18 digits integers are kept to. */
  int ints = A <= B && A <= (double)INT_CAP && B >= -(double)INT_CAP;
  int fracs = !integer && F0 <= F1 && F0 <= (double)INT_CAP;
  if (!ints && !fracs) return sfail(C, path, "no number satisfies the bounds");
  long long a = A < -(double)INT_CAP ? -INT_CAP : (long long)A;
  long long b = B > (double)INT_CAP ? INT_CAP : (long long)B;
  gr_buf_puts(out, "( ");
  if (ints) range_int(out, a, b);
  if (fracs) {
    long long f0 = F0 > (double)INT_CAP ? INT_CAP : (long long)F0;
    long long f1 = F1 > (double)INT_CAP ? INT_CAP : (long long)F1;
    if (ints) gr_buf_puts(out, " | ");
    range_int(out, f0, f1);
    gr_buf_puts(out, " \".\" [0-9]{0,14} [1-9]");
  }
  gr_buf_puts(out, " )");
  return 0;
}

static int gen_string(sctx *C, struct json_object *s, const char *path, gr_buf *out) {
  struct json_object *fmt = NULL, *pat = NULL;
  long long mn = 0, mx = -1;
  int hmn, hmx;
  if (get_count(C, s, "minLength", path, &mn, &hmn) ||
      get_count(C, s, "maxLength", path, &mx, &hmx))
    return -1;
  if (!hmn) mn = 0;
  if (!hmx) mx = -1;
  json_object_object_get_ex(s, "format", &fmt);
  json_object_object_get_ex(s, "pattern", &pat);
  if ((fmt != NULL) + (pat != NULL) + (hmn || hmx) > 1)
    return sfail(C, path, "only one of format, pattern and minLength/maxLength is supported");
  if (fmt) {
    const char *f = json_object_get_string(fmt);
    static const char *const names[][2] = {{"date", "jdate"}, {"time", "jtime"},
                                           {"uuid", "juuid"}, {"email", "jemail"},
                                           {"ipv4", "jipv4"}, {"date-time", NULL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (json_object_is_type(fmt, json_type_string) && !strcmp(f, names[i][0])) {
        if (names[i][1])
          gr_buf_printf(out, "\"\\\"\" %s \"\\\"\"", names[i][1]);
        else
          gr_buf_puts(out, "\"\\\"\" jdate \"T\" jtime \"\\\"\"");
        return 0;
      }
    return sfail(C, path, "format '%s' is not supported (date, time, date-time, uuid, email, ipv4)",
                 f);
  }
  if (pat) {
    if (!json_object_is_type(pat, json_type_string))
      return sfail(C, path, "'pattern' must be a string");
    char what[300];
    snprintf(what, sizeof what, "json_schema: at %s/pattern", *path ? path : "");
    gr_buf_puts(out, "\"\\\"\" ");
    brisk_status st =
        gr_regex_expr(json_object_get_string(pat), (size_t)json_object_get_string_len(pat), 1,
                      "pat", out, NULL, what);
    if (st) {
      C->st = st;
      return -1;
    }
    gr_buf_puts(out, " \"\\\"\"");
    return 0;
  }
  if (!hmn && !hmx) {
    gr_buf_puts(out, "jstring");
    return 0;
  }
  if (mx >= 0 && mx < mn) return sfail(C, path, "maxLength is below minLength");
  if (mn > GR_MAX_REPEAT)
    return sfail(C, path, "minLength above %d is not supported", GR_MAX_REPEAT);
  if (mx > GR_MAX_REPEAT) mx = GR_MAX_REPEAT; /* a valid subset */
  if (mx < 0)
    gr_buf_printf(out, "\"\\\"\" jchar1{%lld,} \"\\\"\"", mn);
  else
    gr_buf_printf(out, "\"\\\"\" jchar1{%lld,%lld} \"\\\"\"", mn, mx);
  return 0;
}

static int gen_array(sctx *C, struct json_object *s, const char *path, gr_buf *out) {
  struct json_object *items = NULL;
  long long mn = 0, mx = -1;
  int hmn, hmx;
  if (get_count(C, s, "minItems", path, &mn, &hmn) || get_count(C, s, "maxItems", path, &mx, &hmx))
    return -1;
  if (!hmn) mn = 0;
  if (!hmx) mx = -1;
  if (mx >= 0 && mx < mn) return sfail(C, path, "maxItems is below minItems");
  if (mn > 1000) return sfail(C, path, "minItems above 1000 is not supported");
  if (mx > 1000) mx = 1000; /* a valid subset */
  char sub[512];
  snprintf(sub, sizeof sub, "%s/items", path);
  gr_buf e = {0};
  int rc = 0;
  if (json_object_object_get_ex(s, "items", &items)) {
    if (json_object_is_type(items, json_type_array))
      rc = sfail(C, path, "'items' as an array (tuple form) is not supported");
    else
      rc = gen(C, items, sub, &e);
  } else {
    gr_buf_puts(&e, "jvalue");
  }
  if (rc) {
    brisk_free(e.s);
    return -1;
  }
  if (mx == 0) {
    brisk_free(e.s);
    gr_buf_puts(out, "\"[\" sp \"]\"");
    return 0;
  }
  int item = hold(C, &e);
  brisk_free(e.s);
  long long rlo = mn > 0 ? mn - 1 : 0;
  gr_buf_printf(out, "\"[\" sp %sr%d ( \",\" sp r%d )", mn == 0 ? "( " : "", item, item);
  if (mx < 0)
    gr_buf_printf(out, "{%lld,}", rlo);
  else
    gr_buf_printf(out, "{%lld,%lld}", rlo, mx - 1);
  gr_buf_printf(out, "%s \"]\"", mn == 0 ? " )?" : "");
  return 0;
}

static int gen_object(sctx *C, struct json_object *s, const char *path, gr_buf *out) {
  struct json_object *props = NULL, *req = NULL, *addl = NULL;
  json_object_object_get_ex(s, "properties", &props);
  json_object_object_get_ex(s, "required", &req);
  json_object_object_get_ex(s, "additionalProperties", &addl);
  if (props && !json_object_is_type(props, json_type_object))
    return sfail(C, path, "'properties' must be an object");
  if (req && !json_object_is_type(req, json_type_array))
    return sfail(C, path, "'required' must be an array");
  size_t n_req = req ? json_object_array_length(req) : 0;
  for (size_t i = 0; i < n_req; i++)
    if (!json_object_is_type(json_object_array_get_idx(req, i), json_type_string))
      return sfail(C, path, "'required' must list strings");
  /* The properties in order: those listed, then required ones not listed. */
  size_t n_props = props ? (size_t)json_object_object_length(props) : 0;
  size_t cap = n_props + n_req + 1;
  const char **keys = brisk_calloc(cap, sizeof *keys);
  struct json_object **vals = brisk_calloc(cap, sizeof *vals);
  int *isreq = brisk_calloc(cap, sizeof *isreq);
  int *kv = brisk_calloc(cap, sizeof *kv);
  int rc = 0;
  if (!keys || !vals || !isreq || !kv) {
    C->st = brisk_error_oom();
    rc = -1;
    goto done;
  }
  size_t n = 0;
  if (props) {
    json_object_object_foreach(props, k, v) {
      keys[n] = k;
      vals[n++] = v;
    }
  }
  for (size_t i = 0; i < n_req; i++) {
    const char *k = json_object_get_string(json_object_array_get_idx(req, i));
    size_t j = 0;
    while (j < n && strcmp(keys[j], k)) j++;
    if (j == n) {
      keys[n] = k;
      vals[n++] = NULL; /* any value */
    }
    isreq[j] = 1;
  }
  if (n == 0) {
    if (addl && json_object_is_type(addl, json_type_boolean) && !json_object_get_boolean(addl)) {
      gr_buf_puts(out, "\"{\" sp \"}\"");
    } else if (addl && !json_object_is_type(addl, json_type_boolean)) {
      char sub[512];
      snprintf(sub, sizeof sub, "%s/additionalProperties", path);
      gr_buf e = {0};
      if (gen(C, addl, sub, &e)) {
        brisk_free(e.s);
        rc = -1;
        goto done;
      }
      int v = hold(C, &e);
      brisk_free(e.s);
      gr_buf_printf(
          out, "\"{\" sp ( jstring \":\" sp r%d ( \",\" sp jstring \":\" sp r%d )* )? \"}\"", v, v);
    } else {
      gr_buf_puts(out, "jobject");
    }
    goto done;
  }
  /* kv_i ::= "\"key\"" ":" sp value */
  for (size_t i = 0; i < n; i++) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s/properties/%s", path, keys[i]);
    gr_buf e = {0};
    struct json_object *ks = json_object_new_string(keys[i]);
    if (!ks) {
      C->st = brisk_error_oom();
      rc = -1;
      goto done;
    }
    put_value(&e, ks);
    json_object_put(ks);
    gr_buf_puts(&e, " \":\" sp ");
    if (vals[i] ? gen(C, vals[i], sub, &e) : (gr_buf_puts(&e, "jvalue"), 0)) {
      brisk_free(e.s);
      rc = -1;
      goto done;
    }
    kv[i] = hold(C, &e);
    brisk_free(e.s);
  }
  /* after_i: the properties from i on once one was written (each with its
   * comma); first_i: the same when none was written yet. */
  int after = new_rule(C), first_rule = new_rule(C);
  for (size_t i = 0; i < n; i++) {
    gr_buf_printf(&C->rules, "r%d_a%zu ::= ", after, i);
    gr_buf_printf(&C->rules, isreq[i] ? "\",\" sp r%d" : "( \",\" sp r%d )?", kv[i]);
    if (i + 1 < n)
      gr_buf_printf(&C->rules, " r%d_a%zu\n", after, i + 1);
    else
      gr_buf_puts(&C->rules, "\n");
  }
  for (size_t i = 0; i < n; i++) {
    gr_buf_printf(&C->rules, "r%d_f%zu ::= r%d", first_rule, i, kv[i]);
    if (i + 1 < n) gr_buf_printf(&C->rules, " r%d_a%zu", after, i + 1);
    if (!isreq[i]) {
      if (i + 1 < n)
        gr_buf_printf(&C->rules, " | r%d_f%zu", first_rule, i + 1);
      else
        gr_buf_puts(&C->rules, " | \"\"");
    }
    gr_buf_puts(&C->rules, "\n");
  }
  gr_buf_printf(out, "\"{\" sp r%d_f0 \"}\"", first_rule);
done:
  brisk_free(keys);
  brisk_free(vals);
  brisk_free(isreq);
  brisk_free(kv);
  return rc;
}

static const char *const TYPES[] = {"string", "number", "integer", "boolean",
                                    "null",   "object", "array",   NULL};

static int gen_type(sctx *C, struct json_object *s, const char *path, const char *t, gr_buf *out) {
  if (!strcmp(t, "string")) return gen_string(C, s, path, out);
  if (!strcmp(t, "number")) return gen_number(C, s, path, 0, out);
  if (!strcmp(t, "integer")) return gen_number(C, s, path, 1, out);
  if (!strcmp(t, "boolean")) {
    gr_buf_puts(out, "( \"true\" | \"false\" )");
    return 0;
  }
  if (!strcmp(t, "null")) {
    gr_buf_puts(out, "\"null\"");
    return 0;
  }
  if (!strcmp(t, "object")) return gen_object(C, s, path, out);
  if (!strcmp(t, "array")) return gen_array(C, s, path, out);
  return sfail(C, path, "unknown type '%s'", t);
}

/* The keywords each part handles; anything else that is not an annotation
 * is refused. */
static int known_keyword(const char *k) {
  static const char *const kw[] = {"type",
                                   "enum",
                                   "const",
                                   "anyOf",
                                   "allOf",
                                   "$ref",
                                   "properties",
                                   "required",
                                   "additionalProperties",
                                   "items",
                                   "minItems",
                                   "maxItems",
                                   "minLength",
                                   "maxLength",
                                   "pattern",
                                   "format",
                                   "minimum",
                                   "maximum",
                                   "exclusiveMinimum",
                                   "exclusiveMaximum",
                                   NULL};
  for (int i = 0; kw[i]; i++)
    if (!strcmp(k, kw[i])) return 1;
  return is_annotation(k);
}

static int gen(sctx *C, struct json_object *s, const char *path, gr_buf *out) {
  if (C->st) return -1;
  if (++C->depth > MAX_DEPTH) return sfail(C, path, "the schema nests deeper than %d", MAX_DEPTH);
  int rc = 0;
  if (json_object_is_type(s, json_type_boolean)) {
    if (json_object_get_boolean(s))
      gr_buf_puts(out, "jvalue");
    else
      rc = sfail(C, path, "the schema 'false' allows no value");
    goto done;
  }
  if (!json_object_is_type(s, json_type_object)) {
    rc = sfail(C, path, "a schema must be an object or a boolean");
    goto done;
  }
  json_object_object_foreach(s, key, val) {
    (void)val;
    if (!known_keyword(key)) {
      rc = sfail(C, path, "keyword '%s' is not supported", key);
      goto done;
    }
  }
  struct json_object *x;
  if (json_object_object_get_ex(s, "$ref", &x)) {
    json_object_object_foreach(s, k2, v2) {
      (void)v2;
      if (strcmp(k2, "$ref") && !is_annotation(k2)) {
        rc = sfail(C, path, "keyword '%s' next to $ref is not supported", k2);
        goto done;
      }
    }
    if (!json_object_is_type(x, json_type_string)) {
      rc = sfail(C, path, "'$ref' must be a string");
      goto done;
    }
    int r = ref_rule(C, json_object_get_string(x), path);
    if (r < 0) {
      rc = -1;
      goto done;
    }
    gr_buf_printf(out, "r%d", r);
    goto done;
  }
  if (json_object_object_get_ex(s, "const", &x)) {
    put_value(out, x);
    goto done;
  }
  if (json_object_object_get_ex(s, "enum", &x)) {
    if (!json_object_is_type(x, json_type_array) || json_object_array_length(x) == 0) {
      rc = sfail(C, path, "'enum' must be a non-empty array");
      goto done;
    }
    gr_buf_puts(out, "( ");
    for (size_t i = 0; i < json_object_array_length(x); i++) {
      if (i) gr_buf_puts(out, " | ");
      put_value(out, json_object_array_get_idx(x, i));
    }
    gr_buf_puts(out, " )");
    goto done;
  }
  if (json_object_object_get_ex(s, "anyOf", &x) || json_object_object_get_ex(s, "allOf", &x)) {
    int all = !json_object_object_get_ex(s, "anyOf", NULL);
    const char *kw = all ? "allOf" : "anyOf";
    if (!json_object_is_type(x, json_type_array) || json_object_array_length(x) == 0 ||
        (all && json_object_array_length(x) != 1)) {
      rc = sfail(C, path,
                 all ? "'allOf' is supported with one schema only"
                     : "'anyOf' must be a non-empty array");
      goto done;
    }
    json_object_object_foreach(s, k3, v3) {
      (void)v3;
      if (strcmp(k3, kw) && !is_annotation(k3)) {
        rc = sfail(C, path, "keyword '%s' next to %s is not supported", k3, kw);
        goto done;
      }
    }
    gr_buf_puts(out, "( ");
    for (size_t i = 0; i < json_object_array_length(x); i++) {
      char sub[512];
      snprintf(sub, sizeof sub, "%s/%s/%zu", path, kw, i);
      if (i) gr_buf_puts(out, " | ");
      if (gen(C, json_object_array_get_idx(x, i), sub, out)) {
        rc = -1;
        goto done;
      }
    }
    gr_buf_puts(out, " )");
    goto done;
  }
  const char *types[8];
  int n_types = 0;
  if (json_object_object_get_ex(s, "type", &x)) {
    if (json_object_is_type(x, json_type_string)) {
      types[n_types++] = json_object_get_string(x);
    } else if (json_object_is_type(x, json_type_array)) {
      for (size_t i = 0; i < json_object_array_length(x) && n_types < 7; i++) {
        struct json_object *t = json_object_array_get_idx(x, i);
        if (!json_object_is_type(t, json_type_string)) {
          rc = sfail(C, path, "'type' must list strings");
          goto done;
        }
        types[n_types++] = json_object_get_string(t);
      }
    }
    if (n_types == 0) {
      rc = sfail(C, path, "'type' must be a string or a non-empty array of strings");
      goto done;
    }
  } else {
    /* No type: the one the keywords imply, else any value. */
    static const char *const implies[][2] = {{"properties", "object"},
                                             {"required", "object"},
                                             {"additionalProperties", "object"},
                                             {"items", "array"},
                                             {"minItems", "array"},
                                             {"maxItems", "array"},
                                             {"minLength", "string"},
                                             {"maxLength", "string"},
                                             {"pattern", "string"},
                                             {"format", "string"},
                                             {"minimum", "number"},
                                             {"maximum", "number"},
                                             {"exclusiveMinimum", "number"},
                                             {"exclusiveMaximum", "number"}};
    for (size_t i = 0; i < sizeof implies / sizeof implies[0] && !n_types; i++)
      if (json_object_object_get_ex(s, implies[i][0], NULL)) types[n_types++] = implies[i][1];
    if (!n_types) {
      gr_buf_puts(out, "jvalue");
      goto done;
    }
  }
  gr_buf_puts(out, "( ");
  for (int i = 0; i < n_types; i++) {
    int ok = 0;
    for (int j = 0; TYPES[j]; j++) ok |= !strcmp(types[i], TYPES[j]);
    if (!ok) {
      rc = sfail(C, path, "unknown type '%s'", types[i]);
      goto done;
    }
    if (i) gr_buf_puts(out, " | ");
    if (gen_type(C, s, path, types[i], out)) {
      rc = -1;
      goto done;
    }
  }
  gr_buf_puts(out, " )");
done:
  C->depth--;
  return rc;
}

brisk_status gr_schema_to_gbnf(const char *schema, size_t len, char **gbnf) {
  sctx C = {0};
  brisk_status st = brisk_json_parse(schema, len, true, "json_schema", &C.doc);
  if (st == BRISK_E_FORMAT) { /* bad text of an argument, not of a file */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", brisk_last_error());
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "%s", msg);
  }
  if (st) return st;
  gr_buf root = {0};
  gr_buf_puts(&C.rules, BASE);
  if (!gen(&C, C.doc, "", &root)) {
    gr_buf_puts(&C.rules, "root ::= ");
    gr_buf_put(&C.rules, root.s ? root.s : "", root.n);
    gr_buf_puts(&C.rules, "\n");
  }
  st = C.st;
  if (!st && (C.rules.oom || root.oom)) st = brisk_error_oom();
  brisk_free(root.s);
  for (size_t i = 0; i < C.n_refs; i++) brisk_free(C.refs[i].ptr);
  brisk_free(C.refs);
  brisk_json_free(C.doc);
  if (st) {
    brisk_free(C.rules.s);
    return st;
  }
  *gbnf = C.rules.s;
  return BRISK_OK;
}
