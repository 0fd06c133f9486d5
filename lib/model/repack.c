/* Regrouping weights at load into the layouts the CPU kernels read fastest
 * (backend/cpu/matmul/pack.h): q8_0, q4_x, q5_x and the K-types' matrices
 * become _R8 on CPUs with the AVX2 kernels. Packing moves bytes in place: a mapped file's pages
 * become private copies (the file is untouched), a read buffer is rewritten.
 * The kernels give the same bits either way (tested), so this only changes
 * speed and where the memory is counted. */
#include "model/load.h"
#include "model/source.h"

#include "backend/cpu/matmul/pack.h"
#include "core/clock.h"
#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"

typedef struct repack_pass {
  brisk_model *m;
  bool apply;     /* false: only count what would be packed */
  int n_tensors;  /* matrices packed (or to pack) */
  uint64_t bytes; /* their bytes */
} repack_pass;

static uint64_t weight_bytes(const brisk_weight *w) { return w->row_bytes * (uint64_t)w->rows; }

/* BRISK_E_UNSUPPORTED from the source: weights that cannot be rewritten
 * (a caller's buffer); the first one stops the pass with nothing changed. */
static brisk_status visit(repack_pass *p, brisk_weight *w) {
  if (!w->data) return BRISK_OK;
  const uint32_t packed = brisk_cpu_pack_type(w->type, w->rows);
  if (packed == w->type) return BRISK_OK;
  const size_t bytes = (size_t)weight_bytes(w); /* fits: checked at bind */
  p->n_tensors++;
  p->bytes += bytes;
  if (!p->apply) return BRISK_OK;
  brisk_status st = brisk_model_source_set_writable(p->m->source, w->data, bytes, true);
  if (st) return st;
  if ((st = brisk_cpu_pack(packed, (void *)(uintptr_t)w->data, w->rows, w->cols))) return st;
  w->type = packed;
  /* Read-only again, as the rest of the mapping: a stray write faults. */
  if (brisk_model_source_set_writable(p->m->source, w->data, bytes, false))
    BRISK_WARN("%s", brisk_last_error());
  return BRISK_OK;
}

static brisk_status run_pass(repack_pass *p) {
  brisk_model *m = p->m;
  brisk_status st = BRISK_OK;
  for (uint32_t l = 0; l < m->hp.n_layer && !st; l++) {
    brisk_layer *ly = &m->layers[l];
    brisk_weight *ws[] = {&ly->wq,       &ly->wk,     &ly->wv,       &ly->wo,
                          &ly->ffn_gate, &ly->ffn_up, &ly->ffn_down, &ly->moe_router};
    for (size_t i = 0; i < sizeof ws / sizeof *ws && !st; i++) st = visit(p, ws[i]);
    for (uint32_t e = 0; ly->expert_gate && e < m->hp.n_expert && !st; e++)
      if (!(st = visit(p, &ly->expert_gate[e])) && !(st = visit(p, &ly->expert_up[e])))
        st = visit(p, &ly->expert_down[e]);
  }
  /* Tied embeddings: the gather reads the same bytes, packed (the CPU embed
   * op reads packed rows). */
  const bool tied = m->token_embd.data == m->output.data;
  if (!st) st = visit(p, &m->output);
  if (!st && tied) m->token_embd.type = m->output.type;
  return st;
}

brisk_status brisk_model_repack(brisk_model *m, uint64_t budget) {
  repack_pass count = {m, false, 0, 0};
  (void)run_pass(&count);
  if (count.n_tensors == 0) return BRISK_OK;
  if (count.bytes > budget) {
    BRISK_INFO("weights used as stored: regrouping %.1f MiB for the CPU kernels would take them "
               "out of the page cache, and only %.1f MiB may",
               (double)count.bytes / (1 << 20), (double)budget / (1 << 20));
    return BRISK_OK;
  }
  const uint64_t t0 = brisk_now_ns();
  repack_pass apply = {m, true, 0, 0};
  brisk_status st = run_pass(&apply);
  if (st == BRISK_E_UNSUPPORTED && apply.n_tensors == 1) {
    BRISK_DEBUG("weights used as stored: %s", brisk_last_error());
    return BRISK_OK;
  }
  if (st) return st;
  BRISK_DEBUG("regrouped %d weight matrices (%.1f MiB) for the CPU kernels in %.1f ms",
              apply.n_tensors, (double)apply.bytes / (1 << 20),
              (double)(brisk_now_ns() - t0) / 1e6);
  return BRISK_OK;
}

uint64_t brisk_model_repack_budget(const brisk_model *m) {
  if (!brisk_model_source_is_mapped(m->source)) return UINT64_MAX;
  const uint64_t avail = brisk_memory_available();
  return avail == 0 ? UINT64_MAX : avail / 4 * 3;
}
