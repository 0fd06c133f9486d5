/* Serving metrics: the accumulator (see metrics.h), the engine's hooks and
 * brisk_engine_get_metrics / brisk_engine_reset_metrics. */
#include "engine/metrics.h"

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "engine/engine_internal.h"
#include "model/cost.h"

#include <math.h>
#include <string.h>

void brisk_metrics_init(brisk_metrics *m, uint64_t slo_ttft_ns, uint64_t slo_tpot_ns,
                        double mem_bandwidth_gbs, double peak_gflops) {
  memset(m, 0, sizeof *m);
  m->slo_ttft_ns = slo_ttft_ns;
  m->slo_tpot_ns = slo_tpot_ns;
  m->mem_bandwidth_gbs = mem_bandwidth_gbs;
  m->peak_gflops = peak_gflops;
  m->kv_elem_bytes = 2;
}

void brisk_metrics_reset(brisk_metrics *m, uint64_t now) {
  /* Not a copy of *m: it is large (histograms) and may be on a small stack. */
  uint64_t ttft = m->slo_ttft_ns, tpot = m->slo_tpot_ns;
  double bw = m->mem_bandwidth_gbs, peak = m->peak_gflops;
  uint32_t kv_elem = m->kv_elem_bytes;
  brisk_metrics_init(m, ttft, tpot, bw, peak);
  m->kv_elem_bytes = kv_elem;
  m->t_reset = now;
}

void brisk_metrics_on_submit(brisk_metrics *m, uint64_t t) {
  if (!m->t_first_submit || t < m->t_first_submit) m->t_first_submit = t;
}

uint64_t brisk_metrics_tpot_ns(const brisk_metrics_request *r) {
  if (r->n_generated < 2 || !r->t_first || r->t_finish < r->t_first) return 0;
  return (r->t_finish - r->t_first) / (uint64_t)(r->n_generated - 1);
}

/* b - a, or 0 when either stamp is missing or out of order. */
static uint64_t span(uint64_t a, uint64_t b) { return a && b >= a ? b - a : 0; }

void brisk_metrics_on_finish(brisk_metrics *m, const brisk_metrics_request *r) {
  uint64_t start = r->t_submit > m->t_reset ? r->t_submit : m->t_reset;
  if (!m->t_start_finished || start < m->t_start_finished) m->t_start_finished = start;
  if (r->t_finish > m->t_last_finish) m->t_last_finish = r->t_finish;
  if (r->reason != BRISK_FINISH_EOG && r->reason != BRISK_FINISH_LENGTH) {
    m->n_aborted++;
    return;
  }
  m->n_completed++;
  m->n_prompt_tokens += (uint64_t)(r->n_prompt > 0 ? r->n_prompt : 0);
  m->n_output_tokens += (uint64_t)(r->n_generated > 0 ? r->n_generated : 0);
  uint64_t ttft = span(r->t_submit, r->t_first);
  brisk_hist_add(&m->queue, span(r->t_submit, r->t_admit));
  brisk_hist_add(&m->ttft, ttft);
  brisk_hist_add(&m->e2e, span(r->t_submit, r->t_finish));
  int good = !m->slo_ttft_ns || ttft <= m->slo_ttft_ns;
  if (r->n_generated >= 2) {
    uint64_t tpot = brisk_metrics_tpot_ns(r);
    brisk_hist_add(&m->tpot, tpot);
    if (m->slo_tpot_ns && tpot > m->slo_tpot_ns) good = 0;
  }
  if (good) m->n_good++;
}

void brisk_metrics_on_embed(brisk_metrics *m, const brisk_metrics_request *r) {
  uint64_t start = r->t_submit > m->t_reset ? r->t_submit : m->t_reset;
  if (!m->t_start_finished || start < m->t_start_finished) m->t_start_finished = start;
  if (r->t_finish > m->t_last_finish) m->t_last_finish = r->t_finish;
  if (r->reason != BRISK_FINISH_LENGTH) {
    m->n_aborted++;
    return;
  }
  m->n_embeddings++;
  m->n_embed_tokens += (uint64_t)(r->n_prompt > 0 ? r->n_prompt : 0);
  brisk_hist_add(&m->embed_e2e, span(r->t_submit, r->t_finish));
}

void brisk_metrics_on_step(brisk_metrics *m, int32_t n_tokens, uint64_t duration_ns, double bytes,
                           double flops, double kv_util) {
  if (n_tokens <= 0) return;
  m->n_busy_steps++;
  m->busy_ns += duration_ns;
  m->bytes += bytes;
  m->flops += flops;
  m->kv_util_sum += kv_util;
}

