/* brisk bench -m MODEL: prompt processing (pp) and text generation (tg)
 * speed, llama-bench style, and decode memory-bandwidth utilisation (MBU).
 *
 * pp: one brisk_decode of p random tokens (BOS first) on an emptied
 * sequence, logits of the last token only. tg: n single-token decodes from
 * position 0 (BOS first, then random tokens), logits every step. Each has
 * its own context sized as the test needs, one untimed warm-up run, then r
 * timed reps; the median, min and max tokens/s are reported.
 *
 * MBU = bytes a decode step must read / step time / read bandwidth, where
 * the bytes are every weight the step multiplies by (the token embedding
 * table only if the output projection shares it, plus one embedding row)
 * and the KV cache up to the step's position, averaged over the n steps; the
 * bandwidth is measured first, in this process, on the same thread count. */
#include "bench_cmd.h"
#include "bench_util.h"
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include "core/cpu.h"
#include "model/shard.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define BW_BYTES ((size_t)256 << 20) /* 16x a 16 MiB L3 */
#define MAX_REPS 1000

static int progress_none(float f, void *u) {
  (void)f;
  (void)u;
  return 1;
}

typedef struct test_result {
  int n_tokens;
  int reps;
  double tps[MAX_REPS]; /* tokens/s of each rep, in run order */
  bench_stats s;
  /* With pipeline stages: micro-batches run, and the bubble fraction
   * measured and ideal over the test's decodes (warm-up included). */
  uint64_t n_micro;
  double bubble, ideal_bubble;
} test_result;

/* Read/copy bandwidth on a pool of its own, freed before returning. */
static bool measure_bw(int threads, bench_bandwidth *out) {
  brisk_threadpool *pool = NULL;
  if (brisk_threadpool_create(threads, &pool) != BRISK_OK) {
    cli_fail("bench", "%s", brisk_last_error());
    return false;
  }
  bool ok = bench_measure_bandwidth(pool, threads, BW_BYTES, 12, out);
  brisk_threadpool_free(pool);
  if (!ok) cli_fail("bench", "no memory for the %zu MiB bandwidth buffers", BW_BYTES >> 20);
  return ok;
}

static int fail_ctx(brisk_context *ctx, brisk_batch *b) {
  int rc = cli_fail("bench", "%s", brisk_last_error());
  brisk_batch_free(b);
  brisk_context_free(ctx);
  return rc;
}

static brisk_status make_ctx(const brisk_model *m, int threads, int kv_type, int32_t kv_tokens,
                             int32_t batch_tokens, brisk_context **ctx, brisk_batch **b) {
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = threads;
  cp.kv_type = (brisk_kv_type)kv_type;
  cp.kv_tokens = kv_tokens;
  cp.n_seq_max = 1;
  if (batch_tokens > cp.max_batch_tokens) cp.max_batch_tokens = batch_tokens;
  brisk_status st = brisk_context_create(m, &cp, ctx);
  if (st != BRISK_OK) return st;
  return brisk_batch_create(batch_tokens, b);
}

static int32_t token(const brisk_model *m, int32_t pos, uint64_t *rng) {
  const int32_t bos = brisk_model_special_token(m, BRISK_TOKEN_BOS);
  if (pos == 0 && bos >= 0) return bos;
  return (int32_t)(bench_rand(rng) % (uint64_t)brisk_model_n_vocab(m));
}

/* One pp run: empty the sequence, decode p tokens in one batch. Seconds. */
static brisk_status run_pp(const brisk_model *m, brisk_context *ctx, brisk_batch *b, int p,
                           uint64_t *rng, double *secs) {
  brisk_status st = brisk_seq_free(ctx, 0);
  if (st != BRISK_OK) return st;
  brisk_batch_clear(b);
  for (int32_t i = 0; i < p; i++)
    if ((st = brisk_batch_add(b, token(m, i, rng), i, 0, i + 1 == p)) != BRISK_OK) return st;
  double t0 = bench_now_s();
  st = brisk_decode(ctx, b);
  *secs = bench_now_s() - t0;
  return st;
}

/* Fills sequence 0 with `depth` random tokens (BOS first), untimed, in
 * batches as large as b holds. */
