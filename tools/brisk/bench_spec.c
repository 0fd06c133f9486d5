/* brisk bench --speculative: what speculative decoding buys at batch 1.
 *
 * Two chat prompts (the model's own template): "copy" asks the model to
 * repeat a supplied passage (prompt lookup's best case: the answer is in the
 * prompt) and "free" asks for a short story (nothing to copy: the draft
 * model's case). For each prompt, each rep runs, one after the other so
 * that a noisy machine slows them alike: plain greedy decoding (one
 * brisk_decode per token), then speculative rounds for every drafter and
 * draft length k. Every run decodes the same n tokens after the prompt;
 * prompt processing (target and draft) is not timed. Speculative output
 * must equal the plain output token for token (greedy), which is checked.
 *
 * Reported per run kind: median decode tokens/s over the reps, speedup
 * (median over reps of the per-rep ratio to that rep's plain run),
 * acceptance rate (accepted / drafted tokens) and mean accepted length
 * (accepted draft tokens per round; each round also adds one token). */
#include "bench_spec.h"

#include "bench_util.h"
#include "brisk.h"
#include "cli.h"
#include "default_model.h"

#include "core/cpu.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REPS 100
#define MAX_KS 16
#define MAX_RUNS (1 + 2 * MAX_KS)

/* Our own passage for the copy task. */
static const char passage[] =
    "The lighthouse on the northern cape was built in 1872 from granite quarried two miles "
    "inland. Its lamp burned whale oil at first, then kerosene, and finally electricity, "
    "which arrived by cable in 1931. Three keepers lived there in turns, each staying four "
    "weeks at a time. They cleaned the lens every morning, wound the clockwork that turned "
    "it every four hours, and wrote the weather into a logbook that now fills eleven "
    "shelves of the town library. The last keeper left in 1989, when the light was made "
    "automatic, but the logbooks still record every storm, every passing ship and every "
    "night the fog was too thick to see the beam.";

typedef struct workload {
  const char *name;
  int32_t *tokens; /* [n_prompt + n + 1] the prompt, then generated tokens */
  size_t n_prompt;
  int32_t *plain; /* [n] the plain greedy output, the reference */
} workload;

typedef struct run_kind {
  const char *drafter; /* "plain", "lookup", "draft" */
  int k;
  double tps[MAX_REPS], speedup[MAX_REPS];
  uint64_t drafted, accepted, rounds, produced;
  int mismatches;
} run_kind;

typedef struct bench {
  const bench_spec_opts *o;
  brisk_model *target, *draft;
  brisk_context *ctx;
  brisk_batch *batch;
  int n_ks, ks[MAX_KS];
  double one_token_s;
} bench;

static int progress_none(float f, void *u) {
  (void)f;
  (void)u;
  return 1;
}

