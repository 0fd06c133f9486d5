/* brisk serve-bench: synthetic serving workloads run in real time through
 * the engine (and a static-batching baseline), with latency percentiles,
 * throughput, goodput and SVG plots. docs/cli.md describes the options and
 * the output; docs/performance.md has results. */
#include "brisk.h"
#include "bench_util.h"
#include "cli.h"
#include "cli_opt.h"
#include "load_progress.h"
#include "serve_plots.h"
#include "serve_run.h"
#include "svg.h"

#include "core/alloc.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cmd_serve_bench(int argc, char **argv);

#define MAX_RATES 16
#define MAX_CONFIGS 8

typedef struct opts {
  cli_model_args load; /* -m, -t, --no-mmap, --no-repack */
  const char *model, *out_dir;
  wl_spec spec;
  double rates[MAX_RATES];
  int n_rates;
  int kv_tokens, max_batch_tokens, max_running, block_size, chunk_size, threads, kv_type;
  int reserve_blocks;         /* -1: the engine's default */
  uint64_t prefix_host_bytes; /* > 0: a "prefix-host" configuration with that host tier */
  int sinks, window;          /* every engine request's window; sinks -1: 4 with a window */
  brisk_preempt_mode preempt;
  bool cmp_static, cmp_prefix, cmp_chunked, static_pad, json;
  sb_slo slo;
} opts;

static bool parse_num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

static const char *parse_rate(const char *v, void *dst) {
  opts *o = dst;
  if (!parse_num(v, 0, 1e6, &o->rates[0])) return "a number of requests/s from 0 to 1000000";
  o->n_rates = 1;
  return NULL;
}

static const char *parse_rates(const char *s, void *dst) {
  opts *o = dst;
  static const char want[] = "A,B,... (up to 16 rates, each from 0 to 1000000)";
  char buf[512];
  if (strlen(s) >= sizeof buf) return want;
  strcpy(buf, s);
  o->n_rates = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (o->n_rates == MAX_RATES || !parse_num(tok, 0, 1e6, &o->rates[o->n_rates])) return want;
    o->n_rates++;
  }
  return o->n_rates > 0 ? NULL : want;
}

static const char *parse_dist(const char *v, void *dst) {
  return wl_dist_parse(v, dst) ? NULL : "N or A..B with 1 <= A <= B";
}

static const char *parse_compare(const char *s, void *dst) {
  opts *o = dst;
  static const char want[] = "static, prefix, chunked or all (or a comma-separated list)";
  char buf[128];
  if (strlen(s) >= sizeof buf) return want;
  strcpy(buf, s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    const bool all = !strcmp(tok, "all");
    if (!all && strcmp(tok, "static") && strcmp(tok, "prefix") && strcmp(tok, "chunked"))
      return want;
    o->cmp_static |= all || !strcmp(tok, "static");
    o->cmp_prefix |= all || !strcmp(tok, "prefix");
    o->cmp_chunked |= all || !strcmp(tok, "chunked");
  }
  return NULL;
}

