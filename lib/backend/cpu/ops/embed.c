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
  if (brisk_dtype_is_packed(table_type) ? !brisk_cpu_pack_known(table_type)
                                        : !brisk_quant_can_dequantize(table_type))
    return brisk_error(BRISK_E_UNSUPPORTED, "embed: table type %s (%u) cannot be read",
                       brisk_dtype_name(table_type), (unsigned)table_type);
  uint64_t row_bytes, table_bytes;
  if (n_vocab < 1 || n_embd < 1 || n_tokens < 0 ||
      !brisk_dtype_row_bytes(table_type, (uint64_t)n_embd, &row_bytes) ||
      brisk_mul_overflow_u64(row_bytes, (uint64_t)n_vocab, &table_bytes) ||
      table_bytes > PTRDIFF_MAX)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "embed: table [%lld][%lld] of %s with %d tokens (needs vocab, embd >= 1, "
                       "embd a multiple of the block size %u)",
                       (long long)n_vocab, (long long)n_embd, brisk_dtype_name(table_type),
                       (int)n_tokens, brisk_dtype_get(brisk_dtype_base(table_type))->block_size);
  if (n_tokens == 0) return BRISK_OK;
  brisk_status st = brisk_cpu_ops_check_matrix("embed", n_tokens, n_embd);
  if (st != BRISK_OK) return st;
  if (!table || !tokens || !out)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: table, tokens or out is NULL");
  for (int32_t t = 0; t < n_tokens; t++)
    if (tokens[t] < 0 || tokens[t] >= n_vocab)
      return brisk_error(BRISK_E_INVALID_ARGUMENT, "embed: token %d at %d is outside [0, %lld)",
                         (int)tokens[t], (int)t, (long long)n_vocab);
  embed_job job = {table, tokens, out, table_type, n_vocab, n_embd, (size_t)row_bytes, 0};
  brisk_cpu_ops_parallel(c->pool, n_tokens, 1, 4.0 * (double)n_tokens * (double)n_embd, embed_range,
                         &job);
  int failed = atomic_load(&job.failed);
  if (failed != BRISK_OK)
    return brisk_error(BRISK_E_INTERNAL, "embed: dequantizing a %s row failed with status %d",
                       brisk_dtype_name(table_type), failed);
  return BRISK_OK;
}
