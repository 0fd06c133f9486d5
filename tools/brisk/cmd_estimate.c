/* brisk estimate: the bytes a model and one context will hold, before
 * loading them (brisk_estimate_memory). */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

int cmd_estimate(int argc, char **argv);

static void row(const char *name, uint64_t bytes, const char *note) {
  printf("%-12s %14" PRIu64 " bytes %10.1f MiB%s%s\n", name, bytes, (double)bytes / (1 << 20),
         note ? "  " : "", note ? note : "");
}

int cmd_estimate(int argc, char **argv) {
  cli_model_args ma = {0};
  const char *pos = NULL;
  int n_pos = 0;
  brisk_context_params cp;
  brisk_context_params_init(&cp);
  int kv_type = 0;
  bool json = false;
  static const char *const kv_types[] = {"f16", "f32", "q8_0", "fp8", NULL};
  const cli_opt ctx[] = {
      {CLI_INT_OPT('c', "kv-tokens", &cp.kv_tokens, "N",
                   "KV pool in tokens (default 0: min(training context,\n4096), or --kv-bytes)", 0,
                   INT_MAX)},
      {CLI_CUSTOM_OPT(0, "kv-bytes", &cp.kv_bytes, "BYTES",
                      "KV pool as a byte budget (K, M, G suffixes)", cli_parse_bytes)},
      {CLI_OPT_(0, "kv-type", CLI_CHOICE, &kv_type, "TYPE",
                "KV element type: f16 (default), f32, q8_0, fp8"),
       .choices = kv_types},
      {CLI_INT_OPT(0, "block-size", &cp.block_size, "N", "KV tokens per block (default 16)", 1,
                   4096)},
      {CLI_INT_OPT(0, "max-batch-tokens", &cp.max_batch_tokens, "N",
                   "largest batch of one decode (default 512)", 1, 1 << 20)},
      {CLI_INT_OPT(0, "n-seq-max", &cp.n_seq_max, "N", "sequences at once (default 64)", 1,
                   1 << 20)},
  };
  const cli_opt output[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")}};
  const cli_group groups[] = {
      cli_model_group(&ma, "GGUF file or Hugging Face folder (or give it as the operand)"),
      {"context", ctx, sizeof ctx / sizeof ctx[0]},
      {"output", output, 1},
  };
  const cli_spec spec = {
      .cmd = "estimate",
      .usage = "-m MODEL [context options] [--json]",
      .summary = "Prints how many bytes of host memory loading MODEL and creating one context\n"
                 "with these options will hold (weights read or repacked, the model's\n"
                 "tables, the KV pool, buffers), within 5%, before loading it: only the\n"
                 "header and metadata are read. With --memory-limit, says whether it fits.",
      .groups = groups,
      .n_groups = sizeof groups / sizeof groups[0],
      .min_pos = 0,
      .max_pos = 1,
      .pos = &pos,
      .n_pos = &n_pos,
      .epilog = "examples:\n"
                "  brisk estimate -m model.gguf\n"
                "  brisk estimate -m model.gguf -c 8192 --kv-type f32 --json\n"
                "  brisk estimate -m model.gguf --no-mmap --memory-limit 2G",
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;
  const char *path = ma.path ? ma.path : pos;
  if (!path) return cli_usage_error("estimate", "a model is required (-m MODEL)");
  if (ma.path && pos) return cli_usage_error("estimate", "give the model once: -m or operand");
  static const brisk_kv_type kv_of[] = {BRISK_KV_F16, BRISK_KV_F32, BRISK_KV_Q8_0,
                                        BRISK_KV_FP8_E4M3};
  cp.kv_type = kv_of[kv_type];
  brisk_model_params mp;
  cli_model_params(&ma, &mp);
  brisk_set_memory_limit(0); /* the estimate itself is not capped */
  brisk_memory_estimate e = {.struct_size = sizeof e};
  brisk_status st = brisk_estimate_memory(path, &mp, &cp, &e);
  if (st) return cli_fail("estimate", "%s", brisk_last_error());
  const bool fits = !ma.memory_limit || e.total <= ma.memory_limit;
  if (json) {
    printf("{\"model\": ");
    cli_json_string(stdout, path);
    printf(", \"weights\": %" PRIu64 ", \"mapped\": %" PRIu64 ", \"model_other\": %" PRIu64
           ", \"kv\": %" PRIu64 ", \"buffers\": %" PRIu64 ", \"total\": %" PRIu64,
           e.weights, e.mapped, e.model_other, e.kv, e.buffers, e.total);
    if (ma.memory_limit)
      printf(", \"memory_limit\": %" PRIu64 ", \"fits\": %s", ma.memory_limit,
             fits ? "true" : "false");
    printf("}\n");
  } else {
    printf("model        %s\n", path);
    row("weights", e.weights, mp.use_mmap ? "(read or repacked into memory)" : "(read)");
    row("mapped", e.mapped, "(used in place from the file: page cache, not counted)");
    row("model other", e.model_other, "(vocabulary, tables, metadata)");
    row("kv", e.kv, NULL);
    row("buffers", e.buffers, "(activations, logits, scratch)");
    row("total", e.total, NULL);
    if (ma.memory_limit)
      printf("limit        %14" PRIu64 " bytes: %s\n", ma.memory_limit,
             fits ? "fits" : "does NOT fit");
  }
  return fits ? 0 : 1;
}
