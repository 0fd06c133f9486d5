/* brisk embed -m MODEL [--pooling P] [--normalize | --no-normalize] TEXT...:
 * one embedding vector per text (brisk_embed), a line of numbers each, or
 * one JSON object with --json. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include <stdio.h>
#include <stdlib.h>

int cmd_embed(int argc, char **argv);

#define EMBED_MAX_TEXTS 4096

static const char *const pooling_names[] = {"default", "mean", "cls", "last", NULL};

int cmd_embed(int argc, char **argv) {
  cli_model_args ma = {0};
  const char *texts[EMBED_MAX_TEXTS];
  int pooling = 0, n_texts = 0, max_tokens = 0, n_threads = 0;
  bool normalize = false, no_normalize = false, json = false;
  const cli_opt embed_opts[] = {
      {CLI_OPT_(0, "pooling", CLI_CHOICE, &pooling, "P",
                "default (the folder's 1_Pooling, else mean for encoders,\n"
                "last for decoders), mean, cls or last"),
       .choices = pooling_names},
      {CLI_FLAG_OPT(0, "normalize", &normalize, "divide each vector by its L2 norm")},
      {CLI_FLAG_OPT(0, "no-normalize", &no_normalize,
                    "never normalise (default: as the folder's modules.json says)")},
      {CLI_INT_OPT(0, "max-tokens", &max_tokens, "N",
                   "cut texts to N tokens (default: the folder's max_seq_length,\n"
                   "else the model's context)",
                   2, 1 << 20)},
      {CLI_INT_OPT('t', "threads", &n_threads, "N", "worker threads (default: one per core)", 0,
                   1024)},
  };
  const cli_opt out_opts[] = {
      {CLI_FLAG_OPT(0, "json", &json, "one JSON object: {\"model\", \"dim\", \"data\": [[...]]}")}};
  const cli_group groups[] = {
      cli_model_group(&ma, "the model: a Hugging Face folder or a GGUF file"),
      {"embedding", embed_opts, 5},
      {"output", out_opts, 1},
  };
  const cli_spec spec = {
      .cmd = "embed",
      .usage = "-m MODEL [--pooling P] [--normalize] [--json] TEXT...",
      .summary = "Embedding vectors of the TEXTs: encoder models (BERT family, e.g.\n"
                 "all-MiniLM-L6-v2) or decoder models pooled over their last hidden states. One\n"
                 "line of space-separated numbers per text, in order.",
      .groups = groups,
      .n_groups = 3,
      .min_pos = 1,
      .max_pos = EMBED_MAX_TEXTS,
      .pos = texts,
      .n_pos = &n_texts,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  if (!ma.path) return cli_usage_error("embed", "give a model (-m MODEL)");
  if (normalize && no_normalize)
    return cli_usage_error("embed", "--normalize and --no-normalize exclude each other");
  brisk_model_params mp;
  cli_model_params(&ma, &mp);
  brisk_model *m = NULL;
  if (brisk_model_load(ma.path, &mp, &m)) {
    cli_fail("embed", "%s", brisk_last_error());
    return 1;
  }
  int rc = 1;
  size_t d = (size_t)brisk_model_n_embd(m);
  float *out = malloc((size_t)n_texts * d * sizeof *out);
  brisk_embed_params p;
  brisk_embed_params_init(&p);
  p.pooling = pooling;
  p.normalize = normalize ? 1 : no_normalize ? 0 : -1;
  p.max_tokens = max_tokens;
  p.n_threads = n_threads;
  if (!out) {
    cli_fail("embed", "out of memory");
  } else if (brisk_embed(m, &p, texts, n_texts, out, (size_t)n_texts * d)) {
    cli_fail("embed", "%s", brisk_last_error());
  } else {
    if (json) printf("{\"dim\": %zu, \"data\": [", d);
    for (int t = 0; t < n_texts; t++) {
      if (json) printf("%s[", t ? ", " : "");
      for (size_t i = 0; i < d; i++)
        printf("%s%.9g", i ? (json ? ", " : " ") : "", (double)out[(size_t)t * d + i]);
      printf(json ? "]" : "\n");
    }
    if (json) printf("]}\n");
    rc = fflush(stdout) ? 1 : 0;
  }
  free(out);
  brisk_model_free(m);
  return rc;
}