/* CLI_CONTINUE, or the exit code (after help or an error). */
static int parse_args(int argc, char **argv, opts *o) {
  static const char *const preempt_modes[] = {"recompute", "swap", NULL};
  int preempt = 0;
  double slo_ttft_ms = 0, slo_tpot_ms = 0;
  const cli_opt wl[] = {
      {CLI_INT_OPT('n', "requests", &o->spec.n_requests, "N", "requests (default 64)", 1, INT_MAX)},
      {CLI_CUSTOM_OPT(0, "rate", o, "R",
                      "Poisson arrivals, requests/s; 0 = all at once (default 4)", parse_rate)},
      {CLI_CUSTOM_OPT(0, "rates", o, "A,B,...", "a sweep over arrival rates instead of --rate",
                      parse_rates)},
      {CLI_CUSTOM_OPT(0, "prompt-len", &o->spec.prompt_len, "L|A..B",
                      "prompt tokens, fixed or uniform (default 32..128)", parse_dist)},
      {CLI_CUSTOM_OPT(0, "output-len", &o->spec.output_len, "L|A..B",
                      "generated tokens, fixed or uniform (default 16..256)", parse_dist)},
      {CLI_DOUBLE_OPT(0, "prefix-frac", &o->spec.prefix_frac, "F",
                      "leading share of each prompt common to all (default 0)", 0, 1)},
      {CLI_INT_OPT(0, "prefix-groups", &o->spec.prefix_groups, "G",
                   "G distinct shared prefixes, one per request at\nrandom (default 1)", 1,
                   1 << 20)},
      {CLI_U64_OPT(0, "seed", &o->spec.seed, "S", "(default 1)")},
  };
  const cli_opt serving[] = {
      {CLI_INT_OPT(0, "kv-tokens", &o->kv_tokens, "N",
                   "KV memory budget in tokens, every configuration\n(default 4096)", 1, INT_MAX)},
      {CLI_KV_TYPE_OPT(&o->kv_type, CLI_KV_TYPE_HELP "\n(default f16)")},
      {CLI_INT_OPT(0, "max-batch-tokens", &o->max_batch_tokens, "N",
                   "tokens per forward pass (default 512)", 1, INT_MAX)},
      {CLI_INT_OPT(0, "max-running", &o->max_running, "N",
                   "engine: requests generating at once (default 64)", 1, INT_MAX)},
      {CLI_INT_OPT(0, "block-size", &o->block_size, "N", "KV tokens per block (default 16)", 1,
                   INT_MAX)},
      {CLI_INT_OPT(0, "chunk-size", &o->chunk_size, "N",
                   "prefill chunk of the 'chunked' configuration (default 64)", 1, INT_MAX)},
      {CLI_OPT_(0, "preempt", CLI_CHOICE, &preempt, "MODE",
                "recompute or swap: the engine's preemption mode\n(default recompute)"),
       .choices = preempt_modes},
      {CLI_INT_OPT(0, "reserve-blocks", &o->reserve_blocks, "N",
                   "engine: growth blocks admission keeps per running\n"
                   "request (default: the engine's, 1)",
                   0, INT_MAX)},
      {CLI_CUSTOM_OPT(0, "prefix-host-bytes", &o->prefix_host_bytes, "BYTES",
                      "adds a 'prefix-host' configuration: the prefix\ncache with a host tier of "
                      "BYTES (K, M, G)",
                      cli_parse_bytes)},
      {CLI_INT_OPT(0, "window", &o->window, "W",
                   "engine: every request attends to its sinks and last W\n"
                   "tokens only (StreamingLLM; default 0: off)",
                   0, INT_MAX)},
      {CLI_INT_OPT(0, "sinks", &o->sinks, "S", "with --window: attention sinks (default 4)", 0,
                   INT_MAX)},
      {CLI_CUSTOM_OPT(0, "compare", o, "LIST",
                      "extra configurations: static, prefix, chunked, all\n"
                      "(repeatable, or comma-separated)",
                      parse_compare)},
      {CLI_FLAG_OPT(0, "static-pad", &o->static_pad,
                    "static batches keep decoding finished slots (padding)")},
  };
  const cli_opt output[] = {
      {CLI_DOUBLE_OPT(0, "slo-ttft-ms", &slo_ttft_ms, "X", "goodput: TTFT within X ms", 0, 1e9)},
      {CLI_DOUBLE_OPT(0, "slo-tpot-ms", &slo_tpot_ms, "Y", "goodput: TPOT within Y ms", 0, 1e9)},
      {CLI_STR_OPT(0, "out-dir", &o->out_dir, "DIR", "write SVG plots there")},
      {CLI_FLAG_OPT(0, "json", &o->json, "one JSON object on stdout")},
  };
  const cli_group groups[] = {
      cli_model_group(&o->load, "the model (required)"),
      {"workload", wl, sizeof wl / sizeof wl[0]},
      {"serving", serving, sizeof serving / sizeof serving[0]},
      {"output", output, sizeof output / sizeof output[0]},
  };
  const cli_spec spec = {
      .cmd = "serve-bench",
      .usage = "-m MODEL [options] [--json]",
      .summary = "Runs a synthetic serving workload in real time through the engine (and, with\n"
                 "--compare, a static-batching baseline and other configurations): TTFT, TPOT\n"
                 "and end-to-end percentiles, throughput, goodput; SVG plots with --out-dir.\n"
                 "On a terminal a progress bar on stderr counts the runs.",
      .groups = groups,
      .n_groups = sizeof groups / sizeof groups[0],
      .epilog = "docs/cli.md describes the workload, the configurations and the output.",
  };
  int rc = cli_parse(&spec, argc, argv);
  if (rc != CLI_CONTINUE) return rc;
  o->model = o->load.path;
  o->threads = o->load.threads;
  o->preempt = preempt == 1 ? BRISK_PREEMPT_SWAP : BRISK_PREEMPT_RECOMPUTE;
  o->slo.ttft_s = slo_ttft_ms * 1e-3;
  o->slo.tpot_s = slo_tpot_ms * 1e-3;
  if (!o->model) return cli_usage_error("serve-bench", "-m MODEL is required (try --help)");
  if (o->sinks >= 0 && !o->window)
    return cli_usage_error("serve-bench", "--sinks goes with --window");
  if (o->window && o->cmp_static)
    return cli_usage_error("serve-bench",
                           "--window applies to the engine's configurations, not --compare static");
  if (o->window && o->sinks < 0) o->sinks = 4;
  return CLI_CONTINUE;
}