static void summarize(const brisk_hist *h, brisk_latency_summary *s) {
  s->count = h->count;
  s->p50_ns = brisk_hist_quantile(h, 0.50);
  s->p90_ns = brisk_hist_quantile(h, 0.90);
  s->p99_ns = brisk_hist_quantile(h, 0.99);
  s->min_ns = h->count ? h->min : 0;
  s->max_ns = h->count ? h->max : 0;
  s->mean_ns = brisk_hist_mean(h);
}

static double per(double x, double seconds) { return seconds > 0 ? x / seconds : 0.0; }

void brisk_metrics_report(const brisk_metrics *m, uint64_t first_submit, uint64_t now, int live,
                          double kv_util_now, uint64_t n_preemptions, brisk_engine_metrics *out) {
  uint32_t size = out->struct_size;
  memset(out, 0, sizeof *out);
  out->struct_size = size;
  out->n_completed = m->n_completed;
  out->n_aborted = m->n_aborted;
  summarize(&m->queue, &out->queue);
  summarize(&m->ttft, &out->ttft);
  summarize(&m->tpot, &out->tpot);
  summarize(&m->e2e, &out->e2e);
  summarize(&m->embed_e2e, &out->embed_e2e);
  out->n_embeddings = m->n_embeddings;
  out->n_embed_tokens = m->n_embed_tokens;

  uint64_t start = first_submit;
  if (m->t_start_finished && (!start || m->t_start_finished < start)) start = m->t_start_finished;
  if (!start && live) start = m->t_reset; /* only requests from before the reset */
  uint64_t end = live ? now : m->t_last_finish;
  double w = start && end > start ? (double)(end - start) * 1e-9 : 0.0;
  out->window_s = w;
  out->output_tokens_per_s = per((double)m->n_output_tokens, w);
  out->total_tokens_per_s = per((double)(m->n_prompt_tokens + m->n_output_tokens), w);
  out->requests_per_s = per((double)m->n_completed, w);
  out->n_good = m->n_good;
  out->goodput_requests_per_s = per((double)m->n_good, w);
  out->goodput_fraction = m->n_completed ? (double)m->n_good / (double)m->n_completed : 0.0;

  out->kv_utilization = kv_util_now;
  out->kv_utilization_mean = m->n_busy_steps ? m->kv_util_sum / (double)m->n_busy_steps : 0.0;
  out->n_preemptions = n_preemptions;
  out->n_busy_steps = m->n_busy_steps;
  out->busy_s = (double)m->busy_ns * 1e-9;
  out->bytes = m->bytes;
  out->flops = m->flops;
  out->achieved_gbs = per(m->bytes, out->busy_s) * 1e-9;
  out->achieved_gflops = per(m->flops, out->busy_s) * 1e-9;
  out->mbu = m->mem_bandwidth_gbs > 0 ? out->achieved_gbs / m->mem_bandwidth_gbs : 0.0;
  out->mfu = m->peak_gflops > 0 ? out->achieved_gflops / m->peak_gflops : 0.0;
}

/* ---- Engine hooks ---- */

/* Milliseconds from params as nanoseconds; -1 when negative, NaN or past
 * what uint64 nanoseconds hold. */
static int ms_to_ns(double ms, uint64_t *ns) {
  if (!(ms >= 0) || ms > 1.8e13) return -1;
  *ns = (uint64_t)llround(ms * 1e6);
  return 0;
}

brisk_status brisk_engine_metrics_setup(brisk_engine *e, const brisk_engine_params *p) {
  uint64_t ttft = 0, tpot = 0;
  if (ms_to_ns(p->slo_ttft_ms, &ttft))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "engine params: slo_ttft_ms %g must be finite and >= 0", p->slo_ttft_ms);
  if (ms_to_ns(p->slo_tpot_ms, &tpot))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "engine params: slo_tpot_ms %g must be finite and >= 0", p->slo_tpot_ms);
  if (!(p->mem_bandwidth_gbs >= 0) || isinf(p->mem_bandwidth_gbs))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "engine params: mem_bandwidth_gbs %g must be finite and >= 0",
                       p->mem_bandwidth_gbs);
  if (!(p->peak_gflops >= 0) || isinf(p->peak_gflops))
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "engine params: peak_gflops %g must be finite and >= 0", p->peak_gflops);
  brisk_metrics_init(&e->metrics, ttft, tpot, p->mem_bandwidth_gbs, p->peak_gflops);
  /* The 8-bit types' scales (2 bytes per 64 values) are left out. */
  e->metrics.kv_elem_bytes = p->kv_type == BRISK_KV_F32 ? 4 : p->kv_type == BRISK_KV_F16 ? 2 : 1;
  return BRISK_OK;
}

