/* The latency histogram against exact sort-based percentiles on fresh
 * random data, its bucket layout, edge cases; and the metrics accumulator
 * driven with synthetic request timelines whose percentiles, throughput,
 * goodput and MBU/MFU are worked out by hand. */
#include "test_support.h"

#include "engine/histogram.h"
#include "engine/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MS UINT64_C(1000000)
#define T0 (UINT64_C(1000) * MS) /* synthetic stamps start at 1 s: 0 means "none" */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank on sorted data: rank max(1, ceil(q * n)). */
static uint64_t exact_quantile(const uint64_t *sorted, size_t n, double q) {
  if (q <= 0) return sorted[0];
  if (q >= 1) return sorted[n - 1];
  double r = ceil(q * (double)n);
  size_t rank = r < 1 ? 1 : (size_t)r;
  return sorted[rank - 1];
}

static void assert_close_rel(uint64_t got, uint64_t want, double rel) {
  double d = fabs((double)got - (double)want);
  if (d > rel * (double)want)
    fail_msg("got %llu, want %llu within %g relative", (unsigned long long)got,
             (unsigned long long)want, rel);
}

static brisk_hist *new_hist(void) {
  brisk_hist *h = malloc(sizeof *h);
  assert_non_null(h);
  brisk_hist_reset(h);
  return h;
}

static void test_bucket_layout(void **state) {
  (void)state;
  /* Buckets tile [0, UINT64_MAX] without gaps, and none is wider than
   * 1/64 of its lower bound (beyond the exact ones). */
  assert_int_equal(brisk_hist_bucket_low(0), 0);
  for (uint32_t b = 0; b < BRISK_HIST_BUCKETS; b++) {
    uint64_t lo = brisk_hist_bucket_low(b), hi = brisk_hist_bucket_high(b);
    assert_true(lo <= hi);
    assert_int_equal(brisk_hist_bucket(lo), b);
    assert_int_equal(brisk_hist_bucket(hi), b);
    if (b < 128)
      assert_int_equal(lo, hi);
    else
      assert_true((hi - lo + 1) * 64 <= lo);
    if (b + 1 < BRISK_HIST_BUCKETS) assert_int_equal(hi + 1, brisk_hist_bucket_low(b + 1));
  }
  assert_true(brisk_hist_bucket_high(BRISK_HIST_BUCKETS - 1) == UINT64_MAX);
  test_rng r = test_rng_seeded("hist_bucket_layout");
  for (int i = 0; i < 100000; i++) {
    uint64_t v = test_rng_u64(&r) >> (test_rng_u64(&r) % 64);
    uint32_t b = brisk_hist_bucket(v);
    assert_true(b < BRISK_HIST_BUCKETS);
    assert_true(brisk_hist_bucket_low(b) <= v && v <= brisk_hist_bucket_high(b));
  }
  /* Fixed memory: a few tens of kilobytes whatever the sample count. */
  assert_true(sizeof(brisk_hist) < 32 * 1024);
}

static void test_empty_and_one(void **state) {
  (void)state;
  brisk_hist *h = new_hist();
  assert_int_equal(brisk_hist_quantile(h, 0.5), 0);
  assert_int_equal(brisk_hist_quantile(h, 0), 0);
  assert_int_equal(brisk_hist_quantile(h, 1), 0);
  assert_true(brisk_hist_mean(h) == 0.0);
  const uint64_t singles[] = {0, 1, 127, 128, 1000, 123456789, UINT64_C(1) << 40, UINT64_MAX};
  for (size_t i = 0; i < sizeof singles / sizeof *singles; i++) {
    brisk_hist_reset(h);
    brisk_hist_add(h, singles[i]);
    /* min == max clamps every quantile to the sample itself. */
    const double qs[] = {0, 0.01, 0.5, 0.99, 1, -1, 2, NAN};
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++)
      assert_true(brisk_hist_quantile(h, qs[k]) == singles[i]);
    assert_int_equal(h->count, 1);
    assert_true(brisk_hist_mean(h) == (double)singles[i]);
  }
  free(h);
}

