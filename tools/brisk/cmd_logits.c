/* brisk logits MODEL OUT.f32 TOK...: the logits of every position after
 * feeding the ids as one batch from position 0, written as float32
 * [n_tokens][n_vocab] (the format of the golden files), for comparing with
 * other engines. */
#include "brisk.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_logits(int argc, char **argv);

int cmd_logits(int argc, char **argv) {
  bool json = false;
  const char *model_path = NULL, *out_path = NULL;
  int32_t *toks = malloc((size_t)argc * sizeof *toks);
  int n = 0;
  for (int i = 1; i < argc; i++) {
    char *end;
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!model_path) model_path = argv[i];
    else if (!out_path) out_path = argv[i];
    else {
      long v = strtol(argv[i], &end, 10);
      if (*end || end == argv[i] || v < 0 || v > INT32_MAX) {
        free(toks);
        return cli_fail("logits", "'%s' is not a token id", argv[i]);
      }
      toks[n++] = (int32_t)v;
    }
  }
  if (!model_path || !out_path || n == 0) {
    free(toks);
    return cli_fail("logits", "usage: brisk logits MODEL OUT.f32 TOK1 [TOK2 ...] [--json]");
  }
  brisk_model *m = NULL;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  FILE *f = NULL;
  int rc = 1;
  brisk_context_params p;
  brisk_context_params_init(&p);
  p.kv_tokens = n;
  p.max_batch_tokens = n;
  p.n_seq_max = 1;
  p.kv_type = BRISK_KV_F32; /* as the golden files were made */
  if (brisk_model_load(model_path, NULL, &m) || brisk_context_create(m, &p, &c) ||
      brisk_batch_create(n, &b)) {
    cli_fail("logits", "%s", brisk_last_error());
    goto done;
  }
  for (int i = 0; i < n; i++) brisk_batch_add(b, toks[i], i, 0, 1);
  if (brisk_decode(c, b)) {
    cli_fail("logits", "%s", brisk_last_error());
    goto done;
  }
  if (!(f = fopen(out_path, "wb"))) {
    cli_fail("logits", "cannot write '%s'", out_path);
    goto done;
  }
  size_t nv = (size_t)brisk_model_n_vocab(m);
  for (int i = 0; i < n; i++)
    if (fwrite(brisk_get_logits(c, i), sizeof(float), nv, f) != nv) {
      cli_fail("logits", "writing '%s' failed", out_path);
      goto done;
    }
  if (json) {
    printf("{\"out\": ");
    cli_json_string(stdout, out_path);
    printf(", \"n_tokens\": %d, \"n_vocab\": %zu}\n", n, nv);
  } else {
    printf("wrote %d x %zu logits to %s\n", n, nv, out_path);
  }
  rc = 0;
done:
  if (f && fclose(f) != 0 && rc == 0) rc = cli_fail("logits", "writing '%s' failed", out_path);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
  free(toks);
  return rc;
}
