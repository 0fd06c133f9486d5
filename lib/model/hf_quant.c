/* GPTQ / AWQ linear layers repacked into Q4_1 blocks (see hf_quant.h).
 *
 * Packing rules, as the formats' own packers write them (int32 words, 8
 * nibbles each, nibble j at bits 4j..4j+3):
 *   GPTQ qweight [cols/8][rows]: nibble j of word [i][n] is q of input
 *        column 8i + j, output n (AutoGPTQ's pack along the input axis);
 *   GPTQ qzeros [groups][rows/8]: nibble j of word [g][i] is the zero point
 *        of output 8i + j, stored minus one in the "gptq" format (AutoGPTQ's
 *        historical offset; "gptq_v2" stores it as is);
 *   GPTQ g_idx [cols]: the group of each input column;
 *   AWQ qweight [cols][rows/8] and qzeros [groups][rows/8]: nibble j of word
 *        [k][i] holds output 8i + order[j], order = {0, 2, 4, 6, 1, 3, 5, 7}
 *        (AutoAWQ's GEMM interleave);
 *   scales [groups][rows] float16 in both.
 * The Q4_1 block (GGUF's layout, 20 bytes): float16 d, float16 m, then 16
 * bytes whose low nibbles are elements 0..15 and high nibbles 16..31. */
#include "model/hf_quant.h"

#include "core/alloc.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "format/json.h"

#include <stdio.h>
#include <string.h>

#define Q4_1_BYTES 20
#define QC "config.json: quantization_config."

static brisk_status get_int(const brisk_hf *hf, const char *key, bool required, int64_t *v) {
  char path[96];
  snprintf(path, sizeof path, "quantization_config.%s", key);
  brisk_status st = brisk_hf_config_get_int(hf, path, v);
  if (st == BRISK_E_NOT_FOUND && required)
    return brisk_error(BRISK_E_FORMAT, QC "%s is missing", key);
  return st == BRISK_E_NOT_FOUND ? BRISK_OK : st;
}

static brisk_status get_bool(const brisk_hf *hf, const char *key, bool *v) {
  char path[96];
  snprintf(path, sizeof path, "quantization_config.%s", key);
  brisk_status st = brisk_hf_config_get_bool(hf, path, v);
  return st == BRISK_E_NOT_FOUND ? BRISK_OK : st;
}

static brisk_status get_string(const brisk_hf *hf, const char *key, const char **v) {
  char path[96];
  snprintf(path, sizeof path, "quantization_config.%s", key);
  brisk_status st = brisk_hf_config_get_string(hf, path, v);
  return st == BRISK_E_NOT_FOUND ? BRISK_OK : st;
}

static brisk_status read_gptq(const brisk_hf *hf, brisk_hf_quant *q) {
  const char *format = "gptq";
  bool marlin = false;
  brisk_status st;
  q->sym = true;
  if ((st = get_bool(hf, "desc_act", &q->desc_act)) || (st = get_bool(hf, "sym", &q->sym)) ||
      (st = get_bool(hf, "is_marlin_format", &marlin)) ||
      (st = get_string(hf, "checkpoint_format", &format)))
    return st;
  if (marlin)
    return brisk_error(BRISK_E_UNSUPPORTED, QC "is_marlin_format = true is not supported (the "
                                               "\"gptq\" checkpoint format is)");
  if (!strcmp(format, "gptq"))
    q->zero_offset = 1;
  else if (!strcmp(format, "gptq_v2"))
    q->zero_offset = 0;
  else
    return brisk_error(BRISK_E_UNSUPPORTED,
                       QC "checkpoint_format '%.64s' is not supported (gptq and gptq_v2 are)",
                       format);
  return BRISK_OK;
}

static brisk_status read_awq(const brisk_hf *hf, brisk_hf_quant *q) {
  const char *version = "gemm";
  bool zero_point = true;
  brisk_status st;
  if ((st = get_string(hf, "version", &version)) || (st = get_bool(hf, "zero_point", &zero_point)))
    return st;
  if (strcmp(version, "gemm") && strcmp(version, "GEMM"))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       QC "version '%.64s' is not supported (AWQ's \"gemm\" packing is)", version);
  if (!zero_point)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       QC "zero_point = false is not supported (AWQ with zero points is)");
  return BRISK_OK;
}

