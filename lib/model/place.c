/* Placing a loaded model's weights on its devices, each backend preparing
 * its own layout (backend.h weight_plan / weight_prepare):
 *
 *   layers [0, n_dev_layers) and, when all layers are there, the output
 *   norm and projection: on the model's device (a GPU), copied into its
 *   memory in the layout its kernels read;
 *   everything else, token embeddings always: on the CPU, in host memory,
 *   regrouped in place where the CPU kernels read another layout faster
 *   (the packed _R8 rows), within a memory budget.
 *
 * The in-place rewrite of a mapped file's pages makes them private copies
 * (the file is untouched), so it is done only when those weights fit in the
 * budget; otherwise they are used as stored, which the CPU kernels read too,
 * with the same bits. */
#include "model/load.h"
#include "model/shard.h"
#include "model/source.h"

#include "backend/device.h"
#include "core/alloc.h"
#include "core/clock.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memcap.h"

#include <stdio.h>
#include <string.h>

typedef struct place_pass {
  brisk_model *m;
  brisk_backend *cpu; /* plans the host weights */
  bool apply;         /* false: only count what the CPU would rewrite */
  int n_tensors;      /* matrices rewritten (or to rewrite) */
  uint64_t bytes;     /* their bytes */
} place_pass;

static uint64_t weight_bytes(const brisk_weight *w) { return w->row_bytes * (uint64_t)w->rows; }

/* A host matrix, rewritten in place when the CPU backend plans so.
 * BRISK_E_UNSUPPORTED from the source: weights that cannot be rewritten (a
 * caller's buffer); the first one stops the pass with nothing changed. */
static brisk_status visit_host(place_pass *p, brisk_weight *w) {
  if (!w->data) return BRISK_OK;
  brisk_weight_plan plan;
  brisk_status st = p->cpu->weight_plan(p->cpu, w->type, w->rows, w->cols, true, &plan);
  if (st || plan.mode != BRISK_WEIGHT_IN_PLACE) return st;
  const size_t bytes = (size_t)weight_bytes(w); /* fits: checked at bind */
  p->n_tensors++;
  p->bytes += bytes;
  if (!p->apply) return BRISK_OK;
  if ((st = brisk_model_source_set_writable(p->m->source, w->data, bytes, true))) return st;
  void *out = NULL;
  if ((st = p->cpu->weight_prepare(p->cpu, &plan, w->type, w->rows, w->cols,
                                   (void *)(uintptr_t)w->data, &out)))
    return st;
  w->type = plan.type;
  /* Read-only again, as the rest of the mapping: a stray write faults. */
  if (brisk_model_source_set_writable(p->m->source, w->data, bytes, false))
    BRISK_WARN("%s", brisk_last_error());
  return BRISK_OK;
}

/* A matrix in memory the model owns (a slot copy): rewritten in place
 * when the CPU plans so, with no mapping to make writable. */
static brisk_status visit_owned(place_pass *p, brisk_weight *w) {
  if (!w->data) return BRISK_OK;
  brisk_weight_plan plan;
  brisk_status st = p->cpu->weight_plan(p->cpu, w->type, w->rows, w->cols, true, &plan);
  if (st || plan.mode != BRISK_WEIGHT_IN_PLACE) return st;
  p->n_tensors++;
  p->bytes += weight_bytes(w);
  if (!p->apply) return BRISK_OK;
  void *out = NULL;
  if ((st = p->cpu->weight_prepare(p->cpu, &plan, w->type, w->rows, w->cols,
                                   (void *)(uintptr_t)w->data, &out)))
    return st;
  w->type = plan.type;
  return BRISK_OK;
}

