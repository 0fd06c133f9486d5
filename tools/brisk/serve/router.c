/* The router thread: the only thread that steps and polls the engine. Each
 * event goes to the job its request's user_data names (an sv_sub); the
 * job's waiting HTTP thread is woken. Jobs are freed by whichever side lets
 * go last: the HTTP thread (sv_release) or the router (the last finished
 * event), so an event never reaches freed memory. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double sv_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Upper bounds of the latency histograms, seconds (Prometheus "le"). */
const double sv_hist_bounds_s[SV_N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                               0.25,  0.5,    1,     2.5,  5,     10,   30};

void sv_hist_add(sv_hist *h, double seconds) {
  size_t b = 0;
  while (b < SV_N_BUCKETS && seconds > sv_hist_bounds_s[b]) b++;
  h->counts[b]++;
  h->sum_s += seconds;
  h->count++;
}

static void job_free(sv_server *s, sv_job *job) {
  if (job->prev)
    job->prev->next = job->next;
  else
    s->jobs = job->next;
  if (job->next) job->next->prev = job->prev;
  pthread_cond_destroy(&job->cond);
  sv_job_clear(job);
  free(job);
}

static bool grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * size);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

/* Appends one event to its choice (under mu). */
static void route(sv_server *s, const brisk_engine_event *ev) {
  sv_sub *sub = ev->user_data;
  sv_job *job = sub->job;
  if (job->kind == SV_EMBEDDING) {
    sv_route_embedding(s, sub, ev);
    if (--job->n_subs_open == 0 && job->http_done) job_free(s, job);
    return;
  }
  sv_choice *c = &job->choices[sub->base + ev->index];
  job->wake = true;
  if (ev->text_len && !sv_buf_append_utf8(&c->text, &c->len, &c->cap, ev->text, ev->text_len))
    job->error = true; /* out of memory: the answer says so */
  if (ev->token >= 0) {
    c->n_generated++;
    if (job->logprobs) {
      if (!grow((void **)&c->tokens, &c->cap_tokens, c->n_tokens + 1, sizeof *c->tokens)) {
        job->error = true;
      } else {
        sv_token *t = &c->tokens[c->n_tokens++];
        t->token = ev->token;
        t->logprob = ev->logprob;
        t->n_top =
            ev->n_top_logprobs < BRISK_MAX_LOGPROBS ? ev->n_top_logprobs : BRISK_MAX_LOGPROBS;
        if (t->n_top > 0) memcpy(t->top, ev->top_logprobs, (size_t)t->n_top * sizeof *t->top);
      }
    }
  }
  /* the text this token completed ends here (for text_offset) */
  if (job->logprobs && c->n_tokens) c->tokens[c->n_tokens - 1].text_end = c->len;
  if (!ev->finished) return;
  c->finished = true;
  c->reason = ev->reason;
  if (ev->reason == BRISK_FINISH_ERROR) job->error = true;
  if (--sub->n_open > 0) return;
  /* the request's last event: its timings, then the job may be done */
  brisk_request_stats st = {.struct_size = sizeof st};
  /* ev->id, not sub->id: a request can finish before its submitting
   * thread has stored the id. */
  brisk_status got = brisk_engine_request_stats(s->engine, ev->id, &st);
  if (got == BRISK_OK) sub->n_cached = st.n_cached_tokens;
  if (got == BRISK_OK && st.error[0] && !job->error_message[0])
    snprintf(job->error_message, sizeof job->error_message, "%s", st.error);
  if (got == BRISK_OK && (ev->reason == BRISK_FINISH_EOG || ev->reason == BRISK_FINISH_LENGTH ||
                          ev->reason == BRISK_FINISH_STOP)) {
    sv_hist_add(&s->h_queue, (double)st.queue_ns * 1e-9);
    if (st.ttft_ns) sv_hist_add(&s->h_ttft, (double)st.ttft_ns * 1e-9);
    if (st.tpot_ns) sv_hist_add(&s->h_tpot, (double)st.tpot_ns * 1e-9);
    sv_hist_add(&s->h_e2e, (double)st.e2e_ns * 1e-9);
  }
  s->n_engine_open--;
  if (--job->n_subs_open == 0 && job->http_done) job_free(s, job);
}

