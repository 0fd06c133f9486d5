/* GPTQ and AWQ checkpoints in a Hugging Face folder: config.json's
 * "quantization_config" and the int32-packed 4-bit linear layers
 * (<module>.qweight, .qzeros, .scales and GPTQ's .g_idx), repacked into
 * brisk's Q4_1 blocks (docs/quantization.md, "GPTQ and AWQ checkpoints").
 *
 * A group of group_size input columns shares one scale s and zero point z
 * per output row: w = s * (q - z). Every group size brisk takes is a
 * multiple of 32, so each Q4_1 block (32 columns: w = d * q + m) lies in one
 * group and takes d = s exactly and m = -s * z rounded to float16. */
#ifndef BRISK_MODEL_HF_QUANT_H
#define BRISK_MODEL_HF_QUANT_H

#include "brisk.h"
#include "format/hf.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum brisk_hf_quant_method {
  BRISK_HF_QUANT_NONE = 0, /* no quantization_config */
  BRISK_HF_QUANT_GPTQ,     /* AutoGPTQ / GPTQModel "gptq" (or "gptq_v2") checkpoint format */
  BRISK_HF_QUANT_AWQ,      /* AutoAWQ version "gemm" */
} brisk_hf_quant_method;

typedef struct brisk_hf_quant {
  brisk_hf_quant_method method;
  int64_t group_size;   /* input columns per group; -1: one group over all of them */
  bool desc_act, sym;   /* GPTQ's act-order and symmetric flags, as the config says */
  uint32_t zero_offset; /* added to each stored zero point: 1 in the "gptq" format */
} brisk_hf_quant;

/* Reads config.json's quantization_config into *q (method NONE when there
 * is none). Anything brisk cannot load exactly is refused with the key and
 * its value in the message: BRISK_E_UNSUPPORTED for a method, bits,
 * group_size, checkpoint_format or version it does not take, BRISK_E_FORMAT
 * for a key of the wrong type. */
brisk_status brisk_hf_quant_read(const brisk_hf *hf, brisk_hf_quant *q);

/* Whether the folder holds `prefix`.qweight (prefix: "model.layers.0.mlp.up_proj"). */
bool brisk_hf_quant_has(const brisk_hf *hf, const char *prefix);

/* Repacks the quantized linear layer `prefix` of `rows` outputs and `cols`
 * inputs into Q4_1 rows ([rows][cols / 32] blocks) in a new
 * brisk_aligned_alloc buffer *out the caller owns; *name is the qweight
 * tensor's name (valid until brisk_hf_close). *perm is NULL when the
 * columns are stored in group order; for an act-order checkpoint (g_idx in
 * another order) the Q4_1 columns are sorted by group and *perm ([cols], a
 * brisk_aligned_alloc buffer the caller owns) says which stored column
 * each one is: the layer computes y = x' W'^T with x'[j] = x[perm[j]].
 * Every tensor's dtype and shape is checked against q, rows and cols, and
 * g_idx against the group size: BRISK_E_FORMAT with the tensor's name on
 * any mismatch or an index out of range, BRISK_E_OUT_OF_MEMORY (nothing
 * allocated then). Thread-safe on distinct outputs. */
brisk_status brisk_hf_quant_repack(const brisk_hf *hf, const brisk_hf_quant *q, const char *prefix,
                                   int64_t cols, int64_t rows, void **out, int32_t **perm,
                                   const char **name);

#endif
