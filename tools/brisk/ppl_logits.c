/* llama-perplexity's arithmetic and saved-logits file (see ppl_logits.h).
 * The float / double mix of each formula is llama.cpp's, so that the same
 * logits give the same figures to the last digit it prints. */
#include "ppl_logits.h"

#include "core/checked.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Round to nearest with ties to even on the float's mantissa (llama.cpp's
 * nearest_int; valid for |fval| < 2^22, which 65535 levels are). */
static int nearest_int(float fval) {
  float val = fval + 12582912.f;
  int i;
  memcpy(&i, &val, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

double ppl_nll(int32_t n_vocab, const float *logits, int32_t tok) {
  float max_logit = logits[0];
  for (int32_t i = 1; i < n_vocab; i++) max_logit = fmaxf(max_logit, logits[i]);
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
  return -((double)(logits[tok] - max_logit) - log(sum_exp));
}

double ppl_compress_row(int32_t n_vocab, const float *logits, uint16_t *row, int32_t tok) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int32_t i = 1; i < n_vocab; i++) {
    max_logit = fmaxf(max_logit, logits[i]);
    min_logit = fminf(min_logit, logits[i]);
  }
  min_logit = fmaxf(min_logit, max_logit - 16);
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
  const float log_sum_exp = (float)log(sum_exp);
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.f;
  memcpy(row, &scale, 4);
  memcpy(row + 2, &min_log_prob, 4);
  uint16_t *q = row + 4;
  memset(q, 0, (ppl_row_u16(n_vocab) - 4) * sizeof *q);
  if (scale) {
    const float inv_scale = 1 / scale;
    for (int32_t i = 0; i < n_vocab; i++)
      q[i] = logits[i] > min_logit ? (uint16_t)nearest_int(inv_scale * (logits[i] - min_logit)) : 0;
  }
  return (double)(max_logit + log_sum_exp - logits[tok]);
}

double ppl_kld_row(int32_t n_vocab, const float *logits, const uint16_t *base_row, int32_t tok,
                   ppl_kld *k, float *p_diff_out) {
  float max_logit = logits[0];
  int32_t imax = 0;
  for (int32_t i = 1; i < n_vocab; i++)
    if (logits[i] > max_logit) {
      max_logit = logits[i];
      imax = i;
    }
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; i++) sum_exp += expf(logits[i] - max_logit);
  const float log_sum_exp = (float)log(sum_exp);
  float scale, min_log_prob;
  memcpy(&scale, base_row, 4);
  memcpy(&min_log_prob, base_row + 2, 4);
  const uint16_t *q = base_row + 4;

  const float nll = max_logit + log_sum_exp - logits[tok];
  k->sum_nll += nll;
  k->sum_nll2 += (double)nll * nll;
  const float nll_base = -(scale * q[tok] + min_log_prob);
  k->sum_nll_base += nll_base;
  k->sum_nll_base2 += (double)nll_base * nll_base;
  k->sum_nll_nll_base += (double)nll * nll_base;

  max_logit += log_sum_exp;
  double sum = 0;
  int32_t imax_base = -1;
  float p_log_base_max = 0;
  for (int32_t i = 0; i < n_vocab; i++) {
    const float p_log_base = scale * q[i] + min_log_prob;
    if (i == 0 || p_log_base > p_log_base_max) {
      p_log_base_max = p_log_base;
      imax_base = i;
    }
    if (p_log_base > -16.f) {
      const float p_base = expf(p_log_base);
      sum += p_base * (p_log_base - logits[i] + max_logit);
    }
  }
  k->sum_kld += sum;
  k->sum_kld2 += sum * sum;
  k->count++;
  if (imax == imax_base) k->n_same_top++;

  const float p_base = expf(-nll_base), p = expf(-nll), p_diff = p - p_base;
  k->sum_p_diff += p_diff;
  const double p_diff2 = (double)p_diff * p_diff;
  k->sum_p_diff2 += p_diff2;
  k->sum_p_diff4 += p_diff2 * p_diff2;
  k->max_p_diff = fmaxf(k->max_p_diff, fabsf(p_diff));
  *p_diff_out = p_diff;
  return sum;
}

float ppl_percentile(const float *values, size_t n, float fraction) {
  if (fraction <= 0) return values[0];
  if (fraction >= 1) return values[n - 1];
  float p = fraction * (float)(n - 1);
  size_t ip = (size_t)p;
  p -= (float)ip;
  return (1 - p) * values[ip] + p * values[ip + 1 < n ? ip + 1 : n - 1];
}

void ppl_mean_unc(double sum, double sum2, uint64_t count, double *mean, double *unc) {
  *mean = *unc = 0;
  if (count < 1) return;
  double f = sum / (double)count, df = sum2 / (double)count - f * f;
  *mean = f;
  *unc = df > 0 && count > 10 ? sqrt(df / (double)(count - 1)) : 0.;
}

