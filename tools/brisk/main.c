/* brisk — one command-line program, many subcommands, all on the public API. */
#include "brisk.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

int cmd_version(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_serve_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);

static const struct {
  const char *name;
  cli_command_fn fn;
  const char *help;
} commands[] = {
    {"bench", cmd_bench, "model, kernel and tokenizer speed against the machine's limits"},
    {"logits", cmd_logits, "write the logits of a token sequence (float32 [n][n_vocab])"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server on the engine (docs/server.md)"},
    {"serve-bench", cmd_serve_bench, "synthetic serving workloads through the engine"},
    {"run", cmd_run, "generate text from a prompt (greedy), streaming it"},
    {"version", cmd_version, "print the version and what this machine supports"},
    {"info", cmd_info, "describe a model file: architecture, sizes, tensor types"},
    {"tokenize", cmd_tokenize, "show the token ids and pieces of a text"},
    {"quantize", cmd_quantize, "re-encode a GGUF model's weight matrices in another type"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: brisk COMMAND [ARGS] [--json]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\nEvery command takes --json for machine-readable output (docs/cli.md).\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 1;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "brisk: unknown command '%s' (try 'brisk --help')\n", argv[1]);
  return 1;
}