brisk_status brisk_hf_quant_read(const brisk_hf *hf, brisk_hf_quant *q) {
  *q = (brisk_hf_quant){0};
  const char *method;
  brisk_status st = brisk_hf_config_get_string(hf, "quantization_config.quant_method", &method);
  if (st == BRISK_E_NOT_FOUND) {
    struct json_object *o;
    if (brisk_json_find(brisk_hf_config(hf), "config.json", "quantization_config", &o) == BRISK_OK)
      return brisk_error(BRISK_E_FORMAT, QC "quant_method is missing");
    return BRISK_OK;
  }
  if (st) return st;
  if (!strcmp(method, "gptq"))
    q->method = BRISK_HF_QUANT_GPTQ;
  else if (!strcmp(method, "awq"))
    q->method = BRISK_HF_QUANT_AWQ;
  else
    return brisk_error(BRISK_E_UNSUPPORTED,
                       QC "quant_method '%.64s' is not supported (gptq and awq are)", method);
  int64_t bits = 0, group = 0;
  if ((st = get_int(hf, "bits", true, &bits)) || (st = get_int(hf, "group_size", true, &group)))
    return st;
  if (bits != 4)
    return brisk_error(BRISK_E_UNSUPPORTED, QC "bits = %lld is not supported (4 is)",
                       (long long)bits);
  /* Q4_1 blocks are 32 columns: a group must cover whole blocks. */
  bool whole = q->method == BRISK_HF_QUANT_GPTQ && group == -1;
  if (!whole && (group <= 0 || group % 32 || group > (1 << 20)))
    return brisk_error(BRISK_E_UNSUPPORTED,
                       QC "group_size = %lld is not supported (a positive multiple of 32%s is)",
                       (long long)group, q->method == BRISK_HF_QUANT_GPTQ ? ", or -1," : "");
  q->group_size = group;
  return q->method == BRISK_HF_QUANT_GPTQ ? read_gptq(hf, q) : read_awq(hf, q);
}

static const brisk_safetensors_tensor *find(const brisk_hf *hf, const char *prefix,
                                            const char *suffix) {
  char name[256];
  if (snprintf(name, sizeof name, "%s.%s", prefix, suffix) >= (int)sizeof name) return NULL;
  return brisk_hf_find_tensor(hf, name);
}

bool brisk_hf_quant_has(const brisk_hf *hf, const char *prefix) {
  return find(hf, prefix, "qweight") != NULL;
}

/* The tensor prefix.suffix with dtype and a 2-D (or, d1 == 0, 1-D) shape. */
static brisk_status need(const brisk_hf *hf, const char *prefix, const char *suffix, uint32_t dtype,
                         int64_t d0, int64_t d1, const brisk_safetensors_tensor **t) {
  *t = find(hf, prefix, suffix);
  if (!*t) return brisk_error(BRISK_E_FORMAT, "tensor '%s.%s' is missing", prefix, suffix);
  const brisk_safetensors_tensor *x = *t;
  bool ok = d1 ? x->n_dims == 2 && (int64_t)x->shape[0] == d0 && (int64_t)x->shape[1] == d1
               : x->n_dims == 1 && (int64_t)x->shape[0] == d0;
  if (x->dtype != dtype)
    return brisk_error(BRISK_E_FORMAT, "tensor '%s' is %s; the %s format stores it as %s", x->name,
                       brisk_safetensors_dtype_name(x->dtype), "GPTQ/AWQ",
                       brisk_safetensors_dtype_name(dtype));
  if (!ok) {
    char want[64];
    if (d1)
      snprintf(want, sizeof want, "[%lld, %lld]", (long long)d0, (long long)d1);
    else
      snprintf(want, sizeof want, "[%lld]", (long long)d0);
    return brisk_error(BRISK_E_FORMAT, "tensor '%s' has shape [%llu, %llu] (%u dims); expected %s",
                       x->name, (unsigned long long)x->shape[0],
                       (unsigned long long)(x->n_dims > 1 ? x->shape[1] : 0), x->n_dims, want);
  }
  return BRISK_OK;
}

