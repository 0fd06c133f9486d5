/* brisk — one command-line program, many subcommands, all on the public API. */
#include "brisk.h"
#include "cli.h"
#include "cli_opt.h"

#include <stdio.h>
#include <string.h>

int cmd_version(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_serve_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_embed(int argc, char **argv);

static const struct {
  const char *name;
  cli_command_fn fn;
  const char *help;
} commands[] = {
    {"bench", cmd_bench, "model, kernel and tokenizer speed against the machine's limits"},
    {"logits", cmd_logits, "write the logits of a token sequence (float32 [n][n_vocab])"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server on the engine (docs/server.md)"},
    {"serve-bench", cmd_serve_bench, "synthetic serving workloads through the engine"},
    {"run", cmd_run, "generate text from a prompt, or chat (--chat), streaming it"},
    {"version", cmd_version, "print the version and what this machine supports"},
    {"info", cmd_info, "describe a model file: architecture, sizes, tensor types"},
    {"tokenize", cmd_tokenize, "show the token ids and pieces of a text"},
    {"embed", cmd_embed, "embedding vectors of texts (encoder or pooled decoder models)"},
    {"quantize", cmd_quantize, "re-encode a GGUF model's weights by a preset (Q4_K_M, ...)"},
    {"imatrix", cmd_imatrix, "activation statistics for importance-weighted quantization"},
    {"perplexity", cmd_perplexity, "perplexity and KL divergence over a text (llama.cpp's method)"},
    {"estimate", cmd_estimate, "the host memory a model and a context will take, before loading"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: brisk COMMAND [OPTIONS]\n"
               "       brisk COMMAND --help\n\n"
               "Runs LLMs (GGUF files, Hugging Face folders) on the brisk library.\n\n"
               "commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\ngeneral:\n"
               "  -h, --help   show this help and exit\n"
               "  --version    show the version and exit\n\n"
               "Every command takes --help, and --json for machine-readable output\n"
               "(docs/cli.md, man brisk-COMMAND).\n");
}

int main(int argc, char **argv) {
  /* The library is silent by default; the program shows its warnings. */
  brisk_set_log_callback(NULL, NULL, BRISK_LOG_WARN);
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(name, "--version")) {
    printf("brisk %s\n", brisk_version_string());
    return 0;
  }
  /* `brisk help CMD` is `brisk CMD --help`. */
  char help_flag[] = "--help";
  char *help_argv[3] = {NULL, help_flag, NULL};
  const bool help = !strcmp(name, "help");
  if (help) {
    if (argc < 3) {
      usage(stdout);
      return 0;
    }
    name = help_argv[0] = argv[2];
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(name, commands[i].name))
      return help ? commands[i].fn(2, help_argv) : commands[i].fn(argc - 1, argv + 1);
  const char *best = NULL;
  size_t best_d = 3;
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    size_t d = cli_edit_distance(name, commands[i].name);
    if (d < best_d) best_d = d, best = commands[i].name;
  }
  if (best)
    fprintf(stderr, "brisk: unknown command '%s' (did you mean '%s'?)\n", name, best);
  else
    fprintf(stderr, "brisk: unknown command '%s' (try 'brisk --help')\n", name);
  return CLI_EXIT_USAGE;
}
