/* One option parser for every brisk subcommand: a command declares its
 * options as tables (grouped, each group with a title), and cli_parse reads
 * argv against them the GNU way (`--name value`, `--name=value`, `-x value`,
 * `-xvalue`, options and operands in any order, `--` ends the options),
 * parses every number strictly with its range, answers -h/--help and
 * --version, and names the flag, the bad value and the accepted range in
 * every error. Help text and man pages (help2man) come from the same tables.
 *
 * Groups used by several commands are declared once here: cli_model_group
 * (model path, threads, mmap, repack) is what run, bench, logits and
 * serve-bench share; a new model-loading option goes into it and reaches
 * every one of them. */
#ifndef BRISK_TOOLS_CLI_OPT_H
#define BRISK_TOOLS_CLI_OPT_H

#include "brisk.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit status of a command-line error (bad flag, bad value, missing operand),
 * as getopt-based programs use it; failures of the work itself exit 1. */
#define CLI_EXIT_USAGE 2
/* cli_parse's "go on": any other value is the exit code to return now. */
#define CLI_CONTINUE (-1)

typedef enum cli_kind {
  CLI_FLAG,     /* bool *dst = true; takes no value */
  CLI_INT,      /* int *dst, whole number in [lo, hi] */
  CLI_U64,      /* uint64_t *dst, any non-negative whole number */
  CLI_FLOAT,    /* float *dst, finite number in [lo, hi] ((lo, hi] with lo_open) */
  CLI_DOUBLE,   /* double *dst, as CLI_FLOAT */
  CLI_STR,      /* const char **dst = the argument (not copied) */
  CLI_STR_LIST, /* const char **dst [max], *count: repeatable, up to max times */
  CLI_CHOICE,   /* int *dst = index into choices (NULL-terminated) */
  CLI_CUSTOM    /* parse(value, dst): NULL when good, else what a value must be */
} cli_kind;

typedef struct cli_opt {
  char short_name;       /* 'n' for -n; 0: none */
  const char *long_name; /* "n-predict" for --n-predict; NULL: none */
  cli_kind kind;
  void *dst;
  const char *metavar; /* "N", "PATH", ...; the value's name in help and errors */
  const char *help;    /* may hold '\n' for more lines */
  double lo, hi;       /* CLI_INT, CLI_FLOAT, CLI_DOUBLE: the accepted range */
  bool lo_open;        /* the range excludes lo */
  const char *const *choices;
  const char *(*parse)(const char *value, void *dst);
  int *count;  /* CLI_STR_LIST: entries filled */
  int max;     /* CLI_STR_LIST: capacity of dst */
  bool *given; /* optional: set when the option appears */
} cli_opt;

/* Table entries by kind (designated initializers; add .given, .lo_open,
 * ... after them as needed: CLI_INT_OPT(...), .given = &seen). */
#define CLI_OPT_(s, l, k, p, mv, h)                                                                \
  .short_name = (s), .long_name = (l), .kind = (k), .dst = (p), .metavar = (mv), .help = (h)
#define CLI_FLAG_OPT(s, l, p, h) CLI_OPT_(s, l, CLI_FLAG, p, NULL, h)
#define CLI_STR_OPT(s, l, p, mv, h) CLI_OPT_(s, l, CLI_STR, p, mv, h)
#define CLI_U64_OPT(s, l, p, mv, h) CLI_OPT_(s, l, CLI_U64, p, mv, h)
#define CLI_INT_OPT(s, l, p, mv, h, a, b) CLI_OPT_(s, l, CLI_INT, p, mv, h), .lo = (a), .hi = (b)
#define CLI_FLOAT_OPT(s, l, p, mv, h, a, b)                                                        \
  CLI_OPT_(s, l, CLI_FLOAT, p, mv, h), .lo = (a), .hi = (b)
#define CLI_DOUBLE_OPT(s, l, p, mv, h, a, b)                                                       \
  CLI_OPT_(s, l, CLI_DOUBLE, p, mv, h), .lo = (a), .hi = (b)
#define CLI_CUSTOM_OPT(s, l, p, mv, h, fn) CLI_OPT_(s, l, CLI_CUSTOM, p, mv, h), .parse = (fn)

typedef struct cli_group {
  const char *title; /* "model", "sampling", ...; NULL: untitled */
  const cli_opt *opts;
  size_t n_opts;
} cli_group;

typedef struct cli_spec {
  const char *cmd;     /* "run" */
  const char *usage;   /* after "usage: brisk CMD "; lines after '\n' are aligned */
  const char *summary; /* one paragraph: what the command does */
  const cli_group *groups;
  size_t n_groups;
  /* Operands: between min_pos and max_pos of them are stored in pos[]; the
   * count goes to *n_pos (may be NULL when min_pos == max_pos). */
  int min_pos, max_pos;
  const char **pos;
  int *n_pos;
  const char *epilog; /* examples, notes; printed after the options */
} cli_spec;