static brisk_status fill_depth(const brisk_model *m, brisk_context *ctx, brisk_batch *b, int depth,
                               int batch, uint64_t *rng) {
  brisk_status st = brisk_seq_free(ctx, 0);
  for (int32_t i0 = 0; i0 < depth && st == BRISK_OK; i0 += batch) {
    brisk_batch_clear(b);
    for (int32_t i = i0; i < depth && i < i0 + batch; i++)
      brisk_batch_add(b, token(m, i, rng), i, 0, i + 1 == depth);
    st = brisk_decode(ctx, b);
  }
  return st;
}

/* One tg run: back to the first `depth` tokens, n single-token decodes.
 * Seconds. */
static brisk_status run_tg(const brisk_model *m, brisk_context *ctx, brisk_batch *b, int depth,
                           int n, uint64_t *rng, double *secs) {
  brisk_status st = brisk_seq_truncate(ctx, 0, depth);
  if (st != BRISK_OK) return st;
  double t0 = bench_now_s();
  for (int32_t i = depth; i < depth + n && st == BRISK_OK; i++) {
    brisk_batch_clear(b);
    brisk_batch_add(b, token(m, i, rng), i, 0, 1);
    st = brisk_decode(ctx, b);
  }
  *secs = bench_now_s() - t0;
  return st;
}

static int run_test(const brisk_model *m, const bench_model_opts *o, bool pp, test_result *r,
                    uint64_t *kv_bytes_per_token) {
  const int n = pp ? o->p : o->n;
  brisk_context *ctx = NULL;
  brisk_batch *b = NULL;
  const int depth = pp ? 0 : o->depth, batch = pp ? n : depth < 512 ? (depth > 1 ? depth : 1) : 512;
  if (make_ctx(m, o->threads, o->kv_type, depth + n, batch, &ctx, &b) != BRISK_OK)
    return fail_ctx(ctx, b);
  brisk_kv_stats ks = {.struct_size = sizeof ks};
  if (brisk_context_kv_stats(ctx, &ks) != BRISK_OK) return fail_ctx(ctx, b);
  *kv_bytes_per_token = ks.block_size > 0 ? ks.bytes_per_block / (uint64_t)ks.block_size : 0;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  double secs;
  /* Warm-up: as the peer does, a whole prompt for pp, one token for tg. */
  brisk_status st =
      pp ? run_pp(m, ctx, b, n, &rng, &secs) : fill_depth(m, ctx, b, depth, batch, &rng);
  if (!pp && st == BRISK_OK) st = run_tg(m, ctx, b, depth, 1, &rng, &secs);
  r->n_tokens = n;
  r->reps = o->reps;
  for (int i = 0; i < o->reps && st == BRISK_OK; i++) {
    st = pp ? run_pp(m, ctx, b, n, &rng, &secs) : run_tg(m, ctx, b, depth, n, &rng, &secs);
    r->tps[i] = (double)n / secs;
    if (!o->json)
      fprintf(stderr, "#   %s%d rep %d: %.2f tok/s\n", pp ? "pp" : "tg", n, i, r->tps[i]);
  }
  if (st != BRISK_OK) return fail_ctx(ctx, b);
  int32_t stages;
  if (brisk_context_pipeline_stats(ctx, &stages, &r->n_micro, &r->bubble, &r->ideal_bubble))
    return fail_ctx(ctx, b);
  double sorted[MAX_REPS];
  memcpy(sorted, r->tps, (size_t)o->reps * sizeof *sorted);
  r->s = bench_summarize(sorted, o->reps);
  brisk_batch_free(b);
  brisk_context_free(ctx);
  return 0;
}

static void print_test_json(const char *key, const test_result *r) {
  printf(", \"%s\": {\"n_tokens\": %d, \"median_tps\": %.3f, \"min_tps\": %.3f, "
         "\"max_tps\": %.3f, ",
         key, r->n_tokens, r->s.median, r->s.min, r->s.max);
  if (r->n_micro)
    printf("\"micro_batches\": %" PRIu64 ", \"bubble\": %.4f, \"ideal_bubble\": %.4f, ", r->n_micro,
           r->bubble, r->ideal_bubble);
  bench_json_array(stdout, "tps", r->tps, r->reps);
  printf("}");
}

