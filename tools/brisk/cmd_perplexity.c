/* brisk perplexity -m MODEL -f TEXT [-c N]: perplexity over a text file by
 * llama-perplexity's method, so the figures compare with it: the text is
 * tokenized once (BOS added if the vocabulary adds one), cut into
 * floor(n / N) windows of N tokens, each evaluated from an empty cache with
 * its first token replaced by BOS (when the vocabulary adds BOS), and only
 * the predictions of the second half of each window are scored (positions
 * N/2 .. N-2 predicting the next token), so every scored token has at least
 * N/2 tokens of context.
 *
 * --kl-divergence-base F saves the scored log-probabilities in llama.cpp's
 * file format; with --kl-divergence the file is read instead (its tokens
 * and N are used) and the model is compared with it: mean KL divergence,
 * its percentiles, top-1 agreement and the perplexity of both. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"
#include "ppl_logits.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cmd_perplexity(int argc, char **argv);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether tokenizing with ADD_SPECIAL puts BOS first (llama.cpp's
 * llama_vocab_get_add_bos), found by tokenizing an empty text. */
static bool adds_bos(const brisk_model *m) {
  int32_t t[4];
  size_t n = 0;
  const int32_t bos = brisk_model_special_token(m, BRISK_TOKEN_BOS);
  if (bos < 0 || brisk_tokenize(m, "", 0, t, 4, BRISK_TOKENIZE_ADD_SPECIAL, &n)) return false;
  return n >= 1 && t[0] == bos;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

typedef struct ppl_run {
  brisk_context *c;
  brisk_batch *b;
  int32_t n_vocab, n_ctx, bos;
  bool add_bos;
} ppl_run;

/* Evaluates one window (n_ctx tokens) from an empty cache; rows[i] then
 * points at the logits of position n_ctx / 2 + i. */
static brisk_status eval_window(ppl_run *r, const int32_t *win, const float **rows) {
  const int32_t first = r->n_ctx / 2;
  brisk_status st = brisk_seq_free(r->c, 0);
  brisk_batch_clear(r->b);
  for (int32_t k = 0; k < r->n_ctx && !st; k++) {
    int32_t tok = k == 0 && r->add_bos ? r->bos : win[k];
    st = brisk_batch_add(r->b, tok, k, 0, k >= first);
  }
  if (!st) st = brisk_decode(r->c, r->b);
  for (int32_t k = first; k < r->n_ctx && !st; k++)
    if (!(rows[k - first] = brisk_get_logits(r->c, k)))
      st = brisk_error(BRISK_E_INTERNAL, "no logits for position %d", k);
  return st;
}

int cmd_perplexity(int argc, char **argv) {
  cli_model_args ma = {0};
  const char *text_path = NULL, *base_path = NULL, *pos[1] = {0};
  int n_ctx = 0, chunks = 0, n_pos = 0;
  bool kld_mode = false, json = false, kv_f32 = false;
  const cli_opt ppl_opts[] = {
      {CLI_STR_OPT('f', "file", &text_path, "PATH", "the text to score (UTF-8)")},
      {CLI_INT_OPT('c', "ctx-size", &n_ctx, "N",
                   "window length in tokens (default 512; the file's with\n--kl-divergence)", 0,
                   1 << 20)},
      {CLI_INT_OPT(0, "chunks", &chunks, "N", "score at most N windows (default 0: all)", 0,
                   1 << 30)},
      {CLI_STR_OPT(0, "kl-divergence-base", &base_path, "PATH",
                   "save the log-probabilities there (llama.cpp's format), or\n"
                   "with --kl-divergence read them from there")},
      {CLI_FLAG_OPT(0, "kl-divergence", &kld_mode,
                    "compare with the saved log-probabilities of a base model")},
      {CLI_FLAG_OPT(0, "kv-f32", &kv_f32,
                    "F32 KV cache (default F16, as llama-perplexity's default)")},
  };
  const cli_opt out_opts[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")}};
  const cli_group groups[] = {
      cli_model_group(&ma, "the model (or give it as the operand)"),
      {"perplexity", ppl_opts, 6},
      {"output", out_opts, 1},
  };
  const cli_spec spec = {
      .cmd = "perplexity",
      .usage = "[-m] MODEL -f TEXT [-c N] [--chunks N] [--kl-divergence-base F "
               "[--kl-divergence]] [--json]",
      .summary = "Perplexity of MODEL over a text, by llama-perplexity's method (figures compare\n"
                 "with it): the tokens are cut into windows of N, each evaluated from an empty\n"
                 "cache (its first token replaced by BOS where the vocabulary adds one), and\n"
                 "only the second half of each window is scored. --kl-divergence-base F saves\n"
                 "the scored log-probabilities (llama.cpp's file format); adding --kl-divergence\n"
                 "compares MODEL with such a file: mean KL divergence, percentiles, top-1\n"
                 "agreement (\"same top p\").",
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
  if (!model_path) return cli_usage_error("perplexity", "give a model (-m MODEL)");
  if (kld_mode && !base_path)
    return cli_usage_error("perplexity", "--kl-divergence needs --kl-divergence-base FILE");
  if (!kld_mode && !text_path) return cli_usage_error("perplexity", "give a text (-f FILE)");

  int rc = 1;
  brisk_model *m = NULL;
  ppl_run r = {0};
  ppl_base base = {0};
  FILE *save = NULL;
  char *text = NULL;
  int32_t *tokens = NULL;
  const float **rows = NULL;
  uint16_t *row16 = NULL;
  float *kld_values = NULL, *p_diff_values = NULL;
  size_t n_tokens = 0;
  brisk_model_params mp;
  cli_model_params(&ma, &mp);
  if (brisk_model_load(model_path, &mp, &m)) {
    cli_fail("perplexity", "%s", brisk_last_error());
    goto done;
  }
  r.n_vocab = brisk_model_n_vocab(m);
  r.bos = brisk_model_special_token(m, BRISK_TOKEN_BOS);
  r.add_bos = adds_bos(m);
  int32_t n_chunk;
  if (kld_mode) {
    FILE *f = fopen(base_path, "rb");
    if (!f) {
      cli_fail("perplexity", "cannot read '%s'", base_path);
      goto done;
    }
    if (ppl_base_open(f, base_path, &base)) {
      cli_fail("perplexity", "%s", brisk_last_error());
      goto done;
    }
    if (base.n_vocab != r.n_vocab) {
      cli_fail("perplexity", "%s was saved with %d tokens in the vocabulary, the model has %d",
               base_path, base.n_vocab, r.n_vocab);
      goto done;
    }
    if (n_ctx && (uint32_t)n_ctx != base.n_ctx) {
      cli_fail("perplexity", "%s was saved with -c %u, not %d", base_path, base.n_ctx, n_ctx);
      goto done;
    }
    r.n_ctx = (int32_t)base.n_ctx;
    n_chunk = base.n_chunk;
    tokens = base.tokens;
  } else {
    r.n_ctx = n_ctx ? n_ctx : 512;
    size_t len;
    if (!(text = cli_read_file(text_path, &len))) {
      cli_fail("perplexity", "cannot read '%s'", text_path);
      goto done;
    }
    brisk_status st = brisk_tokenize(m, text, len, NULL, 0, BRISK_TOKENIZE_ADD_SPECIAL, &n_tokens);
    if (st == BRISK_E_BUFFER_TOO_SMALL || (!st && n_tokens)) {
      if (!(tokens = malloc((n_tokens ? n_tokens : 1) * sizeof *tokens))) {
        cli_fail("perplexity", "out of memory");
        goto done;
      }
      st = brisk_tokenize(m, text, len, tokens, n_tokens, BRISK_TOKENIZE_ADD_SPECIAL, &n_tokens);
    }
    if (st) {
      cli_fail("perplexity", "tokenizing '%s': %s", text_path, brisk_last_error());
      goto done;
    }
    if (r.n_ctx < 4 || n_tokens < 2 * (size_t)r.n_ctx) {
      cli_fail("perplexity",
               "'%s' has %zu tokens; -c %d needs at least %d (two windows of at least 4)",
               text_path, n_tokens, r.n_ctx, 2 * (r.n_ctx < 4 ? 4 : r.n_ctx));
      goto done;
    }
    n_chunk = (int32_t)(n_tokens / (size_t)r.n_ctx);
  }
  if (chunks && chunks < n_chunk) n_chunk = chunks;
  if (kld_mode && chunks) base.n_chunk = n_chunk;

  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.kv_tokens = r.n_ctx;
  cp.max_batch_tokens = r.n_ctx;
  cp.n_seq_max = 1;
  cp.prefix_cache = 0;
  cp.kv_type = kv_f32 ? BRISK_KV_F32 : BRISK_KV_F16;
  cp.n_threads = ma.threads;
  const int32_t first = r.n_ctx / 2, scored = r.n_ctx - 1 - first;
  const size_t nv = ppl_row_u16(r.n_vocab), n_scored = (size_t)scored * (size_t)n_chunk;
  if (brisk_context_create(m, &cp, &r.c) || brisk_batch_create(r.n_ctx, &r.b)) {
    cli_fail("perplexity", "%s", brisk_last_error());
    goto done;
  }
  rows = malloc((size_t)(r.n_ctx - first) * sizeof *rows);
  row16 = malloc(nv * sizeof *row16 * (size_t)scored);
  kld_values = malloc(n_scored * sizeof *kld_values);
  p_diff_values = malloc(n_scored * sizeof *p_diff_values);
  if (!rows || !row16 || !kld_values || !p_diff_values) {
    cli_fail("perplexity", "out of memory");
    goto done;
  }
  if (base_path && !kld_mode) {
    if (!(save = fopen(base_path, "wb")) ||
        ppl_base_write_header(save, (uint32_t)r.n_ctx, r.n_vocab, n_chunk, tokens)) {
      cli_fail("perplexity", "cannot write '%s'", base_path);
      goto done;
    }
  }

  double nll = 0, nll2 = 0, t0 = now_s();
  uint64_t count = 0;
  ppl_kld k = {0};
  for (int32_t i = 0; i < n_chunk; i++) {
    const int32_t *win = tokens + (size_t)i * (size_t)r.n_ctx;
    brisk_status st = eval_window(&r, win, rows);
    if (!st && kld_mode) st = ppl_base_next(&base);
    if (st) {
      cli_fail("perplexity", "window %d: %s", i + 1, brisk_last_error());
      goto done;
    }
    for (int32_t j = 0; j < scored; j++) {
      const int32_t next = win[first + j + 1];
      if (kld_mode) {
        size_t at = (size_t)i * (size_t)scored + (size_t)j;
        kld_values[at] = (float)ppl_kld_row(r.n_vocab, rows[j], base.rows + (size_t)j * nv, next,
                                            &k, &p_diff_values[at]);
      } else {
        double v = save ? ppl_compress_row(r.n_vocab, rows[j], row16 + (size_t)j * nv, next)
                        : ppl_nll(r.n_vocab, rows[j], next);
        nll += v;
        nll2 += v * v;
      }
      count++;
    }
    if (save && fwrite(row16, 2 * nv, (size_t)scored, save) != (size_t)scored) {
      cli_fail("perplexity", "writing '%s' failed", base_path);
      goto done;
    }
    if (!json && !kld_mode) {
      fprintf(stderr, "[%d]%.4f%s", i + 1, exp(nll / (double)count), i + 1 == n_chunk ? "\n" : ",");
      fflush(stderr);
    }
  }
  const double secs = now_s() - t0;
  const double tok_s = secs > 0 ? (double)n_chunk * r.n_ctx / secs : 0;
  if (save) {
    FILE *f = save;
    save = NULL;
    if (fclose(f)) {
      cli_fail("perplexity", "writing '%s' failed", base_path);
      goto done;
    }
  }
  if (!kld_mode) {
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    double ppl = exp(mean), unc = var > 0 ? sqrt(var / (double)(count - 1)) * ppl : 0;
    if (json) {
      printf("{\"model\": ");
      cli_json_string(stdout, model_path);
      printf(", \"n_ctx\": %d, \"chunks\": %d, \"tokens\": %zu, \"scored\": %llu, \"ppl\": %.6f, "
             "\"ppl_unc\": %.6f, \"add_bos\": %s, \"tokens_per_s\": %.1f}\n",
             r.n_ctx, n_chunk, n_tokens, (unsigned long long)count, ppl, unc,
             r.add_bos ? "true" : "false", tok_s);
    } else
      printf("Final estimate: PPL = %.4f +/- %.5f (%d windows of %d, %llu tokens scored, %.1f "
             "tokens/s)\n",
             ppl, unc, n_chunk, r.n_ctx, (unsigned long long)count, tok_s);
    rc = 0;
    goto done;
  }
  qsort(kld_values, n_scored, sizeof *kld_values, cmp_float);
  qsort(p_diff_values, n_scored, sizeof *p_diff_values, cmp_float);
  double lp, lp_unc, lb, lb_unc, kl, kl_unc, mse, mse_unc;
  ppl_mean_unc(k.sum_nll, k.sum_nll2, k.count, &lp, &lp_unc);
  ppl_mean_unc(k.sum_nll_base, k.sum_nll_base2, k.count, &lb, &lb_unc);
  ppl_mean_unc(k.sum_kld, k.sum_kld2, k.count, &kl, &kl_unc);
  ppl_mean_unc(k.sum_p_diff2, k.sum_p_diff4, k.count, &mse, &mse_unc);
  const double same_top = (double)k.n_same_top / (double)k.count;
  const float kl99 = ppl_percentile(kld_values, n_scored, 0.99f);
  const float kl_med = ppl_percentile(kld_values, n_scored, 0.5f);
  const float kl_max = kld_values[n_scored - 1];
  if (json) {
    printf("{\"model\": ");
    cli_json_string(stdout, model_path);
    printf(", \"n_ctx\": %d, \"chunks\": %d, \"scored\": %llu, \"ppl\": %.6f, \"ppl_base\": %.6f, "
           "\"ln_ppl_ratio\": %.6f, \"kld\": %.6f, \"kld_unc\": %.6f, \"kld_median\": %.6f, "
           "\"kld_99\": %.6f, \"kld_max\": %.6f, \"same_top\": %.6f, \"rms_dp\": %.6f, "
           "\"tokens_per_s\": %.1f}\n",
           r.n_ctx, n_chunk, (unsigned long long)k.count, exp(lp), exp(lb), lp - lb, kl, kl_unc,
           (double)kl_med, (double)kl99, (double)kl_max, same_top, sqrt(mse), tok_s);
  } else {
    printf("Mean PPL(Q)                   : %10.6f\n", exp(lp));
    printf("Mean PPL(base)                : %10.6f\n", exp(lb));
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f\n", lp - lb);
    printf("Mean    KLD: %10.6f +/- %10.6f\n", kl, kl_unc);
    printf("Maximum KLD: %10.6f\n", (double)kl_max);
    printf("99.0%%   KLD: %10.6f\n", (double)kl99);
    printf("Median  KLD: %10.6f\n", (double)kl_med);
    printf("RMS dp    : %6.3f %%\n", 100.0 * sqrt(mse));
    printf("Same top p: %6.3f %%\n", 100.0 * same_top);
  }
  rc = 0;
done:
  if (save) fclose(save);
  if (kld_mode) {
    if (tokens == base.tokens) tokens = NULL;
    ppl_base_close(&base);
  }
  free(tokens);
  free(text);
  free(rows);
  free(row16);
  free(kld_values);
  free(p_diff_values);
  brisk_batch_free(r.b);
  brisk_context_free(r.c);
  brisk_model_free(m);
  return rc;
}
