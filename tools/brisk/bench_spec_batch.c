/* brisk bench --speculative --batch: where prompt-lookup speculation stops
 * paying as the batch grows.
 *
 * B identical copy requests go through the engine at once (greedy, exactly
 * n tokens each), with and without speculation (spec_n_draft = k). Each run
 * gets a fresh engine; the decode phase is timed, from the step after which
 * every request has its first token to the last token, so prefill is not
 * counted. At batch 1 a chunk of k + 1 tokens costs little more than one
 * token while decode is bound by reading the weights; as the batch grows a
 * step becomes bound by arithmetic and every drafted token costs about as
 * much as a real one, so the speedup falls towards the acceptance-weighted
 * break-even. Outputs with and without speculation must be identical. */
#include "bench_spec.h"

#include "bench_util.h"
#include "brisk.h"
#include "cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct batch_result {
  double tps; /* decode-phase output tokens/s, all requests together */
  uint64_t drafted, accepted;
} batch_result;

/* One engine run; out receives each request's tokens ([B][n]). */
static brisk_status run_engine(const bench_spec_opts *o, const brisk_model *m, int threads,
                               const int32_t *prompt, size_t n_prompt, int B, int k, int32_t *out,
                               batch_result *res) {
  brisk_engine_params ep;
  brisk_engine_params_init(&ep);
  ep.n_threads = threads;
  ep.max_running = B;
  ep.kv_tokens = B * ((int32_t)n_prompt + o->n + 96);
  ep.max_batch_tokens = 512 > B * 17 ? 512 : B * 17;
  brisk_engine *e = NULL;
  brisk_status st = brisk_engine_create(m, &ep, &e);
  if (st) return st;
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  int32_t *got = calloc((size_t)B, sizeof *got); /* [B] tokens received */
  if (!got) st = BRISK_E_OUT_OF_MEMORY;
  for (int i = 0; i < B && !st; i++) {
    brisk_request_params rp;
    brisk_request_params_init(&rp);
    rp.prompt_tokens = prompt;
    rp.n_prompt_tokens = n_prompt;
    rp.sampler = &sp;
    rp.max_tokens = o->n;
    rp.stop_at_eog = 0;
    rp.user_data = (void *)(intptr_t)i;
    rp.spec_n_draft = k;
    rp.spec_adaptive = o->adaptive;
    if (o->ngram_min > 0) rp.spec_ngram_min = o->ngram_min;
    if (o->ngram_max > 0) rp.spec_ngram_max = o->ngram_max;
    uint64_t id;
    st = brisk_engine_submit(e, &rp, &id);
  }
  int n_started = 0, n_done = 0;
  uint64_t total = 0, at_start = 0;
  double t_start = 0;
  while (!st && n_done < B) {
    if ((st = brisk_engine_step(e, NULL))) break;
    brisk_engine_event ev[64];
    size_t n_ev = 0;
    do {
      if ((st = brisk_engine_poll(e, ev, 64, &n_ev))) break;
      for (size_t j = 0; j < n_ev; j++) {
        int i = (int)(intptr_t)ev[j].user_data;
        if (ev[j].token >= 0 && got[i] < o->n) {
          if (got[i] == 0) n_started++;
          out[(size_t)i * (size_t)o->n + (size_t)got[i]++] = ev[j].token;
          total++;
        }
        if (ev[j].finished) n_done++;
      }
    } while (n_ev == 64);
    if (n_started == B && t_start == 0) {
      t_start = bench_now_s();
      at_start = total;
    }
  }
  double secs = bench_now_s() - t_start;
  brisk_engine_counters c = {.struct_size = sizeof c};
  if (!st) st = brisk_engine_stats(e, &c);
  res->tps = secs > 0 && total > at_start ? (double)(total - at_start) / secs : 0;
  res->drafted = c.n_spec_drafted;
  res->accepted = c.n_spec_accepted;
  free(got);
  brisk_engine_free(e);
  return st;
}

int bench_spec_batch_run(const bench_spec_opts *o, const brisk_model *m, int threads,
                         const int32_t *prompt, size_t n_prompt, const int *ks, int n_ks,
                         const int *batches, int n_batches) {
  if (!o->json) printf("batch  k  plain tok/s  spec tok/s  speedup  accepted same\n");
  int rc = 1, first = 1;
  size_t most = 0;
  for (int b = 0; b < n_batches; b++)
    if ((size_t)batches[b] > most) most = (size_t)batches[b];
  int32_t *plain = malloc(most * (size_t)o->n * sizeof *plain); /* [B][n] */
  int32_t *spec = malloc(most * (size_t)o->n * sizeof *spec);   /* [B][n] */
  double *tp = malloc((size_t)o->reps * sizeof *tp), *ts = malloc((size_t)o->reps * sizeof *ts);
  double *ratio = malloc((size_t)o->reps * sizeof *ratio);
  if (!plain || !spec || !tp || !ts || !ratio) {
    cli_fail("bench", "out of memory");
    goto done;
  }
  if (o->json) printf(", \"batch\": [");
  for (int b = 0; b < n_batches; b++) {
    const int B = batches[b];
    for (int kk = 0; kk < n_ks; kk++) {
      batch_result rp = {0}, rs = {0};
      uint64_t drafted = 0, accepted = 0;
      int same = 1;
      /* Plain and speculative alternate, so a noisy machine slows both. */
      for (int rep = 0; rep < o->reps; rep++) {
        if (run_engine(o, m, threads, prompt, n_prompt, B, 0, plain, &rp) ||
            run_engine(o, m, threads, prompt, n_prompt, B, ks[kk], spec, &rs)) {
          cli_fail("bench", "batch %d k=%d: %s", B, ks[kk], brisk_last_error());
          goto done;
        }
        tp[rep] = rp.tps;
        ts[rep] = rs.tps;
        ratio[rep] = rp.tps > 0 ? rs.tps / rp.tps : 0;
        drafted += rs.drafted;
        accepted += rs.accepted;
        same &= !memcmp(plain, spec, (size_t)B * (size_t)o->n * sizeof *plain);
        if (!o->json)
          fprintf(stderr, "#   batch %d k=%d rep %d: plain %.2f, spec %.2f tok/s\n", B, ks[kk], rep,
                  rp.tps, rs.tps);
      }
      const double mp = bench_summarize(tp, o->reps).median;
      const double ms = bench_summarize(ts, o->reps).median;
      const double mr = bench_summarize(ratio, o->reps).median;
      const double acc = drafted ? (double)accepted / (double)drafted : 0;
      if (o->json) {
        printf("%s{\"batch\": %d, \"k\": %d, \"plain_tps\": %.3f, \"spec_tps\": %.3f, "
               "\"speedup\": %.3f, \"acceptance\": %.4f, \"identical\": %s}",
               first ? "" : ", ", B, ks[kk], mp, ms, mr, acc, same ? "true" : "false");
        first = 0;
      } else {
        printf("%5d %2d %12.2f %11.2f %7.2fx %8.1f%% %s\n", B, ks[kk], mp, ms, mr, 100 * acc,
               same ? "yes" : "NO");
      }
    }
  }
  if (o->json) printf("]");
  rc = 0;
done:
  free(plain);
  free(spec);
  free(tp);
  free(ts);
  free(ratio);
  return rc;
}
