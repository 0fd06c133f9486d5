/* brisk bench: model speed (pp / tg, llama-bench style, with decode MBU),
 * kernel speed against the machine's measured limits, tokenizer speed.
 * docs/performance.md has the method and the results. */
#include "bench_cmd.h"
#include "bench_spec.h"
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int cmd_bench(int argc, char **argv);

static const char usage_text[] =
    "usage: brisk bench -m MODEL [-p 512] [-n 128] [-t THREADS] [-r 3] [--no-repack] [--json]\n"
    "       brisk bench --kernels [-t THREADS] [--quick] [--json]\n"
    "       brisk bench --tokenize VOCAB FILE [--paragraphs] [-r 3] [--json]\n"
    "       brisk bench --speculative [-m MODEL] [--draft MODEL] [--k 2,4,8,16] [--adaptive]\n"
    "                   [--ngram MIN,MAX] [--batch 1,4,16] [-n 128] [-t THREADS] [-r 3]\n"
    "                   [--json]\n";

static bool parse_int(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) return false;
  *out = (int)v;
  return true;
}

int cmd_bench(int argc, char **argv) {
  bench_model_opts o = {.p = 512, .n = 128, .reps = 3};
  bool kernels = false, quick = false, paragraphs = false, speculative = false, adaptive = false;
  int ngram_min = 0, ngram_max = 0;
  const char *tok_vocab = NULL, *tok_file = NULL, *draft = NULL, *ks = NULL, *batch = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const bool has_val = i + 1 < argc;
    int *num = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_text, stdout);
      return 0;
    }
    if (!strcmp(a, "--json"))
      o.json = true;
    else if (!strcmp(a, "--kernels"))
      kernels = true;
    else if (!strcmp(a, "--no-repack"))
      o.no_repack = true;
    else if (!strcmp(a, "--quick"))
      quick = true;
    else if (!strcmp(a, "--paragraphs"))
      paragraphs = true;
    else if (!strcmp(a, "--speculative"))
      speculative = true;
    else if (!strcmp(a, "--draft") && has_val)
      draft = argv[++i];
    else if (!strcmp(a, "--k") && has_val)
      ks = argv[++i];
    else if (!strcmp(a, "--batch") && has_val)
      batch = argv[++i];
    else if (!strcmp(a, "--adaptive"))
      adaptive = true;
    else if (!strcmp(a, "--ngram") && has_val) {
      char *end;
      ngram_min = (int)strtol(argv[++i], &end, 10);
      ngram_max = *end == ',' ? (int)strtol(end + 1, &end, 10) : ngram_min;
      if (*end || ngram_min < 1 || ngram_max < ngram_min || ngram_max > 16)
        return cli_fail("bench", "--ngram needs MIN,MAX with 1 <= MIN <= MAX <= 16");
    } else if (!strcmp(a, "-m") && has_val)
      o.model = argv[++i];
    else if (!strcmp(a, "--tokenize")) {
      if (i + 2 >= argc) return cli_fail("bench", "--tokenize needs VOCAB FILE");
      tok_vocab = argv[++i];
      tok_file = argv[++i];
    } else if (!strcmp(a, "-p"))
      num = &o.p;
    else if (!strcmp(a, "-n"))
      num = &o.n;
    else if (!strcmp(a, "-t"))
      num = &o.threads;
    else if (!strcmp(a, "-r"))
      num = &o.reps;
    else
      return cli_fail("bench", "unexpected argument '%s' (try 'brisk bench --help')", a);
    if (num && (!has_val || !parse_int(argv[i + 1], num)))
      return cli_fail("bench", "%s needs an integer", a);
    if (num) i++;
  }
  if (speculative) {
    if (kernels || tok_vocab)
      return cli_fail("bench", "--speculative does not combine with --kernels or --tokenize");
    bench_spec_opts so = {.model = o.model,
                          .draft = draft,
                          .ks = ks,
                          .batch = batch,
                          .threads = o.threads,
                          .reps = o.reps,
                          .adaptive = adaptive,
                          .ngram_min = ngram_min,
                          .ngram_max = ngram_max,
                          .json = o.json,
                          .n = o.n};
    return bench_spec_run(&so);
  }
  if (o.no_repack && !o.model) return cli_fail("bench", "--no-repack goes with -m MODEL");
  if (draft || ks || batch || adaptive || ngram_min)
    return cli_fail("bench", "--draft, --k, --batch, --adaptive and --ngram go with --speculative");
  const int modes = (o.model != NULL) + kernels + (tok_vocab != NULL);
  if (modes != 1)
    return cli_fail("bench", "give exactly one of -m MODEL, --kernels, --tokenize VOCAB FILE "
                             "(try 'brisk bench --help')");
  if (kernels) return bench_kernels_run(o.threads, quick, o.json);
  if (tok_vocab) return bench_tokenize_run(tok_vocab, tok_file, o.reps, paragraphs, o.json);
  return bench_model_run(&o);
}
