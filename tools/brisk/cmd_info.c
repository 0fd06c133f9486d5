/* brisk info MODEL: what a model file holds, without running it. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int cmd_info(int argc, char **argv);

typedef struct type_count {
  const char *type;
  int64_t tensors;
  uint64_t bytes;
} type_count;

static int progress_none(float f, void *u) {
  (void)f;
  (void)u;
  return 1;
}

static void meta_or(const brisk_model *m, const char *key, char *buf, size_t cap,
                    const char *fallback) {
  if (brisk_model_meta(m, key, buf, cap, NULL) != BRISK_OK) snprintf(buf, cap, "%s", fallback);
}

int cmd_info(int argc, char **argv) {
  const char *path = NULL;
  bool json = false;
  const cli_opt opts[] = {{CLI_FLAG_OPT(0, "json", &json, "one JSON object on stdout")}};
  const cli_group groups[] = {{"output", opts, 1}};
  const cli_spec spec = {
      .cmd = "info",
      .usage = "MODEL [--json]",
      .summary = "Describes a model without running it: architecture, hyper-parameters, the\n"
                 "tensor types and their bytes, the tokenizer, whether it has a chat template.\n"
                 "MODEL is a GGUF file or a Hugging Face folder.",
      .groups = groups,
      .n_groups = 1,
      .min_pos = 1,
      .max_pos = 1,
      .pos = &path,
  };
  int prc = cli_parse(&spec, argc, argv);
  if (prc != CLI_CONTINUE) return prc;

  brisk_model_params params;
  brisk_model_params_init(&params);
  params.progress = progress_none;
  brisk_model *m = NULL;
  brisk_status st = brisk_model_load(path, &params, &m);
  if (st != BRISK_OK) return cli_fail("info", "%s", brisk_last_error());

  type_count types[32];
  int n_types = 0;
  int64_t n_tensors = brisk_model_n_tensors(m);
  for (int64_t i = 0; i < n_tensors; i++) {
    brisk_tensor_info t = {.struct_size = sizeof t};
    if (brisk_model_tensor(m, i, &t) != BRISK_OK) continue;
    int k = 0;
    while (k < n_types && strcmp(types[k].type, t.type) != 0) k++;
    if (k == n_types && n_types < 32) types[n_types++] = (type_count){t.type, 0, 0};
    if (k < n_types) {
      types[k].tensors++;
      types[k].bytes += t.n_bytes;
    }
  }
  char name[256], tokenizer[64];
  meta_or(m, "general.name", name, sizeof name, "");
  snprintf(tokenizer, sizeof tokenizer, "%s",
           brisk_model_tokenizer(m)[0] ? brisk_model_tokenizer(m) : "none");
  const char *tmpl = brisk_model_chat_template(m);

  if (json) {
    printf("{\"path\": ");
    cli_json_string(stdout, path);
    printf(", \"name\": ");
    cli_json_string(stdout, name);
    printf(", \"architecture\": ");
    cli_json_string(stdout, brisk_model_architecture(m));
    printf(", \"n_vocab\": %d, \"n_ctx_train\": %d, \"n_embd\": %d, \"n_layer\": %d, "
           "\"n_head\": %d, \"n_head_kv\": %d, \"n_params\": %" PRIu64
           ", \"weight_bytes\": %" PRIu64 ", \"n_tensors\": %" PRId64 ", \"tensor_types\": {",
           brisk_model_n_vocab(m), brisk_model_n_ctx_train(m), brisk_model_n_embd(m),
           brisk_model_n_layer(m), brisk_model_n_head(m), brisk_model_n_head_kv(m),
           brisk_model_n_params(m), brisk_model_weight_bytes(m), n_tensors);
    for (int k = 0; k < n_types; k++)
      printf("%s\"%s\": {\"tensors\": %" PRId64 ", \"bytes\": %" PRIu64 "}", k ? ", " : "",
             types[k].type, types[k].tensors, types[k].bytes);
    printf("}, \"tokenizer\": ");
    cli_json_string(stdout, tokenizer);
    printf(", \"chat_template\": %s}\n", tmpl ? "true" : "false");
  } else {
    printf("model        %s\n", path);
    if (name[0]) printf("name         %s\n", name);
    printf("architecture %s\n", brisk_model_architecture(m));
    printf("vocabulary   %d tokens (tokenizer: %s)\n", brisk_model_n_vocab(m), tokenizer);
    printf("context      %d tokens (training)\n", brisk_model_n_ctx_train(m));
    printf("layers       %d, embedding %d, heads %d (kv %d)\n", brisk_model_n_layer(m),
           brisk_model_n_embd(m), brisk_model_n_head(m), brisk_model_n_head_kv(m));
    printf("parameters   %.2f M\n", (double)brisk_model_n_params(m) / 1e6);
    printf("weights      %.2f MiB in %" PRId64 " tensors\n",
           (double)brisk_model_weight_bytes(m) / 1048576.0, n_tensors);
    for (int k = 0; k < n_types; k++)
      printf("  %-6s %5" PRId64 " tensors %10.2f MiB\n", types[k].type, types[k].tensors,
             (double)types[k].bytes / 1048576.0);
    printf("chat template %s\n", tmpl ? "yes" : "no");
  }
  brisk_model_free(m);
  return 0;
}