static size_t scored_per_chunk(uint32_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

brisk_status ppl_base_open(FILE *f, const char *name, ppl_base *b) {
  memset(b, 0, sizeof *b);
  b->f = f;
  char magic[8];
  uint32_t hdr[3];
  brisk_status st = BRISK_OK;
  if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "_logits_", 8)) {
    st = brisk_error(BRISK_E_FORMAT, "%s is not a saved-logits file (no \"_logits_\" magic)", name);
    goto fail;
  }
  if (fread(hdr, 4, 3, f) != 3) {
    st = brisk_error(BRISK_E_FORMAT, "%s: the header ends early", name);
    goto fail;
  }
  b->n_ctx = hdr[0];
  memcpy(&b->n_vocab, &hdr[1], 4);
  memcpy(&b->n_chunk, &hdr[2], 4);
  if (b->n_ctx < 4 || b->n_ctx > (1u << 24) || b->n_vocab < 1 || b->n_chunk < 1) {
    st = brisk_error(BRISK_E_FORMAT, "%s: bad header (n_ctx %u, n_vocab %d, n_chunk %d)", name,
                     b->n_ctx, b->n_vocab, b->n_chunk);
    goto fail;
  }
  /* Every size from here is checked: the header is untrusted. */
  uint64_t n_tok, tok_bytes, row_bytes, chunk_bytes, rows_bytes, total;
  const uint64_t scored = scored_per_chunk(b->n_ctx);
  if (brisk_mul_overflow_u64((uint64_t)b->n_chunk, b->n_ctx, &n_tok) ||
      brisk_mul_overflow_u64(n_tok, 4, &tok_bytes) ||
      brisk_mul_overflow_u64(ppl_row_u16(b->n_vocab), 2, &row_bytes) ||
      brisk_mul_overflow_u64(row_bytes, scored, &chunk_bytes) ||
      brisk_mul_overflow_u64(chunk_bytes, (uint64_t)b->n_chunk, &rows_bytes) ||
      brisk_add_overflow_u64(20 + tok_bytes, rows_bytes, &total) || tok_bytes > SIZE_MAX ||
      chunk_bytes > SIZE_MAX) {
    st = brisk_error(BRISK_E_FORMAT, "%s: header sizes overflow", name);
    goto fail;
  }
  /* The stream's length (a file, or memory: fmemopen has no descriptor)
   * must be what the header says before anything is allocated for it; a
   * stream that cannot seek (a pipe) is only caught by its short reads. */
  struct stat sb;
  long long have = -1;
  int fd = fileno(f);
  if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
    have = (long long)sb.st_size;
  } else {
    long cur = ftell(f);
    if (cur >= 0 && fseek(f, 0, SEEK_END) == 0) {
      long end = ftell(f);
      if (end >= 0) have = (long long)end;
      if (fseek(f, cur, SEEK_SET) != 0) have = -2;
    }
  }
  if (have == -2 || (have >= 0 && (uint64_t)have != total)) {
    st = brisk_error(BRISK_E_FORMAT, "%s: %lld bytes, but its header says %llu", name, have,
                     (unsigned long long)total);
    goto fail;
  }
  b->tokens = malloc((size_t)tok_bytes);
  b->rows = malloc((size_t)chunk_bytes);
  if (!b->tokens || !b->rows) {
    st = brisk_error(BRISK_E_OUT_OF_MEMORY, "%s: no memory for the tokens", name);
    goto fail;
  }
  if (fread(b->tokens, 4, (size_t)n_tok, f) != n_tok) {
    st = brisk_error(BRISK_E_IO, "%s: the tokens end early", name);
    goto fail;
  }
  for (uint64_t i = 0; i < n_tok; i++)
    if (b->tokens[i] < 0 || b->tokens[i] >= b->n_vocab) {
      st = brisk_error(BRISK_E_FORMAT, "%s: token %d at %llu is outside [0, %d)", name,
                       b->tokens[i], (unsigned long long)i, b->n_vocab);
      goto fail;
    }
  return BRISK_OK;
fail:
  ppl_base_close(b);
  return st;
}

brisk_status ppl_base_next(ppl_base *b) {
  const size_t nv = ppl_row_u16(b->n_vocab), scored = scored_per_chunk(b->n_ctx);
  if (b->next_chunk >= b->n_chunk)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "saved logits: no chunk after %d", b->n_chunk);
  if (fread(b->rows, 2 * nv, scored, b->f) != scored)
    return brisk_error(BRISK_E_IO, "saved logits: chunk %d ends early", b->next_chunk + 1);
  for (size_t r = 0; r < scored; r++) {
    float scale, mn;
    memcpy(&scale, b->rows + r * nv, 4);
    memcpy(&mn, b->rows + r * nv + 2, 4);
    if (!isfinite(scale) || !isfinite(mn) || scale < 0 || mn > 0 || scale > 1.f)
      return brisk_error(BRISK_E_FORMAT, "saved logits: chunk %d row %zu has scale %g, minimum %g",
                         b->next_chunk + 1, r, (double)scale, (double)mn);
  }
  b->next_chunk++;
  return BRISK_OK;
}

void ppl_base_close(ppl_base *b) {
  if (b->f) fclose(b->f);
  free(b->tokens);
  free(b->rows);
  memset(b, 0, sizeof *b);
}

brisk_status ppl_base_write_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                                   const int32_t *tokens) {
  const size_t n = (size_t)n_chunk * n_ctx;
  if (fwrite("_logits_", 1, 8, f) != 8 || fwrite(&n_ctx, 4, 1, f) != 1 ||
      fwrite(&n_vocab, 4, 1, f) != 1 || fwrite(&n_chunk, 4, 1, f) != 1 ||
      fwrite(tokens, 4, n, f) != n)
    return brisk_error(BRISK_E_IO, "writing the saved logits failed");
  return BRISK_OK;
}
