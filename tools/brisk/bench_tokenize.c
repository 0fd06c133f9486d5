/* brisk bench --tokenize VOCAB FILE: tokenizer throughput. The whole file is
 * one brisk_tokenize call (BOS added, special-token text not parsed, as the
 * peer's tokenize does), timed after one warm-up call; MB/s is 1e6 bytes of
 * input text per second, median of the reps. The vocabulary is loaded
 * without weights and its load time is not counted. */
#include "bench_cmd.h"
#include "bench_util.h"
#include "brisk.h"
#include "cli.h"

#include "core/alloc.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REPS 1000

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap) {
      char *nb = cap > SIZE_MAX / 2 ? NULL : brisk_realloc(buf, cap = cap ? 2 * cap : 1 << 20);
      if (!nb) {
        brisk_free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    if (got == 0) break;
    n += got;
  }
  fclose(f);
  *len = n;
  return buf;
}

int bench_tokenize_run(const char *vocab, const char *file, int reps, bool json) {
  if (reps < 1 || reps > MAX_REPS) return cli_fail("bench", "-r must be in [1, %d]", MAX_REPS);
  size_t len = 0;
  char *text = slurp(file, &len);
  if (!text) return cli_fail("bench", "cannot read '%s'", file);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.vocab_only = 1;
  brisk_model *m = NULL;
  if (brisk_model_load(vocab, &mp, &m) != BRISK_OK) {
    brisk_free(text);
    return cli_fail("bench", "%s", brisk_last_error());
  }
  char load_before[64], load_after[64];
  bench_load_avg(load_before, sizeof load_before);
  const uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL;
  int rc = 0;
  size_t n_tok = 0, n_again = 0;
  int32_t *ids = NULL; /* [n_tok] */
  brisk_status st = brisk_tokenize(m, text, len, NULL, 0, flags, &n_tok);
  if (st == BRISK_E_BUFFER_TOO_SMALL || st == BRISK_OK) {
    ids = brisk_malloc((n_tok ? n_tok : 1) * sizeof *ids);
    st = ids ? BRISK_OK : BRISK_E_OUT_OF_MEMORY;
  }
  double mbs[MAX_REPS], secs[MAX_REPS];
  /* Warm-up (the counting call above also ran the whole tokenizer). */
  if (st == BRISK_OK) st = brisk_tokenize(m, text, len, ids, n_tok, flags, &n_again);
  for (int r = 0; r < reps && st == BRISK_OK; r++) {
    double t0 = bench_now_s();
    st = brisk_tokenize(m, text, len, ids, n_tok, flags, &n_again);
    secs[r] = bench_now_s() - t0;
    mbs[r] = (double)len / secs[r] / 1e6;
  }
  if (st != BRISK_OK) {
    rc = cli_fail("bench", "%s", brisk_last_error());
    goto done;
  }
  bench_load_avg(load_after, sizeof load_after);
  double sorted[MAX_REPS];
  memcpy(sorted, mbs, (size_t)reps * sizeof *sorted);
  const bench_stats s = bench_summarize(sorted, reps);
  if (json) {
    printf("{\"vocab\": ");
    cli_json_string(stdout, vocab);
    printf(", \"tokenizer\": ");
    cli_json_string(stdout, brisk_model_tokenizer(m));
    printf(", \"file\": ");
    cli_json_string(stdout, file);
    printf(", \"bytes\": %zu, \"tokens\": %zu, \"reps\": %d, \"median_mbs\": %.3f, "
           "\"min_mbs\": %.3f, \"max_mbs\": %.3f, \"load_avg_before\": \"%s\", "
           "\"load_avg_after\": \"%s\", ",
           len, n_tok, reps, s.median, s.min, s.max, load_before, load_after);
    bench_json_array(stdout, "seconds", secs, reps);
    printf("}\n");
  } else {
    printf("tokenizer %s (%s): %zu bytes -> %zu tokens (BOS included), %.2f bytes/token\n", vocab,
           brisk_model_tokenizer(m), len, n_tok, n_tok ? (double)len / (double)n_tok : 0.0);
    printf("%.2f MB/s median of %d (min %.2f, max %.2f); load average before %s, after %s\n",
           s.median, reps, s.min, s.max, load_before, load_after);
  }
done:
  brisk_free(ids);
  brisk_free(text);
  brisk_model_free(m);
  return rc;
}