void brisk_engine_metrics_on_finish(brisk_engine *e, const brisk_engine_request *leader) {
  brisk_metrics_request mr;
  brisk_engine_request_timeline(leader, &mr);
  if (leader->embed)
    brisk_metrics_on_embed(&e->metrics, &mr);
  else
    brisk_metrics_on_finish(&e->metrics, &mr);
}

static double kv_util(const brisk_engine *e) {
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  if (!e->ctx || brisk_context_kv_stats(e->ctx, &ks) || ks.n_blocks <= 0) return 0.0;
  return (double)(ks.n_blocks - ks.n_free_blocks) / (double)ks.n_blocks;
}

/* Called at the end of a step, after the scheduled requests' n_computed
 * took in their share of the batch. */
void brisk_engine_metrics_on_step(brisk_engine *e, const brisk_engine_step_info *si,
                                  int32_t n_sched, int32_t n_embed_tokens) {
  brisk_model_cost c = {0, 0};
  double util = 0;
  int32_t n_gen = si->n_tokens - n_embed_tokens;
  if (n_gen > 0) {
    brisk_model_cost_weights(e->model, n_gen, si->n_decode_tokens, &c);
    for (int32_t k = 0; k < n_sched; k++) {
      const brisk_engine_sched *s = &e->sched[k];
      brisk_model_cost_attention(e->model, e->metrics.kv_elem_bytes, s->req->n_computed - s->count,
                                 s->count, &c);
    }
    util = kv_util(e);
  }
  brisk_metrics_on_step(&e->metrics, si->n_tokens, si->duration_ns, c.bytes, c.flops, util);
}

BRISK_API brisk_status brisk_engine_get_metrics(brisk_engine *e, brisk_engine_metrics *m) {
  if (!e || !m)
    return brisk_error(BRISK_E_INVALID_ARGUMENT,
                       "brisk_engine_get_metrics: engine and metrics must be set");
  brisk_engine_metrics full = {.struct_size = sizeof full};
  uint64_t now = brisk_now_ns();
  pthread_mutex_lock(&e->mu);
  uint64_t first_submit = e->metrics.t_first_submit;
  int live = e->in_head != NULL;
  pthread_mutex_unlock(&e->mu);
  live = live || e->n_running > 0 || e->n_waiting > 0 || e->n_embed_waiting > 0;
  brisk_metrics_report(&e->metrics, first_submit, now, live, kv_util(e),
                       e->n_preemptions - e->metrics.preemptions_base, &full);
  full.n_prefix_lookup_tokens = e->n_prefix_lookup_tokens - e->metrics.prefix_lookup_base;
  full.n_prefix_hit_tokens = e->n_prefix_hit_tokens - e->metrics.prefix_hit_base;
  full.prefix_hit_rate = full.n_prefix_lookup_tokens ? (double)full.n_prefix_hit_tokens /
                                                           (double)full.n_prefix_lookup_tokens
                                                     : 0;
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  if (!brisk_context_kv_stats(e->ctx, &ks)) {
    full.host_tier_bytes = ks.host_tier_bytes;
    full.host_tier_index_bytes = ks.host_tier_index_bytes;
    full.n_host_tier_blocks = ks.n_host_tier_blocks;
    full.n_host_tier_hits = ks.n_host_tier_hits - e->metrics.host_base[0];
    full.n_host_tier_misses = ks.n_host_tier_misses - e->metrics.host_base[1];
    full.n_host_tier_evictions = ks.n_host_tier_evictions - e->metrics.host_base[2];
  }
  return brisk_abi_write(&brisk_abi_engine_metrics, m, &full);
}

BRISK_API brisk_status brisk_engine_reset_metrics(brisk_engine *e) {
  if (!e)
    return brisk_error(BRISK_E_INVALID_ARGUMENT, "brisk_engine_reset_metrics: engine is NULL");
  uint64_t now = brisk_now_ns();
  pthread_mutex_lock(&e->mu);
  brisk_metrics_reset(&e->metrics, now);
  pthread_mutex_unlock(&e->mu);
  e->metrics.preemptions_base = e->n_preemptions;
  e->metrics.prefix_lookup_base = e->n_prefix_lookup_tokens;
  e->metrics.prefix_hit_base = e->n_prefix_hit_tokens;
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  if (!brisk_context_kv_stats(e->ctx, &ks)) {
    e->metrics.host_base[0] = ks.n_host_tier_hits;
    e->metrics.host_base[1] = ks.n_host_tier_misses;
    e->metrics.host_base[2] = ks.n_host_tier_evictions;
  }
  return BRISK_OK;
}