static uint32_t word(const brisk_safetensors_tensor *t, uint64_t i) {
  uint32_t w;
  memcpy(&w, (const char *)t->data + 4 * i, 4);
  return w;
}

static uint16_t half_at(const brisk_safetensors_tensor *t, uint64_t i) {
  uint16_t h;
  memcpy(&h, (const char *)t->data + 2 * i, 2);
  return h;
}

/* The nibble of output n within its word: AWQ interleaves 8 outputs. */
static unsigned out_shift(brisk_hf_quant_method method, int64_t n) {
  static const unsigned awq_pos[8] = {0, 4, 1, 5, 2, 6, 3, 7}; /* inverse of the order */
  return 4 * (method == BRISK_HF_QUANT_AWQ ? awq_pos[n % 8] : (unsigned)(n % 8));
}

/* g_idx names each input column's group; each group must have group_size
 * columns. Columns in group order (g_idx[k] = k / group_size) load as
 * stored (*perm NULL). Any other order (act-order, desc_act: groups in
 * the order GPTQ quantized the columns in) is sorted by group, stably, as
 * exllama and vLLM do: perm[j] is the stored column that becomes column j,
 * so column j lies in group j / group_size and every 32-column Q4_1 block
 * in one group; the forward pass gathers the activations by the same perm
 * (x'[j] = x[perm[j]]), which leaves every dot product as it was. */
static brisk_status column_order(const brisk_safetensors_tensor *g, int64_t cols, int64_t group,
                                 int64_t n_groups, int32_t **perm) {
  *perm = NULL;
  for (int64_t k = 0; k < cols; k++) {
    int32_t v = (int32_t)word(g, (uint64_t)k);
    if (v < 0 || v >= n_groups)
      return brisk_error(BRISK_E_FORMAT, "tensor '%s': g_idx[%lld] = %d is out of range [0, %lld)",
                         g->name, (long long)k, v, (long long)n_groups);
  }
  int64_t *next = brisk_calloc((size_t)n_groups, sizeof *next);
  if (!next) return brisk_error_oom();
  for (int64_t k = 0; k < cols; k++) next[(int32_t)word(g, (uint64_t)k)]++;
  brisk_status st = BRISK_OK;
  for (int64_t i = 0; i < n_groups && !st; i++) {
    int64_t want = i < n_groups - 1 ? group : cols - group * (n_groups - 1);
    if (next[i] != want)
      st = brisk_error(
          BRISK_E_FORMAT, "tensor '%s': group %lld has %lld columns; group_size %lld gives %lld",
          g->name, (long long)i, (long long)next[i], (long long)group, (long long)want);
    next[i] = i * group; /* the first column of group i after sorting */
  }
  bool in_order = true;
  for (int64_t k = 0; k < cols && !st && in_order; k++)
    in_order = (int32_t)word(g, (uint64_t)k) == k / group;
  if (!st && !in_order) {
    /* cols <= INT32_MAX: the caller's shape checks bound it by the tensor. */
    int32_t *p = brisk_aligned_alloc(64, (size_t)cols * sizeof *p);
    if (!p) {
      st = brisk_error_oom();
    } else {
      for (int64_t k = 0; k < cols; k++) p[next[(int32_t)word(g, (uint64_t)k)]++] = (int32_t)k;
      *perm = p;
    }
  }
  brisk_free(next);
  return st;
}

