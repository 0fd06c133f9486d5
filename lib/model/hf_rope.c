/* RoPE settings of a Hugging Face config.json. transformers 5 keeps them in
 * "rope_parameters" (rope_theta included; models with sliding and full
 * layers keep one object per layer type there), older configs in a
 * top-level "rope_theta" and a "rope_scaling" object. Every key of these
 * objects is read or refused by name: a setting brisk cannot honour is an
 * error, never a silent default. */
#include "model/hf_rope.h"

#include "core/error.h"
#include "format/hf.h"
#include "format/json.h"

#include <json-c/json.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Keys transformers reads for some rope type; which ones brisk honours
 * depends on the type (below). */
static const char *const known_keys[] = {
    "rope_type",        "type",
    "rope_theta",       "partial_rotary_factor",
    "factor",           "original_max_position_embeddings",
    "low_freq_factor",  "high_freq_factor",
    "beta_fast",        "beta_slow",
    "attention_factor", "short_factor",
    "long_factor",      "mscale",
    "mscale_all_dim",   "truncate",
};

static bool is_known(const char *key) {
  for (size_t i = 0; i < sizeof known_keys / sizeof known_keys[0]; i++)
    if (!strcmp(key, known_keys[i])) return true;
  return false;
}

static brisk_status get_f32(const struct json_object *o, const char *path, const char *key,
                            float *out) {
  double v;
  brisk_status st = brisk_json_get_float(o, "config.json", key, &v);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return brisk_error(st, "config.json: '%s.%s' must be a number", path, key);
  /* A double past FLT_MAX would become inf in the float the model keeps. */
  if (!isfinite(v) || fabs(v) > FLT_MAX)
    return brisk_error(BRISK_E_FORMAT, "config.json: '%s.%s' does not fit a float", path, key);
  *out = (float)v;
  return BRISK_OK;
}

static brisk_status get_u32(const struct json_object *o, const char *path, const char *key,
                            uint32_t *out) {
  int64_t v;
  brisk_status st = brisk_json_get_int(o, "config.json", key, &v);
  if (st == BRISK_E_NOT_FOUND) return BRISK_OK;
  if (st) return brisk_error(st, "config.json: '%s.%s' must be an integer", path, key);
  if (v < 0 || v > (int64_t)UINT32_MAX)
    return brisk_error(BRISK_E_FORMAT, "config.json: '%s.%s' = %lld is out of range", path, key,
                       (long long)v);
  *out = (uint32_t)v;
  return BRISK_OK;
}

