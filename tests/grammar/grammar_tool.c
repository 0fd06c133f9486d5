/* grammar_tool: the constraint core from the command line, for the Python
 * tests that check it against independent implementations (jsonschema,
 * re, json).
 *
 *   grammar_tool gbnf  KIND FILE           prints the GBNF compiled from FILE
 *   grammar_tool gen   KIND FILE N SEED    N random strings of the grammar
 *   grammar_tool check KIND FILE           for each input line, 1 if the
 *                                          matcher accepts it as a whole
 *                                          string, 2 if as a prefix only,
 *                                          else 0
 *
 * KIND is gbnf, schema, json or regex. Strings are read and written as JSON
 * string literals, one per line. `gen` derives strings from the grammar's
 * rules directly (random alternatives, shortest ones past a length
 * budget), not through the matcher, so `check` of its output tests the
 * matcher. Exit status 1 with the error on stderr if FILE does not compile. */
#include "gen.h"
#include "grammar/grammar.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
    free(s);
    s = NULL;
  }
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

static void put_json_string(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  puts("\"");
}

/* Decodes a JSON string literal line (our own output or Python's
 * json.dumps(ensure_ascii=False)) into buf; its length or -1. */
static long get_json_string(const char *line, char *buf, size_t cap) {
  const char *p = line;
  while (*p == ' ') p++;
  if (*p++ != '"') return -1;
  size_t n = 0;
  while (*p && *p != '"') {
    uint32_t cp;
    if (*p == '\\') {
      p++;
      switch (*p) {
      case 'n': cp = '\n'; break;
      case 't': cp = '\t'; break;
      case 'r': cp = '\r'; break;
      case 'b': cp = '\b'; break;
      case 'f': cp = '\f'; break;
      case 'u': {
        cp = (uint32_t)strtoul((char[]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && p[1] == '\\' && p[2] == 'u') {
          uint32_t lo = (uint32_t)strtoul((char[]){p[3], p[4], p[5], p[6], 0}, NULL, 16);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          p += 6;
        }
        break;
      }
      default: cp = (unsigned char)*p;
      }
      p++;
      if (n + 4 >= cap) return -1;
      if (cp < 0x80) {
        buf[n++] = (char)cp;
      } else if (cp < 0x800) {
        buf[n++] = (char)(0xC0 | cp >> 6);
        buf[n++] = (char)(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        buf[n++] = (char)(0xE0 | cp >> 12);
        buf[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        buf[n++] = (char)(0x80 | (cp & 0x3F));
      } else {
        buf[n++] = (char)(0xF0 | cp >> 18);
        buf[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
        buf[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
        buf[n++] = (char)(0x80 | (cp & 0x3F));
      }
    } else {
      if (n + 1 >= cap) return -1;
      buf[n++] = *p++;
    }
  }
  return (long)n;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: grammar_tool gbnf|gen|check KIND FILE [N SEED]\n");
    return 2;
  }
  const char *kinds[] = {"gbnf", "schema", "json", "regex"};
  brisk_constraint_kind kv[] = {BRISK_CONSTRAINT_GBNF, BRISK_CONSTRAINT_JSON_SCHEMA,
                                BRISK_CONSTRAINT_JSON, BRISK_CONSTRAINT_REGEX};
  brisk_constraint_params cp;
  brisk_constraint_params_init(&cp);
  for (int i = 0; i < 4; i++)
    if (!strcmp(argv[2], kinds[i])) cp.kind = kv[i];
  char *text = cp.kind == BRISK_CONSTRAINT_JSON ? NULL : slurp(argv[3]);
  if (cp.kind == BRISK_CONSTRAINT_NONE || (cp.kind != BRISK_CONSTRAINT_JSON && !text)) {
    fprintf(stderr, "grammar_tool: bad kind or unreadable file\n");
    return 2;
  }
  if (text && cp.kind == BRISK_CONSTRAINT_REGEX) { /* the pattern is the first line */
    char *nl = strchr(text, '\n');
    if (nl) *nl = 0;
  }
  cp.text = text;
  brisk_grammar *g;
  if (brisk_grammar_compile(&cp, &g)) {
    fprintf(stderr, "%s\n", brisk_last_error());
    free(text);
    return 1;
  }
  int rc = 0;
  if (!strcmp(argv[1], "gbnf")) {
    fputs(brisk_grammar_gbnf(g), stdout);
  } else if (!strcmp(argv[1], "gen") && argc >= 6) {
    gen_ctx G;
    if (gen_init(&G, g, strtoull(argv[5], NULL, 10))) return 3;
    for (long i = 0; i < atol(argv[4]); i++) {
      size_t n;
      const char *s = gen_string(&G, 200, &n);
      if (!s) return 3;
      put_json_string(s, n);
    }
    gen_release(&G);
  } else if (!strcmp(argv[1], "check")) {
    gr_masker k;
    gr_vocab v;
    const char *none = "";
    uint32_t zero = 0;
    if (gr_vocab_build_texts(1, &none, &zero, NULL, 0, &v) || gr_masker_init_vocab(&k, g, &v)) {
      fprintf(stderr, "%s\n", brisk_last_error());
      return 1;
    }
    gr_state s;
    if (gr_state_init(&k, &s)) return 3;
    static char line[1 << 20], buf[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
      long n = get_json_string(line, buf, sizeof buf);
      if (n < 0) {
        puts("bad");
        continue;
      }
      gr_state_reset(&k, &s);
      int r = gr_state_feed(&k, &s, buf, (size_t)n);
      if (r < 0) {
        fprintf(stderr, "%s\n", brisk_last_error());
        return 1;
      }
      puts(r == 0 ? "0" : gr_state_accepting(&s) ? "1" : "2");
    }
    gr_state_release(&s);
    gr_masker_release(&k);
  } else {
    rc = 2;
  }
  brisk_grammar_free(g);
  free(text);
  return rc;
}