static void test_known_small(void **state) {
  (void)state;
  brisk_hist *h = new_hist();
  /* 1..100 in shuffled order: below 128 every bucket is exact. */
  test_rng r = test_rng_seeded("hist_known_small");
  uint64_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (uint64_t)i + 1;
  for (int i = 99; i > 0; i--) {
    int j = (int)(test_rng_u64(&r) % (uint64_t)(i + 1));
    uint64_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
  for (int i = 0; i < 100; i++) brisk_hist_add(h, v[i]);
  assert_int_equal(brisk_hist_quantile(h, 0.5), 50);
  assert_int_equal(brisk_hist_quantile(h, 0.9), 90);
  assert_int_equal(brisk_hist_quantile(h, 0.99), 99);
  assert_int_equal(brisk_hist_quantile(h, 0.001), 1);
  assert_int_equal(brisk_hist_quantile(h, 0.505), 51);
  assert_int_equal(brisk_hist_quantile(h, 0), 1);
  assert_int_equal(brisk_hist_quantile(h, 1), 100);
  assert_true(brisk_hist_mean(h) == 50.5);
  assert_int_equal(h->min, 1);
  assert_int_equal(h->max, 100);

  /* Four latencies: 10, 20, 50, 200 ms. Nearest rank: p50 is the 2nd. */
  brisk_hist_reset(h);
  const uint64_t lat[] = {50 * MS, 200 * MS, 20 * MS, 10 * MS};
  for (int i = 0; i < 4; i++) brisk_hist_add(h, lat[i]);
  assert_close_rel(brisk_hist_quantile(h, 0.5), 20 * MS, BRISK_HIST_REL_ERROR);
  assert_close_rel(brisk_hist_quantile(h, 0.75), 50 * MS, BRISK_HIST_REL_ERROR);
  assert_int_equal(brisk_hist_quantile(h, 0.9), 200 * MS); /* rank 4 = count: the exact max */
  assert_int_equal(brisk_hist_quantile(h, 0.25), 10 * MS); /* rank 1: the exact min */
  assert_true(brisk_hist_mean(h) == 70.0 * MS);
  free(h);
}

static void test_huge_values(void **state) {
  (void)state;
  brisk_hist *h = new_hist();
  brisk_hist_add(h, UINT64_MAX);
  brisk_hist_add(h, UINT64_MAX - 1);
  brisk_hist_add(h, UINT64_C(1) << 63);
  brisk_hist_add(h, 3);
  assert_true(brisk_hist_quantile(h, 1) == UINT64_MAX);
  assert_int_equal(brisk_hist_quantile(h, 0), 3);
  assert_int_equal(brisk_hist_quantile(h, 0.25), 3);
  assert_close_rel(brisk_hist_quantile(h, 0.5), UINT64_C(1) << 63, BRISK_HIST_REL_ERROR);
  assert_close_rel(brisk_hist_quantile(h, 0.75), UINT64_MAX - 1, BRISK_HIST_REL_ERROR);
  /* The double sum cannot overflow. */
  assert_true(isfinite(brisk_hist_mean(h)));
  assert_true(
      fabs(brisk_hist_mean(h) - (2.0 * 18446744073709551615.0 + 9223372036854775808.0) / 4) < 1e6);
  free(h);
}

/* Fresh random latencies (log-uniform from 1 us to 3 h, or clustered)
 * against sorted nearest-rank percentiles, at fixed and random q. */
static void test_random_against_sort(void **state) {
  (void)state;
  test_rng r = test_rng_seeded("hist_random");
  brisk_hist *h = new_hist();
  enum { N = 20000 };
  uint64_t *v = malloc(N * sizeof *v);
  assert_non_null(v);
  for (int round = 0; round < 6; round++) {
    brisk_hist_reset(h);
    size_t n = 1 + (size_t)(test_rng_u64(&r) % N);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
      double x;
      if (round % 3 == 0) /* log-uniform, 1 us .. 3 h */
        x = exp(test_rng_uniform(&r, log(1e3), log(3.0 * 3600 * 1e9)));
      else if (round % 3 == 1) /* tight cluster around 20 ms: many samples per bucket */
        x = 20e6 + 1e5 * test_rng_normal(&r);
      else /* small integers, partly exact buckets */
        x = test_rng_uniform(&r, 0, 5000);
      v[i] = x < 0 ? 0 : (uint64_t)x;
      sum += (double)v[i];
      brisk_hist_add(h, v[i]);
    }
    qsort(v, n, sizeof *v, cmp_u64);
    double qs[16] = {0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1};
    for (int k = 12; k < 16; k++) qs[k] = test_rng_uniform(&r, 0, 1);
    for (int k = 0; k < 16; k++)
      assert_close_rel(brisk_hist_quantile(h, qs[k]), exact_quantile(v, n, qs[k]),
                       BRISK_HIST_REL_ERROR);
    assert_int_equal(h->count, n);
    assert_int_equal(h->min, v[0]);
    assert_int_equal(h->max, v[n - 1]);
    assert_true(fabs(brisk_hist_mean(h) - sum / (double)n) <= 1e-9 * (sum / (double)n) + 1e-9);
  }
  free(v);
  free(h);
}