brisk_status brisk_hf_quant_repack(const brisk_hf *hf, const brisk_hf_quant *q, const char *prefix,
                                   int64_t cols, int64_t rows, void **out, int32_t **perm_out,
                                   const char **name) {
  const bool awq = q->method == BRISK_HF_QUANT_AWQ;
  const brisk_safetensors_tensor *qw, *qz, *sc, *g = NULL;
  if (q->method == BRISK_HF_QUANT_NONE)
    return brisk_error(BRISK_E_FORMAT,
                       "tensor '%s.qweight' is quantized but config.json has no "
                       "quantization_config",
                       prefix);
  if (cols <= 0 || rows <= 0 || cols % 32 || rows % 8 || cols > INT32_MAX)
    return brisk_error(BRISK_E_UNSUPPORTED,
                       "'%s': %lld x %lld does not fit 4-bit packing into 32-column blocks (inputs "
                       "a multiple of 32, outputs of 8)",
                       prefix, (long long)rows, (long long)cols);
  const int64_t group = q->group_size == -1 ? cols : q->group_size;
  const int64_t n_groups = (cols + group - 1) / group;
  if (cols % group)
    return brisk_error(BRISK_E_UNSUPPORTED, "'%s': %lld input columns are not whole groups of %lld",
                       prefix, (long long)cols, (long long)group);
  brisk_status st;
  if ((st = need(hf, prefix, "qweight", BRISK_DTYPE_I32, awq ? cols : cols / 8,
                 awq ? rows / 8 : rows, &qw)) ||
      (st = need(hf, prefix, "qzeros", BRISK_DTYPE_I32, n_groups, rows / 8, &qz)) ||
      (st = need(hf, prefix, "scales", BRISK_DTYPE_F16, n_groups, rows, &sc)))
    return st;
  int32_t *perm = NULL;
  if (!awq && find(hf, prefix, "g_idx")) {
    if ((st = need(hf, prefix, "g_idx", BRISK_DTYPE_I32, cols, 0, &g)) ||
        (st = column_order(g, cols, group, n_groups, &perm)))
      return st;
  }
  const int64_t nb = cols / 32; /* blocks per row */
  size_t bytes;
  if (brisk_mul_overflow_size((size_t)rows, (size_t)nb * Q4_1_BYTES, &bytes)) {
    brisk_aligned_free(perm);
    return brisk_error(BRISK_E_FORMAT, "'%s': %lld x %lld is too large", prefix, (long long)rows,
                       (long long)cols);
  }
  uint8_t *dst = brisk_aligned_alloc(64, bytes);
  if (!dst) {
    brisk_aligned_free(perm);
    return brisk_error_oom();
  }
  memset(dst, 0, bytes);
  /* Scale and zero point of each block (block b of the sorted columns lies
   * in group b * 32 / group), then the nibbles: column j of the Q4_1 rows is
   * stored column perm[j]. */
  for (int64_t n = 0; n < rows; n++)
    for (int64_t b = 0; b < nb; b++) {
      const int64_t gi = b * 32 / group;
      uint16_t d = half_at(sc, (uint64_t)(gi * rows + n));
      uint32_t z = (word(qz, (uint64_t)(gi * (rows / 8) + n / 8)) >> out_shift(q->method, n)) & 15;
      z += q->zero_offset;
      /* s * z is exact in float32 (11 + 5 bits); m is its float16 rounding. */
      uint16_t m = brisk_f32_to_f16(-(brisk_f16_to_f32(d) * (float)z));
      uint8_t *blk = dst + ((uint64_t)n * (uint64_t)nb + (uint64_t)b) * Q4_1_BYTES;
      memcpy(blk, &d, 2);
      memcpy(blk + 2, &m, 2);
    }
  for (int64_t j = 0; j < cols; j++) {
    const int64_t e = j % 32, b = j / 32, k = perm ? perm[j] : j;
    const unsigned hi = e >= 16 ? 4 : 0;
    for (int64_t n = 0; n < rows; n++) {
      uint32_t v = awq ? (word(qw, (uint64_t)(k * (rows / 8) + n / 8)) >> out_shift(q->method, n))
                       : (word(qw, (uint64_t)((k / 8) * rows + n)) >> (4 * (k % 8)));
      uint8_t *blk = dst + ((uint64_t)n * (uint64_t)nb + (uint64_t)b) * Q4_1_BYTES;
      blk[4 + e % 16] |= (uint8_t)((v & 15) << hi);
    }
  }
  *out = dst;
  *perm_out = perm;
  *name = qw->name;
  return BRISK_OK;
}