static brisk_status visit_layer_host(place_pass *p, brisk_layer *ly, uint32_t l) {
  const brisk_hparams *hp = &p->m->hp;
  /* A split layer reads its slot copies (owned memory) instead of wo and
   * ffn_down (model/shard.h). */
  const brisk_split_layer *sl = p->m->split ? &p->m->split->layers[l] : NULL;
  brisk_weight *ws[] = {&ly->wq,
                        &ly->wk,
                        &ly->wv,
                        sl ? NULL : &ly->wo,
                        &ly->ffn_gate,
                        &ly->ffn_up,
                        sl ? NULL : &ly->ffn_down,
                        &ly->moe_router,
                        &ly->shexp_gate,
                        &ly->shexp_up,
                        &ly->shexp_down,
                        &ly->shexp_gate_inp};
  brisk_status st = BRISK_OK;
  for (size_t i = 0; i < sizeof ws / sizeof *ws && !st; i++)
    if (ws[i]) st = visit_host(p, ws[i]);
  for (int32_t j = 0; sl && j < p->m->split->n_slots && !st; j++)
    if (!(st = visit_owned(p, (brisk_weight *)&sl->wo[j])))
      st = visit_owned(p, (brisk_weight *)&sl->down[j]);
  for (uint32_t e = 0; ly->expert_gate && e < hp->n_expert && !st; e++)
    if (!(st = visit_host(p, &ly->expert_gate[e])) && !(st = visit_host(p, &ly->expert_up[e])))
      st = visit_host(p, &ly->expert_down[e]);
  return st;
}

static brisk_status run_host_pass(place_pass *p) {
  brisk_model *m = p->m;
  brisk_status st = BRISK_OK;
  /* Only the layers (and output) this process runs: an MPI job's stage
   * leaves the others' pages untouched (model/shard.h). */
  uint32_t l0 = (uint32_t)(m->n_dev_layers > m->local_begin ? m->n_dev_layers : m->local_begin);
  for (uint32_t l = l0; l < (uint32_t)brisk_model_local_end(m) && !st; l++)
    st = visit_layer_host(p, &m->layers[l], l);
  if (st || m->output_on_device || !brisk_model_local_output(m)) return st;
  /* Tied embeddings: the gather reads the same bytes, rewritten (the CPU
   * embed op reads packed rows). */
  const bool tied = m->token_embd.data == m->output.data;
  if (!(st = visit_host(p, &m->output)) && tied) m->token_embd.type = m->output.type;
  return st;
}

brisk_status brisk_model_repack(brisk_model *m, uint64_t budget) {
  brisk_backend *cpu = NULL;
  brisk_device_ref host = brisk_device_cpu();
  brisk_status st = brisk_device_backend_create(&host, NULL, &cpu);
  if (st) return st;
  place_pass count = {m, cpu, false, 0, 0};
  (void)run_host_pass(&count);
  if (count.n_tensors == 0) goto done;
  if (count.bytes > budget) {
    BRISK_INFO("weights used as stored: regrouping %.1f MiB for the CPU kernels would take them "
               "out of the page cache, and only %.1f MiB may",
               (double)count.bytes / (1 << 20), (double)budget / (1 << 20));
    goto done;
  }
  /* Rewritten pages of a mapped file become the process's own memory, so
   * they count against the memory limits; over a limit, use them as stored. */
  const bool mapped = m->mem && brisk_model_source_is_mapped(m->source);
  if (mapped && brisk_mem_charge(m->mem, count.bytes)) {
    char why[160];
    brisk_mem_describe_hit(why, sizeof why);
    BRISK_INFO("weights used as stored: regrouping %.1f MiB for the CPU kernels would pass %s",
               (double)count.bytes / (1 << 20), why);
    goto done;
  }
  if (mapped) {
    /* One charge (one reference) for the model's life, however many passes. */
    if (m->repack_charge) brisk_mem_uncharge(m->mem, 0);
    m->repack_charge += count.bytes;
  }
  const uint64_t t0 = brisk_now_ns();
  place_pass apply = {m, cpu, true, 0, 0};
  st = run_host_pass(&apply);
  if (st == BRISK_E_UNSUPPORTED && apply.n_tensors == 1) {
    BRISK_DEBUG("weights used as stored: %s", brisk_last_error());
    st = BRISK_OK;
    goto done;
  }
  if (!st)
    BRISK_DEBUG("regrouped %d weight matrices (%.1f MiB) for the CPU kernels in %.1f ms",
                apply.n_tensors, (double)apply.bytes / (1 << 20),
                (double)(brisk_now_ns() - t0) / 1e6);
done:
  brisk_backend_free(cpu);
  return st;
}

