/* Perplexity and KL-divergence arithmetic of llama.cpp's llama-perplexity,
 * and its saved-logits file ("--kl-divergence-base"), so that figures and
 * files are interchangeable with it:
 *
 *   "_logits_"  8 bytes
 *   n_ctx       uint32
 *   n_vocab     int32
 *   n_chunk     int32
 *   tokens      int32 [n_chunk * n_ctx]   (the evaluated text, BOS not applied)
 *   per chunk, per scored position (n_ctx - 1 - n_ctx / 2 of them):
 *     a row of nv = 2 * ((n_vocab + 1) / 2) + 4 uint16: float scale, float
 *     min_log_prob (in the first 4 uint16), then n_vocab levels q with
 *     log p = scale * q + min_log_prob (log-probabilities below max - 16
 *     clamp to the minimum), zero padding to nv.
 *
 * All little-endian (as llama.cpp writes them on the machines brisk runs on). */
#ifndef BRISK_CLI_PPL_LOGITS_H
#define BRISK_CLI_PPL_LOGITS_H

#include "brisk.h"

#include <stdint.h>
#include <stdio.h>

/* uint16 per saved row. */
static inline size_t ppl_row_u16(int32_t n_vocab) { return 2 * (((size_t)n_vocab + 1) / 2) + 4; }

/* -log p(tok) under softmax(logits) (llama.cpp's arithmetic). */
double ppl_nll(int32_t n_vocab, const float *logits, int32_t tok);

/* Writes the compressed log-probabilities of logits into row (ppl_row_u16
 * uint16) and returns -log p(tok). */
double ppl_compress_row(int32_t n_vocab, const float *logits, uint16_t *row, int32_t tok);

/* Sums over positions, as llama.cpp's kl_divergence_result. */
typedef struct ppl_kld {
  double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
  double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
  float max_p_diff;
  uint64_t n_same_top, count;
} ppl_kld;

/* One position: KL(base || this) from base's saved row, token tok's
 * probabilities, top-1 agreement. Returns the position's KL divergence
 * and sets *p_diff (p - p_base of tok). */
double ppl_kld_row(int32_t n_vocab, const float *logits, const uint16_t *base_row, int32_t tok,
                   ppl_kld *acc, float *p_diff);

/* llama.cpp's percentile over ascending values[0, n) (n >= 1): linear
 * interpolation at fraction * (n - 1), in float. */
float ppl_percentile(const float *values, size_t n, float fraction);

/* mean and its standard error from a sum and a sum of squares. */
void ppl_mean_unc(double sum, double sum2, uint64_t count, double *mean, double *unc);

/* A saved-logits file open for reading: header checked, tokens read. */
typedef struct ppl_base {
  FILE *f;
  uint32_t n_ctx;
  int32_t n_vocab, n_chunk;
  int32_t *tokens; /* [n_chunk * n_ctx] */
  uint16_t *rows;  /* [n_ctx - 1 - n_ctx / 2][ppl_row_u16] one chunk's rows */
  int32_t next_chunk;
} ppl_base;

/* Reads and checks the header and tokens of f (which the ppl_base then
 * owns and closes). Errors (with messages): BRISK_E_FORMAT for a file that
 * is not one (bad magic, n_ctx < 4, n_vocab < 1, n_chunk < 1, a token
 * outside [0, n_vocab), a size that does not match the header when the
 * size is known), BRISK_E_IO for a short read, BRISK_E_OUT_OF_MEMORY. f is
 * closed on error too. */
brisk_status ppl_base_open(FILE *f, const char *name, ppl_base *out);
/* The next chunk's rows into b->rows; checks each row's scale and minimum
 * (finite, scale >= 0, min <= 0). BRISK_E_IO / BRISK_E_FORMAT. */
brisk_status ppl_base_next(ppl_base *b);
void ppl_base_close(ppl_base *b);

/* Writes the header and tokens. BRISK_E_IO. */
brisk_status ppl_base_write_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                                   const int32_t *tokens);

#endif
