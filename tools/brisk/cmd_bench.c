/* brisk bench: model speed (pp / tg, llama-bench style, with decode MBU),
 * kernel speed against the machine's measured limits, tokenizer speed.
 * docs/performance.md has the method and the results. */
#include "bench_cmd.h"
#include "bench_spec.h"
#include "cli.h"
#include "cli_opt.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int cmd_bench(int argc, char **argv);

static const char *parse_ngram(const char *v, void *dst) {
  int *mm = dst; /* [min, max] */
  char *end;
  errno = 0;
  long lo = strtol(v, &end, 10), hi = lo;
  if (!errno && *end == ',') hi = strtol(end + 1, &end, 10);
  if (errno || end == v || *end || lo < 1 || hi < lo || hi > 16)
    return "MIN,MAX with 1 <= MIN <= MAX <= 16";
  mm[0] = (int)lo;
  mm[1] = (int)hi;
  return NULL;
}

int cmd_bench(int argc, char **argv) {
  bench_model_opts o = {.p = 512, .n = 128, .reps = 3};
  bool kernels = false, quick = false, paragraphs = false, speculative = false, adaptive = false;
  int ngram[2] = {0, 0}, n_pos = 0;
  const char *tok_vocab = NULL, *tok_file = NULL, *draft = NULL, *ks = NULL, *batch = NULL;
  cli_model_args ma = {0};
  const cli_opt model_opts[] = {
      {CLI_INT_OPT('p', "n-prompt", &o.p, "N",
                   "prompt tokens of the pp test (default 512; 0: none)", 0, 1 << 20)},
      {CLI_INT_OPT('n', "n-gen", &o.n, "N", "generated tokens of the tg test (default 128)", 0,
                   1 << 20)},
      {CLI_INT_OPT('r', "reps", &o.reps, "N", "repetitions after a warm-up (default 3)", 1, 1000)},
      {CLI_INT_OPT('d', "depth", &o.depth, "N",
                   "tokens in the KV cache before the tg test's decodes\n(default 0)", 0, 1 << 20)},
      {CLI_KV_TYPE_OPT(&o.kv_type, CLI_KV_TYPE_HELP " (default f16)")},
  };
  const cli_opt mode_opts[] = {
      {CLI_FLAG_OPT(0, "kernels", &kernels,
                    "kernel speed: GEMV GB/s, GEMM GFLOP/s, dispatch cost")},
      {CLI_FLAG_OPT(0, "quick", &quick, "--kernels on small shapes (for tests)")},
      {CLI_STR_OPT(0, "tokenize", &tok_vocab, "VOCAB",
                   "tokenizer MB/s of VOCAB on the operand FILE")},
      {CLI_FLAG_OPT(0, "paragraphs", &paragraphs, "--tokenize one call per paragraph")},
      {CLI_FLAG_OPT(0, "speculative", &speculative,
                    "batch-1 decode with and without speculative decoding")},
  };
  const cli_opt spec_opts[] = {
      {CLI_STR_OPT(0, "draft", &draft, "MODEL", "a draft model (default: prompt lookup only)")},
      {CLI_STR_OPT(0, "k", &ks, "K,K,...", "draft lengths to try (default 2,4,8,16)")},
      {CLI_FLAG_OPT(0, "adaptive", &adaptive, "adapt the draft length per round (k the largest)")},
      {CLI_CUSTOM_OPT(0, "ngram", ngram, "MIN,MAX", "the n-gram sizes prompt lookup tries",
                      parse_ngram)},
      {CLI_STR_OPT(0, "batch", &batch, "B,B,...", "engine batch sizes to compare as well")},
  };
  const cli_opt out_opts[] = {{CLI_FLAG_OPT(0, "json", &o.json, "one JSON object on stdout")}};
  const cli_group groups[] = {
      cli_model_group(&ma, "the model to measure (--speculative: default SmolLM2)"),
      {"model test", model_opts, sizeof model_opts / sizeof model_opts[0]},
      {"other tests", mode_opts, sizeof mode_opts / sizeof mode_opts[0]},
      {"speculative", spec_opts, sizeof spec_opts / sizeof spec_opts[0]},
      {"output", out_opts, 1},
  };
  const cli_spec spec = {
      .cmd = "bench",
      .usage =
          "-m MODEL [-p 512] [-n 128] [-d 0] [--kv-type f16] [-t THREADS] [-r 3] [--no-repack]\n"
          "    [--json]\n"
          "--kernels [-t THREADS] [--quick] [--json]\n"
          "--tokenize VOCAB FILE [--paragraphs] [-r 3] [--json]\n"
          "--speculative [-m MODEL] [--draft MODEL] [--k 2,4,8,16] [--adaptive]\n"
          "    [--ngram MIN,MAX] [--batch 1,4,16] [-n 128] [-t THREADS] [-r 3] [--json]",
      .summary = "Measures speed against the machine's own limits, measured in the same run:\n"
                 "a model's pp / tg tokens/s and decode MBU, the kernels, the tokenizer, or\n"
                 "speculative decoding. docs/performance.md has the method and the results.",
      .groups = groups,
      .n_groups = sizeof groups / sizeof groups[0],
      .max_pos = 1,
      .pos = &tok_file,
      .n_pos = &n_pos,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  o.model = ma.path;
  o.threads = ma.threads;
  o.no_repack = ma.no_repack;
  o.no_mmap = ma.no_mmap;
  o.tp = ma.tp;
  o.pp = ma.pp;
  brisk_set_memory_limit(ma.memory_limit); /* for every part of the bench */
  if (tok_vocab && !tok_file) return cli_usage_error("bench", "--tokenize needs VOCAB FILE");
  if (tok_file && !tok_vocab)
    return cli_usage_error("bench", "unexpected argument '%s' (try 'brisk bench --help')",
                           tok_file);
  const int ngram_min = ngram[0], ngram_max = ngram[1];
  if (speculative) {
    if (kernels || tok_vocab)
      return cli_usage_error("bench",
                             "--speculative does not combine with --kernels or --tokenize");
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
  if ((o.no_repack || o.no_mmap) && !o.model)
    return cli_usage_error("bench", "--no-repack and --no-mmap go with -m MODEL");
  if (draft || ks || batch || adaptive || ngram_min)
    return cli_usage_error("bench",
                           "--draft, --k, --batch, --adaptive and --ngram go with --speculative");
  const int modes = (o.model != NULL) + kernels + (tok_vocab != NULL);
  if (modes != 1)
    return cli_usage_error("bench", "give exactly one of -m MODEL, --kernels, --tokenize VOCAB "
                                    "FILE (try 'brisk bench --help')");
  if (kernels) return bench_kernels_run(o.threads, quick, o.json);
  if (tok_vocab) return bench_tokenize_run(tok_vocab, tok_file, o.reps, paragraphs, o.json);
  return bench_model_run(&o);
}