uint64_t brisk_model_repack_bytes(brisk_model *m) {
  brisk_backend *cpu = NULL;
  brisk_device_ref host = brisk_device_cpu();
  if (brisk_device_backend_create(&host, NULL, &cpu)) return 0;
  place_pass count = {m, cpu, false, 0, 0};
  (void)run_host_pass(&count);
  brisk_backend_free(cpu);
  return count.bytes;
}

uint64_t brisk_model_repack_budget(const brisk_model *m) {
  if (!brisk_model_source_is_mapped(m->source)) return UINT64_MAX;
  const uint64_t avail = brisk_memory_available();
  return avail == 0 ? UINT64_MAX : avail / 4 * 3;
}

/* ---- the device ------------------------------------------------------------ */

/* Copies one weight into the device's memory in its layout. */
static brisk_status to_device(brisk_model *m, brisk_weight *w, bool matrix) {
  if (!w->data) return BRISK_OK;
  brisk_backend *be = m->dev_be;
  brisk_weight_plan plan;
  brisk_status st = be->weight_plan(be, w->type, w->rows, w->cols, matrix, &plan);
  if (st) return st;
  if (plan.mode != BRISK_WEIGHT_COPY)
    return brisk_error(BRISK_E_INTERNAL, "%s: the %s backend plans mode %d for weight '%s'",
                       be->name, be->name, (int)plan.mode, w->name ? w->name : "?");
  if (brisk_grow((void **)&m->dev_bufs, &m->dev_bufs_cap, m->n_dev_bufs + 1, sizeof(void *)))
    return brisk_error_oom();
  void *out = NULL;
  if ((st = be->weight_prepare(be, &plan, w->type, w->rows, w->cols, (void *)(uintptr_t)w->data,
                               &out)))
    return st;
  m->dev_bufs[m->n_dev_bufs++] = out;
  m->dev_weight_bytes += plan.bytes;
  w->data = out;
  w->type = plan.type;
  return BRISK_OK;
}

/* The split layer's slot copies (model/shard.h) instead of wo and
 * ffn_down, which the pass does not read then. */
static const brisk_split_layer *split_layer_of(const brisk_model *m, int32_t l) {
  return m->split && l >= m->split->first_layer ? &m->split->layers[l] : NULL;
}

static brisk_status layer_to_device(brisk_model *m, brisk_layer *ly, int32_t l) {
  brisk_split_layer *sl = (brisk_split_layer *)split_layer_of(m, l);
  brisk_weight none = {0};
  brisk_weight *mats[] = {&ly->wq,
                          &ly->wk,
                          &ly->wv,
                          sl ? &none : &ly->wo,
                          &ly->ffn_gate,
                          &ly->ffn_up,
                          sl ? &none : &ly->ffn_down,
                          &ly->moe_router,
                          &ly->shexp_gate,
                          &ly->shexp_up,
                          &ly->shexp_down,
                          &ly->shexp_gate_inp,
                          &ly->wq_a,
                          &ly->wq_b,
                          &ly->wkv_a_lat,
                          &ly->wkv_a_rope};
  /* kv_b stays float32 (mla_attention reads it as such), as vectors do. */
  brisk_weight *vecs[] = {&ly->attn_norm,
                          &ly->ffn_norm,
                          &ly->bq,
                          &ly->bk,
                          &ly->bv,
                          &ly->q_norm,
                          &ly->k_norm,
                          &ly->post_attn_norm,
                          &ly->post_ffn_norm,
                          &ly->q_a_norm,
                          &ly->kv_a_norm,
                          &ly->wkv_b};
  brisk_status st = BRISK_OK;
  for (size_t i = 0; i < sizeof mats / sizeof *mats && !st; i++) st = to_device(m, mats[i], true);
  for (int32_t j = 0; sl && j < m->split->n_slots && !st; j++)
    if (!(st = to_device(m, &sl->wo[j], true))) st = to_device(m, &sl->down[j], true);
  for (size_t i = 0; i < sizeof vecs / sizeof *vecs && !st; i++) st = to_device(m, vecs[i], false);
  for (uint32_t e = 0; ly->expert_gate && e < m->hp.n_expert && !st; e++)
    if (!(st = to_device(m, &ly->expert_gate[e], true)) &&
        !(st = to_device(m, &ly->expert_up[e], true)))
      st = to_device(m, &ly->expert_down[e], true);
  return st;
}

