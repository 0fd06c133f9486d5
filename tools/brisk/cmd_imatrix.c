/* brisk imatrix -m MODEL -f TEXT -o OUT [-c N]: activation statistics for
 * importance-weighted quantization, as llama-imatrix collects them: the text
 * is cut into windows of N tokens (the first replaced by BOS where the
 * vocabulary adds one), each evaluated from an empty cache, and for every
 * weight matrix the squares of each input column are summed over all rows
 * that reach it. The output matrix is left out unless --process-output
 * (llama-imatrix's default too). Written in llama.cpp's GGUF imatrix form
 * (imatrix_file.h), which llama-quantize and brisk quantize --imatrix read.
 * The statistics are taken on the host: the model runs on the CPU. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"
#include "imatrix_file.h"

#include "context/context.h"
#include "core/error.h"
#include "forward/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmd_imatrix(int argc, char **argv);

typedef struct collector {
  imatrix m;
  bool skip_output; /* leave out the output matrix (output or tied token_embd) */
  brisk_status st;
} collector;

static void observe(void *user, const brisk_weight *w, const float *x, int32_t n) {
  collector *c = user;
  if (c->st || !w->name) return;
  /* A tied model's output matrix is its token embedding, which is never a
   * matmul input otherwise: both names mean the output. */
  if (c->skip_output &&
      (!strcmp(w->name, "output.weight") || !strcmp(w->name, "token_embd.weight")))
    return;
  imatrix_entry *e = imatrix_find(&c->m, w->name);
  if (!e && (c->st = imatrix_add(&c->m, w->name, w->cols, &e))) return;
  if (e->n_cols != w->cols) {
    c->st = brisk_error(BRISK_E_INTERNAL, "%s seen with %lld and %lld columns", w->name,
                        (long long)e->n_cols, (long long)w->cols);
    return;
  }
  for (int32_t r = 0; r < n; r++) {
    const float *row = x + (size_t)r * (size_t)w->cols;
    for (int64_t j = 0; j < w->cols; j++) e->sum2[j] += (double)row[j] * row[j];
  }
  e->counts[0] += n;
}

