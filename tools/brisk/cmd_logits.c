/* brisk logits MODEL OUT.f32 TOK...: the logits of every position after
 * feeding the ids as one batch from position 0, written as float32
 * [n_tokens][n_vocab] (the format of the golden files), for comparing with
 * other engines. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_logits(int argc, char **argv);

static const char *parse_ids(const char *const *pos, int n_pos, int32_t *toks, int *n) {
  for (int i = 0; i < n_pos; i++) {
    char *end;
    errno = 0;
    long v = strtol(pos[i], &end, 10);
    if (errno || *end || end == pos[i] || v < 0 || v > INT32_MAX) return pos[i];
    toks[(*n)++] = (int32_t)v;
  }
  return NULL;
}

int cmd_logits(int argc, char **argv) {
  bool json = false;
  int kv_type = BRISK_KV_F32; /* as the golden files were made */
  cli_model_args ma = {0};
  const char **pos = malloc((size_t)argc * sizeof *pos);
  int32_t *toks = malloc((size_t)argc * sizeof *toks);
  int n = 0, n_pos = 0;
  if (!pos || !toks) {
    free(pos);
    free(toks);
    return cli_fail("logits", "out of memory");
  }
  const cli_opt out_opts[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")},
                              {CLI_KV_TYPE_OPT(&kv_type, CLI_KV_TYPE_HELP "\n(default f32)")}};
  const cli_group groups[] = {
      cli_model_group(&ma, "the model (or give it as the first operand)"),
      {"output", out_opts, 2},
  };
  const cli_spec spec = {
      .cmd = "logits",
      .usage = "[-m] MODEL OUT.f32 TOK1 [TOK2 ...] [--json]",
      .summary = "Feeds the token ids as one batch from position 0 (F32 KV cache unless\n"
                 "--kv-type) and writes the\n"
                 "logits of every position as float32 [n_tokens][n_vocab], the format of the\n"
                 "golden files, for comparing with other engines.",
      .groups = groups,
      .n_groups = 2,
      .min_pos = 2,
      .max_pos = argc,
      .pos = pos,
      .n_pos = &n_pos,
  };
  int prc = cli_parse(&spec, argc, argv);
  const char *model_path = ma.path, *out_path = NULL;
  if (prc == CLI_CONTINUE) {
    int first = 0;
    if (!model_path) model_path = pos[first++];
    out_path = first < n_pos ? pos[first++] : NULL;
    const char *bad = parse_ids(pos + first, n_pos - first, toks, &n);
    if (bad)
      prc = cli_usage_error("logits", "'%s' is not a token id (0 to %d)", bad, INT32_MAX);
    else if (!out_path || n == 0)
      prc = cli_usage_error("logits", "usage: brisk logits [-m] MODEL OUT.f32 TOK1 [TOK2 ...]");
  }
  free(pos);
  if (prc != CLI_CONTINUE) {
    free(toks);
    return prc;
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
  p.kv_type = (brisk_kv_type)kv_type;
  p.n_threads = ma.threads;
  brisk_model_params mp;
  cli_model_params(&ma, &mp);
  const int join_rc = cli_mpi_join("logits", ma.tp, ma.pp);
  if (join_rc >= 0) {
    rc = join_rc;
    goto done;
  }
  if (brisk_model_load(model_path, &mp, &m)) {
    cli_fail("logits", "%s", brisk_last_error());
    goto done;
  }
  const int worker_rc = cli_mpi_follow("logits", ma.threads, m);
  if (worker_rc >= 0) {
    rc = worker_rc;
    goto done;
  }
  if (brisk_context_create(m, &p, &c) || brisk_batch_create(n, &b)) {
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
