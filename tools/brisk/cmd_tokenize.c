/* brisk tokenize MODEL TEXT: token ids and their pieces. */
#include "brisk.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_tokenize(int argc, char **argv);

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

/* A piece as JSON-safe text: bytes that are not valid on their own (a
 * split UTF-8 character) are written as \u00XX escapes of the byte. */
static void print_piece(FILE *out, const char *p, size_t n, bool json) {
  char tmp[256];
  size_t k = n < sizeof tmp - 1 ? n : sizeof tmp - 1;
  memcpy(tmp, p, k);
  tmp[k] = 0;
  if (json) cli_json_string(out, tmp);
  else fprintf(out, "'%s'", tmp);
}

int cmd_tokenize(int argc, char **argv) {
  const char *model_path = NULL, *text = NULL, *file = NULL;
  bool json = false;
  uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--no-bos")) flags &= ~BRISK_TOKENIZE_ADD_SPECIAL;
    else if (!strcmp(argv[i], "--special")) flags |= BRISK_TOKENIZE_PARSE_SPECIAL;
    else if (!strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1]) return cli_fail("tokenize", "unknown option '%s'", argv[i]);
    else if (!model_path) model_path = argv[i];
    else if (!text) text = argv[i];
    else return cli_fail("tokenize", "unexpected argument '%s'", argv[i]);
  }
  if (!model_path || (!text && !file) || (text && file))
    return cli_fail("tokenize", "usage: brisk tokenize MODEL (TEXT | --file PATH) [--no-bos] "
                                "[--special] [--json]");
  size_t len = text ? strlen(text) : 0;
  char *owned = NULL;
  if (file && !(owned = read_file(file, &len)))
    return cli_fail("tokenize", "cannot read '%s'", file);
  if (owned) text = owned;

  brisk_model_params params;
  brisk_model_params_init(&params);
  params.vocab_only = 1;
  brisk_model *m = NULL;
  if (brisk_model_load(model_path, &params, &m) != BRISK_OK) {
    free(owned);
    return cli_fail("tokenize", "%s", brisk_last_error());
  }
  size_t n = 0;
  int32_t *ids = NULL;
  brisk_status st = brisk_tokenize(m, text, len, NULL, 0, flags, &n);
  if (st == BRISK_E_BUFFER_TOO_SMALL) {
    ids = malloc((n ? n : 1) * sizeof *ids);
    st = ids ? brisk_tokenize(m, text, len, ids, n, flags, &n) : BRISK_E_OUT_OF_MEMORY;
  }
  int rc = 0;
  if (st != BRISK_OK) {
    rc = cli_fail("tokenize", "%s", brisk_last_error());
  } else if (json) {
    printf("{\"ids\": [");
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"pieces\": [");
    for (size_t i = 0; i < n; i++) {
      char piece[256];
      size_t pn = 0;
      brisk_token_to_piece(m, ids[i], BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece, &pn);
      if (i) printf(", ");
      print_piece(stdout, piece, pn < sizeof piece ? pn : sizeof piece, true);
    }
    printf("]}\n");
  } else {
    for (size_t i = 0; i < n; i++) {
      char piece[256];
      size_t pn = 0;
      brisk_token_to_piece(m, ids[i], BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece, &pn);
      printf("%6d -> ", ids[i]);
      print_piece(stdout, piece, pn < sizeof piece ? pn : sizeof piece, false);
      printf("\n");
    }
  }
  free(ids);
  free(owned);
  brisk_model_free(m);
  return rc;
}
