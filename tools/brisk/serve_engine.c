/* Serving a workload through the engine: requests are submitted when their
 * arrival time has passed while this loop ticks brisk_engine_step, so a
 * request that arrives during a step waits for it, as behind a server. */
#include "serve_run.h"

#include "core/alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EVENT_CAP 256
/* Steps in a row that run nothing while requests are in flight. */
#define MAX_IDLE_STEPS 1000000

static bool fail(const char *config, const char *what) {
  fprintf(stderr, "brisk serve-bench: %s: %s: %s\n", config, what, brisk_last_error());
  return false;
}

static void request_params(brisk_request_params *rp, const brisk_sampler_params *sp,
                           const wl_request *r, uintptr_t tag, const sb_common *window) {
  brisk_request_params_init(rp);
  if (window) {
    rp->n_sinks = window->n_sinks;
    rp->window = window->window;
  }
  rp->prompt_tokens = r->prompt;
  rp->n_prompt_tokens = (size_t)r->n_prompt;
  rp->sampler = sp;
  rp->max_tokens = r->n_output;
  rp->stop_at_eog = 0; /* exactly n_output tokens, as the workload says */
  rp->user_data = (void *)tag;
}

/* One short request before the clock starts, so that first-touch costs
 * (weight pages, buffers) are in no request's latency. */
static bool warm_up(brisk_engine *e, const brisk_sampler_params *sp, const char *name) {
  static const int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const wl_request r = {.n_prompt = 8, .n_output = 2, .prompt = prompt};
  brisk_request_params rp;
  request_params(&rp, sp, &r, 0, NULL);
  uint64_t id;
  if (brisk_engine_submit(e, &rp, &id) != BRISK_OK) return fail(name, "warm-up submit");
  for (int finished = 0; !finished;) {
    if (brisk_engine_step(e, NULL) != BRISK_OK) return fail(name, "warm-up step");
    brisk_engine_event ev[8];
    size_t n = 0;
    do {
      if (brisk_engine_poll(e, ev, 8, &n) != BRISK_OK) return fail(name, "warm-up poll");
      for (size_t i = 0; i < n; i++) finished |= ev[i].finished;
    } while (n == 8);
  }
  return true;
}

static bool counters(brisk_engine *e, brisk_engine_counters *c, const char *name) {
  memset(c, 0, sizeof *c);
  c->struct_size = sizeof *c;
  return brisk_engine_stats(e, c) == BRISK_OK || fail(name, "stats");
}

/* The metrics window starts after the warm-up: its host-tier counters are
 * the run's. */
static bool host_tier(brisk_engine *e, sb_result *out, const char *name) {
  brisk_engine_metrics m = {.struct_size = sizeof m};
  if (brisk_engine_get_metrics(e, &m) != BRISK_OK) return fail(name, "metrics");
  out->n_host_hits = m.n_host_tier_hits;
  out->n_host_misses = m.n_host_tier_misses;
  out->n_host_evictions = m.n_host_tier_evictions;
  out->host_bytes = m.host_tier_bytes;
  return true;
}

/* Records the events of one poll; false on an unexpected event. */
static bool take_events(brisk_engine *e, const brisk_engine_event *ev, size_t n, double t,
                        const wl_workload *w, sb_request *req, int32_t *n_got, sb_itl *itl,
                        int32_t *done, const char *name) {
  for (size_t k = 0; k < n; k++) {
    const uintptr_t tag = (uintptr_t)ev[k].user_data;
    if (tag < 1 || tag > (uintptr_t)w->n) {
      fprintf(stderr, "brisk serve-bench: %s: event for an unknown request\n", name);
      return false;
    }
    const int32_t i = (int32_t)(tag - 1);
    const double arrival = (double)w->req[i].arrival_ns * 1e-9;
    if (ev[k].token >= 0) {
      if (n_got[i]++ == 0) req[i].ttft_s = t - arrival;
      sb_itl_token(itl, i, t);
      req[i].out_hash = sb_hash_token(req[i].out_hash, ev[k].token);
    }
    if (!ev[k].finished) continue;
    if (ev[k].reason != BRISK_FINISH_LENGTH || n_got[i] != w->req[i].n_output) {
      fprintf(stderr, "brisk serve-bench: %s: request %d ended (reason %d) after %d of %d tokens\n",
              name, i, (int)ev[k].reason, n_got[i], w->req[i].n_output);
      return false;
    }
    req[i].e2e_s = t - arrival;
    brisk_request_stats rs = {.struct_size = sizeof rs};
    if (brisk_engine_request_stats(e, ev[k].id, &rs) != BRISK_OK)
      return fail(name, "request stats");
    req[i].n_preemptions = rs.n_preemptions;
    (*done)++;
  }
  return true;
}

