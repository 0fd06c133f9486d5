#include "workload.h"

#include "bench_util.h"

#include "core/alloc.h"
#include "core/checked.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_i32(const char *s, const char *end, int32_t *out) {
  if (s == end) return false;
  char *stop;
  errno = 0;
  long v = strtol(s, &stop, 10);
  if (errno || stop != end || v < 1 || v > INT32_MAX) return false;
  *out = (int32_t)v;
  return true;
}

bool wl_dist_parse(const char *s, wl_dist *out) {
  const char *dots = strstr(s, "..");
  wl_dist d;
  if (!dots) {
    if (!parse_i32(s, s + strlen(s), &d.lo)) return false;
    d.hi = d.lo;
  } else if (!parse_i32(s, dots, &d.lo) || !parse_i32(dots + 2, dots + strlen(dots), &d.hi) ||
             d.hi < d.lo)
    return false;
  *out = d;
  return true;
}

/* Uniform in [0, 1) with 53 random bits. */
static double unit(uint64_t *rng) { return (double)(bench_rand(rng) >> 11) * 0x1.0p-53; }

static int32_t draw(const wl_dist *d, uint64_t *rng) {
  const uint64_t span = (uint64_t)d->hi - (uint64_t)d->lo + 1;
  return d->lo + (int32_t)(bench_rand(rng) % span);
}

bool wl_generate(const wl_spec *s, wl_workload *out) {
  if (s->n_requests < 1 || !(s->rate >= 0) || !isfinite(s->rate) || s->prompt_len.lo < 1 ||
      s->prompt_len.hi < s->prompt_len.lo || s->output_len.lo < 1 ||
      s->output_len.hi < s->output_len.lo || !(s->prefix_frac >= 0 && s->prefix_frac <= 1) ||
      s->n_vocab < 1 || s->prefix_groups < 0) {
    fprintf(stderr, "workload: bad spec (requests %d, rate %g, prefix fraction %g)\n",
            s->n_requests, s->rate, s->prefix_frac);
    return false;
  }
  wl_workload w = {.n = s->n_requests};
  w.req = brisk_calloc((size_t)w.n, sizeof *w.req);
  if (!w.req) goto oom;
  /* Separate streams, so that changing one distribution (or the rate) does
   * not change what the others draw. */
  uint64_t rng_len = s->seed ^ 0x243F6A8885A308D3ull, rng_arr = s->seed ^ 0x13198A2E03707344ull,
           rng_tok = s->seed ^ 0xA4093822299F31D0ull;
  if (!rng_len) rng_len = 1;
  if (!rng_arr) rng_arr = 1;
  if (!rng_tok) rng_tok = 1;
  size_t total = 0;
  double t = 0;
  for (int32_t i = 0; i < w.n; i++) {
    wl_request *r = &w.req[i];
    r->n_prompt = draw(&s->prompt_len, &rng_len);
    r->n_output = draw(&s->output_len, &rng_len);
    /* Exponential gaps of mean 1 / rate; drawn even at rate 0 so that the
     * lengths and tokens do not depend on the rate. */
    const double gap = -log1p(-unit(&rng_arr));
    if (s->rate > 0) t += gap / s->rate;
    r->arrival_ns = (uint64_t)llround(t * 1e9);
    if (brisk_add_overflow_size(total, (size_t)r->n_prompt, &total)) goto oom;
    if (r->n_prompt > w.max_prompt) w.max_prompt = r->n_prompt;
    if (r->n_output > w.max_output) w.max_output = r->n_output;
  }
  w.tokens = brisk_calloc(total, sizeof *w.tokens);
  const int32_t n_groups = s->prefix_groups > 1 ? s->prefix_groups : 1;
  size_t n_shared_tokens;
  int32_t *shared =
      brisk_mul_overflow_size((size_t)w.max_prompt, (size_t)n_groups, &n_shared_tokens)
          ? NULL
          : brisk_calloc(n_shared_tokens, sizeof *shared);
  if (!w.tokens || !shared) {
    brisk_free(shared);
    goto oom;
  }
  /* [n_groups][max_prompt]: the common sequences prompts' prefixes are cut
   * from. The first group's is the single group's, and the groups are drawn
   * from their own stream, so one group gives the workload it always did. */
  for (size_t j = 0; j < n_shared_tokens; j++)
    shared[j] = (int32_t)(bench_rand(&rng_tok) % (uint64_t)s->n_vocab);
  uint64_t rng_grp = s->seed ^ 0x082EFA98EC4E6C89ull;
  if (!rng_grp) rng_grp = 1;
  size_t at = 0;
  for (int32_t i = 0; i < w.n; i++) {
    wl_request *r = &w.req[i];
    int32_t *p = w.tokens + at;
    const int32_t n_shared = (int32_t)floor(s->prefix_frac * r->n_prompt);
    const size_t g = n_groups > 1 ? (size_t)(bench_rand(&rng_grp) % (uint64_t)n_groups) : 0;
    memcpy(p, shared + g * (size_t)w.max_prompt, (size_t)n_shared * sizeof *p);
    for (int32_t j = n_shared; j < r->n_prompt; j++)
      p[j] = (int32_t)(bench_rand(&rng_tok) % (uint64_t)s->n_vocab);
    r->prompt = p;
    at += (size_t)r->n_prompt;
  }
  brisk_free(shared);
  *out = w;
  return true;
oom:
  fprintf(stderr, "workload: out of memory for %d requests\n", s->n_requests);
  wl_free(&w);
  return false;
}

void wl_free(wl_workload *w) {
  brisk_free(w->req);
  brisk_free(w->tokens);
  memset(w, 0, sizeof *w);
}