/* A list of n positive numbers (LongRoPE factors) into out[n]. */
static brisk_status get_factors(const struct json_object *o, const char *path, const char *key,
                                uint32_t n, float *out) {
  struct json_object *a = NULL;
  brisk_status st = brisk_json_find(o, "config.json", key, &a);
  if (st == BRISK_E_NOT_FOUND)
    return brisk_error(BRISK_E_FORMAT, "config.json: longrope needs '%s.%s'", path, key);
  if (st) return st;
  if (!json_object_is_type(a, json_type_array) || json_object_array_length(a) != n)
    return brisk_error(BRISK_E_FORMAT,
                       "config.json: '%s.%s' must be a list of %u numbers (rotary dims / 2)", path,
                       key, n);
  for (uint32_t i = 0; i < n; i++) {
    struct json_object *v = json_object_array_get_idx(a, i);
    double d = json_object_get_double(v);
    if (!(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
        !isfinite(d) || d <= 0 || d > FLT_MAX || (float)d <= 0)
      return brisk_error(BRISK_E_FORMAT,
                         "config.json: '%s.%s[%u]' must be a positive number that fits a float",
                         path, key, i);
    out[i] = (float)d;
  }
  return BRISK_OK;
}

static bool has(const struct json_object *o, const char *key) {
  struct json_object *v = NULL;
  return brisk_json_find(o, "config.json", key, &v) == BRISK_OK;
}

brisk_status brisk_hf_rope_read(const struct json_object *o, const char *path, uint32_t head_dim,
                                brisk_hf_rope *r) {
  brisk_status st;
  if (!json_object_is_type(o, json_type_object))
    return brisk_error(BRISK_E_FORMAT, "config.json: '%s' must be an object", path);
  json_object_object_foreach((struct json_object *)o, key, val) {
    (void)val;
    if (!is_known(key))
      return brisk_error(BRISK_E_UNSUPPORTED, "config.json: RoPE setting '%s.%s' is not supported",
                         path, key);
  }
  const char *type = "default";
  st = brisk_json_get_string(o, "config.json", "rope_type", &type, NULL);
  if (st == BRISK_E_NOT_FOUND) st = brisk_json_get_string(o, "config.json", "type", &type, NULL);
  if (st && st != BRISK_E_NOT_FOUND) return st;
  if ((st = get_f32(o, path, "rope_theta", &r->base))) return st;
  float partial = 1.0f;
  if ((st = get_f32(o, path, "partial_rotary_factor", &partial))) return st;
  if (has(o, "partial_rotary_factor")) {
    float dims = partial * (float)head_dim;
    if (!(partial > 0 && partial <= 1) || dims != floorf(dims) || (uint32_t)dims % 2)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "config.json: '%s.partial_rotary_factor' %g of head_dim %u is not an "
                         "even number of dimensions",
                         path, (double)partial, head_dim);
    r->dim = (uint32_t)dims;
  }
  /* transformers' own defaults for what a type leaves out. */
  r->factor = 1.0f;
  r->low_freq_factor = 1.0f;
  r->high_freq_factor = 4.0f;
  r->beta_fast = 32.0f;
  r->beta_slow = 1.0f;
  r->attn_factor = 1.0f;
  if (!strcmp(type, "default")) {
    r->scaling = BRISK_HP_ROPE_SCALING_NONE;
    return BRISK_OK;
  }
  if ((st = get_f32(o, path, "factor", &r->factor)) ||
      (st = get_u32(o, path, "original_max_position_embeddings", &r->orig_ctx)))
    return st;
  if (!strcmp(type, "linear")) {
    r->scaling = BRISK_HP_ROPE_SCALING_LINEAR;
    return BRISK_OK;
  }
  if (!strcmp(type, "llama3")) {
    r->scaling = BRISK_HP_ROPE_SCALING_LLAMA3;
    return (st = get_f32(o, path, "low_freq_factor", &r->low_freq_factor)) ||
                   (st = get_f32(o, path, "high_freq_factor", &r->high_freq_factor))
               ? st
               : BRISK_OK;
  }
  if (!strcmp(type, "yarn")) {
    r->scaling = BRISK_HP_ROPE_SCALING_YARN;
    /* DeepSeek's mscale pair and an untruncated ramp change the angles in
     * ways brisk's YaRN does not compute. */
    static const char *const refused[] = {"mscale", "mscale_all_dim"};
    for (size_t i = 0; i < 2 && !r->allow_mscale; i++)
      if (has(o, refused[i]))
        return brisk_error(BRISK_E_UNSUPPORTED,
                           "config.json: RoPE setting '%s.%s' (yarn) is not supported", path,
                           refused[i]);
    bool truncate = true;
    st = brisk_json_get_bool(o, "config.json", "truncate", &truncate);
    if (st && st != BRISK_E_NOT_FOUND) return st;
    if (!truncate)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "config.json: RoPE setting '%s.truncate' = false is not supported", path);
    float mscale = 0, mscale_all = 0;
    if ((st = get_f32(o, path, "beta_fast", &r->beta_fast)) ||
        (st = get_f32(o, path, "beta_slow", &r->beta_slow)) ||
        (st = get_f32(o, path, "mscale", &mscale)) ||
        (st = get_f32(o, path, "mscale_all_dim", &mscale_all)))
      return st;
    r->mscale_all_dim = mscale_all;
    if (mscale != 0 && mscale_all != 0 && !has(o, "attention_factor")) {
      /* transformers: cos and sin scale by get_mscale(factor, mscale) /
       * get_mscale(factor, mscale_all_dim), with get_mscale(s, m) = 1 +
       * 0.1 m ln s (1 when s <= 1); brisk's rope multiplies attn_factor by
       * get_mscale(factor, 1), divided out here. */
      double lf = r->factor > 1 ? log((double)r->factor) : 0;
      double af = (1 + 0.1 * mscale * lf) / (1 + 0.1 * mscale_all * lf) / (1 + 0.1 * lf);
      if (!(isfinite(af) && af > 0 && af < 1e30 && isfinite(mscale_all)))
        return brisk_error(BRISK_E_FORMAT,
                           "config.json: '%s' mscale %g / mscale_all_dim %g give no positive "
                           "magnitude for factor %g",
                           path, (double)mscale, (double)mscale_all, (double)r->factor);
      r->attn_factor = (float)af;
      return BRISK_OK;
    }
    /* transformers scales cos and sin by an explicit attention_factor
     * alone; brisk's rope multiplies attn_factor by get_mscale(factor, 1),
     * so that is divided out. */
    float given = 0.0f;
    if ((st = get_f32(o, path, "attention_factor", &given))) return st;
    if (has(o, "attention_factor")) {
      double lf = r->factor > 1 ? log((double)r->factor) : 0;
      r->attn_factor = (float)((double)given / (1 + 0.1 * lf));
    }
    return BRISK_OK;
  }
  if (!strcmp(type, "longrope") || !strcmp(type, "su")) {
    r->scaling = BRISK_HP_ROPE_SCALING_LONGROPE;
    uint32_t n = (r->dim ? r->dim : head_dim) / 2;
    if (n > BRISK_HF_ROPE_MAX_FACTORS)
      return brisk_error(BRISK_E_UNSUPPORTED, "config.json: %u longrope factors is too many", n);
    if ((st = get_factors(o, path, "short_factor", n, r->short_factor)) ||
        (st = get_factors(o, path, "long_factor", n, r->long_factor)))
      return st;
    r->n_factors = n;
    /* transformers: attention_factor defaults to sqrt(1 + ln(s) / ln(orig))
     * with s = factor, or max_position_embeddings / original when the
     * object has no factor (the caller's: factor 0 here). */
    if (!has(o, "factor")) r->factor = 0.0f;
    r->attn_factor = 0.0f;
    return get_f32(o, path, "attention_factor", &r->attn_factor);
  }
  return brisk_error(BRISK_E_UNSUPPORTED, "config.json: '%s.rope_type' '%s' is not supported", path,
                     type);
}