/* ---- The accumulator on synthetic timelines ---- */

static brisk_metrics *new_metrics(uint64_t slo_ttft, uint64_t slo_tpot, double bw, double peak) {
  brisk_metrics *m = malloc(sizeof *m);
  assert_non_null(m);
  brisk_metrics_init(m, slo_ttft, slo_tpot, bw, peak);
  return m;
}

static void add_request(brisk_metrics *m, uint64_t submit, uint64_t admit, uint64_t first,
                        uint64_t finish, int32_t n_prompt, int32_t n_gen,
                        brisk_finish_reason reason) {
  brisk_metrics_on_submit(m, T0 + submit * MS);
  brisk_metrics_request r = {
      .t_submit = T0 + submit * MS,
      .t_admit = admit == UINT64_MAX ? 0 : T0 + admit * MS,
      .t_first = first == UINT64_MAX ? 0 : T0 + first * MS,
      .t_finish = T0 + finish * MS,
      .n_prompt = n_prompt,
      .n_generated = n_gen,
      .reason = reason,
  };
  brisk_metrics_on_finish(m, &r);
}

static void assert_near(double got, double want) {
  if (fabs(got - want) > 1e-9 * fabs(want) + 1e-12) fail_msg("got %.17g, want %.17g", got, want);
}

/* Timelines (ms after T0):
 *   A: submit 0,   admit 10,  first 50,  finish 140, 7 + 10 tokens: ttft 50,  tpot 10  -> good
 *   B: submit 100, admit 150, first 300, finish 320, 8 + 5 tokens:  ttft 200, tpot 5   -> TTFT miss
 *   C: submit 200, admit 210, first 220, finish 280, 9 + 3 tokens:  ttft 20,  tpot 30  -> TPOT miss
 *   D: submit 300, admit 300, first 310, finish 310, 10 + 1 token:  ttft 10,  no tpot  -> good
 *   E: submit 350, cancelled at 400 before admission                                   -> aborted
 * SLO: TTFT <= 100 ms, TPOT <= 20 ms. Window 0 .. 400 ms. */
static void feed_abcde(brisk_metrics *m) {
  add_request(m, 0, 10, 50, 140, 7, 10, BRISK_FINISH_LENGTH);
  add_request(m, 100, 150, 300, 320, 8, 5, BRISK_FINISH_EOG);
  add_request(m, 200, 210, 220, 280, 9, 3, BRISK_FINISH_LENGTH);
  add_request(m, 300, 300, 310, 310, 10, 1, BRISK_FINISH_EOG);
  add_request(m, 350, UINT64_MAX, UINT64_MAX, 400, 4, 0, BRISK_FINISH_CANCELLED);
}

static void scale_ms(uint64_t *a, size_t n) {
  for (size_t i = 0; i < n; i++) a[i] *= MS;
}

