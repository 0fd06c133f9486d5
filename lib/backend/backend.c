/* Backend-independent pieces of the operation table: RoPE frequencies (so
 * every backend rotates by the same angles) and destruction. */
#include "backend/backend.h"

#include "core/error.h"

#include <math.h>

void brisk_backend_free(brisk_backend *be) {
  if (be && be->destroy) be->destroy(be);
}

void brisk_rope_params_init(brisk_rope_params *p) {
  *p = (brisk_rope_params){
      .layout = BRISK_ROPE_NORMAL,
      .n_rot = 0,
      .freq_base = 10000.0f,
      .freq_factors = NULL,
      .scaling = BRISK_ROPE_SCALING_NONE,
      .factor = 1.0f,
      .orig_ctx = 8192,
      .low_freq_factor = 1.0f,
      .high_freq_factor = 4.0f,
      .ext_factor = 1.0f,
      .attn_factor = 1.0f,
      .beta_fast = 32.0f,
      .beta_slow = 1.0f,
  };
}

static bool positive(float x) { return isfinite(x) && x > 0; }

static brisk_status check_params(const brisk_rope_params *p, int32_t head_dim) {
  if (!p) return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: params is NULL");
  if (p->layout != BRISK_ROPE_NORMAL && p->layout != BRISK_ROPE_NEOX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: unknown layout %d", (int)p->layout);
  if (head_dim < 2 || head_dim > BRISK_MAX_HEAD_DIM)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: head_dim %d is outside [2, %d]",
                       (int)head_dim, BRISK_MAX_HEAD_DIM);
  if (p->n_rot < 2 || p->n_rot > head_dim || p->n_rot % 2)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "rope: n_rot %d must be even and in [2, head_dim %d]", (int)p->n_rot,
                       (int)head_dim);
  if (!positive(p->freq_base))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: freq_base %g must be > 0",
                       (double)p->freq_base);
  if (p->freq_factors)
    for (int32_t i = 0; i < p->n_rot / 2; i++)
      if (!positive(p->freq_factors[i]))
        return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: freq_factors[%d] = %g must be > 0",
                           (int)i, (double)p->freq_factors[i]);
  switch (p->scaling) {
  case BRISK_ROPE_SCALING_NONE: return BRISK_OK;
  case BRISK_ROPE_SCALING_LINEAR: break;
  case BRISK_ROPE_SCALING_LLAMA3:
    if (p->orig_ctx <= 0)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope llama3: orig_ctx %d must be > 0",
                         (int)p->orig_ctx);
    if (!positive(p->low_freq_factor) || !positive(p->high_freq_factor) ||
        !(p->high_freq_factor > p->low_freq_factor))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "rope llama3: need 0 < low_freq_factor %g < high_freq_factor %g",
                         (double)p->low_freq_factor, (double)p->high_freq_factor);
    break;
  case BRISK_ROPE_SCALING_YARN:
    if (p->orig_ctx <= 0)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope yarn: orig_ctx %d must be > 0",
                         (int)p->orig_ctx);
    if (!positive(p->beta_fast) || !positive(p->beta_slow) || !isfinite(p->ext_factor) ||
        !isfinite(p->attn_factor))
      return brisk_error(BRISK_E_INVALID_ARGUMENT,
                         "rope yarn: beta_fast %g, beta_slow %g must be > 0 and ext_factor %g, "
                         "attn_factor %g finite",
                         (double)p->beta_fast, (double)p->beta_slow, (double)p->ext_factor,
                         (double)p->attn_factor);
    break;
  case BRISK_ROPE_SCALING_LONGROPE:
    if (!positive(p->attn_factor))
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope longrope: attn_factor %g must be > 0",
                         (double)p->attn_factor);
    break;
  default:
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: unknown scaling %d", (int)p->scaling);
  }
  if (!positive(p->factor))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "rope: scaling factor %g must be > 0",
                       (double)p->factor);
  return BRISK_OK;
}

/* YaRN: the pair index at which a frequency turns `n_turns` times over the
 * original context. */
static double yarn_corr_dim(int32_t n_rot, double orig_ctx, double n_turns, double base) {
  return n_rot * log(orig_ctx / (n_turns * 2 * M_PI)) / (2 * log(base));
}

brisk_status brisk_rope_frequencies(const brisk_rope_params *p, int32_t head_dim, double *inv_freq,
                                    double *mscale) {
  brisk_status st = check_params(p, head_dim);
  if (st != BRISK_OK) return st;
  const int32_t n_pairs = p->n_rot / 2;
  const double factor = p->factor;
  double yarn_lo = 0, yarn_hi = 0;
  *mscale = 1.0;
  if (p->scaling == BRISK_ROPE_SCALING_YARN) {
    yarn_lo = fmax(0, floor(yarn_corr_dim(p->n_rot, p->orig_ctx, p->beta_fast, p->freq_base)));
    yarn_hi =
        fmin(p->n_rot - 1, ceil(yarn_corr_dim(p->n_rot, p->orig_ctx, p->beta_slow, p->freq_base)));
    *mscale = (double)p->attn_factor * (factor > 1 ? 1 + 0.1 * log(factor) : 1.0);
  }
  if (p->scaling == BRISK_ROPE_SCALING_LONGROPE) *mscale = p->attn_factor;
  for (int32_t i = 0; i < n_pairs; i++) {
    double b = pow(p->freq_base, -2.0 * i / p->n_rot);
    if (p->freq_factors) b /= p->freq_factors[i];
    double f = b;
    switch (p->scaling) {
    case BRISK_ROPE_SCALING_NONE:
    case BRISK_ROPE_SCALING_LONGROPE: break;
    case BRISK_ROPE_SCALING_LINEAR: f = b / factor; break;
    case BRISK_ROPE_SCALING_LLAMA3: {
      double wavelen = 2 * M_PI / b;
      double lo_wavelen = p->orig_ctx / (double)p->low_freq_factor;
      double hi_wavelen = p->orig_ctx / (double)p->high_freq_factor;
      if (wavelen > lo_wavelen) {
        f = b / factor;
      } else if (wavelen >= hi_wavelen) {
        double t = (p->orig_ctx / wavelen - p->low_freq_factor) /
                   ((double)p->high_freq_factor - p->low_freq_factor);
        f = (1 - t) * b / factor + t * b;
      }
      break;
    }
    case BRISK_ROPE_SCALING_YARN: {
      double y = (i - yarn_lo) / fmax(0.001, yarn_hi - yarn_lo);
      double mix = (1 - fmin(1, fmax(0, y))) * p->ext_factor;
      f = b / factor * (1 - mix) + b * mix;
      break;
    }
    }
    inv_freq[i] = f;
  }
  return BRISK_OK;
}

brisk_status brisk_backend_transfer(brisk_backend *to, void *dst, brisk_backend *from,
                                    const void *src, size_t bytes, void *staging) {
  if (!to || !from || ((!dst || !src) && bytes))
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "backend transfer: NULL backend or buffer");
  if (bytes == 0) return BRISK_OK;
  brisk_status st;
  /* The destination's queued work may still read dst: wait for it first. */
  if (to->host_memory) {
    if ((st = to->synchronize(to))) return st;
    return from->download(from, dst, src, bytes);
  }
  if (from->host_memory) {
    if ((st = from->synchronize(from))) return st;
    return to->upload(to, dst, src, bytes);
  }
  if (!staging)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "backend transfer %s -> %s: device to device needs a staging buffer",
                       from->name, to->name);
  if ((st = from->download(from, staging, src, bytes)) || (st = to->synchronize(to))) return st;
  return to->upload(to, dst, staging, bytes);
}