/* The configurations of this invocation: "continuous" first, the baseline
 * every comparison is made against (prefix cache off, unchunked prefill). */
static int make_configs(const opts *o, int32_t n_slots, int32_t slot_tokens, sb_config *c) {
  int n = 0;
  const int32_t prefix_off = 0;
  c[n++] = (sb_config){.name = "continuous",
                       .kind = SB_CONTINUOUS,
                       .max_running = o->max_running,
                       .prefix_cache = prefix_off};
  if (o->cmp_static) {
    c[n++] = (sb_config){.name = "static",
                         .kind = SB_STATIC,
                         .n_slots = n_slots,
                         .slot_tokens = slot_tokens,
                         .pad = o->static_pad};
    if (o->static_pad) strcpy(c[n - 1].name, "static-padded");
    c[n++] = (sb_config){.name = "continuous-eqbatch",
                         .kind = SB_CONTINUOUS,
                         .max_running = n_slots,
                         .prefix_cache = prefix_off};
  }
  if (o->cmp_prefix)
    c[n++] = (sb_config){.name = "prefix-cache",
                         .kind = SB_CONTINUOUS,
                         .max_running = o->max_running,
                         .prefix_cache = 1};
  if (o->prefix_host_bytes)
    c[n++] = (sb_config){.name = "prefix-host",
                         .kind = SB_CONTINUOUS,
                         .max_running = o->max_running,
                         .prefix_cache = 1,
                         .prefix_host_bytes = o->prefix_host_bytes};
  if (o->cmp_chunked) {
    c[n] = (sb_config){.kind = SB_CONTINUOUS,
                       .max_running = o->max_running,
                       .prefill_chunk = o->chunk_size,
                       .prefix_cache = prefix_off};
    snprintf(c[n].name, sizeof c[n].name, "chunked-%d", o->chunk_size);
    n++;
  }
  return n;
}

static void json_dist(const char *key, const sb_dist *d) {
  printf("\"%s\": {\"n\": %d, \"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, "
         "\"max\": %.4f}",
         key, d->n, d->mean * 1e3, d->p50 * 1e3, d->p90 * 1e3, d->p99 * 1e3, d->max * 1e3);
}