static void test_synthetic_timelines(void **state) {
  (void)state;
  brisk_metrics *m = new_metrics(100 * MS, 20 * MS, 0, 0);
  feed_abcde(m);
  brisk_engine_metrics out = {.struct_size = sizeof out};
  brisk_metrics_report(m, m->t_first_submit, T0 + 5000 * MS, 0, 0.0, 3, &out);
  assert_int_equal(out.struct_size, sizeof out);
  assert_int_equal(out.n_completed, 4);
  assert_int_equal(out.n_aborted, 1);
  assert_int_equal(out.n_preemptions, 3);

  /* TTFT {50, 200, 20, 10}: sorted 10 20 50 200. */
  assert_int_equal(out.ttft.count, 4);
  assert_close_rel(out.ttft.p50_ns, 20 * MS, BRISK_HIST_REL_ERROR);
  assert_int_equal(out.ttft.p90_ns, 200 * MS);
  assert_int_equal(out.ttft.p99_ns, 200 * MS);
  assert_int_equal(out.ttft.min_ns, 10 * MS);
  assert_int_equal(out.ttft.max_ns, 200 * MS);
  assert_near(out.ttft.mean_ns, 70.0 * MS);
  /* TPOT over A, B, C only: {10, 5, 30}. */
  assert_int_equal(out.tpot.count, 3);
  assert_close_rel(out.tpot.p50_ns, 10 * MS, BRISK_HIST_REL_ERROR);
  assert_int_equal(out.tpot.p90_ns, 30 * MS);
  assert_int_equal(out.tpot.min_ns, 5 * MS);
  assert_near(out.tpot.mean_ns, 15.0 * MS);
  /* E2E {140, 220, 80, 10}; queue {10, 50, 10, 0}. */
  uint64_t e2e[] = {10, 80, 140, 220}, queue[] = {0, 10, 10, 50};
  scale_ms(e2e, 4);
  scale_ms(queue, 4);
  assert_close_rel(out.e2e.p50_ns, e2e[1], BRISK_HIST_REL_ERROR);
  assert_int_equal(out.e2e.p99_ns, e2e[3]);
  assert_near(out.e2e.mean_ns, 112.5 * MS);
  assert_close_rel(out.queue.p50_ns, queue[1], BRISK_HIST_REL_ERROR);
  assert_int_equal(out.queue.p90_ns, queue[3]);
  assert_int_equal(out.queue.min_ns, 0);
  assert_near(out.queue.mean_ns, 17.5 * MS);

  /* Window 0.4 s: 19 output tokens, 34 + 19 in all, 4 completed, 2 good. */
  assert_near(out.window_s, 0.4);
  assert_near(out.output_tokens_per_s, 19 / 0.4);
  assert_near(out.total_tokens_per_s, 53 / 0.4);
  assert_near(out.requests_per_s, 4 / 0.4);
  assert_int_equal(out.n_good, 2);
  assert_near(out.goodput_requests_per_s, 2 / 0.4);
  assert_near(out.goodput_fraction, 0.5);

  /* While a request is live the window runs to now. */
  brisk_metrics_report(m, m->t_first_submit, T0 + 1000 * MS, 1, 0.0, 0, &out);
  assert_near(out.window_s, 1.0);
  assert_near(out.output_tokens_per_s, 19.0);
  free(m);
}

static void test_slo_bounds(void **state) {
  (void)state;
  brisk_engine_metrics out = {.struct_size = sizeof out};
  /* No SLO: every completed request is good. */
  brisk_metrics *m = new_metrics(0, 0, 0, 0);
  feed_abcde(m);
  brisk_metrics_report(m, m->t_first_submit, 0, 0, 0, 0, &out);
  assert_int_equal(out.n_good, 4);
  assert_near(out.goodput_fraction, 1.0);
  /* TTFT only, at exactly 50 ms: A (50, inclusive), C (20), D (10). */
  brisk_metrics_init(m, 50 * MS, 0, 0, 0);
  feed_abcde(m);
  brisk_metrics_report(m, m->t_first_submit, 0, 0, 0, 0, &out);
  assert_int_equal(out.n_good, 3);
  /* TPOT only, 5 ms: B (5) and D (one token, no TPOT). */
  brisk_metrics_init(m, 0, 5 * MS, 0, 0);
  feed_abcde(m);
  brisk_metrics_report(m, m->t_first_submit, 0, 0, 0, 0, &out);
  assert_int_equal(out.n_good, 2);
  assert_near(out.goodput_fraction, 0.5);
  assert_near(out.goodput_requests_per_s, 2 / 0.4);
  free(m);
}