int bench_model_run(const bench_model_opts *o) {
  if (o->p < 0 || o->n < 0 || o->reps < 1 || o->reps > MAX_REPS || o->threads < 0)
    return cli_fail("bench", "need -p >= 0, -n >= 0, 1 <= -r <= %d, -t >= 0", MAX_REPS);
  if (o->p == 0 && o->n == 0) return cli_fail("bench", "nothing to run: -p and -n are both 0");
  bench_model_opts opt = *o;
  if (opt.threads == 0) opt.threads = brisk_cpu_count();
  char load_before[64], load_after[64];
  bench_load_avg(load_before, sizeof load_before);

  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.progress = progress_none;
  mp.repack = !opt.no_repack;
  mp.use_mmap = !opt.no_mmap;
  mp.tp_size = opt.tp;
  mp.pp_size = opt.pp;
  const int join_rc = cli_mpi_join("bench", opt.tp, opt.pp);
  if (join_rc >= 0) return join_rc;
  brisk_model *m = NULL;
  if (brisk_model_load(opt.model, &mp, &m) != BRISK_OK)
    return cli_fail("bench", "%s", brisk_last_error());
  /* Under mpirun, ranks 1.. follow rank 0's contexts; rank 0 measures and
   * reports. */
  const int worker_rc = cli_mpi_follow("bench", o->threads, m);
  if (worker_rc >= 0) {
    brisk_model_free(m);
    return worker_rc;
  }
  /* Bandwidth before and after the tests, when no context exists (so no
   * idle workers compete); MBU uses the mean of the two medians. */
  bench_bandwidth bw0 = {0}, bw1 = {0};
  if (!measure_bw(opt.threads, &bw0)) {
    brisk_model_free(m);
    return 1;
  }

  /* What a decode step reads: a mixture-of-experts model's chosen experts
   * only, not every expert in the file. */
  const uint64_t w_bytes = brisk_model_step_weight_bytes(m, 1, 1);
  static test_result pp, tg;
  uint64_t kv_bpt_pp = 0, kv_bpt = 0;
  if (opt.p > 0 && run_test(m, &opt, true, &pp, &kv_bpt_pp) != 0) goto fail;
  if (opt.n > 0 && run_test(m, &opt, false, &tg, &kv_bpt) != 0) goto fail;
  if (!measure_bw(opt.threads, &bw1)) goto fail;
  bench_load_avg(load_after, sizeof load_after);

  /* Step i (0-based) attends over depth + i + 1 positions: depth + (n + 1) / 2 on
   * average. */
  const double step_bytes = (double)w_bytes + (double)kv_bpt * (opt.depth + (opt.n + 1) / 2.0);
  const double bw_gbs = 0.5 * (bw0.read_gbs.median + bw1.read_gbs.median), bw_bytes = bw_gbs * 1e9;
  const double mbu = opt.n > 0 ? step_bytes * tg.s.median / bw_bytes : 0;
  /* A step whose bytes fit in the cache is not bound by DRAM: MBU is then
   * printed but flagged as meaningless (it can exceed 100%). */
  const size_t llc = bench_llc_bytes();
  const bool mbu_meaningful = llc == 0 || step_bytes > 2.0 * (double)llc;
  const char *name = strrchr(opt.model, '/') ? strrchr(opt.model, '/') + 1 : opt.model;
  if (opt.json) {
    printf("{\"model\": ");
    cli_json_string(stdout, opt.model);
    printf(", \"architecture\": ");
    cli_json_string(stdout, brisk_model_architecture(m));
    printf(", \"n_params\": %" PRIu64 ", \"file_weight_bytes\": %" PRIu64
           ", \"threads\": %d, \"tp_size\": %d, \"pp_size\": %d, \"reps\": %d, \"repack\": %s, "
           "\"load_avg_before\": \"%s\", \"load_avg_after\": \"%s\"",
           brisk_model_n_params(m), brisk_model_weight_bytes(m), opt.threads,
           opt.tp > 1 ? opt.tp : 1, opt.pp > 1 ? opt.pp : 1, opt.reps,
           opt.no_repack ? "false" : "true", load_before, load_after);
    if (opt.p > 0) print_test_json("pp", &pp);
    if (opt.n > 0) print_test_json("tg", &tg);
    printf(", \"mem_read_gbs\": %.3f, \"mem_read_gbs_before\": %.3f, \"mem_read_gbs_after\": "
           "%.3f, \"mem_read_gbs_max\": %.3f, \"mem_copy_gbs\": %.3f",
           bw_gbs, bw0.read_gbs.median, bw1.read_gbs.median,
           bw0.read_gbs.max > bw1.read_gbs.max ? bw0.read_gbs.max : bw1.read_gbs.max,
           0.5 * (bw0.copy_gbs.median + bw1.copy_gbs.median));
    printf(", \"kv_type\": \"%s\", \"depth\": %d", cli_kv_type_names[opt.kv_type], opt.depth);
    printf(", \"decode_weight_bytes\": %" PRIu64 ", \"kv_bytes_per_position\": %" PRIu64
           ", \"decode_bytes_per_token\": %.0f",
           w_bytes, kv_bpt, opt.n > 0 ? step_bytes : 0.0);
    printf(", \"llc_bytes\": %zu", llc);
    /* Under mpirun: what rank 0 holds of the model (each rank its part). */
    if (cli_mpi_size())
      printf(", \"mpi_processes\": %d, \"rank0_weight_bytes\": %" PRIu64
             ", \"rank0_model_memory_bytes\": %" PRIu64,
             cli_mpi_size(), brisk_split_rank_bytes(m, 0), brisk_model_memory_used(m));
    if (opt.n > 0)
      printf(", \"mbu\": %.4f, \"mbu_meaningful\": %s", mbu, mbu_meaningful ? "true" : "false");
    printf("}\n");
  } else {
    printf("model %s (%s, %.1f M params, %.1f MiB of weights%s), %d threads, %d reps\n", name,
           brisk_model_architecture(m), (double)brisk_model_n_params(m) / 1e6,
           (double)brisk_model_weight_bytes(m) / 1048576.0, opt.no_repack ? ", used as stored" : "",
           opt.threads, opt.reps);
    printf("KV cache %s, %llu bytes per token%s", cli_kv_type_names[opt.kv_type],
           (unsigned long long)(opt.n > 0 ? kv_bpt : kv_bpt_pp), opt.depth ? "" : "\n");
    if (opt.depth) printf("; tg after %d tokens already cached\n", opt.depth);
    printf("load average before %s, after %s\n", load_before, load_after);
    if (cli_mpi_size())
      printf("%d MPI processes: rank 0 holds %.1f MiB of the weights (its part), %.1f MiB "
             "allocated\n",
             cli_mpi_size(), (double)brisk_split_rank_bytes(m, 0) / 1048576.0,
             (double)brisk_model_memory_used(m) / 1048576.0);
    printf("memory read %.1f GB/s before, %.1f after (medians of 12 passes over %zu MiB), "
           "copy %.1f / %.1f GB/s\n",
           bw0.read_gbs.median, bw1.read_gbs.median, BW_BYTES >> 20, bw0.copy_gbs.median,
           bw1.copy_gbs.median);
    printf("%-8s %12s %12s %12s\n", "test", "median t/s", "min", "max");
    if (opt.p > 0) printf("pp%-6d %12.2f %12.2f %12.2f\n", opt.p, pp.s.median, pp.s.min, pp.s.max);
    if (opt.p > 0 && pp.n_micro)
      printf("pipeline %d stages: pp%d in %.0f micro-batches per decode, bubble %.1f%% "
             "measured, %.1f%% ideal\n",
             opt.pp, opt.p, (double)pp.n_micro / (opt.reps + 1), 100 * pp.bubble,
             100 * pp.ideal_bubble);
    if (opt.n > 0) {
      printf("tg%-6d %12.2f %12.2f %12.2f\n", opt.n, tg.s.median, tg.s.min, tg.s.max);
      if (tg.n_micro)
        printf("pipeline %d stages: tg, one token per decode, bubble %.1f%% measured, %.1f%% "
               "ideal\n",
               opt.pp, 100 * tg.bubble, 100 * tg.ideal_bubble);
      printf("decode reads %.1f MiB/token (weights %.1f MiB + KV %.2f MiB on average): "
             "MBU %.0f%% (bandwidth bound: %.1f tok/s)\n",
             step_bytes / 1048576.0, (double)w_bytes / 1048576.0,
             (step_bytes - (double)w_bytes) / 1048576.0, 100 * mbu, bw_bytes / step_bytes);
      if (!mbu_meaningful)
        printf("(the step's bytes fit in the %.0f MiB cache: MBU does not apply)\n",
               (double)llc / 1048576.0);
    }
  }
  brisk_model_free(m);
  return 0;
fail:
  brisk_model_free(m);
  return 1;
}
