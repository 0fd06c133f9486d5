/* Regrouping weights at load into the layouts the CPU kernels read fastest
 * (backend/cpu/matmul/pack.h): q4_0 and q8_0 matrices become _R8 on CPUs
 * with the AVX2 kernels. Packing moves bytes in place, so the model takes no
 * extra memory beyond the pages it rewrites: a mapped file's pages become
 * private copies (the file is untouched), a read buffer is rewritten. The
 * kernels give the same bits either way (tested), so this only changes
 * speed. */
#include "model/load.h"
#include "model/source.h"

#include "backend/cpu/matmul/pack.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"

typedef struct repack_stats {
  int n_tensors;
  uint64_t bytes;
} repack_stats;

/* BRISK_E_UNSUPPORTED from the source: weights that cannot be rewritten
 * (a caller's buffer): they stay as they are. */
static brisk_status repack_one(brisk_model *m, brisk_weight *w, repack_stats *rs) {
  if (!w->data) return BRISK_OK;
  const uint32_t packed = brisk_cpu_pack_type(w->type, w->rows);
  if (packed == w->type) return BRISK_OK;
  const size_t bytes = (size_t)(w->row_bytes * (uint64_t)w->rows); /* checked at bind */
  brisk_status st = brisk_model_source_set_writable(m->source, w->data, bytes, true);
  if (st) return st;
  if ((st = brisk_cpu_pack(packed, (void *)(uintptr_t)w->data, w->rows, w->cols))) return st;
  w->type = packed;
  rs->n_tensors++;
  rs->bytes += bytes;
  /* Read-only again, as the rest of the mapping: a stray write faults. */
  if (brisk_model_source_set_writable(m->source, w->data, bytes, false))
    BRISK_WARN("%s", brisk_last_error());
  return BRISK_OK;
}

brisk_status brisk_model_repack(brisk_model *m) {
  repack_stats rs = {0, 0};
  const uint64_t t0 = brisk_now_ns();
  brisk_status st = BRISK_OK;
  for (uint32_t l = 0; l < m->hp.n_layer && !st; l++) {
    brisk_layer *ly = &m->layers[l];
    brisk_weight *ws[] = {&ly->wq,       &ly->wk,     &ly->wv,       &ly->wo,
                          &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, &ly->moe_router};
    for (size_t i = 0; i < sizeof ws / sizeof *ws && !st; i++) st = repack_one(m, ws[i], &rs);
    for (uint32_t e = 0; ly->expert_gate && e < m->hp.n_expert && !st; e++)
      if (!(st = repack_one(m, &ly->expert_gate[e], &rs)) &&
          !(st = repack_one(m, &ly->expert_up[e], &rs)))
        st = repack_one(m, &ly->expert_down[e], &rs);
  }
  /* Tied embeddings: the gather reads the same packed bytes (the CPU embed
   * op reads packed rows). */
  const bool tied = m->token_embd.data == m->output.data;
  if (!st) st = repack_one(m, &m->output, &rs);
  if (!st && tied) m->token_embd.type = m->output.type;
  if (st == BRISK_E_UNSUPPORTED) {
    /* Nothing was packed: the source refuses the first write. */
    BRISK_DEBUG("weights used as stored: %s", brisk_last_error());
    return BRISK_OK;
  }
  if (st) return st;
  if (rs.n_tensors)
    BRISK_DEBUG("regrouped %d weight matrices (%.1f MiB) for the CPU kernels in %.1f ms",
                rs.n_tensors, (double)rs.bytes / (1 << 20), (double)(brisk_now_ns() - t0) / 1e6);
  return BRISK_OK;
}