brisk_status brisk_hf_rope_lookup(const brisk_hf *hf, const char *layer_type, uint32_t head_dim,
                                  brisk_hf_rope *r) {
  const struct json_object *cfg = brisk_hf_config(hf);
  struct json_object *o = NULL;
  char path[96];
  brisk_status st = brisk_json_find(cfg, "config.json", "rope_parameters", &o);
  if (st == BRISK_OK) {
    snprintf(path, sizeof path, "rope_parameters");
    /* Per layer type ({"full_attention": {...}, "sliding_attention": {...}}). */
    struct json_object *sub = NULL;
    if (brisk_json_find(o, "config.json", "full_attention", &sub) == BRISK_OK ||
        brisk_json_find(o, "config.json", "sliding_attention", &sub) == BRISK_OK) {
      if (!layer_type)
        return brisk_error(BRISK_E_UNSUPPORTED,
                           "config.json: per-layer-type 'rope_parameters' are not supported for "
                           "this architecture");
      snprintf(path, sizeof path, "rope_parameters.%s", layer_type);
      if ((st = brisk_json_find(o, "config.json", layer_type, &sub)))
        return st == BRISK_E_NOT_FOUND
                   ? brisk_error(BRISK_E_FORMAT, "config.json: '%s' is missing", path)
                   : st;
      o = sub;
    }
    return brisk_hf_rope_read(o, path, head_dim, r);
  }
  if (st != BRISK_E_NOT_FOUND) return st;
  /* Older configs: top-level rope_theta (and partial_rotary_factor), plus
   * an optional rope_scaling object of the same keys. */
  if ((st = get_f32(cfg, "config", "rope_theta", &r->base))) return st;
  float partial = 1.0f;
  if ((st = get_f32(cfg, "config", "partial_rotary_factor", &partial))) return st;
  if (partial != 1.0f) {
    float dims = partial * (float)head_dim;
    if (!(partial > 0 && partial <= 1) || dims != floorf(dims) || (uint32_t)dims % 2)
      return brisk_error(BRISK_E_UNSUPPORTED,
                         "config.json: partial_rotary_factor %g of head_dim %u is not an even "
                         "number of dimensions",
                         (double)partial, head_dim);
    r->dim = (uint32_t)dims;
  }
  st = brisk_json_find(cfg, "config.json", "rope_scaling", &o);
  if (st == BRISK_E_NOT_FOUND) {
    r->scaling = BRISK_HP_ROPE_SCALING_NONE;
    r->factor = 1.0f;
    return BRISK_OK;
  }
  if (st) return st;
  return brisk_hf_rope_read(o, "rope_scaling", head_dim, r);
}