static void snapshot(sv_server *s) {
  s->counters = (brisk_engine_counters){.struct_size = sizeof s->counters};
  s->metrics = (brisk_engine_metrics){.struct_size = sizeof s->metrics};
  brisk_engine_stats(s->engine, &s->counters);
  brisk_engine_get_metrics(s->engine, &s->metrics);
  s->snap_wanted = false;
  s->snap_seq++;
  pthread_cond_broadcast(&s->snap_cond);
}

static void *router_main(void *arg) {
  sv_server *s = arg;
  enum { CAP = 256 };
  brisk_engine_event *events = malloc(CAP * sizeof *events);
  if (!events) {
    fprintf(stderr, "brisk serve: out of memory in the router\n");
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->stop_router && s->n_engine_open == 0 && !s->snap_wanted)
      pthread_cond_wait(&s->router_cond, &s->mu);
    if (s->snap_wanted) snapshot(s);
    bool stop = s->stop_router && s->n_engine_open == 0;
    pthread_mutex_unlock(&s->mu);
    if (stop) break;
    brisk_engine_step_info info = {.struct_size = sizeof info};
    brisk_status st = brisk_engine_step(s->engine, &info);
    if (st) {
      /* the forward pass failed (e.g. out of memory); requests are kept as
       * they were, so the step is retried after a pause */
      pthread_mutex_lock(&s->mu);
      if (s->n_step_errors++ % 1000 == 0)
        fprintf(stderr, "brisk serve: engine step failed: %s (retrying)\n", brisk_last_error());
      pthread_mutex_unlock(&s->mu);
      usleep(10000);
      continue;
    }
    size_t total = 0, n;
    do {
      n = 0;
      brisk_engine_poll(s->engine, events, CAP, &n);
      pthread_mutex_lock(&s->mu);
      for (size_t i = 0; i < n; i++) route(s, &events[i]);
      /* wake only the threads whose jobs got events */
      for (sv_job *j = s->jobs; j && n; j = j->next)
        if (j->wake) {
          j->wake = false;
          pthread_cond_broadcast(&j->cond);
        }
      pthread_mutex_unlock(&s->mu);
      total += n;
    } while (n == CAP);
    /* Nothing scheduled (e.g. only cancellations just processed): do not spin. */
    if (info.n_tokens == 0 && total == 0) usleep(500);
  }
  free(events);
  return NULL;
}

bool sv_router_start(sv_server *s, pthread_t *thread) {
  return pthread_create(thread, NULL, router_main, s) == 0;
}

void sv_router_stop(sv_server *s, pthread_t thread) {
  pthread_mutex_lock(&s->mu);
  s->stop_router = true;
  pthread_cond_broadcast(&s->router_cond);
  pthread_mutex_unlock(&s->mu);
  pthread_join(thread, NULL);
}