static void test_steps_mbu_mfu(void **state) {
  (void)state;
  brisk_metrics *m = new_metrics(0, 0, 200.0, 1000.0);
  brisk_engine_metrics out = {.struct_size = sizeof out};
  /* Two busy steps of 10 ms moving 1 GB and doing 5 GFLOP each, KV 25% and
   * 75% full; an idle step does not count. */
  brisk_metrics_on_step(m, 64, 10 * MS, 1e9, 5e9, 0.25);
  brisk_metrics_on_step(m, 0, 7 * MS, 0, 0, 1.0);
  brisk_metrics_on_step(m, 1, 10 * MS, 1e9, 5e9, 0.75);
  brisk_metrics_report(m, 0, 0, 0, 0.125, 0, &out);
  assert_int_equal(out.n_busy_steps, 2);
  assert_near(out.busy_s, 0.02);
  assert_near(out.bytes, 2e9);
  assert_near(out.flops, 1e10);
  assert_near(out.achieved_gbs, 100.0);
  assert_near(out.achieved_gflops, 500.0);
  assert_near(out.mbu, 0.5);
  assert_near(out.mfu, 0.5);
  assert_near(out.kv_utilization, 0.125);
  assert_near(out.kv_utilization_mean, 0.5);
  /* No requests: an empty window, zero rates. */
  assert_true(out.window_s == 0 && out.requests_per_s == 0 && out.output_tokens_per_s == 0);
  assert_int_equal(out.ttft.count, 0);
  assert_int_equal(out.ttft.p50_ns, 0);
  /* Unknown machine figures: MBU and MFU read 0, the achieved rates stay. */
  brisk_metrics_init(m, 0, 0, 0, 0);
  brisk_metrics_on_step(m, 8, 10 * MS, 1e9, 5e9, 0.5);
  brisk_metrics_report(m, 0, 0, 0, 0, 0, &out);
  assert_true(out.mbu == 0 && out.mfu == 0);
  assert_near(out.achieved_gbs, 100.0);
  free(m);
}

static void test_reset_window(void **state) {
  (void)state;
  brisk_metrics *m = new_metrics(0, 0, 0, 0);
  brisk_engine_metrics out = {.struct_size = sizeof out};
  feed_abcde(m);
  brisk_metrics_on_step(m, 4, MS, 1, 1, 0.5);
  brisk_metrics_reset(m, T0 + 1000 * MS);
  brisk_metrics_report(m, m->t_first_submit, T0 + 2000 * MS, 0, 0, 0, &out);
  assert_int_equal(out.n_completed, 0);
  assert_int_equal(out.n_busy_steps, 0);
  assert_true(out.window_s == 0 && out.bytes == 0);
  /* Still live, nothing new submitted: the window runs from the reset. */
  brisk_metrics_report(m, m->t_first_submit, T0 + 1500 * MS, 1, 0, 0, &out);
  assert_near(out.window_s, 0.5);
  /* A request submitted before the reset (at 900) finishing after it (at
   * 1200) counts from the reset; its latencies are its own. */
  brisk_metrics_request r = {.t_submit = T0 + 900 * MS,
                             .t_admit = T0 + 950 * MS,
                             .t_first = T0 + 1000 * MS,
                             .t_finish = T0 + 1200 * MS,
                             .n_prompt = 3,
                             .n_generated = 5,
                             .reason = BRISK_FINISH_LENGTH};
  brisk_metrics_on_finish(m, &r);
  brisk_metrics_report(m, m->t_first_submit, T0 + 5000 * MS, 0, 0, 0, &out);
  assert_int_equal(out.n_completed, 1);
  assert_near(out.window_s, 0.2);
  assert_near(out.output_tokens_per_s, 25.0);
  assert_int_equal(out.ttft.max_ns, 100 * MS);
  assert_int_equal(out.tpot.max_ns, 50 * MS);
  /* A later submission does not move the start: the window is from the
   * earliest of them. */
  brisk_metrics_on_submit(m, T0 + 1100 * MS);
  brisk_metrics_report(m, m->t_first_submit, T0 + 5000 * MS, 0, 0, 0, &out);
  assert_near(out.window_s, 0.2);
  free(m);
}

static void test_tpot_helper(void **state) {
  (void)state;
  brisk_metrics_request r = {.t_first = 100, .t_finish = 100 + 3 * 7, .n_generated = 4};
  assert_int_equal(brisk_metrics_tpot_ns(&r), 7);
  r.n_generated = 1;
  assert_int_equal(brisk_metrics_tpot_ns(&r), 0);
  r.n_generated = 2;
  r.t_first = 0; /* never produced a token */
  assert_int_equal(brisk_metrics_tpot_ns(&r), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bucket_layout),       cmocka_unit_test(test_empty_and_one),
      cmocka_unit_test(test_known_small),         cmocka_unit_test(test_huge_values),
      cmocka_unit_test(test_random_against_sort), cmocka_unit_test(test_synthetic_timelines),
      cmocka_unit_test(test_slo_bounds),          cmocka_unit_test(test_steps_mbu_mfu),
      cmocka_unit_test(test_reset_window),        cmocka_unit_test(test_tpot_helper),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
