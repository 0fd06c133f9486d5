/* Embedding gather: rows of a (possibly quantized) table by token id. */
#include "backend/cpu/ops/ops.h"

#include "backend/cpu/matmul/pack.h"
#include "core/checked.h"
#include "core/dtype.h"
#include "core/error.h"
#include "quant/quant.h"

#include <stdatomic.h>

typedef struct embed_job {
  const uint8_t *table;  // [n_vocab][row_bytes]
  const int32_t *tokens; // [n_tokens]
  float *out;            // [n_tokens][n_embd]
  uint32_t type; /* the stored type: a packed id (tied embeddings) reads rows block by block */
  int64_t n_vocab, n_embd;
  size_t row_bytes;
  _Atomic int failed; /* a status other than OK, from any task */
} embed_job;

static void embed_range(void *p, int64_t t0, int64_t t1) {
  embed_job *j = p;
  for (int64_t t = t0; t < t1; t++) {
    const uint8_t *row = j->table + (size_t)j->tokens[t] * j->row_bytes;
    brisk_status st = brisk_dtype_is_packed(j->type)
                          ? brisk_cpu_packed_row_f32(j->type, j->table, j->n_vocab, j->n_embd,
                                                     j->tokens[t], j->out + t * j->n_embd)
                          : brisk_dequantize_row(j->type, row, j->out + t * j->n_embd, j->n_embd);
    if (st != BRISK_OK) atomic_store(&j->failed, (int)st);
  }
}

brisk_status brisk_cpu_ops_embed(brisk_backend *be, uint32_t table_type, const void *table,
                                 int64_t n_vocab, int64_t n_embd, const int32_t *tokens,
                                 int32_t n_tokens, float *out) {
  const brisk_cpu_ctx *c = be->ctx;
  const bool readable = brisk_dtype_is_packed(table_type) ? brisk_cpu_pack_known(table_type)
                                                          : brisk_quant_can_dequantize(table_type);
  uint64_t row_bytes = 0;
  brisk_status st = brisk_check_embed(readable, table_type, table, n_vocab, n_embd, tokens,
                                      n_tokens, out, &row_bytes);
  if (st != BRISK_OK || n_tokens == 0) return st;
  embed_job job = {table, tokens, out, table_type, n_vocab, n_embd, (size_t)row_bytes, 0};
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, 4.0 * (double)n_tokens * (double)n_embd, embed_range,
                         &job);
  int failed = atomic_load(&job.failed);
  if (failed != BRISK_OK)
    return brisk_error(BRISK_E_INTERNAL, "embed: dequantizing a %s row failed with status %d",
                       brisk_dtype_name(table_type), failed);
  return BRISK_OK;
}
