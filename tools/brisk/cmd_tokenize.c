/* brisk tokenize MODEL TEXT: token ids and their pieces. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_tokenize(int argc, char **argv);

int cmd_tokenize(int argc, char **argv) {
  const char *model_path = NULL, *text = NULL, *file = NULL, *pos[2] = {0};
  bool json = false, no_bos = false, special = false;
  int n_pos = 0;
  const cli_opt opts[] = {
      {CLI_STR_OPT(0, "file", &file, "PATH", "tokenize the file's text instead of TEXT")},
      {CLI_FLAG_OPT(0, "no-bos", &no_bos, "leave out the BOS/EOS the vocabulary adds")},
      {CLI_FLAG_OPT(0, "special", &special,
                    "match control tokens such as <|im_start|> in the text")},
      {CLI_FLAG_OPT(0, "json", &json,
                    "one JSON object on stdout: ids, pieces (invalid UTF-8 as\n"
                    "U+FFFD) and each piece's exact bytes")},
  };
  const cli_group groups[] = {{"options", opts, sizeof opts / sizeof opts[0]}};
  const cli_spec spec = {
      .cmd = "tokenize",
      .usage = "MODEL (TEXT | --file PATH) [--no-bos] [--special] [--json]",
      .summary = "Shows the token ids of a text and the piece of text each one stands for.\n"
                 "Works on vocabulary-only GGUF files.",
      .groups = groups,
      .n_groups = 1,
      .min_pos = 1,
      .max_pos = 2,
      .pos = pos,
      .n_pos = &n_pos,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  model_path = pos[0];
  text = pos[1];
  uint32_t flags =
      (no_bos ? 0 : BRISK_TOKENIZE_ADD_SPECIAL) | (special ? BRISK_TOKENIZE_PARSE_SPECIAL : 0);
  if (!text == !file)
    return cli_usage_error("tokenize", "give TEXT or --file PATH (usage: brisk tokenize %s)",
                           spec.usage);
  size_t len = text ? strlen(text) : 0;
  char *owned = NULL;
  if (file && !(owned = cli_read_file(file, &len)))
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
    /* Pieces are text for people (a byte-level piece can be half a
     * character: U+FFFD then); "bytes" holds each piece exactly. */
    printf("{\"ids\": [");
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    for (int pass = 0; pass < 2; pass++) {
      printf(pass ? "], \"bytes\": [" : "], \"pieces\": [");
      for (size_t i = 0; i < n; i++) {
        char piece[256];
        size_t pn = 0;
        brisk_token_to_piece(m, ids[i], BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece, &pn);
        if (pn > sizeof piece) pn = sizeof piece;
        if (i) printf(", ");
        if (!pass) {
          cli_json_bytes(stdout, piece, pn);
          continue;
        }
        putchar('[');
        for (size_t k = 0; k < pn; k++) printf("%s%u", k ? ", " : "", (unsigned char)piece[k]);
        putchar(']');
      }
    }
    printf("]}\n");
  } else {
    for (size_t i = 0; i < n; i++) {
      char piece[256];
      size_t pn = 0;
      brisk_token_to_piece(m, ids[i], BRISK_DETOKENIZE_RENDER_SPECIAL, piece, sizeof piece, &pn);
      printf("%6d -> '%.*s'\n", ids[i], (int)(pn < sizeof piece ? pn : sizeof piece), piece);
    }
  }
  free(ids);
  free(owned);
  brisk_model_free(m);
  return rc;
}