static brisk_status place_device(brisk_model *m, const brisk_model_params *params) {
  brisk_status st = brisk_device_backend_create(&m->device, NULL, &m->dev_be);
  if (st) return st;
  const uint64_t t0 = brisk_now_ns();
  for (int32_t l = 0; l < m->n_dev_layers && !st; l++) {
    st = layer_to_device(m, &m->layers[l], l);
    if (!st)
      st = brisk_model_report_progress(params,
                                       0.5f + 0.5f * (float)(l + 1) / (float)(m->n_dev_layers + 1));
  }
  if (!st && m->output_on_device && !(st = to_device(m, &m->output_norm, false)))
    st = to_device(m, &m->output, true);
  if (!st && m->dev_be->synchronize) st = m->dev_be->synchronize(m->dev_be);
  /* Every slot copy of a split wholly on the device is there now. */
  if (!st && m->split && m->split->first_layer < m->n_dev_layers)
    brisk_split_drop_host_copies(m->split);
  if (!st)
    BRISK_INFO("%d of %u layers%s on %s: %.1f MiB in %.1f ms", (int)m->n_dev_layers, m->hp.n_layer,
               m->output_on_device ? " and the output" : "", m->dev_be->name,
               (double)m->dev_weight_bytes / (1 << 20), (double)(brisk_now_ns() - t0) / 1e6);
  return st;
}

brisk_status brisk_model_place(brisk_model *m, const brisk_model_params *params) {
  const int32_t n_layer = (int32_t)m->hp.n_layer;
  if (brisk_device_is_cpu(&m->device)) {
    m->n_dev_layers = 0;
  } else {
    int32_t ngl = params->n_gpu_layers;
    m->n_dev_layers = ngl < 0 || ngl > n_layer ? n_layer : ngl;
  }
  m->output_on_device = m->n_dev_layers > 0 && m->n_dev_layers == n_layer;
  brisk_status st = BRISK_OK;
  if (m->n_dev_layers > 0 && (st = place_device(m, params))) return st;
  if (params->repack) st = brisk_model_repack(m, brisk_model_repack_budget(m));
  return st;
}

brisk_status brisk_model_place_ranks(brisk_model *m, const brisk_model_params *params) {
  const int32_t n_layer = (int32_t)m->hp.n_layer;
  char first[32];
  brisk_device_name(&m->device, first, sizeof first);
  for (int32_t r = 0; r < m->tp_size; r++) {
    brisk_model *s = m->tp_ranks[r];
    /* Rank r on the r-th device from the one named: "cuda:1" with tp 2 is
     * cuda:1 and cuda:2. */
    char name[48];
    snprintf(name, sizeof name, "%s:%d", m->device.provider->kind_name, (int)(m->device.index + r));
    brisk_status st = brisk_device_parse(name, &s->device);
    if (st) { /* the parse's message, copied: brisk_error rewrites it */
      char why[256];
      snprintf(why, sizeof why, "%s", brisk_last_error());
      return brisk_error(st, "tensor parallelism over %d devices from %s: rank %d: %s",
                         (int)m->tp_size, first, (int)r, why);
    }
    s->n_dev_layers = n_layer;
    s->output_on_device = true;
    if ((st = place_device(s, params))) return st;
  }
  return BRISK_OK;
}

void brisk_model_unplace(brisk_model *m) {
  for (size_t i = 0; i < m->n_dev_bufs; i++) m->dev_be->buffer_free(m->dev_be, m->dev_bufs[i]);
  brisk_free(m->dev_bufs);
  m->dev_bufs = NULL;
  m->n_dev_bufs = m->dev_bufs_cap = 0;
  brisk_backend_free(m->dev_be);
  m->dev_be = NULL;
}
