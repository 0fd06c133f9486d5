/* brisk bench --tokenize VOCAB FILE [--paragraphs]: tokenizer throughput. The
 * whole file is one brisk_tokenize call, or with --paragraphs one call per
 * paragraph (up to and including each blank line), as a server tokenizes
 * many short prompts; BOS added to each, special-token text not parsed, as
 * the peer's tokenize does. Timed after one warm-up pass; MB/s is 1e6 bytes of
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

/* End of the piece that starts at pos: the whole text, or with `para` up to
 * and including the next blank line ("\n\n"). */
static size_t piece_end(const char *t, size_t len, size_t pos, bool para) {
  if (!para) return len;
  const char *h = memmem(t + pos, len - pos, "\n\n", 2);
  return h ? (size_t)(h - t) + 2 : len;
}

/* Tokenizes every piece into ids[cap] (each piece overwrites the last);
 * with ids NULL only counts. *total: tokens of all pieces; *max_piece: of
 * the largest; *n_pieces. */
static brisk_status tokenize_pass(const brisk_model *m, const char *text, size_t len, bool para,
                                  int32_t *ids, size_t cap, size_t *total, size_t *max_piece,
                                  size_t *n_pieces) {
  *total = *max_piece = *n_pieces = 0;
  size_t pos = 0;
  do {
    const size_t end = piece_end(text, len, pos, para);
    size_t n = 0;
    brisk_status st =
        brisk_tokenize(m, text + pos, end - pos, ids, cap, BRISK_TOKENIZE_ADD_SPECIAL, &n);
    if (st == BRISK_E_BUFFER_TOO_SMALL && !ids) st = BRISK_OK;
    if (st != BRISK_OK) return st;
    *total += n;
    if (n > *max_piece) *max_piece = n;
    ++*n_pieces;
    pos = end;
  } while (pos < len);
  return BRISK_OK;
}

int bench_tokenize_run(const char *vocab, const char *file, int reps, bool paragraphs, bool json) {
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
  int rc = 0;
  size_t n_tok = 0, max_piece = 0, n_pieces = 0, n_again, max_again, pieces_again;
  int32_t *ids = NULL; /* [max_piece] */
  brisk_status st = tokenize_pass(m, text, len, paragraphs, NULL, 0, &n_tok, &max_piece, &n_pieces);
  if (st == BRISK_OK) {
    ids = brisk_malloc((max_piece ? max_piece : 1) * sizeof *ids);
    st = ids ? BRISK_OK : BRISK_E_OUT_OF_MEMORY;
  }
  double mbs[MAX_REPS], secs[MAX_REPS];
  /* Warm-up (the counting pass above also ran the whole tokenizer). */
  if (st == BRISK_OK)
    st = tokenize_pass(m, text, len, paragraphs, ids, max_piece, &n_again, &max_again,
                       &pieces_again);
  for (int r = 0; r < reps && st == BRISK_OK; r++) {
    double t0 = bench_now_s();
    st = tokenize_pass(m, text, len, paragraphs, ids, max_piece, &n_again, &max_again,
                       &pieces_again);
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
    printf(", \"paragraphs\": %s, \"pieces\": %zu", paragraphs ? "true" : "false", n_pieces);
    printf(", \"bytes\": %zu, \"tokens\": %zu, \"reps\": %d, \"median_mbs\": %.3f, "
           "\"min_mbs\": %.3f, \"max_mbs\": %.3f, \"load_avg_before\": \"%s\", "
           "\"load_avg_after\": \"%s\", ",
           len, n_tok, reps, s.median, s.min, s.max, load_before, load_after);
    bench_json_array(stdout, "seconds", secs, reps);
    printf("}\n");
  } else {
    printf("tokenizer %s (%s): %zu bytes in %zu call(s) -> %zu tokens (BOS included), %.2f "
           "bytes/token\n",
           vocab, brisk_model_tokenizer(m), len, n_pieces, n_tok,
           n_tok ? (double)len / (double)n_tok : 0.0);
    printf("%.2f MB/s median of %d (min %.2f, max %.2f); load average before %s, after %s\n",
           s.median, reps, s.min, s.max, load_before, load_after);
  }
done:
  brisk_free(ids);
  brisk_free(text);
  brisk_model_free(m);
  return rc;
}
