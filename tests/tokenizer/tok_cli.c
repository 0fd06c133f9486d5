/* A tiny command-line front end to the tokenizer, for the Python cross-check
 * and for poking at vocabularies by hand.
 *
 *   tok_cli [--parse-special] [--add-special] VOCAB INPUT
 *
 * VOCAB is a .gguf file or a tokenizer.json. INPUT holds texts separated by
 * lines "__ggml_vocab_test__" (llama.cpp's .inp format: each text is followed
 * by "\n__ggml_vocab_test__\n"). For each text it prints one line of token
 * ids (each preceded by a space, as the .out files) and one line "= HEX" with
 * the detokenized bytes in hex. Exit status 0, or 1 with a message.
 *
 *   tok_cli --pre-names
 *   tok_cli --pretok NAME INPUT
 *
 * print brisk's table of GGUF pre-tokenizer names as JSON lines (name,
 * family, flags, regexes), and the pieces NAME's regexes cut each text of
 * INPUT into (one line per text: the pieces in hex, space-separated). */
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + len, 1, cap - len, f)) > 0;) {
    len += r;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *n = len;
  return buf;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static int pre_names(void) {
  for (size_t i = 0; i < brisk_pretok_n_names(); i++) {
    const char *name = brisk_pretok_name_at(i);
    brisk_pretok_info f;
    const char *const *pat = brisk_pretok_lookup(name, &f);
    printf("{\"name\": ");
    json_str(name);
    printf(", \"family\": ");
    json_str(f.canonical);
    printf(", \"ignore_merges\": %d, \"clean_spaces\": %d, \"add_bos\": %d, \"no_bos\": %d, "
           "\"add_sep\": %d, \"raw_utf8\": %d, \"escape_spaces\": %d, \"force_bos\": %d, "
           "\"newline_words\": %d, \"patterns\": [",
           f.ignore_merges, f.clean_spaces, f.add_bos, f.no_bos, f.add_sep, f.raw_utf8,
           f.escape_spaces, f.force_bos, f.newline_words);
    for (size_t k = 0; pat[k]; k++) {
      if (k) printf(", ");
      json_str(pat[k]);
    }
    printf("]}\n");
  }
  return 0;
}

static brisk_status print_piece(void *ctx, const char *s, size_t n) {
  (void)ctx;
  putchar(' ');
  for (size_t k = 0; k < n; k++) printf("%02x", (unsigned char)s[k]);
  return BRISK_OK;
}

static int pretok_main(const char *name, const char *path);

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--pre-names") == 0) return pre_names();
  if (argc == 4 && strcmp(argv[1], "--pretok") == 0) return pretok_main(argv[2], argv[3]);
  int parse_special = 0, add_special = 0, i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (strcmp(argv[i], "--parse-special") == 0)
      parse_special = 1;
    else if (strcmp(argv[i], "--add-special") == 0)
      add_special = 1;
    else
      break;
  }
  if (argc - i != 2) {
    fprintf(stderr, "usage: %s [--parse-special] [--add-special] VOCAB INPUT\n", argv[0]);
    return 1;
  }
  brisk_vocab *v = NULL;
  brisk_status st = ends_with(argv[i], ".gguf") ? brisk_vocab_from_gguf_file(argv[i], &v)
                                                : brisk_vocab_from_hf_file(argv[i], &v);
  if (st != BRISK_OK) {
    fprintf(stderr, "tok_cli: %s\n", brisk_last_error());
    return 1;
  }
  size_t n = 0;
  char *in = read_all(argv[i + 1], &n);
  if (!in) {
    fprintf(stderr, "tok_cli: cannot read %s\n", argv[i + 1]);
    brisk_vocab_free(v);
    return 1;
  }
  static const char sep[] = "\n__ggml_vocab_test__\n";
  const size_t sep_len = sizeof sep - 1;
  int rc = 0;
  for (size_t pos = 0; pos < n && rc == 0;) {
    const char *end = NULL;
    for (size_t k = pos; k + sep_len <= n; k++)
      if (memcmp(in + k, sep, sep_len) == 0) {
        end = in + k;
        break;
      }
    size_t len = end ? (size_t)(end - (in + pos)) : n - pos;
    size_t need = 0;
    st = brisk_vocab_tokenize(v, in + pos, len, add_special, parse_special, NULL, 0, &need);
    int32_t *toks = malloc((need ? need : 1) * sizeof *toks);
    if (st == BRISK_OK || st == BRISK_E_BUFFER_TOO_SMALL)
      st = brisk_vocab_tokenize(v, in + pos, len, add_special, parse_special, toks, need, &need);
    if (st != BRISK_OK) {
      fprintf(stderr, "tok_cli: %s\n", brisk_last_error());
      rc = 1;
    } else {
      for (size_t k = 0; k < need; k++) printf(" %d", (int)toks[k]);
      printf("\n=");
      size_t tn = 0;
      brisk_vocab_detokenize(v, toks, need, parse_special ? BRISK_DETOK_RENDER_SPECIAL : 0, NULL, 0,
                             &tn);
      char *text = malloc(tn ? tn : 1);
      st = brisk_vocab_detokenize(v, toks, need, parse_special ? BRISK_DETOK_RENDER_SPECIAL : 0,
                                  text, tn, &tn);
      if (st != BRISK_OK) rc = 1;
      printf(" ");
      for (size_t k = 0; k < tn; k++) printf("%02x", (unsigned char)text[k]);
      printf("\n");
      free(text);
    }
    free(toks);
    pos += len + (end ? sep_len : 0);
  }
  free(in);
  brisk_vocab_free(v);
  return rc;
}

static int pretok_main(const char *name, const char *path) {
  brisk_pretok *p = NULL;
  brisk_pretok_ws *ws = NULL;
  size_t n = 0;
  char *in = read_all(path, &n);
  brisk_status st = in ? brisk_pretok_create(&p) : BRISK_E_IO;
  if (st == BRISK_OK) st = brisk_pretok_add_named(p, name, NULL);
  if (st == BRISK_OK) st = brisk_pretok_ws_create(p, &ws);
  static const char sep[] = "\n__ggml_vocab_test__\n";
  const size_t sep_len = sizeof sep - 1;
  for (size_t pos = 0; st == BRISK_OK && pos < n;) {
    const char *end = NULL;
    for (size_t k = pos; k + sep_len <= n && !end; k++)
      if (memcmp(in + k, sep, sep_len) == 0) end = in + k;
    size_t len = end ? (size_t)(end - (in + pos)) : n - pos;
    st = brisk_pretok_run(p, ws, in + pos, len, print_piece, NULL);
    printf("\n");
    pos += len + (end ? sep_len : 0);
  }
  if (st != BRISK_OK)
    fprintf(stderr, "tok_cli: %s\n", in ? brisk_last_error() : "cannot read input");
  brisk_pretok_ws_free(ws);
  brisk_pretok_free(p);
  free(in);
  return st == BRISK_OK ? 0 : 1;
}