bool sb_run_engine(const sb_common *common, const sb_config *c, const wl_workload *w,
                   sb_result *out) {
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.n_threads = common->n_threads;
  ep.kv_tokens = common->kv_tokens;
  ep.kv_type = common->kv_type;
  ep.block_size = common->block_size;
  ep.max_batch_tokens = common->max_batch_tokens;
  ep.max_running = c->max_running;
  ep.prefill_chunk = c->prefill_chunk;
  ep.preempt_mode = common->preempt;
  if (common->reserve_blocks >= 0) ep.reserve_blocks = common->reserve_blocks;
  if (c->prefix_cache >= 0) ep.prefix_cache = c->prefix_cache;
  ep.prefix_host_bytes = c->prefix_host_bytes;
  brisk_engine *e = NULL;
  if (brisk_engine_create(common->model, &ep, &e) != BRISK_OK) return fail(c->name, "engine");
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0; /* greedy: the same work for every configuration */
  sb_request *req = brisk_calloc((size_t)w->n, sizeof *req);
  int32_t *n_got = brisk_calloc((size_t)w->n, sizeof *n_got); /* [n] tokens received */
  brisk_engine_event *ev = brisk_calloc(EVENT_CAP, sizeof *ev);
  brisk_engine_counters c0, c1;
  sb_itl itl = {0};
  bool ok = req && n_got && ev;
  ok = ok && sb_itl_init(&itl, w);
  if (!ok) fprintf(stderr, "brisk serve-bench: out of memory\n");
  ok = ok && warm_up(e, &sp, c->name) && counters(e, &c0, c->name) &&
       (brisk_engine_reset_metrics(e) == BRISK_OK || fail(c->name, "reset metrics"));

  const double t0 = sb_now_s(), cpu0 = sb_cpu_s();
  int32_t next = 0, done = 0, idle = 0;
  while (ok && done < w->n) {
    const double now = sb_now_s() - t0;
    for (; next < w->n && (double)w->req[next].arrival_ns * 1e-9 <= now; next++) {
      brisk_request_params rp;
      request_params(&rp, &sp, &w->req[next], (uintptr_t)next + 1, common);
      req[next].n_prompt = w->req[next].n_prompt;
      req[next].n_output = w->req[next].n_output;
      req[next].arrival_s = (double)w->req[next].arrival_ns * 1e-9;
      req[next].out_hash = SB_HASH_INIT;
      uint64_t id;
      if (brisk_engine_submit(e, &rp, &id) != BRISK_OK) ok = fail(c->name, "submit");
    }
    if (!ok) break;
    if (next == done) { /* nothing in flight: wait for the next arrival */
      sb_sleep_until(t0 + (double)w->req[next].arrival_ns * 1e-9);
      continue;
    }
    brisk_engine_step_info info = {.struct_size = sizeof info};
    if (brisk_engine_step(e, &info) != BRISK_OK) {
      ok = fail(c->name, "step");
      break;
    }
    if (info.n_tokens == 0 && ++idle > MAX_IDLE_STEPS) {
      fprintf(stderr, "brisk serve-bench: %s: the engine makes no progress\n", c->name);
      ok = false;
      break;
    }
    if (info.n_tokens > 0) idle = 0;
    const double t = sb_now_s() - t0;
    size_t n;
    do {
      if (brisk_engine_poll(e, ev, EVENT_CAP, &n) != BRISK_OK) {
        ok = fail(c->name, "poll");
        break;
      }
      ok = take_events(e, ev, n, t, w, req, n_got, &itl, &done, c->name);
    } while (ok && n == EVENT_CAP);
  }
  const double cpu = sb_cpu_s() - cpu0;
  ok = ok && counters(e, &c1, c->name) && host_tier(e, out, c->name);
  if (ok) {
    double end = 0;
    for (int32_t i = 0; i < w->n; i++)
      if (req[i].arrival_s + req[i].e2e_s > end) end = req[i].arrival_s + req[i].e2e_s;
    out->req = req;
    out->duration_s = end;
    out->cpu_s = cpu;
    sb_itl_finish(&itl, out);
    out->n_steps = c1.n_steps - c0.n_steps;
    out->n_preemptions = c1.n_preemptions - c0.n_preemptions;
    out->n_computed_tokens = c1.n_computed_tokens - c0.n_computed_tokens;
    out->n_prefix_lookup_tokens = c1.n_prefix_lookup_tokens - c0.n_prefix_lookup_tokens;
    out->n_prefix_hit_tokens = c1.n_prefix_hit_tokens - c0.n_prefix_hit_tokens;
    req = NULL;
  }
  brisk_free(req);
  brisk_free(n_got);
  sb_itl_free(&itl);
  brisk_free(ev);
  brisk_engine_free(e);
  return ok;
}
