/* Cost of decoding constraints per generated token.
 *
 *   bench_grammar [--gens N] [--steps N] [--profile] [--compare] VOCAB.gguf...
 *                 [--model MODEL.gguf]
 *
 * For each vocabulary (loaded without weights) and each constraint (JSON
 * mode and three schemas), N generations walk the constraint by drawing a
 * random allowed token at each step (at most --steps steps): the mask time
 * (brisk_constraint_mask) per step is reported as median and p99 over the
 * first generation (cold: most states are new, each a walk over the
 * vocabulary) and over the later ones (warm: the mask cache), with the
 * cache hit rate; accept is timed too. Then, side by side in the same run,
 * brisk_sampler_sample_logits on random logits with and without the
 * constraint set (the mask applied to a row, plus a mask lookup), as a
 * ratio. With --model, whole generations through the engine: tokens/s
 * unconstrained against constrained (one schema), same prompt and seed.
 * Per-call times are the thread's CPU time (clock_gettime adds about
 * 0.1 us to each). --profile sorts the warm calls over 50 us by what they
 * did (read from the masker's counters around the call, outside the
 * library): a cache hit, a state inside an unfinished character, node
 * entries made, or only the match of context-dependent tokens. --compare
 * runs each constraint twice on the same tokens: "(pos)" with only the
 * grammar positions' entries made at creation (the reachable stacks left
 * to run time), then as brisk_constraint_create makes it. "entries" is
 * the node entries' memory after creation; "c" marks a creation whose
 * budget ran out. */
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE /* RUSAGE_THREAD */
#endif
#include "grammar/grammar.h" /* the cache counters */

#include "core/alloc.h"
#include "core/clock.h"
#include "core/error.h"

#include <math.h>
#include <sys/resource.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"json mode", "schema person", "schema order", "schema event"};
static const char *const SCHEMAS[] = {
    NULL,
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\",\"minimum\":0,\"maximum\":150},\"email\":{\"type\":\"string\",\"format\":"
    "\"email\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":["
    "\"name\",\"age\"]}",
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"sku\":{"
    "\"type\":\"string\",\"pattern\":\"^[A-Z]{3}-[0-9]{4}$\"},\"qty\":{\"type\":\"integer\","
    "\"minimum\":1,\"maximum\":99},\"price\":{\"type\":\"number\",\"minimum\":0}},\"required\":["
    "\"sku\",\"qty\"]},\"minItems\":1,\"maxItems\":8},\"status\":{\"enum\":[\"new\",\"paid\","
    "\"shipped\"]}},\"required\":[\"id\",\"items\",\"status\"]}",
    "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":40},"
    "\"when\":{\"type\":\"string\",\"format\":\"date-time\"},\"where\":{\"anyOf\":[{\"type\":"
    "\"null\"},{\"type\":\"object\",\"properties\":{\"lat\":{\"type\":\"number\"},\"lon\":{"
    "\"type\":\"number\"}},\"required\":[\"lat\",\"lon\"]}]},\"attendees\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\",\"maxLength\":20},\"maxItems\":5}},\"required\":[\"title\","
    "\"when\"]}",
};
#define N_CONSTRAINTS 4

/* The calling thread's CPU time: the machines these run on are shared, and
 * wall time would count other processes' time slices as ours. */
static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng = 0x1234567;
static uint64_t next_rand(void) {
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static double pct(uint64_t *v, size_t n, double q) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_u64);
  size_t r = (size_t)ceil(q * (double)n);
  return (double)v[r ? r - 1 : 0] / 1e3;
}

static brisk_grammar *compile(int c) {
  brisk_constraint_params p;
  brisk_constraint_params_init(&p);
  p.kind = SCHEMAS[c] ? BRISK_CONSTRAINT_JSON_SCHEMA : BRISK_CONSTRAINT_JSON;
  p.text = SCHEMAS[c];
  brisk_grammar *g = NULL;
  if (brisk_grammar_compile(&p, &g)) fprintf(stderr, "compile: %s\n", brisk_last_error());
  return g;
}

/* --profile: classify the warm calls slower than slow_ns (the p99's). */
static int profile, compare;
static uint64_t slow_ns = 50000;