bool sv_submit(sv_server *s, sv_job *job, sv_error *err) {
  pthread_mutex_lock(&s->mu);
  const int32_t limit = s->max_running + s->cfg.max_queue;
  /* An embedding job's inputs are short-lived requests of one step each:
   * the job counts once against the queue limit. */
  const int32_t need = job->kind == SV_EMBEDDING ? 1 : (int32_t)job->n_subs;
  if (s->draining || s->n_engine_open + need > limit) {
    if (s->draining) {
      sv_fail(err, 503, NULL, "the server is shutting down");
    } else {
      sv_fail(err, 429, NULL, "the server is busy (%d requests in flight); retry later",
              (int)limit);
      err->code = "rate_limit_exceeded";
    }
    pthread_mutex_unlock(&s->mu);
    sv_job_clear(job);
    free(job);
    return false;
  }
  pthread_cond_init(&job->cond, NULL);
  job->next = s->jobs;
  if (s->jobs) s->jobs->prev = job;
  s->jobs = job;
  bool ok = true;
  for (size_t k = 0; k < job->n_subs && ok; k++) {
    sv_sub *sub = &job->subs[k];
    sub->job = job;
    sub->base = (int32_t)(k * (size_t)job->n);
    sub->n_open = job->n;
    sub->n_prompt = job->n_prompts[k];
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    rp.prompt_tokens = job->prompts[k];
    rp.n_prompt_tokens = (size_t)job->n_prompts[k];
    rp.sampler = &job->sampler;
    rp.max_tokens = job->max_tokens > 0 ? job->max_tokens : s->cfg.ctx_size - job->n_prompts[k];
    rp.stop_at_eog = !job->ignore_eos;
    rp.user_data = sub;
    rp.stop = (const char *const *)job->stop;
    rp.n_stop = job->n_stop;
    rp.logprobs = job->logprobs ? (job->want_top > 0 ? job->want_top : 1) : 0;
    rp.n = job->n;
    rp.spec_n_draft = job->spec_n_draft;
    /* Counted before submitting, so that the router does not go to sleep
     * while the request is on its way in. */
    s->n_engine_open++;
    job->n_subs_open++;
    pthread_mutex_unlock(&s->mu);
    uint64_t id = 0;
    brisk_status st;
    if (job->kind == SV_EMBEDDING) {
      brisk_embed_request_params ep;
      brisk_embed_request_params_init(&ep);
      ep.tokens = job->prompt_texts[k] ? NULL : job->prompts[k];
      ep.n_tokens = (size_t)job->n_prompts[k];
      ep.text = job->prompt_texts[k];
      ep.pooling = job->embed_pooling;
      ep.normalize = job->embed_normalize;
      ep.user_data = sub;
      st = brisk_engine_submit_embed(s->engine, &ep, &id);
    } else if (job->constraint.kind != BRISK_CONSTRAINT_NONE) {
      st = brisk_engine_submit_constrained(s->engine, &rp, &job->constraint, &id);
    } else {
      st = brisk_engine_submit(s->engine, &rp, &id);
    }
    pthread_mutex_lock(&s->mu);
    if (st) {
      s->n_engine_open--;
      job->n_subs_open--;
      sv_fail(err, st == BRISK_E_OUT_OF_MEMORY ? 500 : 400, NULL, "%s", brisk_last_error());
      ok = false;
    } else {
      sub->id = id;
      sub->submitted = true;
    }
    pthread_cond_broadcast(&s->router_cond);
  }
  pthread_mutex_unlock(&s->mu);
  if (!ok) sv_release(s, job); /* cancels the subs that went in */
  return ok;
}

void sv_release(sv_server *s, sv_job *job) {
  pthread_mutex_lock(&s->mu);
  for (size_t k = 0; k < job->n_subs; k++)
    if (job->subs[k].submitted && job->subs[k].n_open > 0)
      brisk_engine_cancel(s->engine, job->subs[k].id);
  job->http_done = true;
  if (job->n_subs_open == 0) job_free(s, job);
  pthread_cond_broadcast(&s->router_cond);
  pthread_mutex_unlock(&s->mu);
}

void sv_cancel_all(sv_server *s) {
  pthread_mutex_lock(&s->mu);
  for (sv_job *j = s->jobs; j; j = j->next)
    for (size_t k = 0; k < j->n_subs; k++)
      if (j->subs[k].submitted && j->subs[k].n_open > 0)
        brisk_engine_cancel(s->engine, j->subs[k].id);
  pthread_cond_broadcast(&s->router_cond);
  pthread_mutex_unlock(&s->mu);
}

bool sv_buf_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n) {
  if (n > SIZE_MAX - *len - 1) return false;
  if (!grow((void **)buf, cap, *len + n + 1, 1)) return false;
  memcpy(*buf + *len, data, n);
  *len += n;
  (*buf)[*len] = 0;
  return true;
}

bool sv_buf_sse(char **buf, size_t *len, size_t *cap, json_object *obj) {
  size_t n = 0;
  const char *j = obj ? json_object_to_json_string_length(
                            obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n)
                      : NULL;
  return j && sv_buf_append(buf, len, cap, "data: ", 6) && sv_buf_append(buf, len, cap, j, n) &&
         sv_buf_append(buf, len, cap, "\n\n", 2);
}