static int parse_ks(const char *s, int *ks, int *n) {
  *n = 0;
  while (*s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > 64 || *n == MAX_KS) return -1;
    ks[(*n)++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return *n > 0 ? 0 : -1;
}

/* The user message in the model's chat template; a model without a
 * recognized template (a tiny test model) gets the message as it is. */
static brisk_status make_prompt(const brisk_model *m, const char *user, int n, workload *w) {
  brisk_chat_message msg = {"user", user};
  size_t len = 0;
  brisk_status st = brisk_chat_apply(m, NULL, &msg, 1, 1, NULL, 0, &len);
  bool raw = st == BRISK_E_UNSUPPORTED;
  if (raw) len = strlen(user), st = BRISK_OK;
  if (st && st != BRISK_E_BUFFER_TOO_SMALL) return st;
  char *text = malloc(len + 1);
  if (!text) return BRISK_E_OUT_OF_MEMORY;
  if (raw)
    memcpy(text, user, len + 1), st = BRISK_OK;
  else
    st = brisk_chat_apply(m, NULL, &msg, 1, 1, text, len + 1, &len);
  const uint32_t flags = BRISK_TOKENIZE_ADD_SPECIAL | BRISK_TOKENIZE_PARSE_SPECIAL;
  size_t nt = 0;
  if (!st) {
    brisk_tokenize(m, text, len, NULL, 0, flags, &nt);
    w->tokens = malloc((nt + (size_t)n + 1) * sizeof *w->tokens);
    w->plain = malloc((size_t)n * sizeof *w->plain);
    if (!w->tokens || !w->plain) st = BRISK_E_OUT_OF_MEMORY;
  }
  if (!st) st = brisk_tokenize(m, text, len, w->tokens, nt, flags, &nt);
  w->n_prompt = nt;
  free(text);
  return st;
}

/* Decodes the prompt but its last token (which each run starts from). */
static brisk_status prefill(bench *b, const workload *w) {
  brisk_status st = brisk_seq_free(b->ctx, 0);
  size_t todo = w->n_prompt - 1;
  for (size_t i = 0; !st && i < todo;) {
    brisk_batch_clear(b->batch);
    size_t end = i + 256 < todo ? i + 256 : todo;
    for (; i < end; i++) brisk_batch_add(b->batch, w->tokens[i], (int32_t)i, 0, 0);
    st = brisk_decode(b->ctx, b->batch);
  }
  return st;
}

/* Plain greedy decoding of n tokens from the pending prompt token. */
static brisk_status run_plain(bench *b, workload *w, double *secs) {
  brisk_status st = prefill(b, w);
  const int32_t nv = brisk_model_n_vocab(b->target);
  size_t pos = w->n_prompt - 1;
  int32_t tok = w->tokens[pos];
  double t0 = bench_now_s();
  for (int i = 0; i < b->o->n && !st; i++) {
    brisk_batch_clear(b->batch);
    brisk_batch_add(b->batch, tok, (int32_t)pos++, 0, 1);
    if ((st = brisk_decode(b->ctx, b->batch))) break;
    const float *l = brisk_get_logits(b->ctx, 0);
    int32_t best = 0;
    for (int32_t t = 1; t < nv; t++)
      if (l[t] > l[best]) best = t;
    w->plain[i] = tok = best;
  }
  *secs = bench_now_s() - t0;
  return st;
}

static brisk_status run_spec(bench *b, workload *w, run_kind *r, double *secs) {
  brisk_spec_params xp;
  brisk_spec_params_init(&xp);
  xp.n_draft = r->k;
  xp.adaptive = b->o->adaptive;
  if (b->o->ngram_min > 0) xp.ngram_min = b->o->ngram_min;
  if (b->o->ngram_max > 0) xp.ngram_max = b->o->ngram_max;
  if (!strcmp(r->drafter, "draft")) {
    xp.drafter = BRISK_SPEC_DRAFT_MODEL;
    xp.draft_model = b->draft;
  }
  brisk_sampler_params sp;
  brisk_sampler_params_init(&sp);
  sp.temperature = 0;
  brisk_spec *spec = NULL;
  brisk_sampler *s = NULL;
  brisk_status st = brisk_spec_create(b->ctx, &xp, &spec);
  if (!st) st = brisk_sampler_create(b->target, &sp, &s);
  if (!st) st = prefill(b, w);
  if (!st) st = brisk_spec_prefill(spec, 0, w->tokens, w->n_prompt - 1);
  size_t n = w->n_prompt, end = w->n_prompt + (size_t)b->o->n;
  double t0 = bench_now_s();
  while (!st && n < end) {
    size_t got = 0;
    st = brisk_spec_round(spec, 0, s, w->tokens, n, w->tokens + n, end - n, &got);
    n += got;
  }
  *secs = bench_now_s() - t0;
  brisk_spec_stats stats = {.struct_size = sizeof stats};
  if (!st && !(st = brisk_spec_get_stats(spec, &stats))) {
    r->drafted += stats.n_drafted;
    r->accepted += stats.n_accepted;
    r->rounds += stats.n_rounds;
    r->produced += stats.n_produced;
    /* The greedy output must be the plain output. */
    if (memcmp(w->tokens + w->n_prompt, w->plain, (size_t)b->o->n * sizeof *w->plain) != 0)
      r->mismatches++;
  }
  brisk_sampler_free(s);
  brisk_spec_free(spec);
  return st;
}

/* Seconds of one target decode of `len` tokens (logits for all, as a
 * round asks) after the prompt: the price of verifying k = len - 1. */
static brisk_status chunk_secs(bench *b, const workload *w, int len, double *secs) {
  brisk_status st = BRISK_OK;
  size_t at = w->n_prompt - 1;
  brisk_batch_clear(b->batch);
  for (int i = 0; i < len; i++)
    brisk_batch_add(b->batch, w->tokens[(at + (size_t)i) % w->n_prompt], (int32_t)(at + (size_t)i),
                    0, 1);
  double t0 = bench_now_s();
  st = brisk_decode(b->ctx, b->batch);
  *secs = bench_now_s() - t0;
  if (!st) st = brisk_seq_truncate(b->ctx, 0, (int32_t)at);
  return st;
}

/* The median of n samples, leaving v in order (the JSON prints them). */
static double median(const double *v, int n) {
  double s[2 * MAX_REPS + 1];
  memcpy(s, v, (size_t)n * sizeof *s);
  return bench_summarize(s, n).median;
}

static int run_workload(bench *b, workload *w, bool first) {
  const bench_spec_opts *o = b->o;
  static run_kind kinds[MAX_RUNS];
  int n_kinds = 0;
  memset(kinds, 0, sizeof kinds);
  kinds[n_kinds++] = (run_kind){.drafter = "plain"};
  for (int i = 0; i < b->n_ks; i++)
    kinds[n_kinds++] = (run_kind){.drafter = "lookup", .k = b->ks[i]};
  if (b->draft)
    for (int i = 0; i < b->n_ks; i++)
      kinds[n_kinds++] = (run_kind){.drafter = "draft", .k = b->ks[i]};
  /* A warm-up of each kind (untimed), then the reps. */
  for (int rep = -1; rep < o->reps; rep++) {
    for (int j = 0; j < n_kinds; j++) {
      run_kind *r = &kinds[j];
      double secs = 0;
      run_kind scratch = *r;
      brisk_status st =
          j == 0 ? run_plain(b, w, &secs) : run_spec(b, w, rep < 0 ? &scratch : r, &secs);
      if (st)
        return cli_fail("bench", "%s %s k=%d: %s", w->name, r->drafter, r->k, brisk_last_error());
      if (rep < 0) continue;
      r->tps[rep] = o->n / secs;
      r->speedup[rep] = r->tps[rep] / kinds[0].tps[rep];
      if (!o->json)
        fprintf(stderr, "#   %s %s k=%d rep %d: %.2f tok/s\n", w->name, r->drafter, r->k, rep,
                r->tps[rep]);
    }
  }
  for (int j = 0; j < n_kinds; j++) {
    run_kind *r = &kinds[j];
    double tps = median(r->tps, o->reps), speedup = median(r->speedup, o->reps);
    double rate = r->drafted ? (double)r->accepted / (double)r->drafted : 0;
    double mean_len = r->rounds ? (double)r->accepted / (double)r->rounds : 0;
    if (o->json) {
      printf("%s{\"workload\": \"%s\", \"drafter\": \"%s\", \"k\": %d, \"median_tps\": %.3f, "
             "\"speedup\": %.3f, \"acceptance\": %.4f, \"mean_accepted\": %.3f, "
             "\"tokens_per_round\": %.3f, \"identical\": %s, ",
             first && j == 0 ? "" : ", ", w->name, r->drafter, r->k, tps, speedup, rate, mean_len,
             r->rounds ? (double)r->produced / (double)r->rounds : 1.0,
             r->mismatches ? "false" : "true");
      bench_json_array(stdout, "tps", r->tps, o->reps);
      printf("}");
    } else if (j == 0) {
      printf("%-6s %-7s %3s %10.2f %8s %10s %9s %s\n", w->name, r->drafter, "-", tps, "1.00x", "-",
             "-", "-");
    } else {
      printf("%-6s %-7s %3d %10.2f %7.2fx %9.1f%% %9.2f %s\n", w->name, r->drafter, r->k, tps,
             speedup, 100 * rate, mean_len, r->mismatches ? "NO" : "yes");
    }
  }
  return 0;
}

int bench_spec_run(const bench_spec_opts *o) {
  if (o->n < 1 || o->reps < 1 || o->reps > MAX_REPS || o->threads < 0)
    return cli_fail("bench", "need -n >= 1, 1 <= -r <= %d, -t >= 0", MAX_REPS);
  bench b = {.o = o};
  if (parse_ks(o->ks ? o->ks : "2,4,8,16", b.ks, &b.n_ks))
    return cli_fail("bench", "--k needs a comma-separated list of up to %d lengths in [1, 64]",
                    MAX_KS);
  int batches[MAX_KS], n_batches = 0;
  if (o->batch && parse_ks(o->batch, batches, &n_batches))
    return cli_fail("bench", "--batch needs a comma-separated list of up to %d sizes in [1, 64]",
                    MAX_KS);
  char default_path[4096];
  const char *path = o->model;
  if (!path) {
    if (default_model_path(default_path, sizeof default_path) != 0)
      return cli_fail("bench", "no model given and the default model is not available");
    path = default_path;
  }
  const int threads = o->threads ? o->threads : brisk_cpu_count();
  char load_before[64], load_after[64];
  bench_load_avg(load_before, sizeof load_before);
  brisk_model_params mp;
  brisk_model_params_init(&mp);
  mp.progress = progress_none;
  int rc = 1;
  workload w[2] = {{.name = "copy"}, {.name = "free"}};
  if (brisk_model_load(path, &mp, &b.target) ||
      (o->draft && brisk_model_load(o->draft, &mp, &b.draft))) {
    cli_fail("bench", "%s", brisk_last_error());
    goto done;
  }
  char copy_msg[2048];
  snprintf(copy_msg, sizeof copy_msg,
           "Repeat the following text exactly, word for word, and write nothing else.\n\n%s",
           passage);
  if (make_prompt(b.target, copy_msg, o->n, &w[0]) ||
      make_prompt(b.target,
                  "Write a short story about a lighthouse keeper who finds a message in a bottle.",
                  o->n, &w[1])) {
    cli_fail("bench", "prompt: %s", brisk_last_error());
    goto done;
  }
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  cp.n_threads = threads;
  cp.n_seq_max = 1;
  cp.max_batch_tokens = 256;
  size_t longest = w[0].n_prompt > w[1].n_prompt ? w[0].n_prompt : w[1].n_prompt;
  cp.kv_tokens = (int32_t)longest + o->n + 80;
  if (brisk_context_create(b.target, &cp, &b.ctx) || brisk_batch_create(256, &b.batch)) {
    cli_fail("bench", "%s", brisk_last_error());
    goto done;
  }
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const char *dname = !o->draft                ? ""
                      : strrchr(o->draft, '/') ? strrchr(o->draft, '/') + 1
                                               : o->draft;
  if (o->json) {
    printf("{\"model\": ");
    cli_json_string(stdout, name);
    printf(", \"draft_model\": ");
    cli_json_string(stdout, dname);
    printf(", \"threads\": %d, \"reps\": %d, \"n\": %d, \"adaptive\": %s, \"ngram_min\": %d, "
           "\"ngram_max\": %d, \"prompt_tokens\": [%zu, %zu], \"runs\": [",
           threads, o->reps, o->n, o->adaptive ? "true" : "false", o->ngram_min, o->ngram_max,
           w[0].n_prompt, w[1].n_prompt);
  } else {
    printf("target %s, draft %s, %d threads, %d reps, %d tokens after prompts of %zu (copy) "
           "and %zu (free) tokens%s\n",
           name, o->draft ? dname : "(none: prompt lookup only)", threads, o->reps, o->n,
           w[0].n_prompt, w[1].n_prompt, o->adaptive ? ", adaptive k" : "");
    printf("%-6s %-7s %3s %10s %8s %10s %9s %s\n", "prompt", "drafter", "k", "tok/s", "speedup",
           "accepted", "mean len", "same");
  }
  if (run_workload(&b, &w[0], true) || run_workload(&b, &w[1], false)) goto done;
  if (o->json) printf("]");
  if (n_batches > 0 && bench_spec_batch_run(o, b.target, threads, w[0].tokens, w[0].n_prompt, b.ks,
                                            b.n_ks, batches, n_batches))
    goto done;
  /* Verification cost: a (k + 1)-token decode against a 1-token one, each
   * the median of 2 * reps + 1 tries. */
  if (prefill(&b, &w[0])) goto fail_msg;
  if (o->json) printf(", \"chunk_cost\": [");
  for (int i = -1; i < b.n_ks; i++) {
    int len = i < 0 ? 1 : b.ks[i] + 1, tries = 2 * o->reps + 1;
    double t[2 * MAX_REPS + 1];
    for (int j = 0; j < tries; j++)
      if (chunk_secs(&b, &w[0], len, &t[j])) goto fail_msg;
    double med = median(t, tries);
    if (i < 0) {
      b.one_token_s = med;
      continue;
    }
    if (o->json)
      printf("%s{\"k\": %d, \"ratio\": %.3f}", i ? ", " : "", b.ks[i], med / b.one_token_s);
    else
      printf("verify k=%-2d: a %d-token decode costs %.2fx a 1-token decode (%.2f ms)\n", b.ks[i],
             len, med / b.one_token_s, 1e3 * med);
  }
  bench_load_avg(load_after, sizeof load_after);
  if (o->json)
    printf("], \"load_avg_before\": \"%s\", \"load_avg_after\": \"%s\"}\n", load_before,
           load_after);
  else
    printf("load average before %s, after %s\n", load_before, load_after);
  rc = 0;
  goto done;
fail_msg:
  cli_fail("bench", "%s", brisk_last_error());
done:
  for (int i = 0; i < 2; i++) {
    free(w[i].tokens);
    free(w[i].plain);
  }
  brisk_batch_free(b.batch);
  brisk_context_free(b.ctx);
  brisk_model_free(b.draft);
  brisk_model_free(b.target);
  return rc;
}