/* Parses argv[1..argc-1] (argv[0] is the command's name) against spec.
 * Returns CLI_CONTINUE when the command should run; 0 after printing help
 * (stdout) or the version; CLI_EXIT_USAGE after a one-line error on stderr
 * ("brisk CMD: ..."), naming the option, the value and what was expected,
 * and for an unknown option the nearest known one. */
int cli_parse(const cli_spec *spec, int argc, char **argv);

/* Writes the help of spec (usage, summary, every group, epilog) to out. */
void cli_print_help(const cli_spec *spec, FILE *out);

/* Prints "brisk CMD: <message>" on stderr and returns CLI_EXIT_USAGE: for
 * combinations of options that the tables alone cannot check. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Typo distance between two words (insertions, deletions, replacements and
 * swaps of neighbours), for "did you mean" suggestions. */
size_t cli_edit_distance(const char *a, const char *b);

/* The highest -t a command accepts: 4 per processor, at most 1024 (more
 * workers than that only contend for the cores). */
int cli_max_threads(void);

/* The whole file at path, malloc'ed and NUL-terminated (the NUL not
 * counted in *len); NULL when it cannot be opened or memory runs out. */
char *cli_read_file(const char *path, size_t *len);

/* --kv-type TYPE for the commands that make a context: the choice's index
 * is the brisk_kv_type (f16 0, f32 1, q8_0 2, fp8 3). */
extern const char *const cli_kv_type_names[];
#define CLI_KV_TYPE_OPT(p, h)                                                                      \
  CLI_OPT_(0, "kv-type", CLI_CHOICE, p, "TYPE", h), .choices = cli_kv_type_names
#define CLI_KV_TYPE_HELP                                                                           \
  "KV cache type: f16, f32, q8_0 (INT8, 8 bits and a scale\nper 64 values) or fp8 (E4M3, the "     \
  "same)"

/* ---- shared groups ------------------------------------------------------ */

#define CLI_MODEL_MAX_OPTS 12

/* The model-loading options shared by run, bench, logits and serve-bench. */
typedef struct cli_model_args {
  const char *path;   /* -m, --model PATH */
  int threads;        /* -t, --threads N; 0: one per processor */
  bool no_mmap;       /* --no-mmap: read the file instead of mapping it */
  bool no_repack;     /* --no-repack: weights exactly as stored */
  const char *device; /* --device cpu|cuda:N (NULL: the CPU) */
  int n_gpu_layers;   /* --n-gpu-layers N, when n_gpu_layers_given */
  bool n_gpu_layers_given;
  uint64_t memory_limit;            /* --memory-limit BYTES (0: none) */
  int tp;                           /* --tp N: tensor-parallel ranks (0: none) */
  int pp;                           /* --pp N: pipeline stages (0: none) */
  cli_opt opts[CLI_MODEL_MAX_OPTS]; /* the declarations, filled by cli_model_group */
} cli_model_args;

/* Declares the model group over *a (which must outlive the parse) with the
 * given path help (e.g. "GGUF file or Hugging Face folder (default: ...)"). */
cli_group cli_model_group(cli_model_args *a, const char *path_help);

/* brisk_model_params from the parsed group (defaults for the rest); also
 * sets the process-wide memory limit from --memory-limit, which then holds
 * for everything the command does (model, contexts, engines). */
void cli_model_params(const cli_model_args *a, brisk_model_params *mp);

/* Under mpirun (Open MPI's or a PMI launcher's environment: the job's size)
 * with --tp N or --pp N > 1: joins the job, which must have N processes,
 * before the model loads (so that each process keeps its rank's part of the
 * model only), and finalizes it at exit. Returns -1 where the command goes
 * on (not under mpirun, one process, or joined), else the exit code for the
 * command to return, after a message (a job of the wrong size fails on
 * every rank; --tp with --pp across processes is refused). */
int cli_mpi_join(const char *cmd, int tp, int pp);

/* After the load, in a joined job: ranks 1.. follow rank 0's contexts on m
 * here (brisk_worker_run, `threads` threads; 0: one per core) and get the
 * exit code for the command to return; rank 0, which then owns the
 * contexts and prints the command's output, and a command outside a job
 * get -1. */
int cli_mpi_follow(const char *cmd, int threads, const brisk_model *m);

/* The job's size once cli_mpi_join joined one, else 0. */
int cli_mpi_size(void);

/* Parses a byte count: digits with an optional K, M, G or T suffix (powers
 * of 1024; "KiB", "MB" spellings too). CLI_CUSTOM parse function over a
 * uint64_t. */
const char *cli_parse_bytes(const char *value, void *dst);

#endif