/* brisk_constraint_create, or (ahead 0, --compare) the same with only the
 * grammar positions' entries made at creation, as before the reachable
 * stacks were made ahead. */
static brisk_status make_constraint(const brisk_model *m, const brisk_grammar *g, int ahead,
                                    brisk_constraint **out) {
  if (ahead) return brisk_constraint_create(m, g, out);
  brisk_constraint *c = brisk_calloc(1, sizeof *c);
  brisk_status st = brisk_error_oom();
  if (!c || !(c->k = brisk_calloc(1, sizeof *c->k)) ||
      !(c->refs = brisk_calloc(1, sizeof *c->refs)))
    goto fail;
  if ((st = gr_masker_init(c->k, g, m))) goto fail;
  c->k->pre_nodes = 0;
  if ((st = gr_masker_precompute(c->k))) goto fail;
  *c->refs = 1;
  if ((st = gr_state_init(c->k, &c->s))) goto fail;
  *out = c;
  return BRISK_OK;
fail:
  brisk_constraint_free(c);
  return st;
}

static int bench_vocab(const char *path, int gens, int max_steps) {
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.vocab_only = 1;
  brisk_model *m;
  if (brisk_model_load(path, &mp, &m)) {
    fprintf(stderr, "%s: %s\n", path, brisk_last_error());
    return 1;
  }
  int32_t n_vocab = brisk_model_n_vocab(m);
  printf("\n%s: %d tokens\n", path, n_vocab);
  printf("%-20s %8s %7s  | %9s %9s | %9s %9s %6s | %9s | %9s %9s %6s\n", "constraint", "create",
         "entries", "cold p50", "cold p99", "warm p50", "warm p99", "hits", "accept", "sample",
         "+mask", "ratio");
  size_t cap = (size_t)gens * (size_t)max_steps;
  uint64_t *cold = malloc(cap * sizeof *cold), *warm = malloc(cap * sizeof *warm);
  uint64_t *acc = malloc(cap * sizeof *acc);
  float *logits = malloc((size_t)n_vocab * sizeof *logits);
  if (!cold || !warm || !acc || !logits) return 1;
  for (int32_t t = 0; t < n_vocab; t++) logits[t] = (float)(next_rand() % 1000) / 100.0f;
  for (int row = 0; row < N_CONSTRAINTS * (compare ? 2 : 1); row++) {
    int c = compare ? row / 2 : row, ahead = !compare || row % 2;
    rng = 0x1234567 + (uint64_t)c; /* both variants of a constraint draw the same tokens */
    brisk_grammar *g = compile(c);
    if (!g) return 1;
    brisk_constraint *k;
    uint64_t t0 = cpu_ns();
    if (make_constraint(m, g, ahead, &k)) {
      fprintf(stderr, "%s\n", brisk_last_error());
      return 1;
    }
    double create_ms = (double)(cpu_ns() - t0) / 1e6;
    double work_walks = (double)k->k->n_work / (double)(k->k->v.n_tnodes ? k->k->v.n_tnodes : 1);
    size_t pre_kib =
        (k->k->ne_slots * (size_t)k->k->n_words * 4 + (k->k->n_ne_deps + k->k->n_ne_toks) * 4) >>
        10;
    size_t n_cold = 0, n_warm = 0, n_acc = 0, steps_warm = 0, n_sampled = 0;
    uint64_t hits0 = 0, misses0 = 0;
    /* Sampler side by side: the same rows with and without the constraint. */
    brisk_sampler_params sp;
    brisk_sampler_params_init(&sp);
    brisk_sampler *plain, *masked;
    brisk_sampler_create(m, &sp, &plain);
    brisk_sampler_create(m, &sp, &masked);
    brisk_sampler_set_constraint(masked, k);
    uint64_t t_plain = 0, t_masked = 0;
    uint64_t slow_n[4] = {0}, slow_t[4] = {0};
    for (int gi = 0; gi < gens; gi++) {
      if (gi == 1) {
        hits0 = k->k->n_hits;
        misses0 = k->k->n_misses;
      }
      brisk_constraint_reset(k);
      for (int s = 0; s < max_steps; s++) {
        const uint32_t *mask;
        int32_t n;
        int partial = k->s.utf8.n != 0;
        uint64_t made0 = k->k->n_entries_made, miss0 = k->k->n_misses;
        uint64_t dep0 = k->k->n_dep_tokens, tr0 = k->k->dfa.tr_n;
        struct rusage ru0, ru1;
        getrusage(RUSAGE_THREAD, &ru0);
        uint64_t a = cpu_ns();
        if (brisk_constraint_mask(k, &mask, &n)) return 1;
        uint64_t dt = cpu_ns() - a;
        if (gi == 0) {
          cold[n_cold++] = dt;
        } else {
          warm[n_warm++] = dt;
          steps_warm++;
          if (dt > slow_ns) { /* what the slow warm calls did */
            getrusage(RUSAGE_THREAD, &ru1);
            int cls = k->k->n_misses == miss0         ? 0
                      : partial                       ? 1
                      : k->k->n_entries_made != made0 ? 2
                                                      : 3;
            slow_n[cls]++;
            slow_t[cls] += dt;
            if (profile > 1)
              printf("    %.0f us: class %d, %d stacks, %llu dependent tokens, %lld transitions, "
                     "%ld page faults\n",
                     (double)dt / 1e3, cls, k->s.n, (unsigned long long)(k->k->n_dep_tokens - dep0),
                     (long long)(k->k->dfa.tr_n - tr0), ru1.ru_minflt - ru0.ru_minflt);
          }
        }
        if (n == 0) break;
        /* A random allowed token; every 4th step the shortest-id allowed
         * one after a random start, so structure closes now and then. */
        int32_t pick = (int32_t)(next_rand() % (uint64_t)n), t = 0;
        for (;; t++)
          if ((mask[t / 32] >> (t % 32) & 1) && pick-- == 0) break;
        if (gi > 0 && s % 8 == 0) { /* the sampler, both ways, on this state */
          int32_t tok;
          a = cpu_ns();
          brisk_sampler_sample_logits(plain, logits, n_vocab, &tok);
          t_plain += cpu_ns() - a;
          a = cpu_ns();
          brisk_sampler_sample_logits(masked, logits, n_vocab, &tok);
          t_masked += cpu_ns() - a;
          n_sampled++;
        }
        a = cpu_ns();
        if (brisk_constraint_accept(k, t)) return 1;
        acc[n_acc++] = cpu_ns() - a;
        if (brisk_token_is_eog(m, t)) break;
      }
    }
    double ratio = t_plain ? (double)t_masked / (double)t_plain : 0;
    double per_plain = n_sampled ? (double)t_plain / (double)n_sampled / 1e3 : 0;
    double per_masked = n_sampled ? (double)t_masked / (double)n_sampled / 1e3 : 0;
    uint64_t h = k->k->n_hits - hits0, mi = k->k->n_misses - misses0;
    char name[32];
    snprintf(name, sizeof name, "%s%s", NAMES[c], ahead ? "" : " (pos)");
    printf("%-20s %6.1fms %6zuK %s| %7.1fus %7.1fus | %7.2fus %7.1fus %5.1f%% | %7.2fus | %7.1fus "
           "%7.1fus %6.3f\n",
           name, create_ms, pre_kib, k->k->pre_capped ? "c" : " ", pct(cold, n_cold, 0.5),
           pct(cold, n_cold, 0.99), pct(warm, n_warm, 0.5), pct(warm, n_warm, 0.99),
           h + mi ? 100.0 * (double)h / (double)(h + mi) : 0, pct(acc, n_acc, 0.5), per_plain,
           per_masked, ratio);
    if (profile)
      printf("  slow warm calls (> %.0f us): %llu hits %.0f us, %llu partial-character states "
             "%.0f us, %llu with entries made %.0f us, %llu dependent matches %.0f us; entries "
             "made %llu, walks at creation %.1f, stacks visited %zu\n",
             (double)slow_ns / 1e3, (unsigned long long)slow_n[0], (double)slow_t[0] / 1e3,
             (unsigned long long)slow_n[1], (double)slow_t[1] / 1e3, (unsigned long long)slow_n[2],
             (double)slow_t[2] / 1e3, (unsigned long long)slow_n[3], (double)slow_t[3] / 1e3,
             (unsigned long long)k->k->n_entries_made, work_walks, k->k->n_pre_nodes);
    brisk_sampler_free(plain);
    brisk_sampler_free(masked);
    brisk_constraint_free(k);
    brisk_grammar_free(g);
  }
  free(cold);
  free(warm);
  free(acc);
  free(logits);
  brisk_model_free(m);
  return 0;
}