static void json_run(const sb_record *r, int32_t n) {
  const sb_summary *s = &r->sum;
  printf("{\"config\": ");
  cli_json_string(stdout, r->c->name);
  printf(", \"kind\": \"%s\", \"rate\": %g, ", r->c->kind == SB_STATIC ? "static" : "continuous",
         r->rate);
  if (r->c->kind == SB_STATIC)
    printf("\"n_slots\": %d, \"slot_tokens\": %d, \"padded\": %s, ", r->c->n_slots,
           r->c->slot_tokens, r->c->pad ? "true" : "false");
  else
    printf("\"max_running\": %d, \"prefill_chunk\": %d, \"prefix_cache\": %d, "
           "\"prefix_host_bytes\": %llu, \"host_tier_hits\": %llu, \"host_tier_misses\": %llu, "
           "\"host_tier_evictions\": %llu, \"host_tier_bytes\": %llu, ",
           r->c->max_running, r->c->prefill_chunk, r->c->prefix_cache,
           (unsigned long long)r->c->prefix_host_bytes, (unsigned long long)r->res.n_host_hits,
           (unsigned long long)r->res.n_host_misses, (unsigned long long)r->res.n_host_evictions,
           (unsigned long long)r->res.host_bytes);
  printf("\"n_requests\": %d, \"duration_s\": %.6f, \"prompt_tokens\": %llu, "
         "\"output_tokens\": %llu, \"output_tok_s\": %.4f, \"total_tok_s\": %.4f, "
         "\"req_s\": %.6f, \"goodput_req_s\": %.6f, \"n_slo_ok\": %d, \"n_steps\": %llu, "
         "\"n_preemptions\": %llu, \"n_computed_tokens\": %llu, \"cpu_s\": %.3f, "
         "\"prefix_lookup_tokens\": %llu, \"prefix_hit_tokens\": %llu, ",
         n, s->duration_s, (unsigned long long)s->prompt_tokens,
         (unsigned long long)s->output_tokens, s->output_tps, s->total_tps, s->req_per_s,
         s->goodput_req_per_s, s->n_slo_ok, (unsigned long long)r->res.n_steps,
         (unsigned long long)r->res.n_preemptions, (unsigned long long)r->res.n_computed_tokens,
         r->res.cpu_s, (unsigned long long)r->res.n_prefix_lookup_tokens,
         (unsigned long long)r->res.n_prefix_hit_tokens);
  json_dist("ttft_ms", &s->ttft);
  printf(", ");
  json_dist("tpot_ms", &s->tpot);
  printf(", ");
  json_dist("e2e_ms", &s->e2e);
  printf(", ");
  json_dist("itl_ms", &s->itl);
  /* Every sample, so that a reader can recompute any statistic. */
  printf(", \"requests\": {\"n_prompt\": [");
  for (int32_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", r->res.req[i].n_prompt);
  printf("], \"n_output\": [");
  for (int32_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", r->res.req[i].n_output);
  printf("], \"n_preemptions\": [");
  for (int32_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", r->res.req[i].n_preemptions);
  printf("], \"out_hash\": [");
  for (int32_t i = 0; i < n; i++)
    printf("%s\"%016llx\"", i ? ", " : "", (unsigned long long)r->res.req[i].out_hash);
  const char *keys[3] = {"arrival_s", "ttft_s", "e2e_s"};
  for (int k = 0; k < 3; k++) {
    printf("], \"%s\": [", keys[k]);
    for (int32_t i = 0; i < n; i++) {
      const sb_request *q = &r->res.req[i];
      printf("%s%.9f", i ? ", " : "", k == 0 ? q->arrival_s : k == 1 ? q->ttft_s : q->e2e_s);
    }
  }
  printf("]}}");
}

static const sb_record *find(const sb_record *runs, int n_runs, const char *name, double rate) {
  for (int i = 0; i < n_runs; i++)
    if (runs[i].rate == rate && !strcmp(runs[i].c->name, name)) return &runs[i];
  return NULL;
}

static const sb_record *find_prefix(const sb_record *runs, int n_runs, const char *prefix,
                                    double rate) {
  for (int i = 0; i < n_runs; i++)
    if (runs[i].rate == rate && !strncmp(runs[i].c->name, prefix, strlen(prefix))) return &runs[i];
  return NULL;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

/* Prompt tokens reused from the prefix cache over those looked up. */
static double hit_rate(const sb_record *r) {
  return ratio((double)r->res.n_prefix_hit_tokens, (double)r->res.n_prefix_lookup_tokens);
}

/* The comparisons at one rate, as JSON objects or text lines. */
static void print_comparisons(const opts *o, const sb_record *runs, int n_runs, double rate,
                              bool *first) {
  const sb_record *cont = find(runs, n_runs, "continuous", rate);
  const sb_record *st = find_prefix(runs, n_runs, "static", rate);
  const sb_record *eq = find(runs, n_runs, "continuous-eqbatch", rate);
  const sb_record *pc = find(runs, n_runs, "prefix-cache", rate);
  const sb_record *ch = find_prefix(runs, n_runs, "chunked-", rate);
  const sb_record *ph = find(runs, n_runs, "prefix-host", rate);
  if (st && cont && eq) {
    const double r1 = ratio(cont->sum.output_tps, st->sum.output_tps),
                 r2 = ratio(eq->sum.output_tps, st->sum.output_tps);
    if (o->json)
      printf("%s{\"name\": \"static\", \"rate\": %g, \"n_slots\": %d, "
             "\"continuous_over_static_output_tok_s\": %.4f, "
             "\"eqbatch_over_static_output_tok_s\": %.4f}",
             *first ? "" : ", ", rate, st->c->n_slots, r1, r2);
    else
      printf("rate %g: continuous / static output tok/s = %.2fx (same KV budget: static has %d "
             "slots); at equal batch size (%d) %.2fx\n",
             rate, r1, st->c->n_slots, st->c->n_slots, r2);
    *first = false;
  }
  if (cont && pc) {
    const double r = ratio(cont->sum.ttft.mean, pc->sum.ttft.mean);
    if (o->json)
      printf("%s{\"name\": \"prefix\", \"rate\": %g, \"mean_ttft_off_over_on\": %.4f}",
             *first ? "" : ", ", rate, r);
    else
      printf("rate %g: prefix cache off / on mean TTFT = %.2fx (%.1f ms / %.1f ms)\n", rate, r,
             cont->sum.ttft.mean * 1e3, pc->sum.ttft.mean * 1e3);
    *first = false;
  }
  /* The host tier against recomputing what the pool evicted (the prefix
   * cache alone), and against no cache. */
  if (ph && (pc || cont)) {
    const sb_record *base = pc ? pc : cont;
    const double r = ratio(base->sum.ttft.mean, ph->sum.ttft.mean);
    const double r50 = ratio(base->sum.ttft.p50, ph->sum.ttft.p50);
    if (o->json)
      printf("%s{\"name\": \"prefix-host\", \"rate\": %g, \"baseline\": \"%s\", "
             "\"mean_ttft_baseline_over_host\": %.4f, \"p50_ttft_baseline_over_host\": %.4f, "
             "\"hit_rate_baseline\": %.4f, \"hit_rate_host\": %.4f}",
             *first ? "" : ", ", rate, base->c->name, r, r50, hit_rate(base), hit_rate(ph));
    else
      printf("rate %g: %s / prefix-host mean TTFT = %.2fx (%.1f ms / %.1f ms), p50 %.2fx; "
             "prefix hit rate %.1f%% / %.1f%% (host tier: %llu blocks back, %llu misses, "
             "%llu evictions)\n",
             rate, base->c->name, r, base->sum.ttft.mean * 1e3, ph->sum.ttft.mean * 1e3, r50,
             100 * hit_rate(base), 100 * hit_rate(ph), (unsigned long long)ph->res.n_host_hits,
             (unsigned long long)ph->res.n_host_misses,
             (unsigned long long)ph->res.n_host_evictions);
    *first = false;
  }
  if (cont && ch) {
    if (o->json)
      printf("%s{\"name\": \"chunked\", \"rate\": %g, \"prefill_chunk\": %d, "
             "\"p99_tpot_ms_off\": %.4f, \"p99_tpot_ms_on\": %.4f, \"p99_itl_ms_off\": %.4f, "
             "\"p99_itl_ms_on\": %.4f}",
             *first ? "" : ", ", rate, ch->c->prefill_chunk, cont->sum.tpot.p99 * 1e3,
             ch->sum.tpot.p99 * 1e3, cont->sum.itl.p99 * 1e3, ch->sum.itl.p99 * 1e3);
    else
      printf("rate %g: p99 TPOT unchunked %.1f ms, prefill chunk %d %.1f ms; p99 inter-token "
             "latency %.1f ms / %.1f ms\n",
             rate, cont->sum.tpot.p99 * 1e3, ch->c->prefill_chunk, ch->sum.tpot.p99 * 1e3,
             cont->sum.itl.p99 * 1e3, ch->sum.itl.p99 * 1e3);
    *first = false;
  }
}

static void print_text_row(const sb_record *r) {
  const sb_summary *s = &r->sum;
  printf("%-20s %6g %7.2f %9.1f %9.1f %7.2f %8.1f %8.1f %8.1f %7.1f %7.1f %7.1f %8.1f %8.1f "
         "%8.1f %6.1f\n",
         r->c->name, r->rate, s->req_per_s, s->output_tps, s->total_tps, s->goodput_req_per_s,
         s->ttft.p50 * 1e3, s->ttft.p90 * 1e3, s->ttft.p99 * 1e3, s->tpot.p50 * 1e3,
         s->tpot.p90 * 1e3, s->tpot.p99 * 1e3, s->e2e.p50 * 1e3, s->e2e.p90 * 1e3, s->e2e.p99 * 1e3,
         100 * hit_rate(r));
}

int cmd_serve_bench(int argc, char **argv) {
  opts o = {.spec = {.n_requests = 64, .prompt_len = {32, 128}, .output_len = {16, 256}, .seed = 1},
            .rates = {4},
            .n_rates = 1,
            .kv_tokens = 4096,
            .max_batch_tokens = 512,
            .max_running = 64,
            .block_size = 16,
            .chunk_size = 64,
            .reserve_blocks = -1,
            .sinks = -1};
  int rc = parse_args(argc, argv, &o);
  if (rc != CLI_CONTINUE) return rc;
  if (o.out_dir && mkdir(o.out_dir, 0777) != 0 && errno != EEXIST)
    return cli_fail("serve-bench", "cannot create --out-dir %s", o.out_dir);

  /* Static slots reserve the longest request the workload allows, in whole
   * blocks, out of the same budget the engine pages. */
  const int64_t slot_tokens = (int64_t)o.spec.prompt_len.hi + o.spec.output_len.hi;
  const int64_t slot_blocks = (slot_tokens + o.block_size - 1) / o.block_size;
  const int64_t kv_blocks = ((int64_t)o.kv_tokens + o.block_size - 1) / o.block_size;
  int64_t n_slots = kv_blocks / slot_blocks;
  if (n_slots > o.max_batch_tokens) n_slots = o.max_batch_tokens;
  if (slot_tokens > o.kv_tokens && !o.window)
    return cli_fail("serve-bench",
                    "--kv-tokens %d cannot hold the longest request (%lld prompt + output "
                    "tokens)",
                    o.kv_tokens, (long long)slot_tokens);

  brisk_model_params mp;
  cli_model_params(&o.load, &mp);
  const int join_rc = cli_mpi_join("serve-bench", o.load.tp, o.load.pp);
  if (join_rc >= 0) return join_rc;
  brisk_model *m = NULL;
  if (cli_load_model(o.model, &mp, isatty(STDERR_FILENO), &m) != BRISK_OK)
    return cli_fail("serve-bench", "%s", brisk_last_error());
  /* Under mpirun, ranks 1.. follow rank 0's engines; rank 0 reports. */
  const int worker_rc = cli_mpi_follow("serve-bench", o.threads, m);
  if (worker_rc >= 0) {
    brisk_model_free(m);
    return worker_rc;
  }
  o.spec.n_vocab = brisk_model_n_vocab(m);
  const sb_common common = {.model = m,
                            .n_threads = o.threads,
                            .kv_tokens = o.kv_tokens,
                            .max_batch_tokens = o.max_batch_tokens,
                            .block_size = o.block_size,
                            .preempt = o.preempt,
                            .reserve_blocks = o.reserve_blocks,
                            .kv_type = (brisk_kv_type)o.kv_type,
                            .n_sinks = o.window ? o.sinks : 0,
                            .window = o.window};
  sb_config configs[MAX_CONFIGS];
  const int n_configs =
      make_configs(&o, (int32_t)n_slots, (int32_t)(slot_blocks * o.block_size), configs);
  char load_before[64], load_after[64];
  bench_load_avg(load_before, sizeof load_before);

  const int n_runs_max = n_configs * o.n_rates;
  sb_record *runs = brisk_calloc((size_t)n_runs_max, sizeof *runs);
  int n_runs = 0;
  bool ok = runs != NULL;
  const bool show_bar = isatty(STDERR_FILENO);
  cli_bar bar = {.label = "serve-bench"};
  for (int ri = 0; ok && ri < o.n_rates; ri++) {
    wl_spec spec = o.spec;
    spec.rate = o.rates[ri];
    wl_workload w;
    if (!(ok = wl_generate(&spec, &w))) break;
    for (int ci = 0; ok && ci < n_configs; ci++) {
      sb_record *r = &runs[n_runs];
      r->c = &configs[ci];
      r->rate = spec.rate;
      /* Progress: a bar on a terminal (also with --json: it is stderr), a
       * line per run otherwise. */
      if (show_bar) {
        char extra[128];
        snprintf(extra, sizeof extra, "run %d/%d: %.80s at %g req/s", n_runs + 1,
                 o.n_rates * n_configs, r->c->name, r->rate);
        cli_bar_draw(&bar, (double)n_runs / (o.n_rates * n_configs), extra);
      } else if (!o.json) {
        fprintf(stderr, "# %s at %g req/s ...\n", r->c->name, r->rate);
      }
      if (!(ok = sb_run(&common, r->c, &w, &r->res))) break;
      n_runs++;
      if (!(ok = sb_summarize_run(r->res.req, w.n, r->res.duration_s, &o.slo, &r->sum)))
        fprintf(stderr, "brisk serve-bench: out of memory\n");
      else
        sb_summarize_itl(r->res.itl, r->res.n_itl, &r->sum);
    }
    wl_free(&w);
  }
  cli_bar_clear(&bar);
  bench_load_avg(load_after, sizeof load_after);
  if (ok && o.out_dir) ok = sb_write_plots(o.out_dir, runs, n_runs, o.spec.n_requests);

  if (ok && o.json) {
    printf("{\"model\": ");
    cli_json_string(stdout, o.model);
    printf(", \"n_vocab\": %d, \"threads\": %d, \"load_avg_before\": \"%s\", "
           "\"load_avg_after\": \"%s\", \"kv_tokens\": %d, \"max_batch_tokens\": %d, "
           "\"block_size\": %d, \"preempt\": \"%s\", ",
           o.spec.n_vocab, o.threads, load_before, load_after, o.kv_tokens, o.max_batch_tokens,
           o.block_size, o.preempt == BRISK_PREEMPT_SWAP ? "swap" : "recompute");
    printf("\"workload\": {\"n_requests\": %d, \"prompt_len\": [%d, %d], \"output_len\": [%d, "
           "%d], \"prefix_frac\": %g, \"prefix_groups\": %d, \"seed\": %llu}, ",
           o.spec.n_requests, o.spec.prompt_len.lo, o.spec.prompt_len.hi, o.spec.output_len.lo,
           o.spec.output_len.hi, o.spec.prefix_frac,
           o.spec.prefix_groups > 1 ? o.spec.prefix_groups : 1, (unsigned long long)o.spec.seed);
    printf("\"slo\": {\"ttft_ms\": %g, \"tpot_ms\": %g}, \"rates\": [", o.slo.ttft_s * 1e3,
           o.slo.tpot_s * 1e3);
    for (int i = 0; i < o.n_rates; i++) printf("%s%g", i ? ", " : "", o.rates[i]);
    printf("], \"runs\": [");
    for (int i = 0; i < n_runs; i++) {
      if (i) printf(", ");
      json_run(&runs[i], o.spec.n_requests);
    }
    printf("], \"comparisons\": [");
    bool first = true;
    for (int i = 0; i < o.n_rates; i++) print_comparisons(&o, runs, n_runs, o.rates[i], &first);
    printf("]}\n");
  } else if (ok) {
    printf("model %s, %d requests, prompt %d..%d, output %d..%d tokens, prefix fraction %g "
           "(%d group%s), seed %llu\n",
           o.model, o.spec.n_requests, o.spec.prompt_len.lo, o.spec.prompt_len.hi,
           o.spec.output_len.lo, o.spec.output_len.hi, o.spec.prefix_frac,
           o.spec.prefix_groups > 1 ? o.spec.prefix_groups : 1, o.spec.prefix_groups > 1 ? "s" : "",
           (unsigned long long)o.spec.seed);
    printf("KV budget %d tokens, %d tokens per step; load average before %s, after %s\n",
           o.kv_tokens, o.max_batch_tokens, load_before, load_after);
    printf("%-20s %6s %7s %9s %9s %7s %8s %8s %8s %7s %7s %7s %8s %8s %8s %6s\n", "config", "rate",
           "req/s", "out tok/s", "tot tok/s", "goodput", "TTFT p50", "p90", "p99", "TPOT p50",
           "p90", "p99", "e2e p50", "p90", "p99", "hit%");
    for (int i = 0; i < n_runs; i++) print_text_row(&runs[i]);
    printf("(latencies in ms; goodput: requests/s within the SLO; hit%%: prompt tokens reused "
           "from the prefix cache)\n");
    bool first = true;
    for (int i = 0; i < o.n_rates; i++) print_comparisons(&o, runs, n_runs, o.rates[i], &first);
  }
  for (int i = 0; i < n_runs; i++) sb_result_free(&runs[i].res);
  brisk_free(runs);
  brisk_model_free(m);
  return ok ? 0 : 1;
}