int cmd_imatrix(int argc, char **argv) {
  cli_model_args ma = {0};
  const char *text_path = NULL, *out_path = NULL, *pos[1] = {0};
  int n_ctx = 512, chunks = 0, n_pos = 0;
  bool json = false, process_output = false;
  const cli_opt im_opts[] = {
      {CLI_STR_OPT('f', "file", &text_path, "PATH", "the calibration text (UTF-8)")},
      {CLI_STR_OPT('o', "output", &out_path, "PATH", "the imatrix file to write (GGUF form)")},
      {CLI_INT_OPT('c', "ctx-size", &n_ctx, "N", "window length in tokens (default 512)", 4,
                   1 << 20)},
      {CLI_INT_OPT(0, "chunks", &chunks, "N", "use at most N windows (default 0: all)", 0,
                   1 << 30)},
      {CLI_FLAG_OPT(0, "process-output", &process_output,
                    "collect the output matrix too (llama-imatrix's flag)")},
  };
  const cli_opt out_opts[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")}};
  const cli_group groups[] = {
      cli_model_group(&ma, "the model (or give it as the operand)"),
      {"imatrix", im_opts, 5},
      {"output", out_opts, 1},
  };
  const cli_spec spec = {
      .cmd = "imatrix",
      .usage = "[-m] MODEL -f TEXT -o OUT.gguf [-c N] [--chunks N] [--process-output] [--json]",
      .summary = "Collects activation statistics over a text for importance-weighted quantization\n"
                 "(brisk quantize --imatrix): windows of N tokens as llama-imatrix cuts them, and\n"
                 "per weight matrix the sum of each input column's squares over every row, in\n"
                 "llama.cpp's GGUF imatrix format. The model runs on the CPU.",
      .groups = groups,
      .n_groups = 3,
      .min_pos = 0,
      .max_pos = 1,
      .pos = pos,
      .n_pos = &n_pos,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  const char *model_path = ma.path ? ma.path : pos[0];
  if (!model_path || !text_path || !out_path)
    return cli_usage_error("imatrix", "give -m MODEL, -f TEXT and -o OUT");
  /* The observer sees the context's own pass: stage 0's layers only. */
  if (ma.pp > 1)
    return cli_usage_error("imatrix", "--pp: the statistics need every layer in one pass");
  int rc = 1;
  brisk_model *m = NULL;
  brisk_context *c = NULL;
  brisk_batch *b = NULL;
  char *text = NULL;
  int32_t *toks = NULL;
  collector col = {0};
  brisk_model_params mp;
  cli_model_params(&ma, &mp);
  mp.device = NULL; /* statistics are taken on the host */
  mp.n_gpu_layers = 0;
  size_t len, n_tokens = 0;
  if (!(text = cli_read_file(text_path, &len))) {
    cli_fail("imatrix", "cannot read '%s'", text_path);
    goto done;
  }
  if (brisk_model_load(model_path, &mp, &m)) {
    cli_fail("imatrix", "%s", brisk_last_error());
    goto done;
  }
  brisk_status st = brisk_tokenize(m, text, len, NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL, &n_tokens);
  if ((st == BRISK_E_BUFFER_TOO_SMALL || !st) && n_tokens) {
    if (!(toks = malloc(n_tokens * sizeof *toks))) {
      cli_fail("imatrix", "out of memory");
      goto done;
    }
    st = brisk_tokenize(m, text, len, toks, n_tokens, BRISK_TOKENIZE_ADD_SPECIAL, &n_tokens);
  }
  if (st || n_tokens < (size_t)n_ctx) {
    cli_fail("imatrix", "'%s': %s", text_path,
             st ? brisk_last_error() : "fewer tokens than one window (-c)");
    goto done;
  }
  int32_t n_chunk = (int32_t)(n_tokens / (size_t)n_ctx);
  if (chunks && chunks < n_chunk) n_chunk = chunks;
  const int32_t bos = brisk_model_special_token(m, BRISK_TOKEN_BOS);
  const bool add_bos = bos >= 0 && toks[0] == bos;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = n_ctx;
  cp.max_batch_tokens = n_ctx;
  cp.n_seq_max = 1;
  cp.prefix_cache = 0;
  cp.n_threads = ma.threads;
  if (brisk_context_create(m, &cp, &c) || brisk_batch_create(n_ctx, &b)) {
    cli_fail("imatrix", "%s", brisk_last_error());
    goto done;
  }
  col.skip_output = !process_output;
  brisk_forward_set_observer(brisk_context_forward(c), observe, &col);
  for (int32_t i = 0; i < n_chunk; i++) {
    const int32_t *win = toks + (size_t)i * (size_t)n_ctx;
    brisk_batch_clear(b);
    st = brisk_seq_free(c, 0);
    for (int32_t k = 0; k < n_ctx && !st; k++)
      st = brisk_batch_add(b, k == 0 && add_bos ? bos : win[k], k, 0, k == n_ctx - 1);
    if (!st) st = brisk_decode(c, b);
    if (!st) st = col.st;
    if (st) {
      cli_fail("imatrix", "window %d: %s", i + 1, brisk_last_error());
      goto done;
    }
    if (!json) fprintf(stderr, "\rimatrix: window %d / %d", i + 1, n_chunk);
  }
  if (!json) fprintf(stderr, "\n");
  col.m.chunk_count = (uint32_t)n_chunk;
  col.m.chunk_size = (uint32_t)n_ctx;
  col.m.dataset = strdup(text_path);
  if (imatrix_write(&col.m, out_path)) {
    cli_fail("imatrix", "writing '%s': %s", out_path, brisk_last_error());
    goto done;
  }
  if (json) {
    printf("{\"out\": ");
    cli_json_string(stdout, out_path);
    printf(", \"entries\": %zu, \"chunks\": %d, \"chunk_size\": %d, \"tokens\": %zu}\n", col.m.n,
           n_chunk, n_ctx, n_tokens);
  } else
    printf("%s: %zu matrices, %d windows of %d tokens\n", out_path, col.m.n, n_chunk, n_ctx);
  rc = 0;
done:
  imatrix_free(&col.m);
  brisk_batch_free(b);
  brisk_context_free(c);
  brisk_model_free(m);
  free(toks);
  free(text);
  return rc;
}