/* Generation through the engine: unconstrained, then constrained. */
static double engine_run(brisk_engine *e, const brisk_constraint_params *cp, int32_t *n_tok) {
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.seed = 7;
  brisk_request_params rp;
  brisk_request_params_init(&rp);
  rp.prompt_text = "Write a JSON object describing a person:";
  rp.max_tokens = 64;
  rp.stop_at_eog = 0; /* the same number of tokens both ways */
  rp.sampler = &sp;
  uint64_t id;
  if (brisk_engine_submit_constrained(e, &rp, cp, &id)) {
    fprintf(stderr, "%s\n", brisk_last_error());
    return 0;
  }
  uint64_t t0 = 0;
  int32_t n = 0;
  for (int done = 0; !done;) {
    brisk_engine_step(e, NULL);
    brisk_engine_event ev[8];
    size_t k;
    brisk_engine_poll(e, ev, 8, &k);
    for (size_t i = 0; i < k; i++) {
      if (ev[i].token >= 0 && n++ == 0) t0 = brisk_now_ns(); /* after prefill + first token */
      done |= ev[i].finished;
    }
  }
  *n_tok = n;
  return n > 1 ? (double)(n - 1) / ((double)(brisk_now_ns() - t0) / 1e9) : 0;
}

static int bench_model(const char *path) {
  brisk_model *m;
  if (brisk_model_load(path, NULL, &m)) {
    fprintf(stderr, "%s: %s\n", path, brisk_last_error());
    return 1;
  }
  brisk_engine *e;
  if (brisk_engine_create(m, NULL, &e)) return 1;
  brisk_constraint_params none, cp;
  brisk_constraint_params_init(&none);
  brisk_constraint_params_init(&cp);
  cp.kind = BRISK_CONSTRAINT_JSON_SCHEMA;
  cp.text = SCHEMAS[1];
  printf("\n%s: engine decode, 64 tokens, tokens/s after the first (median of 3)\n", path);
  double u[3], c[3];
  int32_t nu = 0, nc = 0;
  for (int r = 0; r < 3; r++) { /* interleaved, so drift hits both */
    u[r] = engine_run(e, &none, &nu);
    c[r] = engine_run(e, &cp, &nc);
  }
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++) {
      if (u[j] < u[i]) {
        double t = u[i];
        u[i] = u[j];
        u[j] = t;
      }
      if (c[j] < c[i]) {
        double t = c[i];
        c[i] = c[j];
        c[j] = t;
      }
    }
  printf("unconstrained %.1f tok/s (%d tokens) | constrained (schema person) %.1f tok/s (%d "
         "tokens) | ratio %.3f\n",
         u[1], nu, c[1], nc, u[1] > 0 ? c[1] / u[1] : 0);
  brisk_engine_free(e);
  brisk_model_free(m);
  return 0;
}

int main(int argc, char **argv) {
  int gens = 20, steps = 128, rc = 0;
  const char *model = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--gens") && i + 1 < argc)
      gens = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--model") && i + 1 < argc)
      model = argv[++i];
    else if (!strcmp(argv[i], "--profile"))
      profile++;
    else if (!strcmp(argv[i], "--compare"))
      compare = 1;
  }
  if (gens < 2 || steps < 1) {
    fprintf(stderr, "usage: bench_grammar [--gens N>=2] [--steps N] VOCAB.gguf... [--model M]\n");
    return 2;
  }
  printf("mask = brisk_constraint_mask per step (thread CPU time); cold = first generation, "
         "warm = the %d after; sample = brisk_sampler_sample_logits without / with the "
         "constraint\n",
         gens - 1);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--gens") || !strcmp(argv[i], "--steps") || !strcmp(argv[i], "--model")) {
      i++;
      continue;
    }
    if (!strcmp(argv[i], "--profile") || !strcmp(argv[i], "--compare")) continue;
    rc |= bench_vocab(argv[i], gens, steps);
  }
  if (model) rc |= bench_model(model);
  return rc;
}
